"""The snapshot store: ``<store>/<host>/<UTC timestamp>.json``, one file per snapshot.

File names sort by time under ``ls``. Writes go to a temp file in the same folder and are
then hard-linked into place, which fails instead of overwriting when two writers pick the
same name, so concurrent cron runs never corrupt or clobber each other and a crash never
leaves a half-written file under a snapshot's name.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from driftwatch.errors import StoreError, UserError
from driftwatch.model import SCHEMA_VERSION, Snapshot

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_STAMP = "%Y%m%dT%H%M%S.%fZ"


def host_dir_name(host: str) -> str:
    """A folder name for a host as the user wrote it (`root@10.0.0.1:22` → `root_10.0.0.1_22`)."""
    safe = _UNSAFE.sub("_", host).strip(".")
    return safe or "_"


@dataclass(frozen=True)
class StoredSnapshot:
    path: Path
    snapshot: Snapshot


class SnapshotStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()

    # -- writing -------------------------------------------------------------------
    def save(self, snapshot: Snapshot) -> Path:
        folder = self.root / host_dir_name(snapshot.host.name)
        folder.mkdir(parents=True, exist_ok=True)
        stem = snapshot.taken_at.strftime(_STAMP)
        data = snapshot.model_dump_json(indent=1).encode()
        tmp = _write_temp(folder, data)
        try:
            for attempt in range(100):
                final = folder / (f"{stem}.json" if attempt == 0 else f"{stem}-{attempt}.json")
                try:
                    os.link(tmp, final)
                    return final
                except FileExistsError:
                    continue
            raise StoreError(f"{folder}: could not find a free snapshot name for {stem}")
        finally:
            os.unlink(tmp)

    def host_dir(self, host: str) -> Path:
        return self.root / host_dir_name(host)

    def rewrite(self, path: Path, snapshot: Snapshot) -> None:
        """Replace an existing snapshot file atomically (e.g. to change its labels)."""
        tmp = _write_temp(path.parent, snapshot.model_dump_json(indent=1).encode())
        os.replace(tmp, path)

    # -- reading -------------------------------------------------------------------
    def hosts(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and self.paths(p.name))

    def paths(self, host: str) -> list[Path]:
        """Snapshot files of ``host``, oldest first."""
        folder = self.root / host_dir_name(host)
        if not folder.is_dir():
            return []
        # Dot files are ours but not snapshots: locks, alert state, temp files.
        return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))

    def latest(self, host: str) -> StoredSnapshot | None:
        paths = self.paths(host)
        return StoredSnapshot(paths[-1], load_snapshot(paths[-1])) if paths else None

    def find_label(self, host: str, label: str) -> StoredSnapshot | None:
        """The newest snapshot of ``host`` carrying ``label``."""
        for path in reversed(self.paths(host)):
            snapshot = load_snapshot(path)
            if label in snapshot.labels:
                return StoredSnapshot(path, snapshot)
        return None

    def labels(self, host: str) -> list[str]:
        found: list[str] = []
        for path in self.paths(host):
            try:
                labels = load_snapshot(path).labels
            except StoreError:
                continue
            found.extend(label for label in labels if label not in found)
        return found


def _write_temp(folder: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def load_snapshot(path: str | Path) -> Snapshot:
    """Read and validate one snapshot file; every failure names the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read snapshot: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: not a driftwatch snapshot (corrupt or truncated JSON: {exc})") from exc
    if not isinstance(data, dict) or "schema_version" not in data:
        raise StoreError(f"{path}: not a driftwatch snapshot (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: written by a newer driftwatch (schema {version}, this one reads {SCHEMA_VERSION}); upgrade driftwatch"
        )
    try:
        return Snapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"{path}: not a valid driftwatch snapshot ({where}: {err['msg']})") from exc


def parse_ref(ref: str) -> tuple[str, str]:
    """Split ``HOST@SELECTOR``; a bare host means its latest snapshot."""
    host, sep, selector = ref.rpartition("@")
    if not sep:
        return ref, "latest"
    if not host or not selector:
        raise UserError(f"bad snapshot reference {ref!r}: expected HOST@LABEL, HOST@latest, HOST@~N or a file")
    return host, selector


def resolve_ref(store: SnapshotStore, ref: str) -> StoredSnapshot:
    """A snapshot file path, or HOST@latest / HOST@~N / HOST@LABEL / HOST@<timestamp prefix>."""
    if ref.endswith(".json") or os.sep in ref and Path(ref).exists():
        return StoredSnapshot(Path(ref), load_snapshot(ref))
    host, selector = parse_ref(ref)
    paths = store.paths(host)
    if not paths:
        known = ", ".join(store.hosts()) or "none"
        raise UserError(f"no snapshots of {host!r} in {store.root} (hosts with snapshots: {known})")
    if selector == "latest" or re.fullmatch(r"~\d+", selector):
        back = 0 if selector == "latest" else int(selector[1:])
        if back >= len(paths):
            raise UserError(f"{ref}: only {len(paths)} snapshot(s) of {host!r}")
        path = paths[-1 - back]
        return StoredSnapshot(path, load_snapshot(path))
    found = store.find_label(host, selector)
    if found is not None:
        return found
    prefix = re.sub(r"[-:]", "", selector)
    matches = [p for p in paths if p.name.startswith(prefix)]
    if matches:
        return StoredSnapshot(matches[-1], load_snapshot(matches[-1]))
    labels = ", ".join(store.labels(host)) or "none"
    raise UserError(f"{ref}: no snapshot of {host!r} labelled or timed {selector!r} (labels: {labels}; also latest, ~N)")
