"""The caches probe against real cache trees laid out as FlashInfer, Triton and torch write them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.probes.base import ProbeContext, load_script
from driftwatch.probes.caches import HASHED_RE, OBJECT_SUFFIXES, CachesProbe, owner_of
from driftwatch.probes.locations import layout_of
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport

# Triton's keys: base32 of a sha256, 52 characters (one of them, rarely, without a digit).
KERNELS = ["AAKZ3TQX5MBYH6L2JPOSWVE7C4DFGRNI3UXQ2KDB5LYH7ZMWTP6A", "QXZMBNKLPVDFHJTRWYCGSEUAIOBNXQZLMDKHTWAQXZMBNKLPVDFH"]


def write(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def flashinfer_op(home: Path, version: str, op: str, objects: int) -> Path:
    """One JIT-compiled op as FlashInfer's ninja build leaves it."""
    build = home / ".cache" / "flashinfer" / version / "90a" / "cached_ops" / op
    write(build / "build.ninja", b"rule nvcc\n")
    for i in range(objects):
        write(build / f"kernel_{i}.cuda.o", b"o" * (100 + i))
    write(build / f"{op}.so", b"so" * 50)
    return build


def triton_kernel(home: Path, key: str) -> None:
    for name, data in (("k.cubin", b"c" * 64), ("k.json", b"{}"), ("k.ptx", b"p"), ("__grp__k.json", b"{}")):
        write(home / ".triton" / "cache" / key / name, data)


def record(previous: dict[str, Any] | None = None, **watch: Any) -> ProbeRecord:
    settings = WatchSettings(processes=[], **{"caches": ["~/.cache/flashinfer", "~/.triton/cache",
                                                          "~/.cache/torch_extensions"], **watch})
    ctx = ProbeContext(transport=LocalTransport(), watch=settings, timeout=30, previous=previous or {})
    result = run_probe(CachesProbe(), ctx)
    assert result.status is ProbeStatus.ok, result.error
    return result


def test_each_version_its_owner_and_compiled_objects(home: Path) -> None:
    flashinfer_op(home, "0.6.12", "fused_moe_120", objects=3)
    flashinfer_op(home, "0.6.11", "norm", objects=1)
    for key in KERNELS:
        triton_kernel(home, key)
    write(home / ".cache" / "torch_extensions" / "py310_cu121" / "fused_adam" / "fused_adam.so")
    caches = record().facts["caches"]
    flashinfer = caches["~/.cache/flashinfer"]
    assert flashinfer["path"] == str(home / ".cache" / "flashinfer") and flashinfer["exists"] is True
    assert flashinfer["layout"] == "flashinfer" and flashinfer["truncated"] is None
    entry = flashinfer["entries"]["0.6.12"]
    assert entry["owner"] == {"package": "flashinfer-python", "version": "0.6.12"}
    assert entry["files"] == 5 and entry["object_count"] == 4
    assert entry["bytes"] == len(b"rule nvcc\n") + 100 + 101 + 102 + 100
    op = "0.6.12/90a/cached_ops/fused_moe_120"
    mtime = (home / ".cache" / "flashinfer" / op / "kernel_0.cuda.o").stat().st_mtime
    assert entry["objects"][f"{op}/kernel_0.cuda.o"] == [100, mtime]
    assert set(entry["objects"]) == {f"{op}/kernel_{i}.cuda.o" for i in range(3)} | {f"{op}/fused_moe_120.so"}
    assert entry["oldest"] <= entry["newest"] and len(entry["digest"]) == 64
    assert flashinfer["entries"]["0.6.11"]["owner"]["version"] == "0.6.11"
    # Triton's per-kernel directories are keys, not meanings: one entry for all of them.
    triton = caches["~/.triton/cache"]["entries"]
    assert list(triton) == ["*"] and triton["*"]["files"] == 8 and triton["*"]["object_count"] == 2
    assert triton["*"]["owner"] == {"package": "triton", "version": None}
    ext = caches["~/.cache/torch_extensions"]["entries"]["py310_cu121"]
    assert ext["owner"] == {"package": "torch", "version": None, "python": "3.10", "cuda": "12.1"}


def test_listing_digest_moves_with_size_or_mtime_only(home: Path) -> None:
    build = flashinfer_op(home, "0.6.12", "norm", objects=2)
    first = record().facts["caches"]["~/.cache/flashinfer"]["entries"]["0.6.12"]
    os.utime(build / "kernel_0.cuda.o", ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    second = record().facts["caches"]["~/.cache/flashinfer"]["entries"]["0.6.12"]
    assert second["digest"] != first["digest"] and second["oldest"] == 1_700_000_000.0
    assert second["files"] == first["files"] and second["bytes"] == first["bytes"]


def test_second_snapshot_of_an_unchanged_cache_walks_nothing_and_says_so(home: Path) -> None:
    flashinfer_op(home, "0.6.12", "fused_moe_120", objects=20)
    for key in KERNELS:
        triton_kernel(home, key)
    first = record()
    assert first.facts["volatile"]["walked"] == 2 and first.facts["volatile"]["reused"] == 0
    second = record(previous=first.facts)
    assert second.facts["volatile"] == {"walked": 0, "reused": 2, "visited": 0}
    assert second.facts["caches"] == first.facts["caches"]


def test_an_object_replaced_by_a_rebuild_is_seen_though_the_rest_is_reused(home: Path) -> None:
    build = flashinfer_op(home, "0.6.12", "fused_moe_120", objects=5)
    flashinfer_op(home, "0.6.11", "norm", objects=1)
    first = record()
    # A linker or assembler writes a new file (bfd unlinks a non-empty output first).
    fresh = write(build / "kernel_3.cuda.o.new", b"rebuilt" * 40)
    os.replace(fresh, build / "kernel_3.cuda.o")
    second = record(previous=first.facts)
    assert second.facts["volatile"]["walked"] == 1 and second.facts["volatile"]["reused"] == 1
    entry = second.facts["caches"]["~/.cache/flashinfer"]["entries"]["0.6.12"]
    assert entry["objects"]["0.6.12/90a/cached_ops/fused_moe_120/kernel_3.cuda.o"][0] == 280
    assert entry["digest"] != first.facts["caches"]["~/.cache/flashinfer"]["entries"]["0.6.12"]["digest"]


def test_a_new_kernel_directory_makes_the_hashed_entry_walk_again(home: Path) -> None:
    triton_kernel(home, KERNELS[0])
    first = record()
    triton_kernel(home, KERNELS[1])
    second = record(previous=first.facts).facts
    assert second["caches"]["~/.triton/cache"]["entries"]["*"]["files"] == 8
    assert second["volatile"]["walked"] == 1


def test_symlink_loops_are_counted_and_never_followed(home: Path) -> None:
    build = flashinfer_op(home, "0.6.12", "norm", objects=1)
    (build / "loop").symlink_to(".")
    (build / "up").symlink_to("../../../..")
    (home / ".triton").mkdir()
    (home / ".triton" / "cache").symlink_to(home / ".triton" / "cache")  # a loop as the cache itself
    facts = record().facts["caches"]
    entry = facts["~/.cache/flashinfer"]["entries"]["0.6.12"]
    assert entry["symlinks"] == 2 and entry["files"] == 3 and entry["truncated"] is None
    assert facts["~/.triton/cache"]["exists"] is True and "symbolic links" in facts["~/.triton/cache"]["error"]


def test_missing_cache_and_a_file_where_a_directory_should_be(home: Path) -> None:
    write(home / ".cache" / "torch_extensions", b"not a dir")
    facts = record().facts["caches"]
    assert facts["~/.cache/flashinfer"] == {**facts["~/.cache/flashinfer"], "exists": False, "error": None,
                                             "entries": {}}
    assert facts["~/.cache/torch_extensions"]["error"] == "not a directory"


def test_entry_bound_truncates_says_so_and_keeps_no_keys_to_reuse(home: Path) -> None:
    """A million-entry cache, scaled down: the configured bound is 50 entries."""
    for version in ("0.6.10", "0.6.11", "0.6.12"):
        flashinfer_op(home, version, "big", objects=40)
    first = record(cache_max_entries=50)
    cache = first.facts["caches"]["~/.cache/flashinfer"]
    assert cache["truncated"] == "entries"
    assert cache["entries"]["0.6.10"]["files"] == 42 and cache["entries"]["0.6.10"]["truncated"] is None
    cut = cache["entries"]["0.6.11"]
    assert cut["truncated"] == "entries" and 0 < cut["files"] < 42 and cut["volatile"]["dirs"] is None
    assert cache["entries"]["0.6.12"] == {"owner": {"package": "flashinfer-python", "version": "0.6.12"},
                                         "files": None, "truncated": "entries"}
    second = record(previous=first.facts, cache_max_entries=50).facts
    # The complete entry is reused; a truncated walk proves nothing, so that one is walked
    # again, and the bound, not spent on the reused one, now reaches into the third.
    assert second["volatile"]["reused"] == 1 and second["volatile"]["walked"] == 2
    assert second["caches"]["~/.cache/flashinfer"]["entries"]["0.6.11"]["files"] == 42


def test_moved_by_the_login_environment_walks_there_too(home: Path) -> None:
    moved = home.parent / "fast-disk" / "triton"
    triton_kernel(home.parent / "fast-disk" / "t", KERNELS[0])
    shutil.move(str(home.parent / "fast-disk" / "t" / ".triton" / "cache"), str(moved))
    (home / ".profile").write_text(f"export TRITON_CACHE_DIR={moved}\n")
    facts = record().facts
    cache = facts["caches"][str(moved)]
    assert cache["via"] == ["TRITON_CACHE_DIR (login env)"] and cache["layout"] == "triton"
    assert cache["entries"]["*"]["files"] == 4 and facts["locations_error"] is None
    assert facts["caches"]["~/.triton/cache"]["exists"] is False  # the default is still recorded


def test_one_directory_configured_twice_is_walked_once(home: Path) -> None:
    flashinfer_op(home, "0.6.12", "norm", objects=1)
    (home / "fi").symlink_to(home / ".cache" / "flashinfer")
    facts = record(caches=["~/.cache/flashinfer", "~/fi"]).facts
    assert facts["caches"]["~/fi"]["same_as"] == "~/.cache/flashinfer" and facts["caches"]["~/fi"]["entries"] == {}
    assert facts["volatile"]["walked"] == 1


def run_script(request: dict[str, Any], *prefix: str) -> dict[str, Any]:
    out = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", load_script("caches_collect.py")],
                         input=json.dumps(request).encode(), capture_output=True, check=True, timeout=60).stdout
    return json.loads(out)


def script_request(path: Path, **extra: Any) -> dict[str, Any]:
    return {"roots": [{"key": "c", "path": str(path), "reuse": {}}], "walked": [], "max_entries": 1000,
            "seconds": 30, "hashed_re": HASHED_RE, "max_named": 256, "object_suffixes": list(OBJECT_SUFFIXES),
            "max_objects": 512, "max_dirs": 4096, "max_objects_total": 8192, "max_dirs_total": 32768, **extra}


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="dw-caches-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for sub in path.rglob("*"):
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(0o755)
        shutil.rmtree(path)


def test_unreadable_directory_is_counted_and_the_rest_described(shared_tmp: Path) -> None:
    cache = shared_tmp / "cache"
    write(cache / "0.1.0" / "ok" / "a.so")
    write(cache / "0.1.0" / "locked" / "b.so")
    (cache / "0.1.0" / "locked").chmod(0)
    for sub in (shared_tmp, cache, cache / "0.1.0", cache / "0.1.0" / "ok"):
        sub.chmod(0o755)
    as_other_user = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups") if os.geteuid() == 0 else ()
    if as_other_user and not shutil.which("setpriv"):
        pytest.skip("root reads everything, and setpriv is missing to drop that")
    entry = run_script(script_request(cache), *as_other_user)["roots"]["c"]["entries"]["0.1.0"]
    assert entry["unreadable"] == 1 and entry["first_unreadable"] == "0.1.0/locked"
    assert entry["files"] == 1 and entry["truncated"] is None


def test_the_walk_stops_at_its_time_budget_and_says_so(tmp_path: Path) -> None:
    write(tmp_path / "c" / "0.1.0" / "a.so")
    root = run_script(script_request(tmp_path / "c", seconds=0))["roots"]["c"]
    assert root["truncated"] == "time" and root["entries"] == {"0.1.0": {"skipped": "time"}}


def test_names_that_are_not_utf8_stay_valid_json(tmp_path: Path) -> None:
    bad = os.fsencode(str(tmp_path / "c" / "0.1.0")) + b"/k\xff.so"
    os.makedirs(tmp_path / "c" / "0.1.0")
    with open(bad, "wb") as handle:
        handle.write(b"x")
    entry = run_script(script_request(tmp_path / "c"))["roots"]["c"]["entries"]["0.1.0"]
    assert list(entry["objects"]) == ["0.1.0/k\ufffd.so"] and entry["dirs"] == {"0.1.0": entry["dirs"]["0.1.0"]}


@pytest.mark.parametrize(
    ("path", "layout"),
    [("~/.cache/flashinfer", "flashinfer"), ("/data/home/.cache/flashinfer/", "flashinfer"),
     ("~/.triton/cache", "triton"), ("/tmp/torchinductor_$USER", "torchinductor"),
     ("/scratch/torch_extensions", "torch_extensions"), ("~/.nv/ComputeCache", "cuda"),
     ("~/.deep_gemm", "deep_gemm"), ("~/my-cache", None)],
)
def test_layout_by_the_shape_of_the_path(path: str, layout: str | None) -> None:
    found = layout_of(path)
    assert (found.name if found else None) == layout


@pytest.mark.parametrize(
    ("layout", "entry", "owner"),
    [("~/.cache/flashinfer", "0.2.5", {"package": "flashinfer-python", "version": "0.2.5"}),
     ("~/.cache/flashinfer", "0.6.1.post1", {"package": "flashinfer-python", "version": "0.6.1.post1"}),
     ("~/.cache/flashinfer", "cubins", {"package": "flashinfer-python", "version": None}),
     ("~/.cache/torch_extensions", "py312_cu128", {"package": "torch", "version": None, "python": "3.12", "cuda": "12.8"}),
     ("~/.cache/torch_extensions", "py310_cpu", {"package": "torch", "version": None, "python": "3.10", "cuda": None}),
     ("~/.nv/ComputeCache", "*", None), ("~/mine", "x", None)],
)
def test_owner_where_the_layout_says_it(layout: str, entry: str, owner: dict[str, Any] | None) -> None:
    assert owner_of(layout_of(layout), entry) == owner


def test_vllm_compile_cache_key_factors_are_read_and_bounded(tmp_path: Path) -> None:
    from driftwatch.settings import WatchSettings
    from driftwatch.transport.local import LocalTransport

    root = tmp_path / ".cache" / "vllm"
    good = root / "torch_compile_cache" / "3fbdd5227b" / "rank_0_0" / "backbone"
    bad = root / "torch_compile_cache" / "978868eca3" / "rank_0_0" / "backbone"
    good.mkdir(parents=True)
    bad.mkdir(parents=True)
    (good / "cache_key_factors.json").write_text(json.dumps(
        {"env": {"VLLM_USE_V1": "True", "VLLM_API_KEY": "sk-live-123"}, "config_hash": "84b7dc96bd",
         "code_hash": "1ae1", "compiler_hash": "a92d"}))
    (bad / "cache_key_factors.json").write_text("{not json")
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(caches=[str(root)], processes=[]))
    facts = CachesProbe().collect(ctx)
    keys = facts["caches"][str(root)]["entries"]["torch_compile_cache"]["keys"]
    key = keys["torch_compile_cache/3fbdd5227b/rank_0_0/backbone/cache_key_factors.json"]
    assert key["config_hash"] == "84b7dc96bd" and key["env"]["VLLM_USE_V1"] == "True"
    assert key["env"]["VLLM_API_KEY"] == "<redacted>"  # a key file is an environment like any other
    broken = keys["torch_compile_cache/978868eca3/rank_0_0/backbone/cache_key_factors.json"]
    assert broken["error"].startswith("JSONDecodeError") and broken["env"] == {}
