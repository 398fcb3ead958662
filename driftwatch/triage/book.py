"""Where acceptances are kept: one small state file per host in the snapshot store.

``<store>/<host folder>/.accepted.json`` holds ``{"version": 1, "baselines": {LABEL:
[acceptance, ...]}}``, read and written only through the store's state API
(``read_state`` / ``write_state``), so it lives wherever the store does. Writers hold the
host's store lock (``accept`` and ``check`` take turns). A damaged file is never a
reason to stay quiet: ``check`` warns and counts the drift as drift (it alerts rather
than silences), and ``accept`` refuses to write over it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from driftwatch.store import SnapshotStore
from driftwatch.triage.accept import Acceptance

STATE_NAME = ".accepted.json"
VERSION = 1


@dataclass
class Book:
    """A host's acceptances by baseline label, and what could not be read."""

    host: str
    baselines: dict[str, list[Acceptance]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one line each: a damaged file or entry

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def for_baseline(self, label: str, taken_at: datetime | None = None) -> list[Acceptance]:
        """Its acceptances against ``label``; with ``taken_at``, those in effect for a snapshot taken then."""
        return [a for a in self.baselines.get(label, []) if taken_at is None or a.applies_to(taken_at)]

    def to_json(self) -> dict[str, object]:
        baselines = {label: [a.to_json() for a in entries] for label, entries in self.baselines.items() if entries}
        return {"version": VERSION, "baselines": baselines}


def read_book(store: SnapshotStore, host: str) -> Book:
    raw = store.read_state(host, STATE_NAME)
    book = Book(host)
    if raw is None:
        return book
    where = f"{host}: the acceptances file {STATE_NAME}"
    try:
        data = json.loads(raw)
        baselines = data["baselines"]
        if not isinstance(baselines, dict) or data.get("version") != VERSION:
            raise ValueError("not a version-1 acceptances file")
    except (ValueError, TypeError, KeyError) as exc:
        book.problems.append(f"{where} is damaged ({exc}); its acceptances are not applied")
        return book
    for label, entries in baselines.items():
        for n, entry in enumerate(entries if isinstance(entries, list) else [entries], 1):
            try:
                book.baselines.setdefault(str(label), []).append(Acceptance.from_json(entry))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                book.problems.append(f"{where}: entry {n} of baseline {label!r} is damaged ({exc}); not applied")
    return book


def write_book(store: SnapshotStore, book: Book) -> None:
    """Replace the host's acceptances file atomically (StoreError when the store cannot take it)."""
    store.write_state(book.host, STATE_NAME, json.dumps(book.to_json(), indent=1, default=str).encode())
