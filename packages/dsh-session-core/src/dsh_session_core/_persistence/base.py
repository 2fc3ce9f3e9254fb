"""The backend seam of persistence: what a durable backend must do, and what it returns.

The coordinator (``coordinator``) owns the orchestration every backend shares:
write-behind buffering, per-session serialization, adoption, repair and the writer lock
policy. A backend only stores and scans: the hooks below. A new backend is tested by
adding one fixture to the contract suite (``tests/persistence``).

The protocol is also the only way in for everything that reads a store without writing
it: the CLI (``ls``, ``show``, ``tail -f``...) and :func:`~.copy.copy_sessions` use a
backend through these methods only, never through its class or its attributes, so a
third-party backend (contributed for a URL scheme through the ``store_backend`` hook)
works with every command. The reading methods after :meth:`Backend.close` have a
default here, written with the required ones (correct, but each loads whole sessions):
a backend that subclasses :class:`Backend` inherits them, and the built-in backends
override them with cheaper ones.

What a backend may do beyond these methods (search an index, delete, run on asyncio...)
is declared in :mod:`.capabilities`, one small protocol each, and found once per backend
there: nothing here or elsewhere asks a backend for a method by name.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import re
import time
from collections.abc import Collection, Hashable, Iterator, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from .._logformat.tail import POLL_SECONDS, LogNews, LogTail  # the protocol's value types
from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from ..errors import PersistenceError, SessionIdError, SessionLockedError, SessionNotStoredError
from ..events import Event

__all__ = [
    "COMMON_ID_RULE",
    "POLL_SECONDS",
    "Backend",
    "DeleteStatus",
    "Deleted",
    "LogNews",
    "LogTail",
    "SessionLockedError",
    "SessionSummary",
    "StoredLog",
    "WriterLock",
    "cannot_delete",
    "check_common_id",
    "continued",
    "keep_types",
    "last_active_at",
    "not_found",
    "stored_lines",
]

#: The part of the session-id rule every backend shares (:meth:`Backend.check_id`).
COMMON_ID_RULE: Final = "non-empty strings with a UTF-8 form (no lone surrogate)"


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


@dataclasses.dataclass(frozen=True, slots=True)
class SessionSummary:
    """A stored session as ``dsh-session ls`` shows it (:meth:`Backend.summaries`).

    :ivar header: its header.
    :ivar events: how many events are stored (a torn last line not counted).
    :ivar turns: how many of them are ``turn/start`` events.
    :ivar last_activity: when the session was last active: the ``time`` of its last
        stored event, or its header's ``createdAt`` when that is later (a fork is made
        with its parent's older events, and was active when it was forked) or when there
        is no event or its time cannot be read (:func:`last_active_at`). Given as the
        last event's time, as stored (``None``: none), and settled here, so that every
        backend, a third party's too, answers the same.
    :ivar torn: whether a torn tail follows the stored events.
    :ivar retained: whether the store marks it never to be pruned (``retain``). The mark
        is the store's, kept in its retention ledger, not the session's: the read
        model's listing (``inspect.select_sessions``) says it; a backend's own summaries
        leave it false.
    """

    header: SessionHeader
    events: int
    turns: int
    last_activity: Any = None
    torn: bool = False
    retained: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "last_activity",
                           last_active_at(self.last_activity, self.header.created_at))


#: What became of a session :meth:`Backend.delete` (or a prune) was asked to remove.
DeleteStatus: TypeAlias = Literal["deleted", "would-delete", "locked", "failed"]


@dataclasses.dataclass(frozen=True, slots=True)
class Deleted:
    """A session removed from a store, or one a dry run or a prune would remove or had
    to leave (:meth:`Backend.delete`, ``DurableStore.delete``, ``DurableStore.prune``).

    :ivar session_id: the session.
    :ivar status: ``"deleted"`` (gone), ``"would-delete"`` (a dry run: nothing was
        changed), ``"locked"`` (a writer holds it: left as it is; prune only) or
        ``"failed"`` (it could not be removed, ``reason`` says why: left as it is;
        prune only).
    :ivar location: where its log lived (a file, a database file, a database URL).
    :ivar removed: what was (or would be) removed, for people: the files (JSONL: the
        log, its lock file and dead temp files), or the rows and the lock file
        (SQLite), or the rows (PostgreSQL).
    :ivar bytes: the bytes freed, where known: JSONL, the sizes of the files removed;
        SQLite and PostgreSQL, the size of the session's log (its header and event
        lines, as ``export`` writes them), the data removed (the database file does not
        shrink: SQLite reuses the freed pages, PostgreSQL's VACUUM reclaims them).
    :ivar events: how many events it held, where known.
    :ivar header: its header, where known.
    :ivar last_activity: the time (epoch ms) it was last active, where known: its last
        event's, or its header's ``createdAt`` when later (:func:`last_active_at`; prune
        sets it: what it compared with the cutoff).
    :ivar reason: why it was left (``"locked"``, ``"failed"``), for people.
    """

    session_id: str
    status: DeleteStatus = "deleted"
    location: str = ""
    removed: tuple[str, ...] = ()
    bytes: int | None = None
    events: int | None = None
    header: SessionHeader | None = None
    last_activity: int | float | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.header is not None:
            when = last_active_at(self.last_activity, self.header.created_at)
            object.__setattr__(self, "last_activity", _finite(when))

    @property
    def deleted(self) -> bool:
        """Whether the session is gone (not a dry run, not left)."""
        return self.status == "deleted"


def _finite(value: object) -> int | float | None:
    """A stored time as epoch ms: ``value`` when it is a finite number, else ``None`` (a
    log written by hand may hold anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return value


def last_active_at(last_event_time: Any, created_at: Any) -> Any:
    """When a session was last active: its last event's ``time`` (as stored), unless its
    header's ``createdAt`` is later, or the event's time is no number (or there is no
    event, ``None``): then ``createdAt``. A fork's header is made when it is forked,
    while its seed keeps its parent's times: without this, a fork made a minute ago
    would look as old as its parent's last turn (to ``ls --since`` and ``prune``)."""
    created = _finite(created_at)
    if created is None:
        return last_event_time
    last = _finite(last_event_time)
    return created if last is None or last < created else last_event_time


def not_found(session_id: str, location: str | None = None) -> SessionNotStoredError:
    """The error for an id no session is stored under (``open``'s, ``delete``'s...);
    ``location``: the store, when the raiser knows it (a backend does)."""
    return SessionNotStoredError(session_id, location=location)


def cannot_delete(backend: Backend, session_id: str) -> PersistenceError:
    """The error of a backend that has no way to delete a session (a third-party one
    written before :meth:`Backend.delete` existed, without the
    :class:`~.capabilities.Deletable` capability): nothing was changed."""
    name = backend.name or type(backend).__name__
    return PersistenceError(
        f'the {name} backend cannot delete sessions (it implements no delete): session '
        f'"{session_id}" is left as it is', session_id=session_id)


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

    def check_id(self, session_id: str) -> None:
        """Refuse an id this backend cannot store, before anything is written: the
        durable store calls it at ``create``, and ``copy`` for each session before
        copying it into this backend.

        Every backend refuses what :func:`check_common_id` refuses (the empty id, an id
        with a lone surrogate); a backend adds its own limits (PostgreSQL: no NUL, at
        most 2048 UTF-8 bytes). The default is the common rule alone.

        :raises SessionIdError: the id breaks the rule (the error states it).
        """
        check_common_id(session_id, self.name)

    def close(self) -> None:
        """Release what the backend holds (files, connections, locks)."""
        ...

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove a stored session whole: its log, and its writer lock's file where it
        has one. The session's writer lock (the one :meth:`acquire` takes) is taken
        first, without waiting, so a session a live writer holds, in this process or
        another, is refused and left as it is; it is released once the session is gone.
        Only this session is touched, whatever other ids look like.

        :param dry_run: change nothing: say what would be removed (the lock is only
            tested, and refused the same way).
        :raises SessionLockedError: a writer holds the session.
        :raises SessionNotStoredError: nothing is stored under this id (raise
            :func:`not_found`).
        :raises PersistenceError: the default, for a backend that cannot delete
            (:func:`cannot_delete`).
        """
        raise cannot_delete(self, session_id)

    # --- reading without writing: defaults a backend should override ---------------------

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every materialized session with its counts, for listing. No order. Nothing is
        written and no lock is taken.

        The default loads each session (O(store), every event decoded); the built-in
        backends never decode JSON here: JSONL reads each file once without parsing it,
        SQLite and PostgreSQL run one aggregate query over the events' primary key.

        :raises OSError: the store cannot be listed.
        """
        registry = EventRegistry([])
        found = []
        for header in self.list():
            stored = self.load_stored(header.id, registry)
            if stored is None:  # removed since it was listed
                continue
            lines = stored_lines(stored)
            found.append(SessionSummary(
                header, len(lines), sum(e.type == "turn/start" for e in stored.events),
                _time_of(lines[-1]) if lines else None, stored.torn is not None,
            ))
        return found

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` events' log lines (a torn tail left out), and where
        following them starts; ``None`` when the session is not stored. Nothing is
        written and no lock is taken, so a live session can be read.

        The lines and the position come from one consistent read: the position is just
        after the last line returned (for ``count == 0``, after the last stored event),
        so an event committed meanwhile is reported by :meth:`follow_lines`, never
        skipped nor repeated.

        The built-in backends read from the end (JSONL: backwards from the end of the
        file; the databases: the last rows by the primary key); the default loads the
        session.
        """
        stored = self.load_stored(session_id, EventRegistry([]))
        if stored is None:
            return None
        lines = stored_lines(stored)
        return LogTail(lines[max(len(lines) - count, 0) :] if count > 0 else [], len(lines))

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The log lines of the stored events whose seq is greater than ``after``, at most
        ``limit`` of them (``None``: all), oldest first (a torn tail left out); ``None``
        when the session is not stored. Nothing is written and no lock is taken.

        The built-in backends read only what they return (JSONL: a binary search over
        the file for the line of seq ``after + 1``; the databases: a key range); the
        default loads the session.
        """
        stored = self.load_stored(session_id, EventRegistry([]))
        if stored is None:
            return None
        lines = stored_lines(stored)[max(after + 1, 0):]
        return lines if limit is None else lines[:max(limit, 0)]

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Follow a session from ``position`` (of :meth:`tail_lines`, or of the last news):
        a blocking iterator that yields each batch of new events as it is committed, and
        a news item with a ``note`` when the log was cut back (a repair). It ends only
        after ``timeout`` seconds without news (``None``: never; interrupt it).

        How it waits is the backend's: JSONL and SQLite poll every
        :data:`POLL_SECONDS` (a ``stat``, one indexed query), PostgreSQL waits on the
        session's NOTIFY channel. The default polls :meth:`load_stored` (O(session) per
        poll).
        """
        if type(position) is not int:
            msg = f"a position of {type(self).__name__} is a count of events, got {position!r}"
            raise TypeError(msg)
        seen = position
        quiet_since = time.monotonic()
        while True:
            stored = self.load_stored(session_id, EventRegistry([]))
            lines = [] if stored is None else stored_lines(stored)
            if len(lines) != seen:
                note = None if len(lines) > seen else (
                    f"the session was cut back to {len(lines)} event(s) (a repair?); "
                    f"following from there")
                news, seen = lines[seen:], len(lines)
                quiet_since = time.monotonic()
                yield LogNews(news, seen, note)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(POLL_SECONDS)

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """The log lines stored after ``last``, when the stored log still holds ``last``
        at its seq (the same seq, type and time) and no torn tail follows: what a writer
        that released the session (and holds its writer lock again) must read to take it
        back up (``DurableStore.open(id, resume=session)``). ``None`` when it cannot be
        continued so (nothing stored, cut back or rewritten since, a torn tail or a
        failed write to repair): the caller then loads the session whole.

        Nothing is written; the caller holds the session's writer lock. The built-in
        backends read from ``last`` on (JSONL: the file's end, then a binary search when
        another writer appended; SQLite and PostgreSQL: a key range); the default loads
        the session (O(session)), which every backend can do.
        """
        stored = self.load_stored(header.id, EventRegistry([]))
        if stored is None or stored.torn is not None:
            return None
        return continued(stored_lines(stored)[last.seq:], last)

    def exists(self) -> bool:
        """Whether the store is there to be read (a JSONL backend's folder may not exist
        yet: it is made at the first write). Databases exist once opened; so does the
        default."""
        return True

    def store_identity(self) -> Hashable | None:
        """What tells this store apart from others: two backends with equal identities
        hold the same sessions (the same folder or database file, the same PostgreSQL
        database however its URL is spelt), so copying from one into the other is
        refused. ``None`` when the store lives in this object only (``memory:``, a SQLite
        ``:memory:`` database): no other backend sees its sessions, nor outlives it.

        The default: the class and :meth:`location`'s answer (resolved when it is an
        absolute path), ``None`` when that is ``memory:`` or ``:memory:``.
        """
        where = self.location(SessionHeader(version=0, id="store-identity-probe",
                                            created_at=0))
        if where in ("memory:", ":memory:"):
            return None
        if os.path.isabs(where):
            where = os.path.realpath(where)
        return (type(self).__module__, type(self).__qualname__, where)


def continued(lines: Sequence[bytes], last: Event) -> builtins.list[bytes] | None:
    """The lines after the first of ``lines`` when that one is the line of ``last``
    (its seq, type and time: what tells one writer's event from another's at the same
    seq), else ``None``: what :meth:`Backend.lines_since` returns, from the stored lines
    read from ``last``'s seq on."""
    from .._logformat.logfile import line_wire

    wire = line_wire(lines[0]) if lines else None
    if (wire is None or wire.get("seq") != last.seq or wire.get("type") != last.type
            or wire.get("time") != last.time):
        return None
    return list(lines[1:])


#: The type a log line begins with, as every writer writes it (a type spelt with an
#: escape is not read here: its line is kept, for the caller to decode).
_TYPE_FIRST = re.compile(rb'\{"type":"([^"\\]*)"')


def keep_types(lines: Sequence[bytes], types: Collection[str]) -> builtins.list[bytes]:
    """The ``lines`` of the events of ``types``, and those whose type cannot be told
    without parsing them (see :func:`~.capabilities.lines_of_types_of`)."""
    wanted = {t.encode("utf-8", "surrogatepass") for t in types}
    kept = []
    for line in lines:
        found = _TYPE_FIRST.match(line)
        if found is None or found[1] in wanted:
            kept.append(line)
    return kept


def check_common_id(
    session_id: str, backend: str, rule: str = COMMON_ID_RULE, *,
    cannot: str = "has no UTF-8 form",
) -> None:
    """Refuse an id no backend stores: the empty id (no JSONL file can be named after
    it), and an id with a lone surrogate (it has no UTF-8 form, so no text column, log
    line or file name holds it as given).

    :param backend: the backend's label, for the message.
    :param rule: the backend's whole rule, for the message (default: the common one).
    :param cannot: why a lone surrogate is refused, for the message (``"the SQLite
        backend cannot store"``).
    :raises SessionIdError: the id breaks the rule.
    """
    if session_id == "":
        raise SessionIdError(session_id, backend=backend, problem="it is empty", rule=rule)
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        at = exc.start
        problem = (f"it holds a lone surrogate, which {cannot} "
                   f"(U+{ord(session_id[at]):04X} at index {at})")
        raise SessionIdError(session_id, backend=backend, problem=problem, rule=rule) from None


def stored_lines(stored: StoredLog) -> builtins.list[bytes]:
    """The log line of each stored event (without its newline), as stored when the
    backend kept them, else encoded again."""
    jsonl = stored.jsonl
    if jsonl is not None and jsonl.count(b"\n") == len(stored.events) and (
        not jsonl or jsonl.endswith(b"\n")
    ):
        return jsonl.split(b"\n")[:-1]
    from .._schema.codec import encode_events

    return encode_events(stored.events).split(b"\n")[:-1]


def _time_of(line: bytes) -> Any:
    from .._logformat.logfile import line_wire

    wire = line_wire(line)
    return None if wire is None else wire.get("time")
