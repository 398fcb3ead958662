"""How fast is `driftwatch history` over a year of one host? 500 stored snapshots.

Builds a store holding 500 snapshots of one realistic host (400 distributions, 8 GPUs,
800 watched files, a git checkout, the CUDA stack), taken a day apart. Most differ only in
volatile readings (temperature, uptime); six real changes are spread over them (NCCL
upgraded twice, sgl-kernel upgraded, three source files edited, the driver upgraded, a
process holding GPU memory), and one file is damaged. Then, in the same run:

- the whole command as a user runs it (``driftwatch history gpu01``, a new interpreter
  each time): wall time and peak RSS (``wait4``), for 500 and for 50 snapshots — the
  memory must not grow with the number of snapshots;
- ``history`` in this process against the baseline every history must pay: reading the
  same 500 files and ``json.loads`` each (ratio), and with pydantic validation too.

    python bench/bench_history.py [--repeat 5] [--snapshots 500] [--schema 1] [--keep DIR]

``--schema 1`` writes snapshots as a driftwatch from before schema 2 stored them: those are
redacted again as they are read (driftwatch/store.py), which history then pays per file.

The target (issue 16) is at most 3 s for 500 states on the 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftwatch.cli import main  # noqa: E402
from driftwatch.model import SCHEMA_VERSION, HostIdentity, ProbeRecord, ProbeStatus, Snapshot  # noqa: E402
from driftwatch.store import SnapshotStore  # noqa: E402
from bench_diff import median_time  # noqa: E402  (this folder is on sys.path when run as a script)
from tests.diff.builders import SRT, T0, baseline, dist, gpu_entry, python_facts  # noqa: E402

N_DISTS, N_GPUS, N_FILES = 400, 8, 800
HOST = "gpu01"


def base_facts() -> dict[str, Any]:
    facts = baseline()
    dists = facts["python"]["interpreters"]["python3"]["distributions"]
    for i in range(N_DISTS - len(dists)):
        name = f"package-{i:03d}"
        dists[name] = dist(name, f"1.{i % 40}.{i % 7}", *(f"package-{(i * 7 + k) % 300:03d}>=1.{k}" for k in range(5)))
    facts["python"] = python_facts(dists)
    facts["gpu"]["gpus"] = {
        f"GPU-{i:08x}-0000-0000-0000-000000000000": gpu_entry(i, f"GPU-{i:08x}-0000-0000-0000-000000000000", f"00000000:{0x18 + i:02x}:00.0")
        for i in range(N_GPUS)
    }
    facts["files"]["files"] = {
        f"{SRT}/mod{i // 40}/file{i}.py": {"size": 1000 + i, "mtime": 1.77e9 + i, "mode": "0644", "sha256": f"{i:064x}", "error": None}
        for i in range(N_FILES)
    }
    return facts


def _nccl(version: str) -> Callable[[dict[str, Any]], None]:
    def edit(facts: dict[str, Any]) -> None:
        facts["python"]["interpreters"]["python3"]["distributions"]["nvidia-nccl-cu12"]["version"] = version
        facts["python"]["interpreters"]["python3"]["distributions"]["nvidia-nccl-cu12"]["record_sha256"] = f"rec-{version}"
        facts["cuda"]["nccl"]["distributions"]["nvidia-nccl-cu12"] = version
    return edit


def _sgl_kernel(facts: dict[str, Any]) -> None:
    facts["python"]["interpreters"]["python3"]["distributions"]["sgl-kernel"].update(version="0.3.17", record_sha256="rec-0.3.17")


def _edit_files(facts: dict[str, Any]) -> None:
    for i in (3, 40, 41):
        entry = facts["files"]["files"][f"{SRT}/mod{i // 40}/file{i}.py"]
        entry.update(sha256="e" * 64, mtime=entry["mtime"] + 86400, size=entry["size"] + 12)


def _driver(facts: dict[str, Any]) -> None:
    facts["gpu"]["driver_version"] = "595.71.05"
    facts["system"]["nvidia_modules"]["nvidia"] = "595.71.05"


def _memhog(facts: dict[str, Any]) -> None:
    uuid = next(iter(facts["gpu"]["gpus"]))
    facts["gpu"]["gpus"][uuid]["memory_free_mib"] -= 22528
    facts["gpu"]["processes"][f"{uuid}:10291"] = {"gpu_uuid": uuid, "pid": 10291, "name": "memhog", "used_mib": 22528}


CHANGES: dict[float, Callable[[dict[str, Any]], None]] = {  # at this fraction of the year
    0.12: _nccl("2.27.7"), 0.30: _sgl_kernel, 0.44: _edit_files, 0.60: _driver, 0.76: _nccl("2.28.3"), 0.90: _memhog,
}


def build_store(root: Path, count: int, schema: int = SCHEMA_VERSION) -> SnapshotStore:
    store = SnapshotStore(root)
    facts = base_facts()
    when = {int(fraction * count): edit for fraction, edit in CHANGES.items()}
    for n in range(count):
        if n in when:
            when[n](facts)
        snapshot_facts = copy.deepcopy(facts)
        for gpu in snapshot_facts["gpu"]["gpus"].values():
            gpu["volatile"]["temperature_c"] = 30 + n % 11
        snapshot_facts["system"]["volatile"]["uptime_s"] = 3600.0 * n
        probes = {name: ProbeRecord(status=ProbeStatus.ok, duration_s=0.1, facts=value) for name, value in snapshot_facts.items()}
        store.save(Snapshot(
            host=HostIdentity(name=HOST, address=f"root@{HOST}", hostname=HOST),
            taken_at=T0 + timedelta(days=n * 365 / count), duration_s=0.8,
            labels=["good"] if n == 0 else [], probes=probes, schema_version=schema,
        ))
    damaged = store.paths(HOST)[count // 2]
    damaged.write_bytes(damaged.read_bytes()[:4000])  # cut off mid-write, as a full disk leaves it
    return store


def command(store: Path) -> tuple[float, int]:
    """The whole command in a new interpreter: (wall seconds, peak RSS in KiB)."""
    argv = [sys.executable, "-m", "driftwatch", "history", HOST, "--store", str(store)]
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=store.parent)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"history exited {process.returncode}")
    return wall, usage.ru_maxrss


def in_process(store: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["history", HOST, "--store", str(store)]) == 0


def read_and_parse(store: Path) -> None:
    for path in sorted((store / HOST).glob("*.json")):
        with contextlib.suppress(ValueError):
            json.loads(path.read_bytes())


def read_and_validate(store: Path) -> None:
    for path in sorted((store / HOST).glob("*.json")):
        with contextlib.suppress(ValueError):
            Snapshot.model_validate_json(path.read_bytes())


def main_() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--snapshots", type=int, default=500)
    parser.add_argument("--keep", type=Path, help="build the stores under DIR and leave them there")
    parser.add_argument("--schema", type=int, default=SCHEMA_VERSION,
                        help="write snapshots of this schema (1: stored before full redaction, redacted again on read)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "driftwatch")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        parent = args.keep or Path(tmp)
        big, small = parent / "store-big", parent / "store-small"
        build_store(big, args.snapshots, args.schema)
        build_store(small, args.snapshots // 10, args.schema)
        size = sum(p.stat().st_size for p in (big / HOST).glob("*.json"))
        print(f"{args.snapshots} snapshots of {HOST} (schema {args.schema}; {N_DISTS} distributions, {N_GPUS} GPUs, {N_FILES} files), "
              f"{size / args.snapshots / 1024:.0f} KiB each, {size / 2**20:.0f} MiB in all; median of {args.repeat}")
        runs = {"big": [], "small": []}  # type: dict[str, list[tuple[float, int]]]
        for _ in range(args.repeat):  # alternate, so load on the machine hits both alike
            runs["big"].append(command(big))
            runs["small"].append(command(small))
        for name, n in (("big", args.snapshots), ("small", args.snapshots // 10)):
            wall = statistics.median(w for w, _ in runs[name])
            rss = max(r for _, r in runs[name]) / 1024
            print(f"  driftwatch history, {n:4d} snapshots (new interpreter): {wall:6.3f} s wall, peak RSS {rss:6.1f} MiB")
        timings = {"history": 0.0, "read+json.loads": 0.0, "read+validate": 0.0}
        for label, fn in (("history", in_process), ("read+json.loads", read_and_parse), ("read+validate", read_and_validate)):
            timings[label] = median_time(lambda fn=fn: fn(big), args.repeat)  # type: ignore[misc]
        base = timings["read+json.loads"]
        for label, seconds in timings.items():
            print(f"  in process, {label:16}: {seconds:6.3f} s  {seconds / base:5.2f}x read+json.loads")


if __name__ == "__main__":
    main_()
