"""The persistence coordinator: write-behind durability for a store's live sessions.

Registered on a store's plugin manager, it buffers each appended event
(``session_event``) and writes the buffer durably on ``session_flush``, which harnesses
call at every ``turn/end``. It also offers the backend service directly (``create``,
``append``, ``load``, ``list``). It owns what every backend shares (spec
plugins-persistence §8.4):

- per-session serialization (one lock per session id);
- the four adoption cases of a newly created live session (new, adopt a stored prefix,
  collision, claim a state made by ``create``/``load``);
- crash repair on load: the torn tail is cut and an interrupted turn is durably closed;
- the exclusive writer lock (beyond the reference): a session is written by one writer,
  taken when this coordinator first writes or binds the session, held until
  :meth:`PersistencePlugin.close`.

The states, the serialization and the one load and append path every case goes through
are its base, :class:`~.write_path.WritePath`; this module is the service, the hooks and
the adoption of live sessions.

The backend hooks are synchronous (file and SQLite I/O are); ``DurableStore.aflush``
awaits a backend's native asyncio append where it has one
(:class:`~.capabilities.AsyncAppend`: PostgreSQL, Redis) and otherwise runs
the flush in a worker thread, so an asyncio loop is never blocked. The store's other
``a*`` methods (:mod:`.aio`) run this coordinator's synchronous service in the store's
worker thread; :meth:`PersistencePlugin.serialized` lets a reader in another thread keep
clear of a session's writes.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..._model.repair import interrupted_turn_closers
from ..._plugins.manager import hookimpl
from ..._schema.header import SessionHeader
from ...errors import PersistenceError, SessionExistsError, SessionLockedError
from ...events import Event
from ..base import Deleted, StoredLog, WriterLock, cannot_delete
from ..projections.keep import Keeper
from .idle import IdleWindows
from .write_path import (
    RELEASED_KEPT,
    NamedWriteErrors,
    SessionState,
    check_follows,
    covers,
    cwd_of,
    drop_stored,
    same_objects,
)

if TYPE_CHECKING:
    import asyncio

    from ..._model.session import Session

__all__ = ["PersistenceError", "PersistencePlugin"]


class PersistencePlugin(IdleWindows):
    """Make a store's sessions durable through ``backend``.

    :param backend: where logs are stored (JSONL files, SQLite, ...).
    :param registry: the event types logs decode into; the store's registry.
    """

    # --- the service --------------------------------------------------------------------

    def create(self, header: SessionHeader) -> None:
        """Register a new session; nothing is written until its first event.

        :raises PersistenceError: the id is known here, or already stored anywhere.
        """
        self._create(header, by_store=False)

    def _create(self, header: SessionHeader, *, by_store: bool) -> None:
        """:meth:`create`; ``by_store``: for a store's ``create``, which refuses an id
        stored anywhere with :class:`SessionExistsError` (the coordinator's own
        ``create`` keeps the reference's error)."""
        sid = header.id
        with self._serial(sid):
            if sid in self._states:
                msg = f'session "{sid}" already exists in this backend'
                raise PersistenceError(msg, session_id=sid)
            if self.backend.load_stored(sid, self.registry) is not None:
                if by_store:
                    raise SessionExistsError(sid, stored=True)
                msg = (
                    f'session "{sid}" already has a persisted log on disk; load/resume it '
                    f"instead of creating"
                )
                raise PersistenceError(msg, session_id=sid)
            self._states[sid] = SessionState(header, 0, False)

    def append(self, session_id: str, events: Iterable[Event | Mapping[str, Any]]) -> None:
        """Durably append a contiguous batch (events or their wire shape); return once
        durable. An id unknown here but stored is adopted (loaded and repaired) first.

        :raises PersistenceError: a seq does not continue the stored log.
        """
        batch = self._checked(events, session_id)  # checked now, as the caller sees it
        if not batch:
            return
        with self._serial(session_id):
            self._append_core(session_id, batch, None)

    def load(self, session_id: str) -> StoredLog:
        """The stored log, with its torn tail cut and an interrupted turn durably closed.

        :raises SessionNotStoredError: nothing is stored under this id.
        :raises PersistenceError: it is of another format version.
        """
        with self._serial(session_id):
            return self._load_core(session_id)

    def stored_count(self, session: Session) -> int | None:
        """How many of a live session's events are stored (its durable prefix), or
        ``None`` when this coordinator does not write it."""
        with self._serial(session.id):
            state = self._states.get(session.id)
            if state is None or state.owner is not session:
                return None
            return state.cursor

    def list(self) -> builtins.list[SessionHeader]:
        """Every materialized session's header (metadata only)."""
        return self.backend.list()

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove a stored session (:meth:`~.base.Backend.delete`), unless a live
        session of this coordinator writes it. A state kept without a live session (an
        ``append`` adopted it) is dropped first, its writer lock released, so that the
        backend can take the lock itself.

        :raises SessionLockedError: a live session here, or a writer elsewhere, holds it.
        :raises SessionNotStoredError: nothing is stored under this id.
        :raises PersistenceError: the backend cannot delete
            (:func:`~.base.cannot_delete`).
        """
        remove = self.capabilities.deletable
        if remove is None:  # a backend written before Backend.delete existed
            raise cannot_delete(self.backend, session_id)
        with self._serial(session_id):
            self._drop_state(session_id)
            return remove.delete(session_id, dry_run=dry_run)

    def hold_for_delete(self, header: SessionHeader) -> WriterLock | None:
        """The session's writer lock, taken (without waiting) for a :meth:`delete_held`
        that follows; ``None`` when the backend cannot delete under a held lock
        (:class:`~.capabilities.HeldDeletable`): :meth:`delete` takes it then.

        :raises SessionLockedError: a live session here, or a writer elsewhere, holds it.
        """
        if self.capabilities.held_deletable is None:
            return None
        with self._serial(header.id):
            self._drop_state(header.id)
            return self.backend.acquire(header)

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, under the lock :meth:`hold_for_delete` took (the caller
        releases it)."""
        held = self.capabilities.held_deletable
        if held is None:
            raise cannot_delete(self.backend, session_id)
        with self._serial(session_id):
            return held.delete_held(session_id, lock)

    def _drop_state(self, session_id: str) -> None:
        """Refuse a session a live session of this coordinator writes; drop a state kept
        without one (releasing its lock) so that the backend can take the lock itself."""
        state = self._states.get(session_id)
        if state is not None and state.owner is not None:
            raise SessionLockedError(
                session_id, "a live session of this store: release it first")
        if state is not None:
            if state.lock is not None:
                state.lock.release()
            del self._states[session_id]

    # --- the write path (plugin hooks) --------------------------------------------------

    @hookimpl
    def session_created(self, session: Session) -> None:
        self.init(session)

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        # The append path: keep it to one dict lookup. Events are immutable: no copy.
        try:
            self._buffers[session].append(event)
        except KeyError:
            self._buffers[session] = [event]

    @hookimpl
    def session_flush(self, session: Session) -> None:
        self.flush(session)

    def init(self, session: Session) -> None:
        """Bind a live session to its stored log (the four adoption cases). Idempotent.

        :raises PersistenceError: its id collides with a stored or bound session.
        """
        if id(session) in self._inited or session.read_only:
            return  # a read-only session is bound to nothing: it never writes
        seed = list(session.events)
        self._buffers.setdefault(session, [])
        try:
            self._on_created(session, seed)
        except BaseException:
            # A session that failed to bind (its lock taken by another writer between
            # the load and the claim, a seed that failed to write) leaves nothing bound
            # to it: else its state would refuse every later open and delete of the id
            # in this store as "a live session", though the store never registered it.
            self.discard(session)
            raise
        self._inited.add(id(session))

    def flush(self, session: Session) -> None:
        """Durably write what ``session`` appended since the last flush."""
        if id(session) not in self._inited:
            if session.read_only:
                return
            self.init(session)
        sid = session.id
        with self._serial(sid):
            buffer = self._buffers.get(session)
            if not buffer:
                return
            batch = list(buffer)
            state = self._states.get(sid)
            cursor = state.cursor if state is not None else 0
            # Usually nothing is stale (the buffer starts at the cursor); a seed written
            # at init, or a failed flush's retry, can leave events already stored.
            fresh = batch if batch[0].seq >= cursor else [e for e in batch if e.seq >= cursor]
            if fresh:
                # The lines the session encoded as each event was appended: a flush writes
                # those bytes as they are, and never encodes an event a second time.
                lines = session.jsonl(fresh[0].seq, fresh[-1].seq + 1)
                self._append_core(sid, fresh, lines)
            del buffer[: len(batch)]  # events appended meanwhile stay for the next flush

    async def aflush(self, session: Session) -> None:
        """:meth:`flush` for asyncio hosts. With a backend that appends natively in
        asyncio (``aappend_batch``: PostgreSQL, Redis) the write is awaited on the loop; else,
        and for a session's first write (adoption and the writer lock are synchronous),
        the flush runs in a worker thread. Flushes of one session never overlap."""
        import asyncio

        if id(session) in self._inited and not self._buffers.get(session):
            return  # nothing to write: no hop to a thread for it
        aappend = self.capabilities.async_append
        sid = session.id
        async with self._alock(sid):
            state = self._states.get(sid)
            if (aappend is None or id(session) not in self._inited or state is None
                    or state.owner is not session or state.lock is None):
                await asyncio.to_thread(self.flush, session)
                return
            with self._serial(sid):  # what to write, decided as flush decides it
                buffer = self._buffers.get(session)
                if not buffer:
                    return
                drop_stored(buffer, state.cursor)  # e.g. a seed written at init
                if not buffer:
                    return
                batch = list(buffer)
                check_follows(sid, state.cursor, batch)
                # Rows to write with the batch: the synchronous path writes them in its
                # transaction (the native asyncio append writes events only).
                rows = (self.keeper is not None
                        and bool(self._row_changes(sid, state, batch)))
                lines = session.jsonl(batch[0].seq, batch[-1].seq + 1)
                header, materialized = state.header, state.materialized
            if rows:
                await asyncio.to_thread(self.flush, session)
                return
            with NamedWriteErrors(sid, self.backend, header, "flushing"):
                await aappend.aappend_batch(header, batch, lines, materialized)
            with self._serial(sid):
                # A sync flush from another thread may have written the batch meanwhile
                # (the backend's checked insert made that harmless): never step back.
                state.materialized = True
                state.cursor = max(state.cursor, batch[-1].seq + 1)
                drop_stored(buffer, state.cursor)

    def _alock(self, sid: str) -> asyncio.Lock:
        import asyncio

        loop = asyncio.get_running_loop()
        with self._guard:
            locks = self._alocks.get(loop)
            if locks is None:
                locks = self._alocks[loop] = {}
            lock = locks.get(sid)
            if lock is None:
                lock = locks[sid] = asyncio.Lock()
            return lock

    def release(self, session: Session, idle: float = 0.0) -> None:
        """Flush ``session``, then stop writing it: drop its buffer and state and release
        its writer lock, so another writer (another process) may take it over. With
        ``idle`` seconds (:mod:`.idle`), the state and the lock are kept that long
        (:meth:`linger`), for :meth:`resume` to take them back."""
        self.flush(session)
        if idle > 0 and self.linger(session, idle):
            return
        sid = session.id
        with self._serial(sid):
            state = self._states.get(sid)
            if state is not None and state.owner is session:
                if state.lock is not None:
                    state.lock.release()
                del self._states[sid]
                if state.projected is not None:  # a resume without news reuses it
                    saved = self._projected_at_release
                    saved.pop(sid, None)
                    saved[sid] = (session, state.cursor, state.projected)
                    if len(saved) > RELEASED_KEPT:
                        del saved[next(iter(saved))]
            self._buffers.pop(session, None)
            self._inited.discard(id(session))

    def resume(self, session: Session) -> tuple[builtins.list[Event], builtins.list[bytes]] | None:
        """Take back a session this coordinator released (:meth:`release`), without
        loading its log: its writer lock is taken again, and the stored log read from
        its last event on (:meth:`~.base.Backend.lines_since`). Returns the events other
        writers stored since, decoded, and their lines: ``([], [])`` when there are none
        (``session`` is then bound again, as it was before its release); otherwise the
        state is left for a new session seeded with ``session``'s events and these
        (:meth:`init` claims it, with the lock). ``None`` when the log cannot be
        continued so (cut back, rewritten, a torn tail or an interrupted turn to
        repair, a session live here): nothing is held, and the caller loads it whole.
        Within ``session``'s idle window (:meth:`linger`) it is bound again at once: its
        lock was held throughout, nothing is read.

        :raises SessionLockedError: another writer holds the session.
        """
        sid = session.id
        if session.read_only or not session.seq or id(session) in self._inited:
            return None
        with self._serial(sid):
            kept = self.idle.take(sid, back=True)
            state = self._states.get(sid)
            if state is not None and state.owner is not None:
                return None  # live here
            if (kept is not None and kept.session is session and kept.state is state
                    and state is not None and state.lock is not None
                    and state.cursor == session.seq):
                # Its idle window: the lock held since its release, nothing written.
                state.owner = session
                self._buffers[session] = []
                self._inited.add(id(session))
                return [], []
            from ..._schema.decode import decode_lines
            from ..capabilities import lines_since_of

            # A state kept without a live session (another session's idle window, an
            # append's adoption) is the log as stored: read on from ``session``'s end.
            if state is None:
                state = SessionState(session.header, session.seq, True)
            self._own(state)
            events = session.events
            try:
                with NamedWriteErrors(sid, self.backend, state.header, "reading"):
                    lines = lines_since_of(self.capabilities, state.header, events[-1])
                news = decode_lines(self.registry, lines) if lines else []
                if news:
                    check_follows(sid, session.seq, news)
                    log = [*events, *news]
                    if interrupted_turn_closers(log[-len(news) - 1:]):
                        lines = None  # another writer's turn a crash left open: repair
            except BaseException:
                lines = None
                raise
            finally:
                if lines is None:
                    if self._states.get(sid) is state:
                        del self._states[sid]
                    lock, state.lock = state.lock, None
                    if lock is not None:
                        lock.release()
            if lines is None:
                return None
            if not news:
                state.owner, state.cursor, state.loaded = session, session.seq, None
                self._buffers[session] = []
                self._inited.add(id(session))
                # No writer wrote since: how far its rows go is as it was at release
                # (no read of the marks before the next batch).
                saved = self._projected_at_release.pop(sid, None)
                if saved is not None and saved[0] is session and saved[1] == state.cursor:
                    state.projected = saved[2]
            else:
                state.cursor, state.loaded = len(log), log
            self._states[sid] = state
            return news, lines

    def discard(self, session: Session) -> None:
        """Stop writing ``session`` without writing what it buffered: its unflushed
        events are dropped (never written, by a later flush or by :meth:`close`), its
        state forgotten and its writer lock released. What a failed operation does, so
        that nothing of it is stored: the session object then holds events the log does
        not, and must not be used again (open the session anew)."""
        sid = session.id
        with self._serial(sid):
            self._buffers.pop(session, None)
            self._inited.discard(id(session))
            state = self._states.get(sid)
            if state is not None and state.owner is session:
                del self._states[sid]
                if state.lock is not None:
                    state.lock.release()

    def close(self) -> None:
        """Flush every buffered session, release the writer locks, close the backend.

        :raises ExceptionGroup: ``<backend name> dispose failed``, with every failure.
        """
        if self._closed:
            return
        errors = self.close_sessions()
        try:
            self.backend.close()
        except Exception as exc:
            errors.append(exc)
        self.raise_dispose(errors)

    def close_sessions(self) -> builtins.list[Exception]:
        """The first half of :meth:`close`: flush every buffered session and release the
        writer locks; the coordinator is closed. Returns the failures, for
        :meth:`raise_dispose` (the backend is left open)."""
        errors: builtins.list[Exception] = []
        self.idle.close()  # the timer lets go of no more windows: their locks go below
        for session, buffer in list(self._buffers.items()):
            if buffer:
                try:
                    self.flush(session)
                except Exception as exc:  # aggregated below
                    errors.append(exc)
        for state in self._states.values():
            if state.lock is not None:
                state.lock.release()
                state.lock = None
        self._closed = True
        return errors

    def raise_dispose(self, errors: builtins.list[Exception]) -> None:
        """Raise the failures of a close, if any.

        :raises ExceptionGroup: ``<backend name> dispose failed``, with every failure.
        """
        if errors:
            msg = f"{self.backend.name} dispose failed"
            raise ExceptionGroup(msg, errors)

    # --- internals ----------------------------------------------------------------------

    def _on_created(self, session: Session, seed: builtins.list[Event]) -> None:
        sid = session.header.id
        with self._serial(sid):
            state = self._states.get(sid)
            if state is not None:
                if state.owner is session:
                    return
                if state.owner is None:
                    self._claim(session, state, seed)
                    return
                if state.materialized or self._buffers.get(state.owner):
                    msg = (
                        f'session "{sid}" is already bound to a different live session in '
                        f"this backend (id collision)"
                    )
                    raise PersistenceError(msg, session_id=sid)
                # An abandoned, never-written id: reclaim it.
                if state.lock is not None:
                    state.lock.release()
                del self._states[sid]
            stored = self.backend.load_live(sid, cwd_of(session.header), self.registry)
            if stored is not None:
                self._adopt_live_prefix(session, stored, seed)
                return
        # Case 4: nothing stored at this cwd (``create`` refuses an id stored elsewhere).
        header = session.header
        self._create(header, by_store=True)
        with self._serial(sid):
            state = self._states[sid]
            state.owner = session
            self._own(state)
            # ``create`` looked before the lock was held: another writer (another
            # process) may have created, written and released the id in between. Looked
            # at again under the lock, which every writer of ours takes, a new id is
            # this session's alone: it is refused now, not at its first flush (so
            # ``open_or_create`` opens the other writer's session instead).
            if self._stored_now(sid):
                if state.lock is not None:
                    state.lock.release()
                    state.lock = None
                self._states.pop(sid, None)
                raise SessionExistsError(sid, stored=True)
            if seed:
                self._append_core(sid, seed, session.jsonl(0, len(seed)))

    def _claim(self, session: Session, state: SessionState, seed: builtins.list[Event]) -> None:
        sid = state.header.id
        persisted, live = cwd_of(state.header), cwd_of(session.header)
        if persisted != live:
            msg = (
                f'session "{sid}" is already persisted at a different cwd (persisted: '
                f"{persisted or 'undefined'}, live: {live or 'undefined'}) (id collision)"
            )
            raise PersistenceError(msg, session_id=sid)
        if state.cursor > 0 and not same_objects(seed, state.loaded, state.cursor):
            stored = self.backend.load_stored(sid, self.registry)
            prefix = stored.events[: state.cursor] if stored is not None else []
            if not covers(seed, prefix):
                msg = (
                    f'session "{sid}" is already persisted with {state.cursor} event(s) that '
                    f"do not match this live session (id collision)"
                )
                raise PersistenceError(msg, session_id=sid)
        last = state.loaded[-1] if state.loaded else None
        state.owner = session
        state.loaded = None
        taken = state.lock is None
        self._own(state)
        if taken and last is not None:
            self._check_unchanged(state, last)
        if self.keeper is not None and state.materialized:
            self._gain_rows(sid, state, seed)
        if len(seed) > state.cursor:
            rest = session.jsonl(state.cursor, len(seed))
            self._append_core(sid, seed[state.cursor :], rest)

    def _gain_rows(self, sid: str, state: SessionState, events: builtins.list[Event]
                   ) -> None:
        """Bring the session's projection rows up to its stored log, now that its writer
        holds it (``events``: the log, from its start): a store written before a
        projection existed gains its rows at the first open of each session. A failure
        to write them leaves them as they were: the next flush tries again."""
        assert self.keeper is not None
        assert self.capabilities.projecting is not None
        stored = events[: state.cursor]
        if state.projected is None:
            state.projected = self.keeper.trusted(sid, stored)
        changes = self.keeper.stale(state.projected, stored)
        if not changes:
            return
        try:
            with NamedWriteErrors(sid, self.backend, state.header, "indexing"):
                self.capabilities.projecting.write_rows(state.header, changes)
        except Exception:
            state.projected = None  # read again at the next flush
            return
        Keeper.written(state.projected, changes, state.cursor)

    def _check_unchanged(self, state: SessionState, last: Event) -> None:
        """After taking the writer lock on a log read without it (``open``): refuse if
        the log was removed (or removed and written again) in between, rather than
        write after a prefix that is gone. One read of the log's last line."""
        from ..._logformat.logfile import line_wire

        sid = state.header.id
        tail = self.backend.tail_lines(sid, 1)
        wire = line_wire(tail.lines[-1]) if tail is not None and tail.lines else None
        if (wire is not None and wire.get("seq") == last.seq
                and wire.get("type") == last.type and wire.get("time") == last.time):
            return
        state.owner = None
        if state.lock is not None:
            lock, state.lock = state.lock, None
            lock.release()
        del self._states[sid]
        msg = (f'session "{sid}" was removed or rewritten while it was being opened '
               f"(a delete or prune in another process?): open it again")
        raise PersistenceError(msg, session_id=sid)

    def _adopt_live_prefix(
        self, session: Session, stored: StoredLog, seed: builtins.list[Event]
    ) -> None:
        sid = stored.header.id
        self.check_version(stored.header)
        if not covers(seed, stored.events):
            # A store's create of a stored id (without that log as its seed): the id is
            # taken, and open (or open_or_create) is what resumes it.
            raise SessionExistsError(sid, stored=True)
        state = SessionState(stored.header, len(stored.events), True, session)
        if stored.torn is not None:
            # Truncate only: the live session is still the authority for its open turn.
            self._repair(state, stored, [])
        else:
            self._own(state)
        self._states[sid] = state
        if len(seed) > len(stored.events):
            start = len(stored.events)
            self._append_core(sid, seed[start:], session.jsonl(start, len(seed)))
