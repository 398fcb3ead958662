"""Real ELF shared libraries for the tests, built with the system C compiler.

``build_library`` compiles a one-function library with a chosen GNU build-id and SONAME
(``cc -shared -Wl,--build-id=0x…``), padded with a read-only array so that two builds of
"the same version" also differ in size, as pip's and the OS package's libnccl do.
``synthetic_elf`` writes the other layouts the reader must handle and this machine's
compiler does not produce (32-bit, big-endian, notes only in section headers).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

COMPILER = shutil.which("cc") or shutil.which("gcc")


def need_compiler() -> str:
    if COMPILER is None:
        pytest.skip("no C compiler (apt-get install gcc; .ci/run does it)")
    return COMPILER


def build_library(path: Path, build_id: str, *, soname: str | None = None, pad: int = 0, symbol: str = "dw_f",
                  link: list[Path] | tuple[Path, ...] = (), runpath: str | None = None, rpath: str | None = None) -> Path:
    """Compile a shared library at ``path`` whose GNU build-id is ``build_id`` (hex), linked
    against the libraries in ``link`` (their SONAMEs become its DT_NEEDED), with a DT_RUNPATH
    or an old-style DT_RPATH when given."""
    compiler = need_compiler()
    source = path.parent / f".{path.name}.c"
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = f"const char dw_pad[{pad}] = {{1}};\n" if pad else ""
    source.write_text(f"{blob}int {symbol}(void) {{ return 7; }}\n")
    search = [f"-Wl,--enable-new-dtags,-rpath,{runpath}"] if runpath else []
    search += [f"-Wl,--disable-new-dtags,-rpath,{rpath}"] if rpath else []
    argv = [compiler, "-shared", "-fPIC", f"-Wl,--build-id=0x{build_id}", *([f"-Wl,-soname,{soname}"] if soname else []),
            "-o", str(path), str(source), *(["-Wl,--no-as-needed"] if link else []), *map(str, link), *search]
    subprocess.run(argv, check=True, capture_output=True)
    source.unlink()
    return path


def synthetic_elf(
    build_id: bytes, *, wide: bool, big: bool, soname: str | None = None, sections_only: bool = False, align: int = 4
) -> bytes:
    """A minimal ELF file with a GNU build-id note (and a SONAME), laid out by hand."""
    end = ">" if big else "<"
    ehsize, phentsize, shentsize = (64, 56, 64) if wide else (52, 32, 40)
    name = b"GNU\0"
    desc = build_id + b"\0" * (-len(build_id) % align)
    note = struct.pack(end + "III", len(name), len(build_id), 3) + name + b"\0" * (-(12 + len(name)) % align) + desc
    strtab = b"\0" + (soname.encode() + b"\0" if soname else b"")
    phnum = 0 if sections_only else (3 if soname else 1)
    note_off = ehsize + phnum * phentsize
    str_off = note_off + len(note)
    dyn_fmt = end + ("qQ" if wide else "iI")
    dyn_off = str_off + len(strtab)
    dynamic = b"".join(struct.pack(dyn_fmt, tag, value) for tag, value in ((5, str_off), (14, 1), (0, 0))) if soname else b""
    sh_off = dyn_off + len(dynamic)
    total = sh_off + (2 * shentsize if sections_only else 0)

    def phdr(kind: int, offset: int, size: int, palign: int) -> bytes:
        if wide:  # type, flags, offset, vaddr, paddr, filesz, memsz, align
            return struct.pack(end + "IIQQQQQQ", kind, 4, offset, offset, offset, size, size, palign)
        return struct.pack(end + "IIIIIIII", kind, offset, offset, offset, size, size, 4, palign)

    headers = b""
    if not sections_only:
        headers += phdr(4, note_off, len(note), align)
        if soname:
            headers += phdr(1, 0, total, 4096) + phdr(2, dyn_off, len(dynamic), 8)
    sections = b""
    if sections_only:  # the null section, then SHT_NOTE
        fmt = end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
        sections = b"\0" * shentsize + struct.pack(fmt, 0, 7, 0, 0, note_off, len(note), 0, 0, align, 0)
    ident = b"\x7fELF" + bytes([2 if wide else 1, 2 if big else 1, 1]) + b"\0" * 9
    fields = (3, 62, 1, 0, ehsize if phnum else 0, sh_off if sections_only else 0, 0, ehsize, phentsize, phnum,
              shentsize, 2 if sections_only else 0, 0)
    header = ident + struct.pack(end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"), *fields)
    return header + headers + note + strtab + dynamic + sections
