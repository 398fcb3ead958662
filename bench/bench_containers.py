"""How much does a host with containerised servers cost a snapshot, against the same
servers running natively, in the same run?

Builds one image from this machine's Python (tests/rootfs.py: a venv with real dist-infos
and a sleeping ``sglang.launch_server`` that maps a real ELF library), then runs:

  native       4 servers started from that image's venv directly on the host
  podman       4 servers in podman containers (runc, cgroupfs) of that image

Both sets run for the whole benchmark (the machine carries the same load in every case);
each case snapshots `local` as a fresh process (`driftwatch snapshot local`, as from
cron) with a config that watches its own four servers, the previous snapshot in the
store. Cases alternate, the order rotating every round. The containers case pays for
reading each container's identity from the host, `podman inspect`, and the stack inside
each image (its distributions and mapped libraries) through /proc/PID/root.

Run as root:  python bench/bench_containers.py [--repeat N] [--servers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _loopback import precompile  # noqa: E402
from tests.rootfs import VENV, build_rootfs, image_tar  # noqa: E402
from tests.runtimes import Podman, wait_started  # noqa: E402


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.decode()[-500:]}")
    return elapsed


def config(folder: Path, pattern: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "driftwatch.toml").write_text(
        f'store = "{folder}/store"\nlocal_name = "bench"\ntimeout = 30\n'
        f'[watch]\npython = []\nrepos = []\nfiles = []\nlogs = []\nprocesses = ["{pattern}"]\n')
    return folder


def containers_facts(folder: Path) -> dict:
    latest = sorted((folder / "store" / "bench").glob("*.json"))[-1]
    return json.loads(latest.read_text())["probes"]["containers"]


def walk_cost(root: Path, model: str, rounds: int) -> tuple[float, float]:
    """CPU seconds of one /proc walk (processes_collect.py) of a host server, without and
    with the per-server context (process_context.py): what a host with no containerised
    server pays for the containers probe. CPU time, not wall time: these machines are shared."""
    from driftwatch.probes.base import load_script
    from driftwatch.probes.processes import LIB_MARKERS, redaction_rules
    from driftwatch.probes.server_limits import THREAD_ENV

    plain = {"patterns": [f"--model-path {model}"], "env": ["NCCL_*"], "always_env": [], "lib_markers": LIB_MARKERS,
             "mapped": True, "max_mapped": 2048, "mapped_exclude": [], "max_processes": 64, "max_bytes": 4 << 20,
             **redaction_rules()}
    context = {**plain, "context": True, "context_env": list(THREAD_ENV), "max_shm_segments": 256}
    code = {"without": load_script("processes_collect.py"),
            "with": load_script("process_context.py") + "\n\n" + load_script("processes_collect.py")}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(rounds):
        for name, request in (("without", plain), ("with", context)):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", code[name]], input=json.dumps(request).encode(),
                           capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(cpu["without"]), statistics.median(cpu["with"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--servers", type=int, default=4)
    args = parser.parse_args()
    precompile()
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="dw-bench-containers-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        root = build_rootfs(work / "image" / "root", work=work / "image")
        podman = Podman(work / "podman")
        natives: list[subprocess.Popen[bytes]] = []
        try:
            podman.load(image_tar(root, work / "image" / "image.tar"))
            for i in range(args.servers):
                model = f"/models/bn-{tag}-{i}"
                env = {"PATH": "/usr/bin:/bin", "SLEEP": "3600"}
                natives.append(subprocess.Popen([str(root / VENV.lstrip("/") / "bin" / "python3"), "-m",
                                                 "sglang.launch_server", "--model-path", model, "--tp", "2",
                                                 "--port", str(30000 + i)], env=env, start_new_session=True))
                wait_started(model)
                podman.run(f"bench-{tag}-{i}", f"/models/bc-{tag}-{i}", {"SLEEP": "3600"}, shm=64 << 20)
            cases = {"native": config(work / "native", f"--model-path /models/bn-{tag}-"),
                     "podman": config(work / "podman-case", f"--model-path /models/bc-{tag}-")}
            snapshot = [sys.executable, "-m", "driftwatch", "snapshot", "local"]
            for folder in cases.values():
                timed(snapshot, folder)  # the store's previous snapshot, as from cron
            times: dict[str, list[float]] = {name: [] for name in cases}
            names = list(cases)
            for round_ in range(args.repeat):
                for name in names[round_ % len(names):] + names[: round_ % len(names)]:
                    times[name].append(timed(snapshot, cases[name]))
            without, with_context = walk_cost(root, f"/models/bn-{tag}-", max(20, args.repeat * 3))
            base = statistics.median(times["native"])
            print(f"{args.servers} servers, {args.repeat} rounds, medians:")
            for name, runs in times.items():
                record = containers_facts(cases[name])
                inside = sum(1 for s in record["facts"]["servers"].values() if s.get("python"))
                print(f"  {name:8s} {statistics.median(runs):.3f} s  {statistics.median(runs) / base:.2f}x native"
                      f"  (containers probe {record['duration_s']:.2f} s, {inside} stacks read inside images)")
            print(f"the /proc walk of {args.servers} host servers, CPU s (median): {without * 1000:.1f} ms without the "
                  f"per-server context, {with_context * 1000:.1f} ms with it ({(with_context - without) * 1000:+.1f} ms)")
        finally:
            for proc in natives:
                os.killpg(proc.pid, 9)
                proc.wait()
            podman.close()


if __name__ == "__main__":
    main()
