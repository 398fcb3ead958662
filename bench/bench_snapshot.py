"""How long does one snapshot take, against a bare `ssh HOST true` on the same host?

Starts a throwaway OpenSSH sshd on 127.0.0.1 (the test fixture), then times, alternating
in one run so machine noise hits both alike:

  ssh true      the OpenSSH client running `true` (connection + session, the floor)
  snapshot      `driftwatch snapshot testhost` as a fresh process: interpreter start,
                imports, connect, all probes (H200 capture replayed, a GPU venv, 50 files)
  slow probes   the same with two probes slowed by 2 s each (nvidia-smi sleeps 2 s; the
                venv's python sleeps 2 s before starting): concurrency means ~2 s, not ~4 s

Run:  python bench/bench_snapshot.py [--repeat N]
Prints medians in seconds and the ratios against `ssh true`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _loopback import precompile  # noqa: E402
from tests.sshd import Sshd, find_sshd, start_sshd  # noqa: E402
from tests.venvs import make_gpu_venv  # noqa: E402


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.decode()[-500:]}")
    return elapsed


def setup(work: Path) -> tuple[Path, Path, Sshd, list[str]]:
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
    common = f'ssh_config = "{server.ssh_config_path}"\nknown_hosts = "{server.known_hosts_path}"\n'
    fast, slow = work / "fast", work / "slow"
    for folder, interp in ((fast, python), (slow, slow_python)):
        folder.mkdir()
        (folder / "driftwatch.toml").write_text(f'{common}[watch]\npython = ["{interp}"]\nfiles = ["{src}/*.py"]\n')
    ssh_true = ["ssh", "-F", server.ssh_config_path, "testhost", "true"]
    return fast, slow, server, ssh_true


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    precompile()
    snapshot = [sys.executable, "-m", "driftwatch", "snapshot", "testhost"]
    with tempfile.TemporaryDirectory() as tmp:
        fast, slow, server, ssh_true = setup(Path(tmp))
        sshd_dir = server.workdir
        runs: dict[str, list[float]] = {"ssh true": [], "snapshot": [], "slow probes": []}
        try:
            measure(args.repeat, runs, fast, slow, sshd_dir, ssh_true, snapshot)
        finally:
            server.stop()  # never leave a listening sshd behind
    report(runs, args.repeat)


def measure(
    repeat: int, runs: dict[str, list[float]], fast: Path, slow: Path, sshd_dir: Path, ssh_true: list[str],
    snapshot: list[str],
) -> None:
    for _ in range(repeat):  # alternating, so noise hits every case alike
        _reset_env(sshd_dir, delay=None)
        runs["ssh true"].append(timed(ssh_true, fast))
        runs["snapshot"].append(timed(snapshot, fast))
        _reset_env(sshd_dir, delay=2)
        runs["slow probes"].append(timed(snapshot, slow))


def report(runs: dict[str, list[float]], repeat: int) -> None:
    base = statistics.median(runs["ssh true"])
    print(f"{'case':<12} {'median s':>9} {'× ssh true':>11}   (n={repeat}, {os.cpu_count()} cores)")
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"{name:<12} {median:>9.3f} {median / base:>10.2f}×")


def _reset_env(sshd_dir: Path, delay: float | None) -> None:
    capture = Path(__file__).resolve().parents[1] / "tests/fixtures/nvidia-smi/linux-x86_64__nvidia-h200__590.48.01.txt"
    lines = [f"FAKE_NVIDIA_SMI_CAPTURE={capture}"]
    if delay:
        lines.append(f"FAKE_NVIDIA_SMI_DELAY={delay}")
    (sshd_dir / "fake.env").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
