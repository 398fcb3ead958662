"""How does a snapshot scale from 1 to 128 hosts?

ONE loopback OpenSSH sshd (the test fixture, see bench/_loopback.py) is reached under N
ssh-config aliases ``h001`` ... ``h128``: every alias is a separate connection, handshake,
agent and set of probes, stored as a separate host, but all of them run on this one
machine. Its ``MaxStartups`` is raised to 256:30:512 so 32 simultaneous handshakes are
never throttled. Hosts are made latency-bound, as a real host behind a real network and a
real driver is: the fake ``nvidia-smi`` sleeps FAKE_NVIDIA_SMI_DELAY=3 s on every call, so
one host takes a little over 3 s and parallel collection shows as N hosts in about that.

Each round runs, as fresh processes, in rotating order:

  python -m driftwatch snapshot h001 ... hNNN --parallel 32 --config <cfg>

for N in 1, 8, 32, 128, and records its wall time, the collector's own CPU time
(RUSAGE_CHILDREN around the subprocess: the driftwatch process, threads and all) and the
CPU time the loopback hosts spent serving it (the sshd listener's reaped children). On a
2-core machine the hosts' work competes with the collector for the same two cores, which
a real fleet does not: read the collector CPU per host as the figure that scales.

Run:  python bench/bench_fleet.py [--repeat N] [--sizes 1,8,32,128] [--parallel 32] [--delay 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _loopback import Timing, precompile, start_bench_sshd, timed, write_aliases

from tests.venvs import make_gpu_venv


def host_names(n: int) -> list[str]:
    return [f"h{i:03d}" for i in range(1, n + 1)]


def check_store(store: Path, hosts: list[str], seen: dict[str, int]) -> tuple[int, list[str]]:
    """Hosts whose newest snapshot is new since the last look, and any probe not ok."""
    fresh, problems = 0, []
    for host in hosts:
        files = sorted((store / host).glob("*.json"))
        if len(files) > seen.get(host, 0):
            fresh += 1
        seen[host] = len(files)
        if files:
            snap = json.loads(files[-1].read_text())
            for name, record in snap["probes"].items():
                if record["status"] not in ("ok", "skipped"):
                    problems.append(f"{host}/{name}: {record['status']} {record.get('error') or ''}".strip())
    return fresh, problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each runs every size once)")
    parser.add_argument("--sizes", default="1,8,32,128")
    parser.add_argument("--parallel", type=int, default=32)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds every nvidia-smi call sleeps")
    parser.add_argument("--timeout", type=float, default=20.0, help="driftwatch's per-probe deadline")
    args = parser.parse_args()
    precompile()
    sizes = [int(s) for s in args.sizes.split(",")]

    runs: dict[int, list[Timing]] = {n: [] for n in sizes}
    problems: dict[int, list[str]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="dw-fleet-") as tmp:
        work = Path(tmp)
        server = start_bench_sshd(
            work / "sshd",
            max_startups="256:30:512",
            fake_env={"FAKE_NVIDIA_SMI_DELAY": f"{args.delay:g}"},
        )
        try:
            write_aliases(server, host_names(max(sizes)))
            python = make_gpu_venv(work / "venv")
            src = work / "src"
            src.mkdir()
            for i in range(20):
                (src / f"module_{i}.py").write_text(f"x = {i}\n" * 200)
            store = work / "snapshots"
            config = work / "driftwatch.toml"
            config.write_text(
                f'store = "{store}"\ntimeout = {args.timeout:g}\n'
                f'ssh_config = "{server.ssh_config_path}"\nknown_hosts = "{server.known_hosts_path}"\n'
                f'[watch]\npython = ["{python}"]\nfiles = ["{src}/*.py"]\n'
            )

            def snapshot(n: int) -> Timing:
                argv = [
                    sys.executable,
                    "-m",
                    "driftwatch",
                    "snapshot",
                    *host_names(n),
                    "--parallel",
                    str(args.parallel),
                    "--config",
                    str(config),
                ]
                return timed(argv, cwd=work, ok=(0, 3), server=server)

            seen: dict[str, int] = {}
            snapshot(1)  # warm-up: .pyc files, page cache
            check_store(store, host_names(max(sizes)), seen)
            for round_ in range(args.repeat):
                shift = round_ % len(sizes)
                for n in sizes[shift:] + sizes[:shift]:
                    result = snapshot(n)
                    runs[n].append(result)
                    fresh, bad = check_store(store, host_names(n), seen)
                    if fresh != n:
                        bad.append(f"only {fresh} of {n} hosts stored a snapshot")
                    problems[n].extend(bad)
                    print(
                        f"round {round_ + 1}: {n:4d} hosts {result.wall:7.2f} s  exit {result.rc}"
                        f"  collector cpu {result.cpu:.2f} s  host cpu {result.remote_cpu:.2f} s",
                        file=sys.stderr,
                    )
        finally:
            server.stop()

    one = statistics.median(t.wall for t in runs[sizes[0]])
    print(
        f"\n{args.repeat} rounds, {os.cpu_count()} cores, one sshd under N aliases, nvidia-smi delay "
        f"{args.delay:g} s, --parallel {args.parallel}"
    )
    print(
        f"{'hosts':>5} {'wall s':>8} {'× 1 host':>9} {'collector cpu s':>16} {'per host':>9} "
        f"{'host cpu s':>11} {'per host':>9}"
    )
    for n in sizes:
        wall = statistics.median(t.wall for t in runs[n])
        cpu = statistics.median(t.cpu for t in runs[n])
        remote = statistics.median(t.remote_cpu for t in runs[n])
        print(
            f"{n:>5} {wall:>8.2f} {wall / one:>8.2f}× {cpu:>16.2f} {cpu / n:>9.3f} {remote:>11.2f} {remote / n:>9.3f}"
        )
    if 8 in runs and sizes[0] == 1:
        ratio = statistics.median(t.wall for t in runs[8]) / one
        print(f"\n8 hosts / 1 host = {ratio:.2f}× (target ≤ 2.5×)")
    for n, found in problems.items():
        if found:
            shown = "; ".join(sorted(set(found))[:5])
            print(f"{n} hosts: {len(found)} probe(s) not ok across rounds, e.g. {shown}")


if __name__ == "__main__":
    main()
