"""An in-memory backend: the reference behaviour without a disk.

For tests and throwaway sessions. It stores each session's log lines exactly as a
durable backend would, so loading decodes them like any other log; locks are exclusive
within this backend object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .._decode import decode_body
from .._header import SessionHeader
from .._registry import EventRegistry
from ..events import Event
from .base import SessionLockedError, StoredLog, WriterLock

__all__ = ["MemoryBackend"]


@dataclasses.dataclass(slots=True)
class _Log:
    header: SessionHeader
    lines: list[bytes]


class _Lock:
    def __init__(self, held: set[str], key: str) -> None:
        self._held = held
        self._key = key

    def release(self) -> None:
        self._held.discard(self._key)


class MemoryBackend:
    """Keeps logs in a dict; gone with the process."""

    name = "session-persistence-memory"

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}
        self._held: set[str] = set()

    def _stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        log = self._logs.get(session_id)
        if log is None:
            return None
        jsonl = b"".join(log.lines)
        return StoredLog(log.header, decode_body(registry, jsonl), None, jsonl)

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        return self._stored(session_id, registry)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        log = self._logs.get(session_id)
        if log is None or (log.header.cwd if isinstance(log.header.cwd, str) else None) != cwd:
            return None
        return self._stored(session_id, registry)

    def append_batch(
        self, header: SessionHeader, events: Sequence[Event], jsonl: bytes, materialized: bool
    ) -> None:
        if not materialized:
            self._logs[header.id] = _Log(header, [])
        self._logs[header.id].lines.append(jsonl)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        # Nothing is ever torn in memory; closers are appended like any batch.
        self._logs[header.id].lines.append(jsonl)

    def list(self) -> list[SessionHeader]:
        return [log.header for log in self._logs.values()]

    def location(self, header: SessionHeader) -> str:
        """In memory: nowhere on disk."""
        return "memory:"

    def acquire(self, header: SessionHeader) -> WriterLock:
        if header.id in self._held:
            raise SessionLockedError(header.id, "another writer in this process")
        self._held.add(header.id)
        return _Lock(self._held, header.id)

    def close(self) -> None:
        self._held.clear()
