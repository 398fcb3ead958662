"""The ``processes`` probe: running inference servers and a fresh login shell's environment.

Two stdlib scripts run concurrently on the target under the first configured interpreter
(script as ``-c``, JSON request on stdin, so no pattern or path passes through a shell):

* ``scripts/processes_collect.py`` walks ``/proc`` for processes whose command line holds
  a ``[watch] processes`` pattern, keeping the server, not its forked workers, and records
  argv, start time, cwd, exe, the environment filtered by ``[watch] env`` and the GPU
  libraries the process really mapped (``/proc/PID/maps``);
* ``scripts/login_env_collect.py`` runs the user's login shell in a clean environment and
  records what the profiles export (a ``CUDA_VISIBLE_DEVICES`` in ``~/.profile`` is drift).

Secrets: both scripts redact on the target with the rules of :mod:`driftwatch.redact`
shipped in the request, and this module redacts again with the full rules (secret flag
values, URL passwords) before any fact exists.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.launchargs import parse_launch_args
from driftwatch.probes.container_identity import identify, label
from driftwatch.probes.server_limits import THREAD_ENV
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json, load_script
from driftwatch.probes.locations import LOCATION_ENV
from driftwatch.redact import (
    NOT_SECRET,
    SECRET_NAME_RE,
    TOKEN_RE,
    URL_HEAD_RE,
    URL_SECRET_NAME_RE,
    redact_argv,
    redact_env,
)

# Always recorded whatever the env globs say: which GPUs a server sees, and where its
# compile caches, NCCL config file and Hugging Face cache are (the caches, nccl_conf and
# models probes follow them there).
ALWAYS_ENV = ["CUDA_VISIBLE_DEVICES", *LOCATION_ENV]
# Mapped libraries worth recording: which NCCL, kernels, torch and CUDA runtime a server
# really loaded. ``triton/_C`` rather than ``triton``: Triton's per-kernel cache objects
# (``~/.triton/cache/<hash>/…so``) are many and churn without meaning anything.
LIB_MARKERS = [
    "libnccl", "sgl_kernel", "sgl-kernel", "flashinfer", "torch/lib", "libcudart", "libcublas",
    "libcudnn", "vllm/_C", "vllm/_moe_C", "triton/_C", "libcuda.so",
]
MAX_PROCESSES = 64
MAX_READ_BYTES = 4 * 1024 * 1024  # per cmdline/environ/maps read
# Every mapped shared object is also kept in the walk's report (not in these facts) for the
# libraries probe, except per-kernel objects of JIT caches: many, churning, meaning nothing.
MAPPED_EXCLUDE = ["/.triton/cache/", "/torchinductor_"]
MAX_MAPPED = 2048  # per process
# Read from each server's environment whatever [watch] env says: how many threads OpenMP and
# the BLAS libraries start (torch's intra-op pool follows OMP_NUM_THREADS).
MAX_SHM_SEGMENTS = 256
# Where a containerised server's interpreter and libraries come from (never stored: the
# containers probe uses them to find the python it runs).
INTERPRETER_ENV = ["PATH", "HOME", "PYTHONHOME", "PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "LD_LIBRARY_PATH"]




def redaction_rules() -> dict[str, Any]:
    """The name and token rules as plain regex text, for the target-side scripts."""
    return {
        "secret_name_re": SECRET_NAME_RE.pattern,
        "url_secret_name_re": URL_SECRET_NAME_RE.pattern,
        "url_head_re": URL_HEAD_RE.pattern,
        "token_re": TOKEN_RE.pattern,
        "not_secret": sorted(NOT_SECRET),
    }


def _port(args: dict[str, Any]) -> str | None:
    port = args.get("port")
    if isinstance(port, list):  # repeated: argparse keeps the last
        port = port[-1]
    return port if isinstance(port, str) and port else None


def server_keys(servers: list[dict[str, Any]]) -> list[str]:
    """Keys stable across restarts (pids are not), by what a server is: the entry point
    alone when it is unique, else ``entry@container`` (two containers may both listen on
    30000 in their own network namespaces), else ``entry:port``, else ``entry:model``, and
    only for servers alike in all of these ``entry#n`` in pid order. ``servers`` is in pid order."""
    bases = [s["entry"] or s["pattern"] for s in servers]
    keys: list[str] = []
    for base, server in zip(bases, servers, strict=True):
        group = [s for b, s in zip(bases, servers, strict=True) if b == base]
        if len(group) == 1:
            keys.append(base)
            continue
        for sep, identity in (("@", _container), (":", lambda s: _port(s["args"])), (":", _model)):
            mine = identity(server)
            if mine is not None and sum(identity(s) == mine for s in group) == 1:
                keys.append(f"{base}{sep}{mine}")
                break
        else:
            keys.append(f"{base}#{next(i for i, s in enumerate(group, 1) if s is server)}")
    return keys


def _container(server: dict[str, Any]) -> str | None:
    return server.get("container")


def _model(server: dict[str, Any]) -> str | None:
    model = server.get("model")
    return model if isinstance(model, str) and model else None


def server_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """One process record from the target, redacted again and its argv normalised."""
    argv = redact_argv([str(word) for word in raw.get("argv") or []])
    launch = parse_launch_args(argv)
    env = raw.get("env")
    container = label(identify(raw.get("context")))
    return {
        **({"container": container} if container else {}),  # a host's own server: no key at all
        "kind": launch["kind"],
        "entry": launch["entry"],
        "model": launch["model"],
        "argv": argv,
        "args": launch["args"],
        "cwd": raw.get("cwd"),
        "exe": raw.get("exe"),
        "env": None if env is None else redact_env({str(k): str(v) for k, v in env.items()}),
        "libraries": raw.get("libraries"),
        "pattern": raw.get("pattern"),
        # The server's worker processes (its ranks hold the GPUs): how the gpu-state rules
        # tell them from another job on the same GPUs, whatever either is called.
        "volatile": {"pid": raw.get("pid"), "ppid": raw.get("ppid"), "start_time": raw.get("start_time"),
                     "descendants": raw.get("descendants")},
    }


def build_facts(processes: dict[str, Any], login: dict[str, Any]) -> Facts:
    keyed = {key: server_facts(raw) for key, raw in keyed_servers(processes).items()}
    for server in keyed.values():
        server.pop("pattern", None)  # only needed to key servers with no known entry point
    login_env = login.get("login_env")
    return {
        "servers": keyed,
        "truncated": bool(processes.get("truncated")),
        "login_shell": login.get("login_shell"),
        "login_env": None if login_env is None else redact_env(login_env),
        "login_env_error": login.get("login_env_error"),
    }


def _run_json(ctx: ProbeContext, script_name: str, request: dict[str, Any], preludes: tuple[str, ...] = ()) -> dict[str, Any]:
    return collect_json(ctx, script_name, request, what="processes", keys=(), preludes=preludes)


def observed(ctx: ProbeContext, max_processes: int = MAX_PROCESSES) -> Facts:
    """The processes probe's facts, fetched once per snapshot: the caches, nccl_conf and
    models probes read the servers' models and environments from them. Raises what the
    probe would record (ProbeSkipped without /proc, ProbeError, ProbeTimeout)."""
    return ctx.shared.once(("processes", max_processes), lambda: _observe(ctx, max_processes))


def _observe(ctx: ProbeContext, max_processes: int) -> Facts:
    env = {"env": ctx.watch.env, "always_env": ALWAYS_ENV, **redaction_rules()}
    # The login shell gets less than the deadline, so a hung profile is reported as such
    # by the script instead of costing the whole probe.
    login = {**env, "timeout": max(0.5, ctx.time_left * 0.8 - 0.5)}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="processes") as pool:
        walked = pool.submit(server_walk, ctx, max_processes)
        shell = pool.submit(_run_json, ctx, "login_env_collect.py", login)
        try:
            login_report = shell.result()
        except ProbeError as exc:  # includes ProbeTimeout: the servers are still facts
            login_report = {"login_env": None, "login_env_error": f"login shell: {exc}"}
        report = walked.result()
    if report.get("error"):
        raise ProbeSkipped(str(report["error"]))
    return build_facts(report, login_report)


def environments(facts: Facts) -> list[tuple[str, dict[str, str]]]:
    """Every environment in the processes facts, named for a sentence: the login shell's,
    then each server's ("server sglang.launch_server")."""
    found = [("login env", facts.get("login_env") or {})]
    found += [(f"server {key}", (server or {}).get("env") or {}) for key, server in (facts.get("servers") or {}).items()]
    return found


def walk_request(ctx: ProbeContext, max_processes: int = MAX_PROCESSES) -> dict[str, Any]:
    return {
        "env": ctx.watch.env,
        "always_env": ALWAYS_ENV,
        **redaction_rules(),
        "patterns": ctx.watch.processes,
        "lib_markers": LIB_MARKERS,
        "mapped": True,
        "mapped_exclude": MAPPED_EXCLUDE,
        "max_mapped": MAX_MAPPED,
        "max_processes": max_processes,
        "max_bytes": MAX_READ_BYTES,
        # The context of each server (scripts/process_context.py): its limits, cgroup,
        # /dev/shm and, in a container, who runs it; the containers probe reads it.
        "context": True,
        "context_env": [*THREAD_ENV, *INTERPRETER_ENV],
        "max_shm_segments": MAX_SHM_SEGMENTS,
        # Compiled by the walk only when a server looks containerised.
        "container_code": load_script("container_context.py"),
    }


def server_walk(ctx: ProbeContext, max_processes: int = MAX_PROCESSES) -> dict[str, Any]:
    """The raw report of ``processes_collect.py``: one walk of /proc per snapshot, shared by
    the processes probe and the libraries probe (which reads each server's ``mapped``).
    No patterns, nothing to match: no walk at all (one interpreter start less)."""
    request = walk_request(ctx, max_processes)
    if not request["patterns"]:
        return {"processes": [], "truncated": False}
    key = ("processes_walk", json.dumps(request, sort_keys=True))
    return ctx.shared.once(key, lambda: _run_json(ctx, "processes_collect.py", request, ("process_context.py",)))


def keyed_servers(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The walk's raw server records under the keys the processes facts use."""
    records = sorted(report.get("processes") or [], key=lambda p: p.get("pid") or 0)
    keys = server_keys([server_facts(raw) for raw in records])
    return dict(zip(keys, records, strict=True))


class ProcessesProbe:
    name = "processes"

    def __init__(self, max_processes: int = MAX_PROCESSES) -> None:
        self.max_processes = max_processes

    def collect(self, ctx: ProbeContext) -> Facts:
        return observed(ctx, self.max_processes)
