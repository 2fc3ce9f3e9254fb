"""The coordinator's write path: its session states, and the one load and append path.

The write path of the persistence coordinator (:mod:`.coordinator`): what it keeps of
each session (:class:`SessionState`), the per-session serialization, and the one way a
stored log is loaded (its crash repaired) and a batch appended (:class:`WritePath`),
with the checks and the error naming those go through. The coordinator's module keeps
the rest: its service, its plugin hooks and the adoption of live sessions.
"""

from __future__ import annotations

import bisect
import builtins
import dataclasses
import itertools
import operator
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._base.json_values import find_non_json
from ..._model.repair import interrupted_turn_closers
from ..._schema.codec import encode_events
from ..._schema.decode import decode_wire
from ..._schema.header import SEALED_FORMAT_VERSION, SESSION_FORMAT_VERSION, SessionHeader
from ..._schema.registry import EventRegistry
from ...errors import PersistenceError, SessionExistsError, StoreFolderError, StoreWriteError
from ...events import Event
from ..base import Backend, StoredLog, WriterLock, not_found
from ..capabilities import Capabilities
from ..projections.keep import Keeper
from ..rows import RowChanges

if TYPE_CHECKING:
    import asyncio

    from ..._model.session import Session

__all__ = [
    "SEQ_OF",
    "NamedWriteErrors",
    "SessionState",
    "WritePath",
    "check_follows",
    "covers",
    "cwd_of",
    "drop_stored",
    "same_objects",
]

#: How many released sessions' projection covers a store keeps for their resume.
RELEASED_KEPT = 256

#: An event's seq (the key the buffers are sorted by).
SEQ_OF = operator.attrgetter("seq")


@dataclasses.dataclass(slots=True)
class SessionState:
    """What the coordinator keeps of one session it writes or has read."""

    header: SessionHeader
    cursor: int  # the next seq to store
    materialized: bool
    owner: Session | None = None
    lock: WriterLock | None = None
    #: The events ``load`` returned, until a live session claims the state: a seed made
    #: of these very objects covers the stored log without reading it again.
    loaded: list[Event] | None = None
    #: How many events each projection's stored rows fold (:class:`~..projections.keep.
    #: Keeper`), once read (``None``: not yet).
    projected: dict[str, int] | None = None


class NamedWriteErrors:
    """Re-raise a backend's bare :class:`OSError` as a :class:`StoreWriteError` naming
    the session and its log (the cause stays its ``__cause__``); any other error, our
    own ones included, passes as it is."""

    __slots__ = ("_action", "_backend", "_header", "_sid")

    def __init__(self, sid: str, backend: Backend, header: SessionHeader, action: str) -> None:
        self._sid, self._backend, self._header, self._action = sid, backend, header, action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        # A StoreFolderError is an OSError of ours: it names the store and what to do.
        if not isinstance(exc, OSError) or isinstance(exc, StoreWriteError | StoreFolderError):
            return
        try:
            where = self._backend.location(self._header)
        except Exception:  # only for the message: never hide the write's own error
            where = self._backend.name
        raise StoreWriteError(self._sid, where, exc, action=self._action) from exc


def check_follows(sid: str, cursor: int, events: Sequence[Event]) -> None:
    """Refuse a batch that does not continue the stored log at ``cursor``."""
    if not all(map(operator.eq, map(SEQ_OF, events), itertools.count(cursor))):
        i, ev = next((i, e) for i, e in enumerate(events) if e.seq != cursor + i)
        from ..._schema.seq_text import got_seq

        msg = (f'append seq mismatch for "{sid}": expected {cursor + i} at index {i}, '
               f"got {got_seq(ev.seq)}")
        raise PersistenceError(msg, session_id=sid)


def drop_stored(buffer: list[Event], cursor: int) -> None:
    """Drop the buffered events already stored (those before ``cursor``)."""
    del buffer[: bisect.bisect_left(buffer, cursor, key=SEQ_OF)]


def cwd_of(header: SessionHeader) -> str | None:
    cwd = header.cwd
    return cwd if isinstance(cwd, str) else None


def same_objects(seed: Sequence[Event], loaded: Sequence[Event] | None, n: int) -> bool:
    """Whether the first ``n`` seed events are the very objects ``load`` returned (events
    are immutable, so then they are the stored log); checked at C speed."""
    if loaded is None or len(seed) < n or len(loaded) < n:
        return False
    return all(map(operator.is_, itertools.islice(seed, n), itertools.islice(loaded, n)))


def covers(seed: Sequence[Event], prefix: Sequence[Event]) -> bool:
    """Whether ``seed`` starts with ``prefix`` event for event (same log lines)."""
    if len(prefix) > len(seed):
        return False
    return encode_events(seed[: len(prefix)]) == encode_events(prefix)


class WritePath:
    """The ground of the persistence coordinator (:class:`~.coordinator.PersistencePlugin`
    subclasses it): its per-session states and locks, and the one path every load and
    append goes through (adoption of a stored log, crash repair, the writer lock).

    :param backend: where logs are stored (JSONL files, SQLite, ...).
    :param registry: the event types logs decode into; the store's registry.
    """

    def __init__(self, backend: Backend, registry: EventRegistry) -> None:
        self.backend = backend
        #: What the backend has beyond the protocol, found once, here.
        self.capabilities = Capabilities.of(backend)
        self.registry = registry
        projecting = self.capabilities.projecting
        #: Keeps the projections current (where the backend keeps rows and plugins
        #: declare projections).
        self.keeper = (Keeper(registry.projections, projecting)
                       if projecting is not None and registry.projections else None)
        self._states: dict[str, SessionState] = {}
        self._buffers: dict[Session, builtins.list[Event]] = {}
        self._inited: set[int] = set()
        self._id_locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()
        # Per event loop, per session: asyncio locks belong to one loop.
        self._alocks: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False
        #: Per session id, the session last released, its cursor and how far its
        #: projection rows went then (:meth:`~.coordinator.PersistencePlugin.resume`
        #: reuses them when it takes that very session back). A cache: the oldest go
        #: past :data:`RELEASED_KEPT` (and a resume then reads the marks).
        self._projected_at_release: dict[str, tuple[Session, int, dict[str, int]]] = {}

    # --- per-session serialization ------------------------------------------------------

    def _serial(self, session_id: str) -> threading.RLock:
        with self._guard:
            lock = self._id_locks.get(session_id)
            if lock is None:
                lock = self._id_locks[session_id] = threading.RLock()
            return lock

    def serialized(self, session_id: str) -> threading.RLock:
        """The lock that serializes this coordinator's work on one session: a reader
        that calls the backend for a session from another thread (an asyncio follower's
        poll) holds it, so that it never calls the backend at once with a write of that
        session (the :class:`~.base.Backend` contract)."""
        return self._serial(session_id)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` (or :meth:`close_sessions`) ran."""
        return self._closed

    def _own(self, state: SessionState) -> None:
        """Take the session's writer lock before this coordinator writes to it."""
        if state.lock is None:
            with NamedWriteErrors(state.header.id, self.backend, state.header, "locking"):
                state.lock = self.backend.acquire(state.header)

    def _repair(self, state: SessionState, stored: StoredLog, closers: Sequence[Event]) -> None:
        """Commit a crash repair under the writer lock. When it fails, a lock taken for
        it is released again: the state it was taken for is dropped, so a lock kept
        would refuse every retry (even this store's) until :meth:`close`."""
        taken = state.lock is None
        self._own(state)
        try:
            with NamedWriteErrors(stored.header.id, self.backend, stored.header,
                        "writing the crash repair of"):
                self.backend.commit_repair(
                    stored.header, stored.torn, closers, encode_events(closers)
                )
        except BaseException:
            if taken and state.lock is not None:
                lock, state.lock = state.lock, None
                lock.release()
            raise

    def _checked(
        self, events: Iterable[Event | Mapping[str, Any]], session_id: str
    ) -> builtins.list[Event]:
        """The batch as events, each checked as JSON now, as the caller sees it."""
        batch: builtins.list[Event] = []
        for item in events:
            if isinstance(item, Event):
                batch.append(item)
                continue
            if find_non_json(item.get("data")) is not None:
                msg = (
                    f'event "{item.get("type")}" carries non-JSON-serializable data '
                    f"(seq {item.get('seq')})"
                )
                raise PersistenceError(msg, session_id=session_id)
            batch.append(decode_wire(self.registry, item))
        return batch

    def _append_core(self, sid: str, events: Sequence[Event], lines: bytes | None) -> None:
        state = self._states.get(sid)
        if state is None:
            self._load_core(sid)  # adopt: repair first, so the batch continues the repair
            state = self._states[sid]
        check_follows(sid, state.cursor, events)
        self._own(state)
        jsonl = lines if lines is not None else encode_events(events)
        changes = self._row_changes(sid, state, events) if self.keeper is not None else None
        try:
            with NamedWriteErrors(sid, self.backend, state.header, "flushing"):
                if changes:
                    assert self.capabilities.projecting is not None
                    self.capabilities.projecting.append_projected(
                        state.header, events, jsonl, state.materialized, changes)
                else:
                    self.backend.append_batch(state.header, events, jsonl,
                                              state.materialized)
        except Exception as exc:
            # A first write refused because another writer (another process) created
            # the same id since this store's create checked it: say so, whatever the
            # backend's own error was (a file that exists, a duplicate key).
            cause = exc.__cause__ if isinstance(exc, StoreWriteError) else exc
            # An I/O error is this write's own (a publication it could not withdraw
            # finishes at the next write); a refusal (a log that exists, a duplicate
            # key: the driver's integrity error) is another writer's doing.
            refused = isinstance(cause, FileExistsError) or not isinstance(cause, OSError)
            if not state.materialized and refused and self._stored_now(sid):
                # This session can never be written: it lets go of the id (its lock,
                # its buffer), so that closing the store does not try again.
                if state.lock is not None:
                    state.lock.release()
                    state.lock = None
                if state.owner is not None:
                    self._buffers.pop(state.owner, None)
                self._states.pop(sid, None)
                raise SessionExistsError(sid, stored=True) from exc
            raise
        # Only once the backend returned: a failed write leaves the cursor where it was,
        # so a retry writes the same seqs (the backend rolled them back).
        state.materialized = True
        state.cursor += len(events)
        if changes and state.projected is not None:
            Keeper.written(state.projected, changes, state.cursor)

    def _row_changes(self, sid: str, state: SessionState, events: Sequence[Event]
                     ) -> builtins.list[RowChanges]:
        """The projections' changes for ``events``, the batch a flush appends."""
        assert self.keeper is not None
        cursor = state.cursor
        memo: builtins.list[Sequence[Event]] = []

        def before() -> Sequence[Event]:
            if not memo:
                memo.append(self._events_before(sid, state, cursor))
            return memo[0]

        if state.projected is None:
            state.projected = (self.keeper.trusted(sid, before()) if state.materialized
                               else {})
        return self.keeper.changes(state.projected, cursor, before, events)

    def _events_before(self, sid: str, state: SessionState, cursor: int
                       ) -> Sequence[Event]:
        """The session's stored events (at least ``cursor`` of them): the live
        session's, the ones its load returned, else read again."""
        owner = state.owner
        if owner is not None and len(owner.events) >= cursor:
            return owner.events
        if state.loaded is not None and len(state.loaded) >= cursor:
            return state.loaded
        stored = self.backend.load_stored(sid, self.registry)
        return stored.events if stored is not None else []

    def _stored_now(self, sid: str) -> bool:
        """Whether the backend holds ``sid``. Never raises: a look that fails counts as
        "not stored" (a first write's own check still refuses a log that exists)."""
        try:
            return self.backend.tail_lines(sid, 0) is not None
        except Exception:
            return False

    def _load_stored(self, sid: str) -> StoredLog:
        stored = self.backend.load_stored(sid, self.registry)
        if stored is None:
            raise not_found(sid)
        self.check_version(stored.header)
        return stored

    def _load_core(self, sid: str) -> StoredLog:
        stored = self._load_stored(sid)
        closers = interrupted_turn_closers(stored.events)
        state = self._states.get(sid)
        if state is None:
            state = SessionState(stored.header, len(stored.events), True)
        unlocked = state.lock is None
        if (stored.torn is not None or closers) and unlocked:
            # A repair is decided on the log as it is under the writer lock: read
            # without it, the log may be another writer's mid-turn (a torn line being
            # written, a turn still open) and grow until that writer lets go, and
            # closers written after a stale read would take seqs it wrote (or a cut
            # would drop its lines). The lock taken, the log is read again.
            self._own(state)
            try:
                stored = self._load_stored(sid)
                closers = interrupted_turn_closers(stored.events)
                if stored.torn is not None or closers:
                    self._repair(state, stored, closers)
            except BaseException:
                if state.lock is not None:
                    lock, state.lock = state.lock, None
                    lock.release()
                raise
        elif stored.torn is not None or closers:
            self._repair(state, stored, closers)
        events = [*stored.events, *closers] if closers else stored.events
        # A load re-anchors the state and drops any previous owner, as the reference does.
        self._states[sid] = SessionState(
            stored.header, len(events), True, None, state.lock, loaded=events
        )
        jsonl = None
        if stored.jsonl is not None:
            jsonl = stored.jsonl + encode_events(closers) if closers else stored.jsonl
        return StoredLog(stored.header, events, None, jsonl)

    def check_version(self, header: SessionHeader) -> None:
        """Refuse a log of another format version than this build reads.

        :raises EncryptedSessionError: it is an encrypted session, and this store was
            opened without keys.
        :raises PersistenceError: it is of another version.
        """
        if header.version == SEALED_FORMAT_VERSION:
            from ...errors import EncryptedSessionError

            raise EncryptedSessionError(header.id)
        if header.version != SESSION_FORMAT_VERSION:
            msg = (
                f"unsupported session format version {header.version} for \"{header.id}\" "
                f"(only v{SESSION_FORMAT_VERSION} is supported)"
            )
            raise PersistenceError(msg, session_id=header.id)
