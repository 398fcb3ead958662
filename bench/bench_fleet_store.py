"""How fast is `fleet --all` over a store of 1,000 hosts, and how much memory does it take?

Generates N realistic stored snapshots (the diff bench's big host: 800 distributions,
8 GPUs, 5,000 watched files; ~1.8 MB of JSON each) into a store folder, each host with
its own identity (hostname, boot and machine ids, GPU UUIDs, file mtimes, install times),
three odd hosts (an older NCCL, another kernel, one edited file) and two stale ones
(taken 3 h ago). Then, in rotating order, each round times in this process:

  baseline   read every host's newest file and json.loads it (what any reader pays)
  fleet      driftwatch fleet --all --store DIR --json (in process, output discarded)

and reports medians and fleet / baseline. Peak memory is measured apart, in fresh
processes (RUSAGE_CHILDREN's max RSS): `fleet --all` over the N hosts and over N/10 of
them (bounded memory: the two should be close), and a process that json.loads every
file and keeps them (what holding the snapshots would cost).

Run:  python bench/bench_fleet_store.py [--hosts 1000] [--repeat 3] [--dir DIR] [--s3 200]

The store is kept in DIR (default bench/.fleet-store-v2-<hosts>, git-ignored) and reused
by later runs. --s3 N also times fleet over the first N hosts uploaded to a bucket of
moto's S3 server on 127.0.0.1 (tests/s3.py), against json.loads of the same N files: moto
is a Python server sharing these 2 cores, so read that figure as an upper bound on what
the protocol costs, not as S3's speed.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import copy
import io
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_diff import base_facts  # noqa: E402  (the diff bench's big host)

from driftwatch.cli import main  # noqa: E402
from driftwatch.model import HostIdentity, ProbeRecord, ProbeStatus, Snapshot, utcnow  # noqa: E402
from driftwatch.store import SnapshotStore  # noqa: E402

ODD = {17: "nccl", 423: "kernel", 777: "file"}


def healthy(base: dict[str, Any]) -> dict[str, Any]:
    """The diff bench's host with every requirement met, as on a host that works: its
    synthetic ranges (>=1.7 of a 1.3.x) would give doctor thousands of unmet requirements."""
    dists = base["python"]["interpreters"]["python3"]["distributions"]
    versions = {name: d["version"] for name, d in dists.items()}
    for dist in dists.values():
        dist["requires"] = [f"{dep}=={versions[dep]}" if dep in versions else f"{dep}>=0"
                            for dep in (re.split(r"[=<>!~ ;\[]", r, maxsplit=1)[0] for r in dist["requires"])]
    return base


def host_snapshot(base: dict[str, Any], n: int, hosts: int) -> Snapshot:
    facts = copy.deepcopy(base)
    name = f"node{n:04d}"
    facts["system"].update(hostname=name, boot_id=f"boot-{n}", machine_id=f"machine-{n}")
    facts["system"]["volatile"]["uptime_s"] = 1000.0 * n
    facts["gpu"]["gpus"] = {f"GPU-{n:04d}{i:04x}-0000-0000-0000-000000000000": dict(gpu, bus_id=gpu["bus_id"])
                            for i, gpu in enumerate(facts["gpu"]["gpus"].values())}
    for entry in facts["files"]["files"].values():
        entry["mtime"] += n  # copied to each host at another moment: identity, not drift
    interp = facts["python"]["interpreters"]["python3"]
    for dist in interp["distributions"].values():
        dist["installed_at"] += n
    odd = ODD.get(n)
    if odd == "nccl":
        interp["distributions"]["nvidia-nccl-cu12"].update(version="2.21.5", record_sha256="f" * 64)
    elif odd == "kernel":
        facts["system"]["kernel"] = "5.15.0-170-generic"
    elif odd == "file":
        next(iter(facts["files"]["files"].values()))["sha256"] = "e" * 64
    stale = n >= hosts - 2
    taken = utcnow() - (timedelta(hours=3) if stale else timedelta(seconds=n % 600))
    probes = {name_: ProbeRecord(status=ProbeStatus.ok, facts=value) for name_, value in facts.items()}
    return Snapshot(host=HostIdentity(name=name, address="local", hostname=name), taken_at=taken,
                    duration_s=1.0, probes=probes)


def generate(store_dir: Path, hosts: int) -> None:
    """The store, unless a complete one is there already (each run refreshes the times)."""
    store = SnapshotStore(store_dir)
    if len(store.hosts()) == hosts:
        return
    base = healthy(base_facts())
    start = time.perf_counter()
    for n in range(hosts):
        store.save(host_snapshot(base, n, hosts))
    print(f"generated {hosts} hosts in {store_dir} in {time.perf_counter() - start:.0f} s", flush=True)


def refresh(store_dir: Path, hosts: int) -> None:
    """Rename each host's file so its time in the name is fresh again (the content keeps its taken_at)."""
    now = utcnow()
    for n, folder in enumerate(sorted(p for p in store_dir.iterdir() if p.is_dir() and not p.name.startswith("."))):
        stale = n >= hosts - 2
        stamp = (now - (timedelta(hours=3) if stale else timedelta(seconds=n % 600))).strftime("%Y%m%dT%H%M%S.%fZ")
        for old in folder.glob("*.json"):
            data = json.loads(old.read_bytes())
            data["taken_at"] = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:22]}Z"
            new = folder / f"{stamp}.json"
            new.write_text(json.dumps(data, indent=1))
            if new != old:
                old.unlink()


def newest_files(store_dir: Path) -> list[Path]:
    return [max(p.glob("*.json")) for p in sorted(store_dir.iterdir()) if p.is_dir() and not p.name.startswith(".")]


def baseline(files: list[Path]) -> None:
    for path in files:
        json.loads(path.read_bytes())


def fleet(store: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["fleet", "--all", "--store", store, "--json"])
    result: dict[str, Any] = json.loads(out.getvalue())
    result["exit"] = code
    return result


def peak_rss_mib(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Max RSS of a fresh child process running ``argv`` (its own reading, not this process's)."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
    return int(done.stdout.strip()) / 1024


def cpu_s() -> float:
    """CPU time of this process and of its children that have ended (fleet's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(label: str, fn: Any, times: dict[str, list[float]], cpu: dict[str, list[float]]) -> Any:
    start, start_cpu = time.perf_counter(), cpu_s()
    value = fn()
    times.setdefault(label, []).append(time.perf_counter() - start)
    cpu.setdefault(label, []).append(cpu_s() - start_cpu)
    return value


def main_() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--s3", type=int, default=0, metavar="N")
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "driftwatch"), quiet=1)
    store_dir = args.dir or ROOT / "bench" / f".fleet-store-v2-{args.hosts}"
    generate(store_dir, args.hosts)
    refresh(store_dir, args.hosts)
    files = newest_files(store_dir)
    size = sum(p.stat().st_size for p in files)
    print(f"{len(files)} hosts, {size / 2**20:.0f} MiB of newest snapshots ({size / len(files) / 2**20:.2f} MiB each)",
          flush=True)
    result = fleet(str(store_dir))
    summary = result["summary"]
    print(f"fleet: exit {result['exit']}, {len(summary['hosts'])} compared, stale {[s['host'] for s in summary['stale']]}, "
          f"outliers {summary['outlier_hosts']}: {summary['headline'][:100]}")
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    cases = [("baseline", lambda: baseline(files)), ("fleet", lambda: fleet(str(store_dir)))]
    for round_ in range(args.repeat):
        for label, fn in cases[round_ % 2:] + cases[: round_ % 2]:
            timed(label, fn, times, cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"median of {args.repeat}: json.loads of every newest file {med['baseline']:.2f} s ({mcpu['baseline']:.2f} CPU-s); "
          f"fleet --all {med['fleet']:.2f} s ({mcpu['fleet']:.2f} CPU-s) = {med['fleet'] / med['baseline']:.2f}x the "
          f"baseline's wall time, {mcpu['fleet'] / mcpu['baseline']:.2f}x its CPU time; load average {os.getloadavg()[0]:.1f}")
    if args.s3:
        bench_s3(files[: args.s3])
    cli = [sys.executable, "-m", "driftwatch", "fleet", "--all", "--json", "--store"]
    subset = store_dir.parent / f"{store_dir.name}-tenth"
    if not subset.is_dir():
        subset.mkdir()
        (subset / ".driftwatch-layout").write_text((store_dir / ".driftwatch-layout").read_text())
        for folder in sorted(p for p in store_dir.iterdir() if p.is_dir() and not p.name.startswith("."))[::10]:
            (subset / folder.name).symlink_to(folder)
    keep_all = ("import json, sys, pathlib; kept = [json.loads(p.read_bytes()) for p in "
                f"[max(d.glob('*.json')) for d in pathlib.Path({str(store_dir)!r}).iterdir() if d.is_dir()]]")
    print(f"peak RSS: fleet --all over {len(files)} hosts {peak_rss_mib([*cli, str(store_dir)]):.0f} MiB; "
          f"over {len(files) // 10} hosts {peak_rss_mib([*cli, str(subset)]):.0f} MiB; "
          f"json.loads of all {len(files)} kept {peak_rss_mib([sys.executable, '-c', keep_all]):.0f} MiB")


def bench_s3(files: list[Path]) -> None:
    import tempfile

    from tests.s3 import start_moto

    server = start_moto(Path(tempfile.mkdtemp()) / "moto.log")
    try:
        os.environ.update(AWS_ACCESS_KEY_ID=server.key, AWS_SECRET_ACCESS_KEY=server.secret,
                          AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL_S3=server.endpoint)
        url = f"s3://{server.bucket()}/fleet"
        store = SnapshotStore(url)
        start = time.perf_counter()
        for path in files:
            store.backend.replace(store.backend.location(path.parent.name, path.name), path.read_bytes())
        print(f"s3: uploaded {len(files)} snapshots to moto in {time.perf_counter() - start:.0f} s", flush=True)
        times: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        timed("baseline", lambda: baseline(files), times, cpu)
        result = timed("fleet", lambda: fleet(url), times, cpu)
        print(f"s3: fleet --all over {len(result['summary']['hosts'])} hosts in moto {times['fleet'][0]:.2f} s "
              f"({cpu['fleet'][0]:.2f} CPU-s, moto's not counted) = {times['fleet'][0] / times['baseline'][0]:.2f}x "
              f"json.loads of the same files from disk ({times['baseline'][0]:.2f} s)", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main_()
