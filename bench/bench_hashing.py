"""Does the hash cache make a second snapshot of an unchanged big tree cheap?

Generates a watched tree of 2,000 files totalling 2 GiB (~1 MiB each: a random 64 KiB
block repeated, with the file's number written into every block so no two files are
alike) under a temp dir, then times, alternating in one run:

  first    ``python -m driftwatch snapshot local`` into an empty store: every file read
           and hashed (sha256)
  second   the same into a store that already holds a snapshot of the unchanged tree:
           size, mtime, ctime and inode match, so the previous digest is reused and no
           file is read

Both as fresh processes (interpreter start, imports and the other local probes included),
and also the snapshot's own duration (``duration_s``: every probe, concurrently) and the
``files`` probe's, as recorded in the snapshot. The command runs with a private, empty
``HOME``, as the SSH benches give their sessions: otherwise the processes probe's login
shell would source this development machine's ~/.bashrc (``pyenv init``, ~0.1 s of CPU). The tree was just
written, so it sits in the page cache: without ``--cold`` the first snapshot is the best
case for hashing (no disk reads), the ratio is the conservative one. The 2 GiB are deleted at the
end, also on Ctrl-C.

With ``--cold`` the tree is evicted from the page cache before every first snapshot, so
that one reads from disk, as the first snapshot of a model directory usually does.

Run:  python bench/bench_hashing.py [--repeat N] [--files 2000] [--gib 2] [--dir PARENT] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _loopback import Timing, precompile, timed

BLOCK = 64 * 1024


def make_tree(root: Path, files: int, total: int) -> int:
    """``files`` files totalling ``total`` bytes in 20 subfolders; returns the largest size."""
    pattern = bytearray(os.urandom(BLOCK))
    size = total // files
    for i in range(files):
        folder = root / f"shard_{i % 20:02d}"
        folder.mkdir(exist_ok=True)
        pattern[:8] = i.to_bytes(8, "little")
        block = bytes(pattern)
        this = size + (total % files if i == files - 1 else 0)
        with open(folder / f"weights_{i:05d}.bin", "wb") as out:
            out.writelines(block for _ in range(this // BLOCK))
            out.write(block[: this % BLOCK])
            out.flush()
            os.fsync(out.fileno())  # clean pages: evict() can then drop them
    return size + total % files


def evict(root: Path) -> None:
    """Drop the tree's pages from the page cache (POSIX_FADV_DONTNEED needs no root), so
    the next read comes from disk, as for a model directory not read since boot."""
    for path in root.rglob("*.bin"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--cold", action="store_true", help="evict the tree from the page cache before each first snapshot")
    parser.add_argument("--gib", type=float, default=2.0, help="total size of the tree in GiB")
    parser.add_argument("--dir", type=Path, default=None, help="where to create the tree (default: the temp dir)")
    args = parser.parse_args()
    precompile()

    work = Path(tempfile.mkdtemp(prefix="dw-hashing-", dir=args.dir))
    try:
        tree = work / "tree"
        tree.mkdir()
        total = int(args.gib * 2**30)
        largest = make_tree(tree, args.files, total)
        print(f"tree: {args.files} files, {total / 2**30:.2f} GiB in {tree}", file=sys.stderr)
        config = work / "driftwatch.toml"
        config.write_text(
            "[watch]\npython = []\nprocesses = []\n"
            f'files = ["{tree}/**/*.bin"]\n'
            f"max_hash_bytes = {largest * 4}\nmax_files = {args.files * 2}\n"
        )

        home = work / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home)}

        def snapshot(store: Path) -> tuple[Timing, dict]:
            argv = [
                sys.executable,
                "-m",
                "driftwatch",
                "snapshot",
                "local",
                "--json",
                "--config",
                str(config),
                "--store",
                str(store),
            ]
            result = timed(argv, cwd=work, env=env, ok=(0, 3))  # 3: no nvidia-smi here, gpu probe errors
            snap = json.loads(result.stdout)[0]["snapshot"]
            files = snap["probes"]["files"]
            if files["status"] != "ok" or len(files["facts"]["files"]) != args.files:
                raise SystemExit(f"files probe: {files['status']} {files.get('error')}")
            return result, {**files, "snapshot_s": snap["duration_s"]}

        warm = work / "store-second"
        snapshot(warm)  # seeds the cache for the "second" runs; also warms .pyc files
        runs: dict[str, list[tuple[Timing, dict]]] = {"first": [], "second": []}
        for round_ in range(args.repeat):
            cases = ["first", "second"] if round_ % 2 == 0 else ["second", "first"]
            for case in cases:
                if case == "first" and args.cold:
                    evict(tree)
                store = work / f"store-first-{round_}" if case == "first" else warm
                runs[case].append(snapshot(store))
                if case == "first":
                    shutil.rmtree(store)
            print(
                f"round {round_ + 1}: first {runs['first'][-1][0].wall:.2f} s, "
                f"second {runs['second'][-1][0].wall:.2f} s",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    counts = {case: runs[case][-1][1]["facts"].get("volatile", {}) for case in runs}
    wall = {case: statistics.median(t.wall for t, _ in runs[case]) for case in runs}
    cpu = {case: statistics.median(t.cpu for t, _ in runs[case]) for case in runs}
    probe = {case: statistics.median(f["duration_s"] for _, f in runs[case]) for case in runs}
    own = {case: statistics.median(f["snapshot_s"] for _, f in runs[case]) for case in runs}
    print(
        f"\n{args.files} files, {total / 2**30:.2f} GiB (page cache {'cold' if args.cold else 'warm'}), "
        f"{args.repeat} rounds, {os.cpu_count()} cores"
    )
    print(f"{'snapshot':<8} {'wall s':>8} {'cpu s':>7} {'duration_s':>11} {'files probe s':>14}  files hashed / reused")
    for case in runs:
        print(
            f"{case:<8} {wall[case]:>8.3f} {cpu[case]:>7.3f} {own[case]:>11.3f} {probe[case]:>14.3f}  "
            f"{counts[case].get('hashed')} / {counts[case].get('reused')}"
        )
    print(f"\nsecond / first, snapshot duration_s = {own['second'] / own['first']:.3f}× (target ≤ 0.1×)")
    print(f"second / first, files probe         = {probe['second'] / probe['first']:.3f}×")
    print(f"second / first, whole command       = {wall['second'] / wall['first']:.3f}× (with interpreter start and imports)")
    print(f"tree removed: {not work.exists()}")


if __name__ == "__main__":
    main()
