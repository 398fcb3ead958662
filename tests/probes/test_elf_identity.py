"""The target-side ELF reader (scripts/elf_identity.py) on real and hand-laid ELF files.

Real libraries come from the C compiler with known build-ids; the layouts a x86-64 compiler
does not produce (32-bit, big-endian, notes only in sections, 8-byte note alignment) are
written byte by byte. Cut, garbled and non-ELF files must come back as ElfError, never as
another exception.
"""

from __future__ import annotations

import importlib.util
import io
import shutil
import struct
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.elfs import build_library, synthetic_elf

SCRIPT = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts" / "elf_identity.py"
BUILD_ID = "a7f4c0de5eed1e550123456789abcdef01234567"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("elf_identity", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ELF = load()


def identity(data: bytes) -> dict[str, str | None]:
    """Who the file is (build-id, SONAME); its dependencies are tested below."""
    result = ELF.elf_identity(io.BytesIO(data))
    return {"build_id": result["build_id"], "soname": result["soname"]}


def test_compiled_library_build_id_and_soname(tmp_path: Path) -> None:
    lib = build_library(tmp_path / "libnccl.so.2.28.9", BUILD_ID, soname="libnccl.so.2")
    assert identity(lib.read_bytes()) == {"build_id": BUILD_ID, "soname": "libnccl.so.2"}
    if shutil.which("readelf"):  # the same identity binutils reads
        notes = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True, check=True).stdout
        assert f"Build ID: {BUILD_ID}" in notes


def test_compiled_library_without_soname(tmp_path: Path) -> None:
    lib = build_library(tmp_path / "_C.abi3.so", "0badc0de")
    assert identity(lib.read_bytes()) == {"build_id": "0badc0de", "soname": None}


@pytest.mark.parametrize("wide", [False, True], ids=["32-bit", "64-bit"])
@pytest.mark.parametrize("big", [False, True], ids=["little-endian", "big-endian"])
def test_both_classes_and_byte_orders(wide: bool, big: bool) -> None:
    data = synthetic_elf(bytes.fromhex(BUILD_ID), wide=wide, big=big, soname="libcuda.so.1")
    assert identity(data) == {"build_id": BUILD_ID, "soname": "libcuda.so.1"}


@pytest.mark.parametrize("wide", [False, True], ids=["32-bit", "64-bit"])
def test_notes_only_in_section_headers(wide: bool) -> None:
    data = synthetic_elf(bytes.fromhex("c0db1e55"), wide=wide, big=True, sections_only=True)
    assert identity(data) == {"build_id": "c0db1e55", "soname": None}


def test_eight_byte_aligned_notes() -> None:
    data = synthetic_elf(bytes.fromhex("0102030405"), wide=True, big=False, align=8)
    assert identity(data)["build_id"] == "0102030405"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not an ELF file"),
        (b"#!/bin/sh\necho not a library\n", "not an ELF file"),
        (b"\x7fELF\x02\x01", "truncated ELF"),
        (b"\x7fELF\x09\x01" + b"\0" * 58, "malformed ELF"),  # no such ELF class
    ],
)
def test_not_elf_is_an_elf_error(data: bytes, reason: str) -> None:
    with pytest.raises(ELF.ElfError, match=reason):
        identity(data)


def test_header_pointing_past_the_end_of_a_real_file_is_truncated(tmp_path: Path) -> None:
    # A 64-bit header whose program headers sit at 2**62: seeking there on a real file
    # fails with EINVAL, which must not surface as an I/O error of the library.
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 1 << 62, 0, 0, 64, 56, 1, 64, 0, 0)
    (tmp_path / "libbad.so").write_bytes(header)
    with open(tmp_path / "libbad.so", "rb") as handle, pytest.raises(ELF.ElfError, match="truncated ELF"):
        ELF.elf_identity(handle)


def test_every_truncation_of_a_real_library_is_an_elf_error_or_an_identity(tmp_path: Path) -> None:
    data = build_library(tmp_path / "libx.so", BUILD_ID, soname="libx.so.1").read_bytes()
    outcomes = set()
    for cut in range(0, len(data), 97):
        try:
            outcomes.add(identity(data[:cut])["build_id"])
        except ELF.ElfError as exc:
            outcomes.add(str(exc))
    # Early cuts lose the headers; later ones keep them (the build-id note sits near the start).
    assert {"not an ELF file", "truncated ELF", BUILD_ID} <= outcomes


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=600), st.sampled_from([b"\x01\x01", b"\x02\x01", b"\x01\x02", b"\x02\x02"]))
def test_garbage_after_an_elf_magic_never_crashes(garbage: bytes, klass: bytes) -> None:
    try:
        result = identity(b"\x7fELF" + klass + garbage)
    except ELF.ElfError:
        return
    assert set(result) == {"build_id", "soname"}


def test_what_the_loader_reads_to_find_dependencies(tmp_path: Path) -> None:
    """DT_NEEDED, DT_RUNPATH and DT_RPATH as the linker writes them (readelf -d shows the same)."""
    jit = build_library(tmp_path / "nvjitlink" / "lib" / "libnvJitLink.so.12", "0a", soname="libnvJitLink.so.12")
    sparse = build_library(tmp_path / "cusparse" / "lib" / "libcusparse.so.12", "0b", soname="libcusparse.so.12",
                           link=[jit], runpath="$ORIGIN/../../nvjitlink/lib")
    old = build_library(tmp_path / "old" / "libcusparse.so.11", "0c", link=[jit], rpath="/usr/local/cuda/lib64")
    dynamic = ELF.elf_identity(io.BytesIO(sparse.read_bytes()))["dynamic"]
    assert dynamic["needed"][0] == "libnvJitLink.so.12" and "libc.so.6" in dynamic["needed"]
    assert (dynamic["runpath"], dynamic["rpath"]) == ("$ORIGIN/../../nvjitlink/lib", None)
    dynamic = ELF.elf_identity(io.BytesIO(old.read_bytes()))["dynamic"]
    assert (dynamic["runpath"], dynamic["rpath"]) == (None, "/usr/local/cuda/lib64")
