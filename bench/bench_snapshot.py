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

After the runs, the libraries probe's counts of the first and the last snapshot show that
an unchanged host is not read again.

Run:  python bench/bench_snapshot.py [--repeat N] [--cache-entries N]
Prints medians in seconds and the ratios against `ssh true`, then what the caches,
nccl_conf and models probes cost inside the snapshot (their own duration_s).
"""

from __future__ import annotations

import argparse
import base64
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

from _loopback import precompile  # noqa: E402
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


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.decode()[-500:]}")
    return elapsed


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


def setup(work: Path, cache_entries: int) -> tuple[dict[str, Path], Sshd, list[str], subprocess.Popen[bytes]]:
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
               "--perf": (python, stack)}
    for case, (interp, extra) in folders.items():
        folder = work / case.replace(" ", "-")
        folder.mkdir()
        (folder / "driftwatch.toml").write_text(
            f'{common}[watch]\npython = ["{interp}"]\nfiles = ["{src}/*.py"]\nprocesses = ["{pattern}"]\n{extra}')
    ssh_true = ["ssh", "-F", server.ssh_config_path, "testhost", "true"]
    return {case: work / case.replace(" ", "-") for case in folders}, server, ssh_true, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cache-entries", type=int, default=10_000, help="entries per compile cache")
    args = parser.parse_args()
    precompile()
    snapshot = [sys.executable, "-m", "driftwatch", "snapshot", "testhost"]
    with tempfile.TemporaryDirectory() as tmp:
        folders, server, ssh_true, proc = setup(Path(tmp), args.cache_entries)
        costs = stack_costs(stack_fixture(Path(tmp) / "alone", args.cache_entries), args.repeat)
        runs: dict[str, list[float]] = {"ssh true": [], **{case: [] for case in folders}}
        probes: dict[str, dict[str, list[float]]] = {"snapshot": {}, "cold stack": {}}
        try:
            measure(args.repeat, runs, probes, folders, server.workdir, ssh_true, snapshot)
            counts = library_counts(folders["snapshot"])
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


def measure(
    repeat: int, runs: dict[str, list[float]], probes: dict[str, dict[str, list[float]]], folders: dict[str, Path],
    sshd_dir: Path, ssh_true: list[str], snapshot: list[str],
) -> None:
    cases = ["ssh true", "snapshot", "no stack", "cold stack"]
    for round_ in range(repeat):  # alternating, the order rotating, so noise hits every case alike
        _reset_env(sshd_dir, delay=None)
        for case in cases[round_ % len(cases):] + cases[: round_ % len(cases)]:
            if case == "ssh true":
                runs[case].append(timed(ssh_true, folders["snapshot"]))
                continue
            if case == "cold stack":
                shutil.rmtree(folders[case] / "snapshots", ignore_errors=True)
            runs[case].append(timed(snapshot, folders[case]))
            if case in probes:
                _probe_times(folders[case], probes[case])
        for area in FACT_AREAS:
            without = [sys.executable, "-c", WITHOUT, area, *snapshot[3:]]
            runs[f"-{area}"].append(timed(without, folders[f"-{area}"]))
        runs["--perf"].append(timed([*snapshot, "--perf"], folders["--perf"]))
        _reset_env(sshd_dir, delay=2)
        runs["slow probes"].append(timed(snapshot, folders["slow probes"]))


def _probe_times(folder: Path, into: dict[str, list[float]]) -> None:
    """The stack probes' own duration_s, and the whole snapshot's, from the stored snapshot."""
    latest = max((folder / "snapshots").rglob("*.json"), key=lambda p: p.stat().st_mtime)
    stored = json.loads(latest.read_text())
    into.setdefault("(whole snapshot)", []).append(stored["duration_s"])
    for name in ("processes", *STACK_PROBES):
        record = stored["probes"].get(name) or {}
        into.setdefault(name, []).append(record.get("duration_s", float("nan")))
        counts = (record.get("facts") or {}).get("volatile")
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


def report(runs: dict[str, list[float]], probes: dict[str, dict[str, list[float]]], repeat: int) -> None:
    base = statistics.median(runs["ssh true"])
    full = statistics.median(runs["snapshot"])
    print(f"{'case':<12} {'median s':>9} {'× ssh true':>11}   (n={repeat}, {os.cpu_count()} cores)")
    for name, values in runs.items():
        median = statistics.median(values)
        cost = f"   the {name[1:]} probe costs {full - median:+.3f} s" if name.startswith("-") and name != "--perf" else ""
        print(f"{name:<12} {median:>9.3f} {median / base:>10.2f}×{cost}")
    print(f"\n{'probe duration_s (median)':<28} {'snapshot':>9} {'cold stack':>11}")
    for name in ("(whole snapshot)", "processes", *STACK_PROBES):
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
