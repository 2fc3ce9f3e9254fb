"""``DshSession``: the OpenAI Agents SDK's ``Session`` protocol on a dsh-session store.

By default each operation takes the session, writes, flushes and releases it with an
idle window (``store.release(session, idle=...)``: the writer lock is kept for
``idle_window`` seconds): the session object it released is kept, and the next
operation takes it back with ``store.open(id, resume=...)``, at once within the window
(the lock was kept), else retaking the writer lock and reading only what other writers
stored since (nothing, usually), so an operation costs what it appends, not the length
of the log. With ``keep_open`` the first operation opens it and keeps it until
``close()``. Either way, while a run's turn is open (from its first saved batch to the
one that ends it, or until it is seen to have stopped: :mod:`._watch`) the session is
held: its writer lock is kept between the run's calls, and the writes of every other
instance wait for the run's end, up to their ``lock_timeout``. The index of the item
view folds in only the events appended since the last operation
(:class:`._view._LogIndex`), and an operation that fails leaves the stored log as it
found it, nothing of it kept in memory.
The mapping of items onto events is :mod:`._mapping`'s, the item view :mod:`._view`'s,
the turns operations take on a session :mod:`._locks`', a run's hold on it
:mod:`._hold`'s.
"""

from __future__ import annotations

__all__ = ["DshSession", "fold_items", "record_items"]

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.run_context import RunContextWrapper

from dsh_session_core import (
    DurableStore,
    PersistenceError,
    Session,
    SessionLockedError,
    open_store,
)
from dsh_session_core.errors import SessionNotStoredError, UnknownProjectionError

from ._hold import RunHold
from ._locks import _off_loop, _settled, _taking_turns, _taking_turns_now, run_holds
from ._mapping import Runs, _record, _Run, end_open_turn, record_clear, record_items, record_pop
from ._projection import ITEMS
from ._view import VIEW_TYPES, _items, _LogIndex, fold_items, stored_view, tail_view

_T = TypeVar("_T")

#: How long an operation waits for another writer (another instance on another store
#: object, or another process) to release the session before it gives up.
DEFAULT_LOCK_TIMEOUT = 30.0
#: How long the default mode keeps the writer lock after an operation, for the next one
#: to skip taking it (and looking at the log's end): what another process's writer waits
#: at most, beyond its polling step, once this one goes idle (docs/openai-agents.md).
DEFAULT_IDLE_WINDOW = 0.25
#: A read of at most this many items of a session held open (``keep_open``) runs on the
#: event loop: copying them out costs a few microseconds, less than a hop to a thread.
_INLINE_ITEMS = 16


class _Busy(Exception):
    """Another writer holds the session's writer lock, and the deadline is not past:
    :meth:`DshSession._run` waits for it without its turn on the session, so that the
    holder, when it is an instance of this process, can go on (and let go)."""


class DshSession(SessionABC):
    """An OpenAI Agents SDK session stored as a dsh-session log.

    :param session_id: the dsh session id (one log per SDK session).
    :param store: a store URL (``"sqlite:///agents.db"``, a folder, ``postgresql://...``;
        opened here and closed by :meth:`close`), a :class:`DurableStore` of the caller's
        (left open), or ``None`` for the default store.
    :param session_settings: the SDK's settings (``limit``), as ``SessionSettings`` or
        its dict.
    :param lock_timeout: seconds a write waits for another writer of the session (a run
        of another instance, in this process or another, whose turn is open; another
        store object or process) before raising ``SessionLockedError``.
    :param keep_open: keep the session open between operations, as this store's live
        writer, until :meth:`close`: each operation then costs what it reads or appends,
        not the length of the log, and every other store object and process is refused
        writing the session meanwhile (``SessionLockedError`` after their
        ``lock_timeout``).
    :param idle_window: the default mode: seconds the writer lock is kept after a write
        (the idle window), so that the next write within it neither takes the lock nor
        looks at the log; another writer waits at most that long (and its polling step)
        once this instance is idle. ``0`` releases it at the end of each write.

    By default each write takes the session's writer lock, brings the session up to
    date with what other writers stored since its last call (read from its last event
    on, not the whole log), writes, flushes and releases it after an idle window (a
    write within it finds the lock still held, and the log as it left it), so
    instances on one store and id, in one process or many, share its history and take
    turns writing; but while a run's turn is open (from the run's first saved items to
    the batch that ends its turn, or until the run is seen to stop) the session stays
    held by this instance between the run's calls, and the others' writes wait for the
    run's end;
    :meth:`get_items` reads the item view from what is stored, without opening the
    session (it waits for no writer). With ``keep_open``, the first operation opens
    the session (or creates it) and keeps it; instances on the same store object
    share it.

    A write that fails part way (an item the log refuses, a failed flush) leaves the
    stored session as it was, and nothing of it buffered: the next call starts from
    what is stored, as ``SQLiteSession``'s rolled-back transaction does.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: DurableStore | str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        keep_open: bool = False,
        idle_window: float = DEFAULT_IDLE_WINDOW,
    ) -> None:
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._owns_store = not isinstance(store, DurableStore)
        self.store: DurableStore = store if isinstance(store, DurableStore) else open_store(store)
        self.lock_timeout = lock_timeout
        self.keep_open = keep_open
        self.idle_window = idle_window
        #: keep_open: the session this instance opened and holds; either mode: the
        #: index of its log the last operation left.
        self._held: Session | None = None
        self._index: _LogIndex | None = None
        self._turns_key: tuple[object, str] | None = None
        #: The default mode: the session the last operation released, clean (all of it
        #: stored), taken back by the next one without loading the log (at once, within
        #: its idle window).
        self._cached: Session | None = None
        #: The run this instance records (:mod:`._mapping`): its turn may stay open in
        #: the log between operations, and the session stays held meanwhile: kept
        #: open (the default mode's, ``_holding``), marked held in this process and
        #: the run watched for its stop (``_run_hold``).
        self._runs = Runs()
        self._holding: Session | None = None
        # Waiting for an operation of this process to end a stopped run's turn,
        # whatever this instance's lock_timeout (0 refuses other writers at once; it
        # must not skip the end).
        self._run_hold = RunHold(self._runs, self._key, self._end_stopped, session_id,
                             max(lock_timeout, DEFAULT_LOCK_TIMEOUT))
        self._store_closed = False

    # --- the protocol -----------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The items, oldest first; the last ``limit`` (or ``session_settings.limit``)
        when given: ``0`` gives none, a negative limit all (as ``SQLiteSession``)."""
        session_limit = resolve_session_limit(limit, self.session_settings)

        def last(items: list[_T]) -> list[_T]:
            if session_limit is not None and session_limit >= 0:
                return items[-session_limit:] if session_limit else []
            return items

        if wrapper is not None and self._runs.run is not None and not self._runs.run.of(
                wrapper):
            await self._run(lambda index: end_open_turn(index, self._runs), False)
        if not self.keep_open and session_limit is not None and session_limit > 0:
            tail = await self._stored_tail(session_limit)
            if tail is not None:
                return cast(list[TResponseInputItem], tail)
        if not self.keep_open:
            stored = await self._stored_items()
            if stored is not None:
                return cast(list[TResponseInputItem], last(stored))

        def few(index: _LogIndex) -> bool:
            count = len(index.items)
            if session_limit is not None and session_limit >= 0:
                count = min(count, session_limit)
            return count <= _INLINE_ITEMS

        return cast(list[TResponseInputItem], await self._run(
            lambda index: _items(last(index.items)), False, write=False, inline=few))

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append the items (durable when this returns). A batch holding an item the log
        cannot keep (not JSON) is refused whole: nothing of it is appended."""
        if not items:
            return
        batch = list(items)
        await self._run(lambda index: _record(index, batch, wrapper, self._runs), True)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Take the most recent item off the view and return it (``None`` when empty):
        an ``agents/pop`` event, durable when this returns."""
        return cast("TResponseInputItem | None", await self._run(
            lambda index: record_pop(index, self._runs, wrapper), False))

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Empty the view: an ``agents/clear`` event, durable when this returns (the log
        keeps every earlier event)."""
        await self._run(lambda index: record_clear(index, self._runs, wrapper), False)

    # --- the store -----------------------------------------------------------------------

    def close(self) -> None:
        """Release the session this instance keeps open (``keep_open``), then close the
        store if this instance opened it from a URL. Safe to call again.

        :raises RuntimeError: on the thread of an event loop where an operation of this
            session is still running (await :meth:`aclose` there).
        """
        try:
            if self._runs.run is not None and (not self.keep_open or self._held is None):
                with _taking_turns_now(self._key(), self.lock_timeout):
                    self._run_once(lambda index: end_open_turn(index, self._runs), False,
                                   time.monotonic() + self.lock_timeout)
            if self._held is not None:
                with _taking_turns_now(self._key(), self.lock_timeout):
                    held, index = self._held, self._index
                    self._held, self._index = None, None
                    if held is not None and self._live() is held:
                        self._end_held(held, index)
                        self.store.release(held)
            cached = self._cached
            if cached is not None and not self.store.persistence.closed:
                self.store.end_idle(cached)  # its idle window ends with the instance
        finally:
            self._run_hold.let_go()
            if self._owns_store and not self._store_closed:
                self._store_closed = True
                self.store.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaited (it waits for a running operation of this session)."""
        try:
            if self._runs.run is not None and (not self.keep_open or self._held is None):
                await self._run(lambda index: end_open_turn(index, self._runs), False)
            if self._held is not None:
                async with _taking_turns(self._key()):
                    held, index = self._held, self._index
                    self._held, self._index = None, None
                    if held is not None and self._live() is held:
                        self._end_held(held, index)
                        await _settled(self.store.arelease(held))
            cached = self._cached
            if cached is not None and not self.store.persistence.closed:
                await self.store.aend_idle(cached)  # its idle window ends with it
        finally:
            self._run_hold.let_go()
            if self._owns_store and not self._store_closed:
                self._store_closed = True
                await self.store.aclose()

    def _end_held(self, held: Session, index: _LogIndex | None) -> None:
        """``keep_open``: end the turn of a run that stopped saving before its end."""
        if self._runs.run is not None:
            if index is None or index.session is not held:
                index = _LogIndex(held)
            end_open_turn(index.update(), self._runs)

    def _live(self) -> Session | None:
        """The session live in the store (``None`` once the store is closed)."""
        if self.store.persistence.closed:
            return None
        return self.store.get(self.session_id)

    def _key(self) -> tuple[object, str]:
        key = self._turns_key
        if key is None:
            identity = self.store.backend.store_identity()
            key = self._turns_key = (
                identity if identity is not None else id(self.store), self.session_id)
        return key

    def _end_stopped(self, run: _Run, cancelled: bool) -> None:
        """End the turn of ``run``, seen to stop (:class:`._hold.RunHold`), if it is
        still open; the caller has the session's turn."""
        if (self._runs.run is not run or self._store_closed
                or self.store.persistence.closed):
            return
        self._run_once(lambda index: end_open_turn(index, self._runs, cancelled=cancelled),
                       False, time.monotonic() + self.lock_timeout)

    async def _stored_items(self) -> list[Any] | None:
        """The default mode's read: the item view of what is stored, from the lines of
        the view's events alone (:func:`stored_view`), without opening the session: no
        writer lock is taken, so a reader never waits for a writer; it sees what the
        writers have made durable. ``None`` when the session must be loaded instead:
        live in this store (held by a ``keep_open`` instance), or a line
        :func:`stored_view` cannot read."""
        async with _taking_turns(self._key()):
            if self.store.get(self.session_id) is not None:
                return None
            # Read and decoded in one hop off the loop, in the default pool (whose
            # threads outlive a store: a fresh store starts no thread of its own).
            return await asyncio.to_thread(self._read_view)

    def _read_view(self, limit: int | None = None) -> list[Any] | None:
        """The stored item view (its last ``limit`` items): read from the rows of the
        ``agents/items`` projection, which the store keeps beside the log (or folds
        from it where it keeps none); from the view's lines where the store does not
        know the projection (a plugin manager without this plugin)."""
        try:
            view = self.store.projection(self.session_id, ITEMS.name)
        except UnknownProjectionError:
            if limit is not None:
                return None
            try:
                lines = self.store.read_lines(self.session_id, types=VIEW_TYPES)
            except PersistenceError:
                return []  # nothing stored: an empty view, as the load gives
            return stored_view(lines)
        except PersistenceError:
            return []  # nothing stored: an empty view, as the load gives
        if limit is None:
            return [row.item for _, row in view.rows()]
        items = [row.item for _, row in view.rows(newest_first=True, limit=limit)]
        items.reverse()
        return items

    async def _stored_tail(self, limit: int) -> list[Any] | None:
        """The default mode's read of the last ``limit`` items, proportional to
        ``limit``, not to the log: the newest rows of the ``agents/items`` projection
        where the store keeps its rows; elsewhere from the last events of what is
        stored (:meth:`DurableStore.atail`, read from the end of the log), a window of
        ``4 * limit + 16`` events grown fourfold until it holds them
        (:func:`._view.tail_view`). ``None`` when the session must be read otherwise
        (live here)."""
        async with _taking_turns(self._key()):
            if self.store.get(self.session_id) is not None:
                return None
            if self.store.capabilities.projecting is not None:
                found = await asyncio.to_thread(self._read_view, limit)
                if found is not None:
                    return found
            window = 4 * limit + 16
            while True:
                try:
                    events = await self.store.atail(self.session_id, window)
                except PersistenceError:
                    return []  # nothing stored: an empty view, as the load gives
                whole = len(events) < window
                items = tail_view(events, limit, whole)
                if items is not None or whole:
                    return items
                window *= 4

    async def _acquire(self, create: bool, deadline: float, hold: bool = False
                       ) -> tuple[Session | None, bool]:
        """The live session and whether this operation opened it (and must release it);
        ``(None, False)`` when nothing is stored and ``create`` is false. With ``hold``
        (``keep_open``), what it opens is this instance's to hold, even when the
        operation is cancelled while the store opens it. Another writer holding it
        raises :class:`_Busy` (waited for by :meth:`_run`), or, past ``deadline``
        (``time.monotonic()``), ``SessionLockedError``."""
        live = self.store.get(self.session_id)
        if live is not None:
            return live, False
        while True:
            try:
                try:
                    return await self._opening(self.store.aopen(self.session_id), hold), True
                except SessionLockedError:
                    raise
                except PersistenceError as exc:
                    if create:
                        # The store's get-or-create settles a race with another
                        # process creating the same id (one creates, the other opens).
                        return await self._opening(
                            self.store.aopen_or_create(self.session_id), hold), True
                    if not _missing(exc, self.session_id):
                        raise
                    if self.session_id not in {h.id for h in await self.store.astored()}:
                        return None, False
                    if time.monotonic() >= deadline:
                        raise
                    continue  # created by another writer since our look: open it
            except SessionLockedError as exc:
                if time.monotonic() >= deadline:
                    raise run_holds(self.session_id, self.lock_timeout, exc.holder) from exc
                raise _Busy from exc

    async def _opening(self, opening: Awaitable[Session], hold: bool) -> Session:
        """Await the store opening (or creating) the session; with ``hold``, to its end
        even when cancelled, the session then held (released by :meth:`close`)."""
        if not hold:
            return await opening
        return await _settled(opening, self._hold)

    def _hold(self, session: Session) -> None:
        self._held = session

    async def _run(self, operation: Callable[[_LogIndex], _T], create: bool,
                   *, write: bool = True,
                   inline: Callable[[_LogIndex], bool] | None = None) -> _T:
        """Run ``operation`` on the index of the live session, then flush (and release
        what it opened, unless ``keep_open`` or its run's turn is still open). With
        nothing stored and ``create`` false, run it on an empty session (``keep_open``
        creates it: the first operation takes the session). An operation that fails
        leaves the stored log as it found it and nothing of it in memory
        (:meth:`_forget`). A ``write`` waits, up to ``lock_timeout``, while the run of
        another instance of this process holds the session; any operation waits as
        long for another writer's lock, without its turn on the session meanwhile
        (that writer may be an instance of this process, which needs it to let go).
        ``inline``: ``operation`` only reads, and, when this is true of the index of a
        session held open (``keep_open``), costs a few microseconds: it runs on the
        event loop, with no hop to a thread."""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                async with _taking_turns(self._key(), self._run_hold,
                                         deadline if write else None, self._refusal):
                    try:
                        if self.keep_open:
                            return await self._run_held(operation, deadline, inline)
                        # One hop off the loop: open, run, flush and release in one
                        # worker thread (run to its end when cancelled: the turn lasts
                        # as long).
                        return await _settled(_off_loop(
                            self._run_once, operation, create, deadline, True))
                    finally:
                        self._run_hold.settle(on_loop=True)
            except _Busy:
                pass
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _refusal(self) -> BaseException:
        return run_holds(self.session_id, self.lock_timeout,
                         "a run of the OpenAI Agents SDK through another DshSession of "
                         "this process, its turn open")

    def _run_once(self, operation: Callable[[_LogIndex], _T], create: bool,
                  deadline: float, busy: bool = False) -> _T:
        """The default mode's operation, in a worker thread: the session taken back
        (:meth:`_acquire_now`), ``operation`` run on its index, then flushed and released
        (:meth:`_let_go`: held instead while this instance's run has its turn open); the
        session object and its index are kept for the next operation. ``busy``: raise
        :class:`_Busy` rather than wait here for another writer's lock."""
        session, opened = self._acquire_now(create, deadline, busy)
        if session is None:
            return operation(_LogIndex(Session(self.session_id)))
        ours = opened or session is self._holding
        index = self._index
        if index is None or index.session is not session:
            index = _LogIndex(session)
        length = len(session.events)
        try:
            result = operation(index.update())
        except BaseException:
            if len(session.events) != length:  # part of it appended: drop it all
                self._forget(session)
                raise
            # Refused before it appended anything: the session is as stored.
            if ours:
                self._let_go(session, index)
            raise
        try:
            if ours:
                self._let_go(session, index)
            else:  # live here: held by a keep_open instance on this store object
                self.store.flush(session)
        except BaseException:
            self._forget(session)
            raise
        return result

    def _let_go(self, session: Session, index: _LogIndex) -> None:
        """After an operation on the session this instance opened (or holds for its
        run): release it, kept to be taken back by the next operation; or, while its
        run's turn is open, flush it and go on holding it (released between the run's
        calls, another writer would find a turn open and close it as a crash's)."""
        if self._runs.open_in(index):
            self.store.flush(session)
            self._holding, self._index = session, index
            return
        self._holding = None
        self.store.release(session, idle=self.idle_window)
        self._cached, self._index = session, index

    def _acquire_now(self, create: bool, deadline: float, busy: bool = False
                     ) -> tuple[Session | None, bool]:
        """The live session and whether this operation opened it (and must release it),
        as :meth:`_acquire`, synchronously (another writer's lock waited for here, unless
        ``busy``). The session the last operation released is taken back
        (``store.open(id, resume=...)``): its writer lock taken again and only what
        other writers stored since read, not the whole log."""
        live = self.store.get(self.session_id)
        if live is not None:
            return live, False
        cached, self._cached = self._cached, None
        delay = 0.005
        while True:
            try:
                try:
                    return self.store.open(self.session_id, resume=cached), True
                except SessionLockedError:
                    raise
                except PersistenceError as exc:
                    if create:
                        # As in _acquire: the store's get-or-create settles a race with
                        # another process creating the same id.
                        return self.store.open_or_create(self.session_id), True
                    if not _missing(exc, self.session_id):
                        raise
                    if not self._is_stored():
                        return None, False
                    if time.monotonic() >= deadline:
                        raise
                    continue  # created by another writer since our look: open it
            except SessionLockedError as exc:
                late = time.monotonic() >= deadline
                if late or busy:
                    self._cached = cached  # still what is stored, for the next call
                if late:
                    raise run_holds(self.session_id, self.lock_timeout, exc.holder) from exc
                if busy:
                    raise _Busy from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def _is_stored(self) -> bool:
        return self.store.backend.tail_lines(self.session_id, 0) is not None

    def _forget(self, session: Session) -> None:
        """After an operation failed: drop ``session`` without writing what it buffered
        (``store.discard``: its writer lock released, nothing of the operation stored,
        by this call or a later one), and the index and session kept, which hold it: the
        next operation loads the log as stored."""
        self._cached = self._index = None
        if self._held is session:
            self._held = None
        if self._holding is session:
            self._holding = None
        # Its writer lock goes: a turn of our run left open in the log is closed by the
        # next load (crash repair, ``interrupted``); the run itself raises with this.
        self._runs.run = None
        if self._live() is session:
            self.store.discard(session)

    async def _run_held(self, operation: Callable[[_LogIndex], _T], deadline: float,
                        inline: Callable[[_LogIndex], bool] | None = None) -> _T:
        """``keep_open``: the live session (opened, or created, and held at the first
        operation; shared with the other instances of this store object), its index
        kept from one operation to the next. The operation and the flush run in one
        worker thread: one hop off the loop per operation, where ``aflush`` takes two;
        none for a read that ``inline`` says is small (it appends nothing, so there is
        nothing to flush, and the index is in memory)."""
        session, _ = await self._acquire(True, deadline, hold=True)
        assert session is not None
        index = self._index
        if index is None or index.session is not session:
            index = self._index = _LogIndex(session)
        if inline is not None and inline(index.update()):
            return operation(index)
        return await _settled(_off_loop(self._apply, operation, index))

    def _apply(self, operation: Callable[[_LogIndex], _T], index: _LogIndex) -> _T:
        """Run ``operation`` on ``index`` brought up to date, then flush its session; when
        either fails, the session is dropped with what it buffered (:meth:`_forget`)."""
        length = len(index.session.events)
        try:
            result = operation(index.update())
            self.store.flush(index.session)
        except BaseException:
            if len(index.session.events) != length:  # part of it appended: drop it all
                self._forget(index.session)
            raise
        return result


def _missing(exc: PersistenceError, session_id: str) -> bool:
    """Whether ``exc`` is the store's "nothing is stored under this id" (``open``'s),
    rather than a stored log that cannot be opened (which trying again does not mend)."""
    return isinstance(exc, SessionNotStoredError) and exc.session_id == session_id
