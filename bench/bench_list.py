"""How fast is `driftwatch list` of one host with 20,000 snapshots, and in how much memory?

Builds a store holding 20,000 snapshots of one host (each ~50 KiB: 150 distributions and
200 watched files, 1 GB in all, as issue 24's), one label among them. `list` reads each file's name, stat and head
(its time and labels come before its probes), never the whole file. In the same run:

- ``driftwatch list gpu01 --json`` as a user runs it (a new interpreter each time): wall time
  and peak RSS (``wait4``), for 20,000 and for 2,000 snapshots: the memory must not grow
  with what the files hold;
- the floor, ``ls -l --full-time`` of the folder (names and stat, a new process), and what
  `list` cost before (reading every file whole and ``json.loads`` of each, in process).

    python bench/bench_list.py [--repeat 5] [--snapshots 20000] [--keep DIR]

The target (issue 24) is at most 2 s for 20,000 snapshots, in flat memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftwatch.store.names import snapshot_stem  # noqa: E402
from bench_diff import median_time  # noqa: E402  (this folder is on sys.path when run as a script)
from tests.builders import T0, snapshot  # noqa: E402

HOST = "gpu01"


def document() -> str:
    """One snapshot's JSON as driftwatch stores it, ~50 KiB."""
    dists = {f"package-{i:03d}": {"version": f"1.{i % 40}.{i % 7}", "installer": "pip", "requires": [f"dep-{i}>=1"]}
             for i in range(150)}
    files = {f"/srv/src/mod{i // 40}/file{i}.py": {"size": 1000 + i, "sha256": f"{i:064x}"} for i in range(200)}
    snap = snapshot(HOST, python={"interpreters": {"python3": {"distributions": dists}}}, files={"files": files})
    return snap.model_dump_json(indent=1)


def build_store(root: Path, count: int) -> int:
    """``count`` snapshot files of HOST, a minute apart, the first labelled; their total size."""
    folder = root / HOST
    folder.mkdir(parents=True)
    text = document()
    stamp = T0.isoformat().replace("+00:00", "Z")
    assert stamp in text
    total = 0
    for n in range(count):
        taken = T0 + timedelta(minutes=n)
        body = text.replace(stamp, taken.isoformat().replace("+00:00", "Z"), 1)
        if n == 0:
            body = body.replace('"labels": []', '"labels": [\n  "good"\n ]', 1)
        data = body.encode()
        (folder / f"{snapshot_stem(taken)}.json").write_bytes(data)
        total += len(data)
    return total


def run(argv: list[str], cwd: Path) -> tuple[float, int]:
    """A command in a new process: (wall seconds, peak RSS in KiB)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_maxrss


def read_whole(store: Path) -> None:
    for path in sorted((store / HOST).glob("*.json")):
        json.loads(path.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--snapshots", type=int, default=20000)
    parser.add_argument("--keep", type=Path, help="build the stores under DIR and leave them there")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "driftwatch")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        parent = args.keep or Path(tmp)
        big, small = parent / "store-big", parent / "store-small"
        size = build_store(big, args.snapshots)
        build_store(small, args.snapshots // 10)
        print(f"{args.snapshots} snapshots of {HOST}, {size / args.snapshots / 1024:.0f} KiB each, "
              f"{size / 2**20:.0f} MiB in all; median of {args.repeat}")
        cases = {
            "list big": [sys.executable, "-m", "driftwatch", "list", HOST, "--json", "--store", str(big)],
            "list small": [sys.executable, "-m", "driftwatch", "list", HOST, "--json", "--store", str(small)],
            "ls -l big": ["ls", "-l", "--full-time", str(big / HOST)],
        }
        runs: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
        for round_ in range(args.repeat):  # alternate, the order rotating, so load hits all alike
            names = list(cases)
            for name in names[round_ % len(names):] + names[: round_ % len(names)]:
                runs[name].append(run(cases[name], parent))
        base = statistics.median(w for w, _ in runs["ls -l big"])
        for name, results in runs.items():
            wall = statistics.median(w for w, _ in results)
            rss = max(r for _, r in results) / 1024
            print(f"  {name:12}: {wall:6.3f} s wall ({wall / base:5.1f}x ls -l), peak RSS {rss:6.1f} MiB")
        whole = median_time(lambda: read_whole(big), max(1, args.repeat // 2))
        print(f"  before (read whole + json.loads, in process): {whole:6.3f} s ({whole / base:5.1f}x ls -l)")


if __name__ == "__main__":
    main()
