# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin: {"patterns": [...], "head": bytes, "tail": bytes}. For each pattern it picks the
# newest matching file and reads at most head + tail bytes of it with seek, never the
# whole file. Output: one JSON line describing each pattern, then the raw bytes read, in
# order (head then tail per file). Raw bytes, not JSON strings: binary garbage would
# grow up to 6x when escaped, and the collector decodes it anyway.
import glob
import json
import os
import sys


def newest(pattern):
    best = None
    for path in glob.iglob(os.path.expanduser(pattern), recursive=True):
        try:
            st = os.stat(path)
        except OSError:
            continue  # vanished or unreadable: not a candidate
        if not os.path.isfile(path):
            continue
        key = (st.st_mtime, path)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def read_bounded(path, head, tail):
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        size = st.st_size
        # A name that is not UTF-8 would carry lone surrogates into the snapshot's JSON.
        shown = os.fsencode(path).decode("utf-8", "replace")
        entry = {"path": shown, "size": size, "mtime": st.st_mtime, "tail_offset": None}
        if size <= head + tail:
            # Small enough to read whole; bounded anyway in case it grew since fstat.
            return entry, handle.read(head + tail), b""
        first = handle.read(head)
        # One byte before the tail says whether the tail starts at a line boundary.
        offset = size - tail - 1
        handle.seek(offset)
        entry["tail_offset"] = offset
        return entry, first, handle.read(tail + 1)


def main():
    request = json.load(sys.stdin)
    entries, blobs = [], []
    for pattern in request["patterns"]:
        path = newest(pattern)
        if path is None:
            entries.append({"pattern": pattern, "error": "no file matches"})
            continue
        try:
            entry, first, last = read_bounded(path, request["head"], request["tail"])
        except OSError as exc:
            shown = os.fsencode(path).decode("utf-8", "replace")
            entries.append({"pattern": pattern, "path": shown, "error": exc.strerror or str(exc)})
            continue
        entry.update(pattern=pattern, head_len=len(first), tail_len=len(last))
        entries.append(entry)
        blobs.extend([first, last])
    out = sys.stdout.buffer
    out.write(json.dumps({"logs": entries}).encode() + b"\n")
    for blob in blobs:
        out.write(blob)
    out.flush()


main()
