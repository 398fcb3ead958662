"""How long does one snapshot take, against a bare `ssh HOST true` on the same host?

Starts a throwaway OpenSSH sshd on 127.0.0.1 (the test fixture), then times, alternating
in one run so machine noise hits both alike:

  ssh true      the OpenSSH client running `true` (connection + session, the floor)
  snapshot      `driftwatch snapshot testhost` as a fresh process: interpreter start,
                imports, connect, all probes (H200 capture replayed, a GPU venv, 50 files,
                a running server that maps 20 real ELF libraries, three compile caches of
                10,000 entries each and a model directory), with the previous snapshot in
                the store, as from cron
  no stack      the same without the caches, nccl_conf and models probes
  cold stack    the snapshot with an empty store: every cache walked, every model file read
  slow probes   the same with two probes slowed by 2 s each (nvidia-smi sleeps 2 s; the
                venv's python sleeps 2 s before starting): concurrency means ~2 s, not ~4 s
  -<probe>      the snapshot without one of the probes in FACT_AREAS: the difference to
                `snapshot` is what that fact area costs
  --perf        the snapshot with the opt-in perf probe on (its CPU section, the
                nvidia-smi preflight, and the GPU section up to the venv's torch, which
                refuses to import): what --perf costs. Off (`snapshot`), nothing of the
                probe is imported (tests/probes/test_perf.py), so it costs nothing

  system only   the snapshot with the system probe alone: what every snapshot pays before and
                after its probes (interpreter start, imports, connect, the agent, the store)
  @REV          (with --compare REV) the snapshot case with driftwatch as committed at REV,
                its own store, in the same rounds: a change's before/after from one run

Each case also gets the collector's CPU (the driftwatch process and what it waited for) and
the host's (what the loopback sshd's sessions spent: shells, agent, probes), and the CPU floor:
both CPU figures spread over all of this machine's cores, against `ssh true` (collector and
host share these cores here, so no case can finish faster than that). After the runs,
where the time goes: every probe's duration_s; the connection, the agent's start and one
command's round trip, measured in this process; and each command of one snapshot run
alone over the agent (wall, and the target's CPU for it), the login shell among them. The
libraries probe's counts of the first and the last snapshot show that an unchanged host
is not read again.

Run:  python bench/bench_snapshot.py [--repeat N] [--cache-entries N] [--compare REV]
Prints medians in seconds and the ratios against `ssh true`, with the load average at the
start and the end (the machine is shared: only ratios from one run mean much).
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _loopback import Timing, precompile, timed  # noqa: E402
from tests.elfs import build_library  # noqa: E402
from tests.sshd import Sshd, find_sshd, start_sshd  # noqa: E402
from tests.venvs import make_gpu_venv  # noqa: E402

# Probes whose cost is measured by leaving them out (issue 12's library and driver facts;
# the stack probes are measured alone below, and together as "no stack").
FACT_AREAS = ["libraries", "driver"]
MAPPED_LIBRARIES = 20
# `python -c WITHOUT a,b snapshot HOST`: the CLI with those probes removed from the registry.
WITHOUT = (
    "import sys; from driftwatch.probes import registry; "
    "[registry.DEFAULT_PROBES.pop(n) for n in sys.argv.pop(1).split(',')]; "
    "from driftwatch.cli import run; run()"
)
# `python -c ONLY a,b snapshot HOST`: the CLI with only those probes.
ONLY = (
    "import sys; from driftwatch.probes import registry; keep = sys.argv.pop(1).split(','); "
    "[registry.DEFAULT_PROBES.pop(n) for n in list(registry.DEFAULT_PROBES) if n not in keep]; "
    "from driftwatch.cli import run; run()"
)
SERVER = """\
import ctypes, os, sys, time
for lib in sys.argv[3].split(os.pathsep):  # argv: --model-path MODEL LIBS READY
    ctypes.CDLL(lib)
open(sys.argv[4], "w").close()
time.sleep(3600)
"""


def start_server(work: Path, python: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A stand-in inference server (the venv's python, `-m sglang.launch_server`-like argv)
    that maps MAPPED_LIBRARIES real ELF libraries; returns it and its [watch] pattern."""
    libs = [build_library(work / "libs" / f"libbench{i}.so.1.{i}", f"{i:08x}" * 5, soname=f"libbench{i}.so.1")
            for i in range(MAPPED_LIBRARIES)]
    (work / "server.py").write_text(SERVER)
    ready = work / "server.ready"
    model = f"/models/bench-{os.getpid()}"
    argv = [str(python), str(work / "server.py"), "--model-path", model, os.pathsep.join(map(str, libs)), str(ready)]
    proc = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the stand-in server did not start")
        time.sleep(0.05)
    return proc, f"server.py --model-path {model}"


STACK_PROBES = ("caches", "nccl_conf", "models")
NO_STACK = "caches = []\nnccl_conf = []\nmodels = []\n"


def _files(folder: Path, count: int, name: str, size: int = 64) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / name.format(i)).write_bytes(b"x" * size)


def stack_fixture(work: Path, entries: int) -> str:
    """Three compile caches of about ``entries`` entries each, laid out as FlashInfer,
    Triton and torch extensions write them, and a model directory (small JSON files, a
    2 MiB tokenizer.json, four sparse 4 GiB shards that must never be read); returns the
    [watch] lines that watch them."""
    root = work / "stack"
    per_op = 98  # 100 ops x (96 objects, build.ninja, the .so) + their directories
    flashinfer = root / ".cache" / "flashinfer" / "0.6.12" / "90a" / "cached_ops"
    for op in range(entries // (per_op + 1)):
        _files(flashinfer / f"op_{op}", per_op - 2, "kernel_{}.cuda.o")
        (flashinfer / f"op_{op}" / "build.ninja").write_text("rule nvcc\n")
        (flashinfer / f"op_{op}" / f"op_{op}.so").write_bytes(b"so" * 64)
    triton = root / ".triton" / "cache"
    for kernel in range(entries // 7):  # one directory and six files per kernel
        key = base64.b32encode(hashlib.sha256(str(kernel).encode()).digest()).decode().rstrip("=")
        for ext in ("cubin", "ptx", "ttir", "ttgir", "llir", "json"):
            (triton / key).mkdir(parents=True, exist_ok=True)
            (triton / key / f"kernel.{ext}").write_bytes(b"t" * 64)
    extensions = root / ".cache" / "torch_extensions" / "py310_cu121"
    for ext in range(20):
        _files(extensions / f"ext_{ext}", entries // 20 - 1, "part_{}.o")
    model = root / "models" / "Qwen3-8B"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 36}))
    (model / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.95}))
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "chat_template": "x" * 4000}))
    (model / "tokenizer.json").write_bytes(b'{"model": {"vocab": "' + b"v" * (2 << 20) + b'"}}')
    for shard in range(4):
        with open(model / f"model-{shard + 1:05d}-of-00004.safetensors", "wb") as handle:
            handle.truncate(4 << 30)
    caches = [root / ".cache" / "flashinfer", triton, root / ".cache" / "torch_extensions"]
    return f"caches = {json.dumps([str(c) for c in caches])}\nmodels = [\"{model}\"]\n"


def stack_costs(watch_lines: str, repeat: int) -> list[tuple[str, float, float, float, float]]:
    """Each stack probe alone on this host (local transport; the login shell's and the
    servers' environments given as empty, so no probe waits for them): (probe, cold wall s,
    cold CPU s, warm wall s, warm CPU s), medians. Cold has no previous snapshot; warm has
    the one before, as from cron. CPU counts this process and the target-side scripts."""
    import resource
    import tomllib

    from driftwatch.collect import run_probe
    from driftwatch.probes.base import ProbeContext, Shared
    from driftwatch.probes.caches import CachesProbe
    from driftwatch.probes.models import ModelsProbe
    from driftwatch.probes.nccl_conf import NcclConfProbe
    from driftwatch.probes.processes import MAX_PROCESSES
    from driftwatch.settings import WatchSettings
    from driftwatch.transport.local import LocalTransport

    watch = WatchSettings(processes=[], **tomllib.loads(watch_lines))

    def once(probe: Any, previous: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
        shared = Shared()
        shared.once(("processes", MAX_PROCESSES), lambda: {"servers": {}, "login_env": {}})
        ctx = ProbeContext(transport=LocalTransport(), watch=watch, timeout=30, previous=previous, shared=shared)
        before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        started = time.perf_counter()
        record = run_probe(probe, ctx)
        wall = time.perf_counter() - started
        after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True))
        return wall, cpu, record.facts

    rows = []
    for probe in (CachesProbe(), NcclConfProbe(), ModelsProbe()):
        cold, warm = [], []
        for _ in range(repeat):
            wall, cpu, facts = once(probe, {})
            cold.append((wall, cpu))
            warm.append(once(probe, facts)[:2])
        rows.append((probe.name, *(statistics.median(x[i] for x in runs) for runs in (cold, warm) for i in (0, 1))))
    return rows


def setup(work: Path, cache_entries: int, compare: str | None) -> tuple[dict[str, Path], Sshd, list[str], subprocess.Popen[bytes]]:
    server = start_sshd(work / "sshd", find_sshd() or sys.exit("sshd not installed"))
    server.fake_env()
    python = make_gpu_venv(work / "venv")
    slow_python = work / "slow-python"
    slow_python.write_text(f"#!/bin/sh\nsleep 2\nexec {python} \"$@\"\n")
    slow_python.chmod(0o755)
    src = work / "src"
    src.mkdir()
    for i in range(50):
        (src / f"module_{i}.py").write_text(f"x = {i}\n" * 200)
    stack = stack_fixture(work, cache_entries)
    proc, pattern = start_server(work, python)
    common = f'ssh_config = "{server.ssh_config_path}"\nknown_hosts = "{server.known_hosts_path}"\n'
    folders = {"snapshot": (python, stack), "no stack": (python, NO_STACK), "cold stack": (python, stack),
               "slow probes": (slow_python, stack), **{f"-{area}": (python, stack) for area in FACT_AREAS},
               "--perf": (python, stack), "system only": (python, stack),
               **({f"@{compare}": (python, stack)} if compare else {})}
    for case, (interp, extra) in folders.items():
        folder = work / _folder_name(case)
        folder.mkdir()
        (folder / "driftwatch.toml").write_text(
            f'{common}[watch]\npython = ["{interp}"]\nfiles = ["{src}/*.py"]\nprocesses = ["{pattern}"]\n{extra}')
    ssh_true = ["ssh", "-F", server.ssh_config_path, "testhost", "true"]
    return {case: work / _folder_name(case) for case in folders}, server, ssh_true, proc


def _folder_name(case: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in case)


def exported(rev: str, into: Path) -> dict[str, str]:
    """driftwatch/ as committed at ``rev``, byte-compiled, and the environment that runs it."""
    root = Path(__file__).resolve().parents[1]
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "driftwatch"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    import compileall

    compileall.compile_dir(str(into / "driftwatch"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(into)}
    found = subprocess.run([sys.executable, "-c", "import driftwatch; print(driftwatch.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not found.startswith(str(into)):
        raise SystemExit(f"--compare: {found} is imported, not the tree of {rev}")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cache-entries", type=int, default=10_000, help="entries per compile cache")
    parser.add_argument("--compare", metavar="REV", help="also time the snapshot with driftwatch as committed at REV")
    args = parser.parse_args()
    precompile()
    snapshot = [sys.executable, "-m", "driftwatch", "snapshot", "testhost"]
    print(f"load average at the start: {_load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folders, server, ssh_true, proc = setup(Path(tmp), args.cache_entries, args.compare)
        compare_env = exported(args.compare, Path(tmp) / "compare") if args.compare else None
        costs = stack_costs(stack_fixture(Path(tmp) / "alone", args.cache_entries), args.repeat)
        runs: dict[str, list[Timing]] = {"ssh true": [], **{case: [] for case in folders}}
        probes: dict[str, dict[str, list[float]]] = {"snapshot": {}, "cold stack": {}}
        try:
            measure(args.repeat, runs, probes, folders, server, ssh_true, snapshot, args.compare, compare_env)
            counts = library_counts(folders["snapshot"])
            parts = connection_parts(server, args.repeat)
            commands = command_costs(folders["snapshot"], args.repeat)
        finally:
            server.stop()  # never leave a listening sshd behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    report(runs, probes, args.repeat)
    print(f"\nlibraries probe, first snapshot: {counts[0]}")
    print(f"libraries probe, last snapshot:  {counts[-1]}")
    print(f"\n{'stack probe alone':<18} {'cold s':>7} {'cold CPU s':>11} {'warm s':>7} {'warm CPU s':>11}")
    for name, cold_wall, cold_cpu, warm_wall, warm_cpu in costs:
        print(f"{name:<18} {cold_wall:>7.3f} {cold_cpu:>11.3f} {warm_wall:>7.3f} {warm_cpu:>11.3f}")
    print("\nin this process (paramiko imported), medians:")
    for name, seconds in parts.items():
        print(f"  {name:<40} {seconds:.3f} s")
    print(f"\n{'each command of a snapshot, alone':<60} {'wall s':>7} {'target CPU s':>13}")
    for name, (wall, cpu) in commands.items():
        print(f"  {name:<58} {wall:>7.3f} {cpu:>13.3f}")
    print(f"  {'(sum)':<58} {sum(w for w, _ in commands.values()):>7.3f} {sum(c for _, c in commands.values()):>13.3f}")
    print(f"\nload average at the end: {_load()}")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(
    repeat: int, runs: dict[str, list[Timing]], probes: dict[str, dict[str, list[float]]], folders: dict[str, Path],
    server: Sshd, ssh_true: list[str], snapshot: list[str], compare: str | None, compare_env: dict[str, str] | None,
) -> None:
    cases = ["ssh true", "snapshot", "no stack", "cold stack", *([f"@{compare}"] if compare else [])]
    ok = (0, 3)
    for round_ in range(repeat):  # alternating, the order rotating, so noise hits every case alike
        _reset_env(server.workdir, delay=None)
        for case in cases[round_ % len(cases):] + cases[: round_ % len(cases)]:
            if case == "ssh true":
                runs[case].append(timed(ssh_true, cwd=folders["snapshot"], server=server))
                continue
            if case == "cold stack":
                shutil.rmtree(folders[case] / "snapshots", ignore_errors=True)
            env = compare_env if case.startswith("@") else None
            runs[case].append(timed(snapshot, cwd=folders[case], env=env, ok=ok, server=server))
            if case in probes:
                _probe_times(folders[case], probes[case])
        for area in FACT_AREAS:
            without = [sys.executable, "-c", WITHOUT, area, *snapshot[3:]]
            runs[f"-{area}"].append(timed(without, cwd=folders[f"-{area}"], ok=ok, server=server))
        only = [sys.executable, "-c", ONLY, "system", *snapshot[3:]]
        runs["system only"].append(timed(only, cwd=folders["system only"], ok=ok, server=server))
        runs["--perf"].append(timed([*snapshot, "--perf"], cwd=folders["--perf"], ok=ok, server=server))
        _reset_env(server.workdir, delay=2)
        runs["slow probes"].append(timed(snapshot, cwd=folders["slow probes"], ok=ok, server=server))
    _reset_env(server.workdir, delay=None)


def _probe_times(folder: Path, into: dict[str, list[float]]) -> None:
    """Every probe's own duration_s, and the whole snapshot's, from the stored snapshot."""
    latest = max((folder / "snapshots").rglob("*.json"), key=lambda p: p.stat().st_mtime)
    stored = json.loads(latest.read_text())
    into.setdefault("(whole snapshot)", []).append(stored["duration_s"])
    for name, record in stored["probes"].items():
        into.setdefault(name, []).append(record.get("duration_s", float("nan")))
        counts = (record.get("facts") or {}).get("volatile") if name in STACK_PROBES else None
        if counts:
            into.setdefault(f"{name} counts", []).append(counts)  # type: ignore[arg-type]


def library_counts(folder: Path) -> list[dict[str, int]]:
    """The libraries probe's read/reuse counts of each stored snapshot, oldest first."""
    stored = sorted((folder / "snapshots").rglob("*.json"))
    counts = []
    for path in stored:
        probe = json.loads(path.read_text())["probes"].get("libraries") or {}
        counts.append((probe.get("facts") or {}).get("volatile") or {"status": probe.get("status")})
    return counts


def connection_parts(server: Sshd, repeat: int) -> dict[str, float]:
    """What every snapshot pays before its first probe, timed in this process: the
    connection (handshake, auth), a bare session channel running `true` (what each
    command cost before the agent), the agent's start up to its hello (the one login
    shell and python3 of a snapshot), one command on it, and one stdlib script forked."""
    from driftwatch.transport.agent import Agent
    from driftwatch.transport.base import DEFAULT_PYTHONS
    from driftwatch.transport.ssh import SshTransport

    rows: dict[str, list[float]] = {}

    def note(name: str, started: float) -> None:
        rows.setdefault(name, []).append(time.perf_counter() - started)

    for _ in range(repeat):
        started = time.perf_counter()
        transport = SshTransport.connect("testhost", ssh_config_path=server.ssh_config_path, use_agent=False)
        note("connect (TCP, handshake, auth)", started)
        try:
            paramiko_transport = transport._clients[0].get_transport()
            assert paramiko_transport is not None
            started = time.perf_counter()
            channel = paramiko_transport.open_session()
            channel.exec_command("true")
            channel.recv_exit_status()
            channel.close()
            note("a session channel running `true`", started)
            started = time.perf_counter()
            agent = Agent.start(paramiko_transport, address="testhost", pythons=DEFAULT_PYTHONS, wait=10)
            note("the agent: channel, login shell, python3, hello", started)
            try:
                started = time.perf_counter()
                agent.run("true", timeout=5, stdin=None, max_output=1024, deadline=time.monotonic() + 10)
                note("one command on the agent (`sh -c true`)", started)
                started = time.perf_counter()
                agent.run("false", timeout=5, stdin=None, max_output=1024, deadline=time.monotonic() + 10, python="pass")
                note("one stdlib script in a fork of the agent", started)
            finally:
                agent.close()
        finally:
            transport.close()
    return {name: statistics.median(values) for name, values in rows.items()}


def command_costs(folder: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Each command of one snapshot (the config of ``folder``, its last snapshot as the
    previous one), run alone over the agent, probe after probe: wall time, and the target's
    CPU for it (what the agent reaped, and the agent's own), medians."""
    from driftwatch.collect import run_probe
    from driftwatch.config import load_config, resolve_targets
    from driftwatch.connect import open_transport
    from driftwatch.probes.base import ProbeContext, Shared
    from driftwatch.probes.registry import DEFAULT_PROBES

    config = load_config(str(folder / "driftwatch.toml"))
    target = resolve_targets(config, ["testhost"])[0]
    latest = max((folder / "snapshots").rglob("*.json"), key=lambda p: p.stat().st_mtime)
    previous = json.loads(latest.read_text())["probes"]
    rows: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeat):
        transport = open_transport(target, config)
        try:
            metered = _Metered(transport, rows)
            shared = Shared()
            for name, probe in DEFAULT_PROBES.items():
                metered.probe = name
                facts = (previous.get(name) or {}).get("facts") or {}
                run_probe(probe, ProbeContext(transport=metered, watch=target.watch, timeout=30,  # type: ignore[arg-type]
                                              previous=facts, shared=shared))
        finally:
            transport.close()
    return {name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for name, v in rows.items()}


class _Metered:
    """The SSH transport, noting each command's wall time and the target's CPU for it."""

    def __init__(self, transport: Any, rows: dict[str, list[tuple[float, float]]]) -> None:
        self.name, self.probe, self._transport, self._rows = transport.name, "?", transport, rows
        transport.run("true", timeout=10)  # the agent is up
        self._stat = Path(f"/proc/{transport._agent.result().pid}/stat")

    def _cpu(self) -> float:  # utime stime cutime cstime of the agent
        fields = self._stat.read_text().rpartition(")")[2].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def run(self, script: str, **kw: Any) -> Any:
        before, started = self._cpu(), time.perf_counter()
        result = self._transport.run(script, **kw)
        wall = time.perf_counter() - started
        time.sleep(0.02)  # until the agent has reaped the command
        name = f"{self.probe}: {_command_name(script, kw.get('python'), kw.get('stdin'))}"
        self._rows.setdefault(name, []).append((wall, self._cpu() - before))
        return result


def _command_name(script: str, python: str | None, stdin: bytes | None) -> str:
    """A short name for a probe's command: its collector script (forked by the agent, or
    fed to an interpreter on stdin), or the command's first words."""
    code = python if python is not None else (stdin or b"").decode("utf-8", "replace")
    for name, text in sorted(_scripts().items(), key=lambda item: -len(item[1])):
        if text[:300] in code and not name.startswith(("dists", "process_context", "elf_", "ld_")):
            return f"{name} ({'forked by the agent' if python is not None else 'the configured python'})"
    words = " ".join(script.split())
    return words[:40] + ("…" if len(words) > 40 else "")


@functools.cache
def _scripts() -> dict[str, str]:
    from driftwatch.probes.base import load_script

    folder = Path(__file__).resolve().parents[1] / "driftwatch" / "probes" / "scripts"
    return {path.name: load_script(path.name) for path in folder.glob("*.py")}


def report(runs: dict[str, list[Timing]], probes: dict[str, dict[str, list[float]]], repeat: int) -> None:
    def med(name: str, attr: str) -> float:
        return statistics.median(getattr(t, attr) for t in runs[name])

    base, full = med("ssh true", "wall"), med("snapshot", "wall")
    # Collector and host share this machine's cores: no schedule finishes before their CPU
    # seconds spread over every core, whatever runs concurrently.
    cores = os.cpu_count() or 1
    print(f"{'case':<14} {'median s':>9} {'× ssh true':>11} {'collector CPU s':>16} {'host CPU s':>11}"
          f" {'CPU floor ×':>12}   (n={repeat}, {cores} cores)")
    for name in runs:
        median = med(name, "wall")
        floor = (med(name, "cpu") + med(name, "remote_cpu")) / cores / base
        cost = f"   the {name[1:]} probe costs {full - median:+.3f} s" if name in {f"-{a}" for a in FACT_AREAS} else ""
        print(f"{name:<14} {median:>9.3f} {median / base:>10.2f}× {med(name, 'cpu'):>16.3f} "
              f"{med(name, 'remote_cpu'):>11.3f} {floor:>11.2f}×{cost}")
    print(f"\n{'probe duration_s (median)':<28} {'snapshot':>9} {'cold stack':>11}")
    for name in probes["snapshot"]:
        if name.endswith(" counts"):
            continue
        warm, cold = (statistics.median(probes[case].get(name) or [float("nan")]) for case in ("snapshot", "cold stack"))
        print(f"{name:<28} {warm:>9.3f} {cold:>11.3f}")
    for case in ("snapshot", "cold stack"):
        for name in STACK_PROBES:
            counts = probes[case].get(f"{name} counts")
            if counts:
                print(f"{case} {name} volatile (last run): {counts[-1]}")


def _reset_env(sshd_dir: Path, delay: float | None) -> None:
    capture = Path(__file__).resolve().parents[1] / "tests/fixtures/nvidia-smi/linux-x86_64__nvidia-h200__590.48.01.txt"
    lines = [f"FAKE_NVIDIA_SMI_CAPTURE={capture}"]
    if delay:
        lines.append(f"FAKE_NVIDIA_SMI_DELAY={delay}")
    (sshd_dir / "fake.env").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
