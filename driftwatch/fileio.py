"""Local files written whole or not at all, with the permissions we mean whatever the umask.

A writer puts the data in a temp file beside its target (``.tmp-*``), fsyncs it, then
renames or hard-links it into place, so a reader never sees half a file. A temp file left
behind by a killed writer is removed by the next writer in that folder once it is over a
minute old: a live writer's temp file is a few milliseconds old.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

TEMP_PREFIX = ".tmp-"
STALE_TEMP_S = 60.0


def make_dir(path: Path, mode: int) -> None:
    """Create ``path`` (and missing parents) if needed; a folder created here gets exactly ``mode``.

    Folders that already exist keep their mode: an operator may have opened one on purpose.
    """
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        if path.is_dir():  # another writer made it meanwhile
            return
        raise
    os.chmod(path, mode)  # mkdir's mode is masked by the umask


def write_temp(folder: Path, data: bytes, *, mode: int, prefix: str = TEMP_PREFIX) -> Path:
    """``data`` in a new temp file in ``folder``, on disk (fsynced), with ``mode``."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def replace_file(path: Path, data: bytes, *, mode: int, prefix: str = TEMP_PREFIX) -> None:
    """Write ``path`` atomically, replacing what was there."""
    tmp = write_temp(path.parent, data, mode=mode, prefix=prefix)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def clean_stale_temps(folder: Path, *, prefix: str = TEMP_PREFIX, now: float | None = None) -> list[Path]:
    """Remove temp files in ``folder`` left by writers that died over a minute ago."""
    cutoff = (time.time() if now is None else now) - STALE_TEMP_S
    removed: list[Path] = []
    try:
        candidates = list(folder.glob(f"{prefix}*"))
    except OSError:
        return removed
    for path in candidates:
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
        except OSError:  # removed by another run first, or not ours to remove: not this write's problem
            continue
    return removed
