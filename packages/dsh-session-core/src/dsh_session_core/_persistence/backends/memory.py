"""An in-memory backend: the reference behaviour without a disk.

For tests and throwaway sessions. It stores each session's log lines exactly as a
durable backend would, so loading decodes them like any other log; locks are exclusive
within this backend object.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Hashable, Iterator, Sequence

from ..._logformat.logfile import TURN_LINE, line_wire
from ..._schema.decode import decode_body
from ..._schema.header import SessionHeader
from ..._schema.registry import EventRegistry
from ...events import Event
from ..base import (
    POLL_SECONDS,
    Deleted,
    LogNews,
    LogTail,
    SessionLockedError,
    SessionSummary,
    StoredLog,
    WriterLock,
    check_common_id,
    continued,
    not_found,
)
from ..rows import RowChanges, RowQuery, RowTable

__all__ = ["MemoryBackend"]


@dataclasses.dataclass(slots=True)
class _Log:
    header: SessionHeader
    lines: list[bytes]  # the batches' log lines, one block (of \n-ended lines) each

    def split(self) -> list[bytes]:
        return b"".join(self.lines).split(b"\n")[:-1]


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
        #: (session id, projection) -> its rows, and its mark.
        self._tables: dict[tuple[str, str], tuple[RowTable, bytes]] = {}

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

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        self.append_batch(header, events, jsonl, materialized)
        self.write_rows(header, changes)

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        for change in changes:
            key = (header.id, change.name)
            table = self._tables[key][0] if key in self._tables else RowTable()
            table.apply(change)
            self._tables[key] = (table, change.mark)

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        return {name: mark for (sid, name), (_, mark) in self._tables.items()
                if sid == session_id}

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        found = self._tables.get((session_id, name))
        return found[0].select(query) if found is not None else []

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        wanted = None if session_ids is None else set(session_ids)
        return [(sid, mark, table.summary) for (sid, n), (table, mark) in self._tables.items()
                if n == name and table.summary is not None
                and (wanted is None or sid in wanted)]

    def drop_projections(self, session_id: str | None) -> None:
        for key in [k for k in self._tables if session_id is None or k[0] == session_id]:
            del self._tables[key]

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the session's header and lines (one assignment: nothing to tear);
        its rows go with the old log (the store folds the new one)."""
        self.drop_projections(header.id)
        self._logs[header.id] = _Log(header, [jsonl])

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

    def check_id(self, session_id: str) -> None:
        """The common rule (:func:`~.base.check_common_id`), as every backend's."""
        check_common_id(session_id, self.name)

    def acquire(self, header: SessionHeader) -> WriterLock:
        if header.id in self._held:
            raise SessionLockedError(header.id, "another writer in this process")
        self._held.add(header.id)
        return _Lock(self._held, header.id)

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Drop the session's log, unless a writer of this backend holds it."""
        log = self._logs.get(session_id)
        if log is None:
            raise not_found(session_id)
        if session_id in self._held:
            raise SessionLockedError(session_id, "another writer in this process")
        return self._drop(session_id, log, dry_run=dry_run)

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, under the writer lock the caller took and releases."""
        log = self._logs.get(session_id)
        if log is None:
            raise not_found(session_id)
        return self._drop(session_id, log, dry_run=False)

    def scrub(self) -> str:
        """Nothing to scrub: a deleted log is dropped from this process's memory
        (:class:`~..capabilities.Scrubbable`)."""
        return "memory: the log dropped from this process's memory; nothing on disk"

    def _drop(self, session_id: str, log: _Log, *, dry_run: bool) -> Deleted:
        jsonl = b"".join(log.lines)
        from ..._schema.codec import ENCODER

        last = jsonl[jsonl.rfind(b"\n", 0, len(jsonl) - 1) + 1 : -1]
        wire = line_wire(last) if last else None
        when = None if wire is None else wire.get("time")
        if not dry_run:
            del self._logs[session_id]
            self.drop_projections(session_id)
        return Deleted(session_id, "would-delete" if dry_run else "deleted", "memory:",
                       (f"memory: the log of {session_id!r}",),
                       len(ENCODER.encode(log.header)) + 1 + len(jsonl), jsonl.count(b"\n"),
                       log.header, when if isinstance(when, int) else None)

    def summaries(self) -> builtins.list[SessionSummary]:
        """Counted from the stored lines, without decoding them (as JSONL's)."""
        found = []
        for log in self._logs.values():
            jsonl = b"".join(log.lines)
            last = jsonl[jsonl.rfind(b"\n", 0, len(jsonl) - 1) + 1 : -1]
            wire = line_wire(last) if last else None
            found.append(SessionSummary(
                log.header, jsonl.count(b"\n"), (b"\n" + jsonl).count(TURN_LINE),
                None if wire is None else wire.get("time"),
            ))
        return found

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last lines; the position is how many events are stored."""
        log = self._logs.get(session_id)
        if log is None:
            return None
        lines = log.split()
        return LogTail(lines[max(len(lines) - count, 0) :] if count > 0 else [], len(lines))

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The lines after seq ``after`` (at most ``limit``)."""
        log = self._logs.get(session_id)
        if log is None:
            return None
        lines = log.split()[max(after + 1, 0):]
        return lines if limit is None else lines[:max(limit, 0)]

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """The lines from ``last``'s seq on (nothing in memory is ever torn)."""
        lines = self.read_lines(header.id, last.seq - 1, None)
        return None if lines is None else continued(lines, last)

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Polls the dict every :data:`POLL_SECONDS` (only this process can append)."""
        if type(position) is not int:
            msg = f"a memory position is a count of events, got {position!r}"
            raise TypeError(msg)
        seen = position
        quiet_since = time.monotonic()
        while True:
            log = self._logs.get(session_id)
            lines = [] if log is None else log.split()
            if len(lines) > seen:
                news, seen = lines[seen:], len(lines)
                quiet_since = time.monotonic()
                yield LogNews(news, seen)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(POLL_SECONDS)

    def exists(self) -> bool:
        return True

    def store_identity(self) -> Hashable | None:
        """``None``: the store lives in this object only."""
        return None

    def close(self) -> None:
        self._held.clear()
