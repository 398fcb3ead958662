"""A byte buffer that keeps the first ``limit`` bytes and counts the rest."""

from __future__ import annotations


class BoundedBuffer:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.truncated = False

    def feed(self, data: bytes) -> None:
        room = self.limit - self._size
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        if data:
            self._chunks.append(data)
            self._size += len(data)

    def getvalue(self) -> bytes:
        return b"".join(self._chunks)
