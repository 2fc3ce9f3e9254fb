"""The backend seam of persistence: what a durable backend must do, and what it returns.

The coordinator (``coordinator``) owns the orchestration every backend shares:
write-behind buffering, per-session serialization, adoption, repair and the writer lock
policy. A backend only stores and scans: the hooks below. A new backend is tested by
adding one fixture to the contract suite (``tests/persistence``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._header import SessionHeader
from .._registry import EventRegistry
from ..errors import SessionLockedError
from ..events import Event

__all__ = ["Backend", "SessionLockedError", "StoredLog", "WriterLock"]


@dataclasses.dataclass(frozen=True, slots=True)
class StoredLog:
    """A session as found in storage.

    :ivar header: its header (any version: the coordinator checks it).
    :ivar events: the longest valid prefix of its log, contiguous from seq 0.
    :ivar torn: where a torn tail starts, when one must be cut (a backend-specific,
        opaque marker: a byte offset for JSONL, a seq for SQLite; ``0`` is a marker),
        else ``None``.
    :ivar jsonl: the log lines of ``events`` exactly as stored (each ``\\n``-ended), when
        the backend has them cheaply; lets a reloaded session skip re-encoding.
    """

    header: SessionHeader
    events: list[Event]
    torn: object | None = None
    jsonl: bytes | None = None




@runtime_checkable
class WriterLock(Protocol):
    """An exclusive writer lock on one session; released by :meth:`release` (and by the
    death of the process that holds it)."""

    def release(self) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """The storage hooks a durable backend implements.

    Every method is synchronous and may be called from any thread, but never twice at
    once for the same session (the coordinator serializes per session).
    """

    #: A label for errors, e.g. ``"session-persistence-jsonl"``.
    name: str

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session under any cwd scope, or ``None`` when nothing is stored.

        :param registry: the event types to decode into (others stay opaque).
        :raises LogFormatError: committed corruption (a hole at or before the last
            committed ``turn/end``), naming where.
        """
        ...

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """The session stored under exactly this ``cwd`` scope (``None`` = the no-cwd
        scope, not "any"), or ``None``."""
        ...

    def append_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """Durably append a contiguous batch; return only once it is durable.

        :param jsonl: the batch's log lines, each ``\\n``-ended (already encoded once).
        :param materialized: whether the session exists in storage; when not, write the
            header and the batch atomically together (a session exists iff it has an
            event).
        :raises OSError: the write failed; nothing of the batch is left behind.
        """
        ...

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Cut the torn tail (iff ``torn`` is not ``None``), then durably append the
        crash-repair ``closers`` (``jsonl`` is their lines). Need not be atomic."""
        ...

    def list(self) -> list[SessionHeader]:
        """Every materialized session's header, from metadata only (no full parse)."""
        ...

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's exclusive writer lock, without waiting.

        :raises SessionLockedError: another writer holds it.
        """
        ...

    def location(self, header: SessionHeader) -> str:
        """Where the session's log lives, for people: a file path, a database path."""
        ...

    def close(self) -> None:
        """Release what the backend holds (files, connections, locks)."""
        ...
