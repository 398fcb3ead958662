"""The libraries probe on this machine: real ELF libraries built with known build-ids, a real
stand-in server that maps them with ctypes, real venvs whose RECORDs hash real files, and
wheels installed by pip.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, load_script
from driftwatch.probes.libraries import MAX_HASH_BYTES, PRELUDES, LibrariesProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.elfs import build_library
from tests.probes.test_processes import Servers
from tests.venvs import build_wheel, make_gpu_venv, pip_install, record_line, site_packages

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")

BUILD_A = "a7f4c0de" + "11" * 16
BUILD_B = "c0db1e55" + "22" * 16
BIG = 400 * 1024 * 1024


def collect(python: list[str], processes: list[str], previous: dict[str, Any] | None = None,
            timeout: float = 30.0, **watch: Any) -> dict[str, Any]:
    settings = WatchSettings(python=python, processes=processes, **watch)
    ctx = ProbeContext(transport=LocalTransport(), watch=settings, timeout=timeout, previous=previous or {})
    record = run_probe(LibrariesProbe(), ctx)
    assert record.status is ProbeStatus.ok, record.error
    return record.facts


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    started = Servers(tmp_path / "servers")
    try:
        yield started
    finally:
        started.stop()


def nccl_venv(root: Path, build_id: str = BUILD_A, pad: int = 0) -> tuple[Path, Path]:
    """The GPU venv with its nvidia-nccl-cu12 wheel's libnccl.so.2 a real ELF library."""
    python = make_gpu_venv(root / "venv")
    lib = site_packages(root / "venv") / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    build_library(lib, build_id, soname="libnccl.so.2", pad=pad)
    rewrite_record(root / "venv", "nvidia_nccl_cu12-2.27.3.dist-info", "nvidia/nccl/lib/libnccl.so.2")
    return python, lib


def rewrite_record(venv: Path, dist_info: str, rel: str) -> None:
    """Put the file's real sha256 in RECORD, as pip would have after installing it."""
    site = site_packages(venv)
    record = site / dist_info / "RECORD"
    lines = [record_line(site, rel) if line.startswith(rel + ",") else line for line in record.read_text().splitlines()]
    record.write_text("\n".join(lines) + "\n")


def test_mapped_libraries_have_build_ids_names_versions_and_owners(tmp_path: Path, servers: Servers) -> None:
    python, wheel_lib = nccl_venv(tmp_path)
    system_lib = build_library(tmp_path / "sys" / "libcudart.so.12.8.90", BUILD_B, soname="libcudart.so.12")
    servers.start(env={"STANDIN_LOAD": os.pathsep.join([str(wheel_lib), str(system_lib)])})
    facts = collect([str(python)], [servers.pattern])

    [key] = facts["servers"]
    mapped = facts["servers"][key]
    assert mapped["libnccl.so.2"] == [str(wheel_lib)] and mapped["libcudart.so.12"] == [str(system_lib)]
    wheel = facts["files"][str(wheel_lib)]
    assert (wheel["build_id"], wheel["name"], wheel["version"]) == (BUILD_A, "libnccl.so.2", "2")
    assert wheel["owners"] == {"nvidia-nccl-cu12": "2.27.3"} and wheel["size"] == wheel_lib.stat().st_size
    system = facts["files"][str(system_lib)]
    assert (system["build_id"], system["version"], system["owners"]) == (BUILD_B, "12.8.90", {})
    # The interpreter's own NCCL/CUDA wheels, mapped or not; the fake cuDNN only starts like ELF.
    libs = facts["interpreters"][str(python)]["libraries"]
    cudnn = str(site_packages(tmp_path / "venv") / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    assert libs == sorted([str(wheel_lib), cudnn])
    assert facts["files"][cudnn]["error"] == "malformed ELF"
    assert facts["servers_error"] is None and facts["truncated"] is False


def test_second_snapshot_of_an_unchanged_host_reads_nothing_again(tmp_path: Path, servers: Servers) -> None:
    python, wheel_lib = nccl_venv(tmp_path)
    servers.start(env={"STANDIN_LOAD": str(wheel_lib)})
    first = collect([str(python)], [servers.pattern])
    assert first["volatile"]["libraries_read"] >= 2 and first["volatile"]["files_hashed"] >= 1
    second = collect([str(python)], [servers.pattern], previous=first)
    assert second["volatile"]["libraries_read"] == 0 and second["volatile"]["files_hashed"] == 0
    assert second["volatile"]["libraries_reused"] == first["volatile"]["libraries_read"]
    strip = ("volatile",)
    assert {k: v for k, v in second.items() if k not in strip} == {k: v for k, v in first.items() if k not in strip}


def test_a_library_replaced_on_disk_under_a_running_server(tmp_path: Path, servers: Servers) -> None:
    python, wheel_lib = nccl_venv(tmp_path)
    servers.start(env={"STANDIN_LOAD": str(wheel_lib)})
    first = collect([str(python)], [servers.pattern])
    new_build = build_library(tmp_path / "new" / "libnccl.so.2", BUILD_B, soname="libnccl.so.2", pad=4096)
    os.replace(new_build, wheel_lib)  # what a reinstall does under a running server
    facts = collect([str(python)], [servers.pattern], previous=first)
    [key] = facts["servers"]
    deleted = f"{wheel_lib} (deleted)"
    assert facts["servers"][key]["libnccl.so.2"] == [deleted]
    assert facts["files"][str(wheel_lib)]["build_id"] == BUILD_B  # what a new process would load
    if os.geteuid() == 0:  # /proc/PID/map_files needs CAP_SYS_ADMIN: the copy the server runs
        assert facts["files"][deleted]["build_id"] == BUILD_A
    else:
        assert facts["files"][deleted]["error"]


def test_unreadable_garbage_and_cut_libraries_are_data(tmp_path: Path) -> None:
    python = make_gpu_venv(tmp_path / "venv")
    lib_dir = site_packages(tmp_path / "venv") / "nvidia" / "junk" / "lib"
    real = build_library(tmp_path / "libreal.so.1", BUILD_A).read_bytes()
    lib_dir.mkdir(parents=True)
    (lib_dir / "libgarbage.so.1").write_bytes(b"\x7fELF\x02\x01\x01" + os.urandom(4000))
    (lib_dir / "libcut.so.1").write_bytes(real[:40])
    (lib_dir / "libtext.so").write_text("INPUT(-lfoo)\n")  # a linker script, as libc.so is
    os.mkfifo(lib_dir / "libfifo.so.1")  # must not block the reader
    locked = lib_dir / "liblocked.so.1"
    locked.write_bytes(real)
    locked.chmod(0)
    facts = collect([str(python)], [])
    errors = {Path(p).name: e["error"] for p, e in facts["files"].items() if "/junk/" in p}
    assert errors["libcut.so.1"] == "truncated ELF"
    assert errors["libtext.so"] == "not an ELF file"
    assert errors["libgarbage.so.1"] in {"truncated ELF", "malformed ELF", None}
    assert "libfifo.so.1" not in errors  # not a regular file: not a library
    if os.geteuid() != 0:  # root reads mode-000 files
        assert errors["liblocked.so.1"] == "Permission denied"


def big_focus_venv(root: Path) -> tuple[Path, Path]:
    """A venv whose focus distribution nvidia-nccl-cu12 ships a 400 MB libnccl (sparse)."""
    python = make_gpu_venv(root / "venv")
    lib = site_packages(root / "venv") / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    build_library(lib, BUILD_A, soname="libnccl.so.2")
    with open(lib, "r+b") as handle:
        handle.truncate(BIG)
    rewrite_record(root / "venv", "nvidia_nccl_cu12-2.27.3.dist-info", "nvidia/nccl/lib/libnccl.so.2")
    return python, lib


def test_a_400_mb_library_is_hashed_once_then_cached(tmp_path: Path) -> None:
    python, lib = big_focus_venv(tmp_path)
    first = collect([str(python)], [])
    assert first["files"][str(lib)]["build_id"] == BUILD_A  # identity: headers only
    assert first["volatile"]["bytes_hashed"] >= BIG
    report = first["integrity"][str(python)]
    assert report["modified"] == {} and report["missing"] == {} and "nvidia-nccl-cu12" in report["distributions"]
    second = collect([str(python)], [], previous=first)
    assert second["volatile"]["bytes_hashed"] == 0 and second["volatile"]["libraries_read"] == 0


def test_a_library_over_the_hash_bound_is_unchecked_never_read(tmp_path: Path) -> None:
    python = make_gpu_venv(tmp_path / "venv")
    lib = site_packages(tmp_path / "venv") / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    build_library(lib, BUILD_A, soname="libnccl.so.2")
    with open(lib, "r+b") as handle:
        handle.truncate(MAX_HASH_BYTES + 1)  # sparse: costs no disk
    facts = collect([str(python)], [])
    assert facts["files"][str(lib)]["build_id"] == BUILD_A
    assert facts["volatile"]["files_unchecked"] == 1 and facts["volatile"]["bytes_hashed"] < 1 << 20
    assert str(lib) not in facts["integrity"][str(python)]["modified"]


def test_a_library_replaced_while_being_hashed_is_recorded_so(tmp_path: Path) -> None:
    python, lib = big_focus_venv(tmp_path)
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(collect([str(python)], [])))
    worker.start()
    assert wait_until_read(lib), "the collector never started hashing the library"
    replacement = tmp_path / "replacement.so"
    replacement.write_bytes(b"\x7fELF new build")
    os.replace(replacement, lib)
    worker.join(60)
    report = result["integrity"][str(python)]
    assert report["unreadable"][str(lib)] == {"distribution": "nvidia-nccl-cu12", "error": "changed while being read"}
    assert str(lib) not in report["modified"]


def wait_until_read(path: Path, deadline: float = 30.0) -> bool:
    """True once some process has ``path`` open and has read part of it (its fd position
    in /proc/PID/fdinfo is past 0 and short of the end)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for fd in Path("/proc").glob("[0-9]*/fd/*"):
            try:
                if os.readlink(fd) != str(path):
                    continue
                info = (fd.parent.parent / "fdinfo" / fd.name).read_text()
            except OSError:
                continue
            pos = int(info.split()[1])
            if 0 < pos < BIG:
                return True
        time.sleep(0.001)
    return False


def test_two_wheels_one_file_a_modified_file_and_a_missing_one(tmp_path: Path) -> None:
    python = make_gpu_venv(tmp_path / "venv")
    site = site_packages(tmp_path / "venv")
    cu12 = build_library(tmp_path / "b12" / "libnccl.so.2", BUILD_A, soname="libnccl.so.2").read_bytes()
    cu13 = build_library(tmp_path / "b13" / "libnccl.so.2", BUILD_B, soname="libnccl.so.2", pad=8192).read_bytes()
    rel = "nvidia/nccl/lib/libnccl.so.2"
    for name, version, data in (("nvidia-nccl-cu12", "2.30.7", cu12), ("nvidia-nccl-cu13", "2.28.9", cu13)):
        wheel = build_wheel(tmp_path / "wheels", name, version, {rel: data, "nvidia/nccl/__init__.py": b""})
        pip_install(python, wheel, force=True)  # cu12 over the venv's 2.27.3, then cu13 over its file
    (site / "torch" / "version.py").write_text("__version__ = 'edited on the host'\n")
    (site / "sgl_kernel" / "version.py").unlink()
    facts = collect([str(python)], [])
    report = facts["integrity"][str(python)]
    assert report["shared"][str(site / rel)]["claimed_by"] == {"nvidia-nccl-cu12": "2.30.7", "nvidia-nccl-cu13": "2.28.9"}
    assert report["shared"][str(site / rel)]["on_disk"] == "nvidia-nccl-cu13"
    assert str(site / rel) not in report["modified"]  # it is cu13's file: not modified, shared
    modified = report["modified"][str(site / "torch" / "version.py")]
    assert modified["distribution"] == "torch"
    assert modified["sha256"] == hashlib.sha256(b"__version__ = 'edited on the host'\n").hexdigest()
    assert report["missing"] == {str(site / "sgl_kernel" / "version.py"): {"distribution": "sgl-kernel", "error": None}}
    assert facts["files"][str(site / rel)]["owners"] == {"nvidia-nccl-cu12": "2.30.7", "nvidia-nccl-cu13": "2.28.9"}
    assert facts["files"][str(site / rel)]["build_id"] == BUILD_B
    # Unchanged since: nothing hashed again, the same verdicts.
    again = collect([str(python)], [], previous=facts)
    assert again["volatile"]["files_hashed"] == 0
    assert {k: v for k, v in again["integrity"][str(python)].items() if k != "volatile"} == {
        k: v for k, v in report.items() if k != "volatile"}


def test_a_failed_interpreter_is_an_error_not_an_absence(tmp_path: Path) -> None:
    facts = collect([str(tmp_path / "no-such-python")], [])
    name = str(tmp_path / "no-such-python")
    assert facts["interpreters"][name]["error"] and facts["integrity"][name]["error"]
    assert facts["interpreters"][name]["libraries"] == []


def test_no_process_patterns_means_no_servers_and_no_error(tmp_path: Path) -> None:
    facts = collect([], [])
    assert facts["servers"] == {} and facts["servers_error"] is None


def run_collector(request: dict[str, Any], python: str = sys.executable) -> dict[str, Any]:
    code = "\n\n".join(load_script(name) for name in (*PRELUDES, "libraries_collect.py"))
    run = subprocess.run([python, "-I", "-S", "-c", code], input=json.dumps(request).encode(),
                         capture_output=True, check=True, timeout=30)
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_a_fifo_where_a_record_or_library_should_be_never_blocks(tmp_path: Path) -> None:
    make_gpu_venv(tmp_path / "venv")
    site = site_packages(tmp_path / "venv")
    record = next(site.glob("torch-*.dist-info")) / "RECORD"
    record.unlink()
    os.mkfifo(record)  # a plain open() would wait for a writer forever
    os.mkfifo(tmp_path / "libnccl.so.2")
    report = run_collector({"interpreters": {"p": {"sys_path": [str(site)]}}, "focus": ["torch", "sgl-kernel"],
                            "system_dirs": [str(tmp_path)], "system_globs": ["libnccl.so*"]})
    assert report["system"] == []  # not a regular file: not a library
    assert report["integrity"]["p"]["distributions"] == {"sgl-kernel": "0.3.16.post4", "torch": "2.8.0+cu128"}
    assert report["integrity"]["p"]["modified"] == {}  # torch's RECORD is unreadable: nothing to compare


def oldest_pythons() -> list[str]:
    """Python 3.6 and 3.7 interpreters on this machine (PATH or pyenv): the collector must
    run on any python3 >= 3.6 a GPU host may have as its system python."""
    found = []
    for version in ("3.6", "3.7"):
        candidates = [shutil.which(f"python{version}")]
        candidates += [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))]
        for candidate in filter(None, candidates):
            if subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False).returncode == 0:
                found.append(candidate)
                break
    return found


@pytest.mark.parametrize("old_python", oldest_pythons() or [pytest.param(None, marks=pytest.mark.skip("no 3.6/3.7"))])
def test_the_collector_runs_on_old_pythons(tmp_path: Path, old_python: str) -> None:
    make_gpu_venv(tmp_path / "venv")
    build_library(tmp_path / "sys" / "libnccl.so.2.28.9", BUILD_A, soname="libnccl.so.2")
    (site_packages(tmp_path / "venv") / "torch" / "version.py").write_text("edited\n")
    request = {"interpreters": {"p": {"sys_path": [str(site_packages(tmp_path / "venv"))]}}, "focus": ["torch"],
               "system_dirs": [str(tmp_path / "sys")], "system_globs": ["libnccl.so*"], "wheel_globs": ["nvidia/*/lib/*"]}
    outputs = [run_collector(request, interpreter) for interpreter in (old_python, sys.executable)]
    assert outputs[0] == outputs[1]
    assert outputs[0]["files"][str(tmp_path / "sys" / "libnccl.so.2.28.9")]["build_id"] == BUILD_A
    assert list(outputs[0]["integrity"]["p"]["modified"]) == [str(site_packages(tmp_path / "venv") / "torch" / "version.py")]


def test_entries_from_before_the_loader_facts_are_read_again_once() -> None:
    """A library cached without its DT_NEEDED/RUNPATH would leave the loader model blind to it
    for as long as the file does not change: such entries are not reused."""
    from driftwatch.probes.libraries import cache_from

    vol = {"mtime_ns": 1, "ctime_ns": 2, "inode": 3}
    previous = {"files": {
        "/old.so": {"size": 10, "build_id": "ab", "soname": "libold.so.1", "error": None, "volatile": vol},
        "/new.so": {"size": 10, "build_id": "cd", "soname": None, "error": None, "dynamic": {"needed": ["libc.so.6"]},
                    "volatile": vol},
        "/text.so": {"size": 10, "build_id": None, "soname": None, "error": "not an ELF file", "volatile": vol},
    }}
    cache = cache_from(previous)
    assert sorted(cache) == ["/new.so", "/text.so"]
    assert cache["/new.so"][7] == {"needed": ["libc.so.6"]}
