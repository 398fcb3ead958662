"""Diff rules of the libraries probe: builds of mapped and installed libraries, and focus
distributions against their RECORD. Facts are shaped as the probe writes them
(tests/probes/test_libraries.py checks the probe against real files)."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import DiffResult, diff_snapshots
from tests.diff.builders import make_snapshot

SITE = "/root/ml-env/lib/python3.12/site-packages"
WHEEL = f"{SITE}/nvidia/nccl/lib/libnccl.so.2"
SYSTEM = "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
A = "a7f4c0de" + "1" * 32
B = "c0db1e55" + "2" * 32
SERVER = "sglang.launch_server"


def entry(build_id: str | None, size: int, name: str, version: str | None, **owners: str) -> dict[str, Any]:
    return {"size": size, "mtime": 1771495200.0, "build_id": build_id, "soname": name, "error": None,
            "owners": owners, "name": name, "version": version,
            "volatile": {"mtime_ns": 1, "ctime_ns": 1, "inode": 1}}


def integrity(**changes: Any) -> dict[str, Any]:
    report = {"distributions": {"nvidia-nccl-cu12": "2.28.9", "torch": "2.8.0+cu128"}, "modified": {},
              "missing": {}, "unreadable": {}, "shared": {}, "error": None, "volatile": {"cache": {}}}
    return {**report, **changes}


def libraries() -> dict[str, Any]:
    """A host whose SGLang server maps the nvidia-nccl-cu12 wheel's libnccl (219 MB)."""
    return {
        "files": {
            WHEEL: entry(A, 219_000_000, "libnccl.so.2", "2", **{"nvidia-nccl-cu12": "2.28.9"}),
            LIBC: entry("93ac61ec" * 5, 2_125_328, "libc.so.6", "6"),
        },
        "servers": {SERVER: {"libc.so.6": [LIBC], "libnccl.so.2": [WHEEL]}},
        "servers_error": None,
        "interpreters": {"python3": {"libraries": [WHEEL], "error": None}},
        "system": [],
        "integrity": {"python3": integrity()},
        "truncated": False,
        "volatile": {"libraries_read": 2, "libraries_reused": 0, "files_hashed": 10, "bytes_hashed": 219_000_000,
                     "hashes_reused": 0, "files_unchecked": 0},
    }


def diff(old: dict[str, Any], new: dict[str, Any], **probes: Any) -> DiffResult:
    return diff_snapshots(make_snapshot(libraries=old), make_snapshot(minutes=60, libraries=new, **probes))


def test_identical_and_volatile_only_is_no_drift() -> None:
    new = libraries()
    new["volatile"] = {"libraries_read": 0, "libraries_reused": 2, "files_hashed": 0, "bytes_hashed": 0,
                       "hashes_reused": 10, "files_unchecked": 0}
    new["files"][WHEEL]["volatile"] = {"mtime_ns": 2, "ctime_ns": 2, "inode": 2}
    assert diff(libraries(), new).changes == []


def test_same_version_different_build_mapped_by_the_server_is_named_first() -> None:
    new = libraries()
    new["files"][WHEEL].update(build_id=B, size=190_000_000)
    new["integrity"]["python3"]["modified"] = {WHEEL: {
        "distribution": "nvidia-nccl-cu12", "size": 190_000_000, "mtime": 1.0, "sha256": "ef" * 32,
        "expected_sha256": "ab" * 32, "volatile": {"mtime_ns": 2, "ctime_ns": 2, "inode": 2}}}
    changes = diff(libraries(), new).changes
    # First: the replaced libnccl.so.2, as the known-bad "modified install" (observed) or as
    # the server's different build; both lines are there, each once.
    assert "libnccl.so.2" in changes[0].explanation
    first = next(c for c in changes if c.explanation.startswith("libnccl.so.2 (mapped"))
    assert first.explanation == (
        f"libnccl.so.2 (mapped by the server {SERVER}): same version 2.28.9, different build "
        "(build-id a7f4c0de… → c0db1e55…, 208.9 MiB → 181.2 MiB)")
    assert (first.category, first.severity) == ("nccl", Severity.high)
    # The RECORD mismatch is the evidence that the wheel's file was replaced: reported too.
    record = next(c for c in changes if c.item == "nvidia-nccl-cu12")
    assert record.explanation.startswith("nvidia-nccl-cu12 2.28.9: 1 file differs from its RECORD "
                                         "(nvidia/nccl/lib/libnccl.so.2; sha256 efefefef…, RECORD says abababab…)")
    # One line for the mapped library: the installed-library rule leaves it to the server rule.
    assert [c.item for c in changes].count(WHEEL) == 1


def test_the_server_now_maps_the_system_copy_instead_of_the_wheels() -> None:
    new = libraries()
    new["files"][SYSTEM] = entry(B, 190_000_000, "libnccl.so.2", "2.28.9")
    new["servers"][SERVER]["libnccl.so.2"] = [SYSTEM]
    new["system"] = [SYSTEM]
    changes = diff(libraries(), new).changes
    assert changes[0].explanation.startswith(
        f"the server {SERVER} now maps {SYSTEM} (2.28.9, build-id c0db1e55…) instead of the wheel's copy "
        "(nvidia-nccl-cu12 2.28.9, build-id a7f4c0de…) — known-bad state (observed)")
    assert (changes[0].category, changes[0].severity, changes[0].old, changes[0].new) == (
        "nccl", Severity.high, [WHEEL], [SYSTEM])


def test_a_server_still_running_a_replaced_library() -> None:
    new = libraries()
    new["files"][WHEEL + " (deleted)"] = copy.deepcopy(new["files"][WHEEL])
    new["files"][WHEEL]["build_id"] = B
    new["servers"][SERVER]["libnccl.so.2"] = [WHEEL + " (deleted)"]
    change = diff(libraries(), new).changes[0]
    assert change.explanation.startswith(
        f"the server {SERVER} still runs the libnccl.so.2 that was deleted or replaced on disk after it started")
    assert "old build (build-id a7f4c0de…) until it restarts" in change.explanation


def test_an_installed_library_rebuilt_with_the_same_version() -> None:
    old, new = libraries(), libraries()
    for facts in (old, new):
        facts["servers"] = {}
    new["files"][WHEEL]["build_id"] = B
    [change] = diff(old, new).changes
    assert change.explanation == ("nvidia/nccl/lib/libnccl.so.2 (in python3): same version 2.28.9, different build "
                                  "(build-id a7f4c0de… → c0db1e55…)")
    assert change.magnitude < 3.0  # below a library a server really maps


def test_two_wheels_one_file_is_the_first_cause() -> None:
    old = libraries()
    new = libraries()
    new["files"][WHEEL].update(build_id=B, size=190_000_000, owners={"nvidia-nccl-cu12": "2.30.7",
                                                                      "nvidia-nccl-cu13": "2.28.9"})
    new["servers"] = old["servers"] = {}
    new["integrity"]["python3"]["shared"] = {WHEEL: {
        "claimed_by": {"nvidia-nccl-cu12": "2.30.7", "nvidia-nccl-cu13": "2.28.9"}, "on_disk": "nvidia-nccl-cu13",
        "sha256": "ef" * 32, "size": 190_000_000, "volatile": {"mtime_ns": 2, "ctime_ns": 2, "inode": 2}}}
    cuda = copy.deepcopy(make_snapshot().facts("cuda"))
    cuda["nccl"]["distributions"]["nvidia-nccl-cu13"] = "2.28.9"
    changes = diff(old, new, cuda=cuda).changes
    assert changes[0].explanation.startswith(
        "nvidia/nccl/lib/libnccl.so.2 is installed by nvidia-nccl-cu12 2.30.7 and nvidia-nccl-cu13 2.28.9; "
        "the copy on disk is nvidia-nccl-cu13's: code that loads nvidia-nccl-cu12's copy gets nvidia-nccl-cu13 2.28.9")
    assert (changes[0].category, changes[0].severity) == ("nccl", Severity.high)
    # The wheel's library under the same path: another build, and two claims on its version.
    rebuilt = next(c for c in changes if c.item == WHEEL)
    assert rebuilt.explanation.startswith("nvidia/nccl/lib/libnccl.so.2 (in python3): 2.28.9 → 2.28.9 or 2.30.7, "
                                          "different build (build-id a7f4c0de… → c0db1e55…")


def test_modified_sources_are_one_change_per_distribution() -> None:
    new = libraries()
    paths = [f"{SITE}/torch/{name}.py" for name in ("a", "b", "c", "d", "e")]
    new["integrity"]["python3"]["modified"] = {p: {
        "distribution": "torch", "size": 1, "mtime": 1.0, "sha256": "01" * 32, "expected_sha256": "02" * 32,
        "volatile": {"mtime_ns": 1, "ctime_ns": 1, "inode": 1}} for p in paths}
    [change] = diff(libraries(), new).changes
    assert change.explanation.startswith("torch 2.8.0+cu128: 5 files differ from its RECORD "
                                         "(torch/a.py, torch/b.py, torch/c.py and 2 more;")
    assert (change.severity, change.category, change.focus) == (Severity.medium, "package", True)
    back = diff(new, libraries()).changes
    assert [(c.severity, c.explanation.endswith("match RECORD again")) for c in back] == [(Severity.info, True)]


def test_missing_native_library_is_high() -> None:
    new = libraries()
    lib = f"{SITE}/torch/lib/libtorch_cuda.so"
    new["integrity"]["python3"]["missing"] = {lib: {"distribution": "torch", "error": None}}
    [change] = diff(libraries(), new).changes
    assert change.severity is Severity.high
    assert change.explanation.startswith(
        "torch 2.8.0+cu128: 1 file its RECORD lists is missing (torch/lib/libtorch_cuda.so) — known-bad state (observed)")


def test_unknown_servers_or_interpreters_are_not_compared() -> None:
    new = libraries()
    new["servers"], new["servers_error"] = {}, "process walk: timed out after 10s"
    new["interpreters"]["python3"] = {"libraries": [], "error": "exit 127"}
    new["integrity"]["python3"] = {"error": "exit 127"}
    changes = diff(libraries(), new).changes
    assert [(c.severity, c.explanation) for c in changes] == [
        (Severity.low, "the libraries the servers map could not be read: process walk: timed out after 10s")]


def test_an_upgrade_that_rebuilds_many_libraries_of_one_distribution_is_one_line() -> None:
    old, new = libraries(), libraries()
    for facts, build, version in ((old, A, "2.8.0+cu128"), (new, B, "2.9.0+cu128")):
        for lib in ("libtorch_cuda.so", "libc10.so", "libtorch.so", "libtorch_cpu.so"):
            path = f"{SITE}/torch/lib/{lib}"
            facts["files"][path] = entry(build, 1000, lib, None, torch=version)
            facts["servers"][SERVER][lib] = [path]
    changes = diff(old, new).changes
    assert [c.explanation for c in changes] == [
        f"4 libraries of torch mapped by the server {SERVER}: 2.8.0+cu128 → 2.9.0+cu128, different builds "
        "(libc10.so, libtorch.so, libtorch_cpu.so and 1 more)"]
