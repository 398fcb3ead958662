# driftwatch target-side prelude (any python3 >= 3.6, stdlib only), sent ahead of
# libraries_collect.py: who a shared library is, read from its ELF headers.
#
# elf_identity(handle) returns the GNU build-id (the linker's hash of the build, the
# identity `file` and `readelf -n` print), the SONAME and what the dynamic loader reads to
# find the file's own dependencies (DT_NEEDED, DT_RPATH, DT_RUNPATH) of an open file, reading
# only headers: a 400 MB libnccl costs a few kilobytes. Both ELF classes and byte orders are
# read; every read is bounded, and a file that is not ELF, is cut short or is garbage
# raises ElfError with a short reason that is recorded as data.
import struct

PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
SHT_NOTE = 7
NT_GNU_BUILD_ID = 3
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
MAX_NEEDED = 256
MAX_HEADERS = 1 << 20  # bytes of program or section header table read
MAX_NOTES = 1 << 16  # bytes of one note segment or section read
MAX_DYNAMIC = 1 << 18  # bytes of the dynamic section read
MAX_SONAME = 256
MAX_NOTE_TABLES = 64  # note segments or sections looked at


class ElfError(Exception):
    """Why a file has no ELF identity: "not an ELF file", "truncated ELF", "malformed ELF"."""


class Reader:
    """Bounded reads at offsets of an open file: a read past its end is "truncated ELF"
    (a header field pointing at exabytes never reaches seek)."""

    def __init__(self, handle):
        self.handle = handle
        self.size = handle.seek(0, 2)

    def at(self, offset, size):
        if offset < 0 or size < 0:
            raise ElfError("malformed ELF")
        if offset + size > self.size:
            raise ElfError("truncated ELF")
        self.handle.seek(offset)
        data = self.handle.read(size)
        if len(data) < size:  # the file shrank since it was opened
            raise ElfError("truncated ELF")
        return data

    def table(self, end, fmt, offset, entsize, count):
        """Rows of a header table, each unpacked with ``fmt`` (which must fit in ``entsize``)."""
        size = struct.calcsize(end + fmt)
        if count == 0 or offset == 0:
            return []
        if entsize < size or entsize * count > MAX_HEADERS:
            raise ElfError("malformed ELF")
        blob = self.at(offset, entsize * count)
        return [struct.unpack_from(end + fmt, blob, i * entsize) for i in range(count)]


def notes_build_id(blob, end, align):
    """The GNU build-id in a blob of ELF notes (hex), or None."""
    align = 8 if align == 8 else 4
    pos = 0
    while pos + 12 <= len(blob):
        namesz, descsz, kind = struct.unpack_from(end + "III", blob, pos)
        desc = pos + (12 + namesz + align - 1) // align * align
        if desc + descsz > len(blob):
            return None
        if kind == NT_GNU_BUILD_ID and blob[pos + 12:pos + 12 + namesz].rstrip(b"\0") == b"GNU":
            return blob[desc:desc + descsz].hex() or None
        pos = desc + (descsz + align - 1) // align * align
    return None


def dynamic(reader, end, wide, segments):
    """{"soname", "needed", "rpath", "runpath"} of the first PT_DYNAMIC segment, its strings
    found through the PT_LOAD mapping of DT_STRTAB."""
    out = {"soname": None, "needed": [], "rpath": None, "runpath": None}
    found = [s for s in segments if s[0] == PT_DYNAMIC]
    if not found:
        return out
    _, offset, _, filesz, _ = found[0]
    fmt = end + ("qQ" if wide else "iI")
    step = struct.calcsize(fmt)
    blob = reader.at(offset, min(filesz, MAX_DYNAMIC) // step * step)
    strtab = None
    strings = []  # (tag, string table offset)
    for pos in range(0, len(blob), step):
        tag, value = struct.unpack_from(fmt, blob, pos)
        if tag == 0:
            break
        if tag == DT_STRTAB:
            strtab = value
        elif tag in (DT_SONAME, DT_RPATH, DT_RUNPATH) or tag == DT_NEEDED and len(strings) < MAX_NEEDED:
            strings.append((tag, value))
    if strtab is None:
        return out
    base = None
    for kind, seg_offset, seg_vaddr, seg_filesz, _ in segments:
        if kind == PT_LOAD and seg_vaddr <= strtab < seg_vaddr + seg_filesz:
            base = strtab - seg_vaddr + seg_offset
            break
    if base is None:
        return out
    for tag, value in strings:
        start = base + value
        raw = reader.at(start, max(0, min(MAX_SONAME, reader.size - start))).split(b"\0", 1)[0]
        text = raw.decode("utf-8", "replace") or None
        if tag == DT_NEEDED:
            out["needed"] += [text] if text else []
        else:
            out[{DT_SONAME: "soname", DT_RPATH: "rpath", DT_RUNPATH: "runpath"}[tag]] = text
    return out


def elf_identity(handle):
    """{"build_id": hex or None, "soname": str or None, "dynamic": {"needed", "rpath",
    "runpath"}} of the ELF file open in ``handle``;
    ElfError for anything that is not a well-formed ELF file (OSError passes through)."""
    try:
        return read_identity(handle)
    except (struct.error, OverflowError, ValueError):  # offsets or sizes that point nowhere sane
        raise ElfError("malformed ELF") from None


def read_identity(handle):
    reader = Reader(handle)
    handle.seek(0)
    ident = handle.read(16)
    if ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if len(ident) < 16:
        raise ElfError("truncated ELF")
    klass, order = ident[4], ident[5]
    if klass not in (1, 2) or order not in (1, 2):
        raise ElfError("malformed ELF")
    end, wide = ("<" if order == 1 else ">"), klass == 2
    header = end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH")
    fields = struct.unpack(header, reader.at(16, struct.calcsize(header)))
    phoff, shoff, phentsize, phnum, shentsize, shnum = fields[4], fields[5], fields[8], fields[9], fields[10], fields[11]
    # Program headers, as (type, offset, vaddr, filesz, align): 64-bit puts p_flags second.
    if wide:
        rows = reader.table(end, "IIQQQQQQ", phoff, phentsize, phnum)
        segments = [(r[0], r[2], r[3], r[5], r[7]) for r in rows]
    else:
        rows = reader.table(end, "IIIIIIII", phoff, phentsize, phnum)
        segments = [(r[0], r[1], r[2], r[4], r[7]) for r in rows]
    build_id = None
    for _, offset, _, filesz, align in [s for s in segments if s[0] == PT_NOTE][:MAX_NOTE_TABLES]:
        build_id = notes_build_id(reader.at(offset, min(filesz, MAX_NOTES)), end, align)
        if build_id:
            break
    if build_id is None:  # no program headers (an object file) or no note in them: try sections
        rows = reader.table(end, "IIQQQQIIQQ" if wide else "IIIIIIIIII", shoff, shentsize, shnum)
        for row in [r for r in rows if r[1] == SHT_NOTE][:MAX_NOTE_TABLES]:
            build_id = notes_build_id(reader.at(row[4], min(row[5], MAX_NOTES)), end, row[8])
            if build_id:
                break
    found = dynamic(reader, end, wide, segments)
    return {"build_id": build_id, "soname": found.pop("soname"), "dynamic": found}
