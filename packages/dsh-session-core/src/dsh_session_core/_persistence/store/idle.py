"""The idle window of released sessions: their writer locks kept for a moment.

A writer that releases a session and writes it again a moment later (an agent SDK's
session saving a run's items call by call, a graph's checkpointer storing a checkpoint
then its writes) would take the writer lock again and look at the log's end at each
call. Released with an idle window (``DurableStore.release(session, idle=seconds)``),
the session is flushed and leaves the store as any release makes it, but the
coordinator keeps its state and its writer lock: ``open(id, resume=session)`` within
the window takes it back without locking or reading anything (nothing can have been
written: the lock was held throughout). Once the window has passed without that, the
lock is released by a timer thread (:class:`IdleLocks`: one per store, running only while
windows are open, and a few seconds after), so that another writer, waiting for the lock
in its ``lock_timeout``, gets in. The lock also goes when the store is closed (with the
process, as every lock).
Another store object of this process over the same store (two ``DshSession`` opened
from one URL each open their own) does not wait for the window: it ends it
(:meth:`IdleLocks.end_elsewhere`), since the window's holder is between two operations.
A writer that goes on writing within each window would keep the lock for good: once it
has kept it across windows for :data:`MAX_HOLD` seconds, its next release lets it go (a
writer of another process polling for it gets in between two calls, as without
windows), and the windows start again from its next take.

The windows and their timer are :class:`IdleLocks`; :class:`IdleWindows`, a base of the
coordinator (:mod:`.coordinator`), opens one at a release (:meth:`~IdleWindows.linger`)
and ends one (:meth:`~IdleWindows.end_idle`); the coordinator's ``resume`` takes one back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from ..._schema.registry import EventRegistry
from ..base import Backend
from .write_path import SessionState, WritePath

if TYPE_CHECKING:
    from ..._model.session import Session

__all__ = ["IdleLocks", "IdleWindows", "Kept"]

#: How long a writer keeps a session's lock across idle windows (taken back within each)
#: before a release lets it go all the same: far below the lock timeouts writers wait
#: (30 s by default in the integrations).
MAX_HOLD = 5.0

#: How long the timer thread waits, no window open, before it ends. A writer's window
#: is taken back at each of its calls, so the timer often finds none open for an
#: instant: ending then, it would be started again at the call's release (a thread
#: start, measured: about 0.4 ms on a loaded machine, at one call in five).
_TIMER_LINGER = 5.0

#: The windows open in this process, by store identity and session id (one at most: a
#: window holds the session's writer lock), for another store object over the same
#: store to end rather than wait for (:meth:`IdleLocks.end_elsewhere`).
_OPEN: dict[tuple[Hashable, str], IdleLocks] = {}
_OPEN_GUARD = threading.Lock()


class Kept:
    """One open window: the session released with it, the coordinator's state of that
    session (its lock held), when the window ends and since when the lock has been kept
    across windows (``time.monotonic()``). A new release makes a new one: the timer lets
    go of a window only if it is still the one it found due."""

    __slots__ = ("deadline", "session", "since", "state")

    def __init__(self, session: Session, state: SessionState, deadline: float,
                 since: float) -> None:
        self.session = session
        self.state = state
        self.deadline = deadline
        self.since = since


class IdleLocks:
    """The open windows of one store's released sessions, by session id, and the
    timer thread that ends them.

    :param serial: the coordinator's lock of a session id (the timer lets go of a window
        under it, as every change of the session's state is made).
    :param let_go: releases the lock of a window that ended, if its state is still the
        one kept without a live session; called under ``serial`` of the id.
    :param identity: the store's identity (:meth:`~.base.Backend.store_identity`),
        asked once, at the first window.
    """

    def __init__(self, serial: Callable[[str], threading.RLock],
                 let_go: Callable[[str, Kept], None],
                 identity: Callable[[], Hashable | None]) -> None:
        self._serial = serial
        self._let_go = let_go
        self._identity = identity
        self._ident: Hashable | None = None
        self._ident_known = False
        self._cond = threading.Condition(threading.Lock())
        self._windows: dict[str, Kept] = {}
        #: The windows taken back by their sessions (``resume``), until those sessions'
        #: next release: the state they kept and since when its lock has been kept.
        self._taken: dict[str, tuple[SessionState, float]] = {}
        self._thread: threading.Thread | None = None
        #: When the timer wakes next (``time.monotonic()``; infinity when it is not
        #: waiting): a window ending before that wakes it now.
        self._wake = float("inf")
        #: The shortest window opened so far: how long the timer waits when it finds
        #: none open (a window opened meanwhile ends no sooner than it wakes).
        self._shortest = float("inf")
        self._closed = False

    def keep(self, session_id: str, session: Session, state: SessionState,
             seconds: float) -> bool:
        """Open (or open anew) the window of ``session_id``; ``False`` (none opened) when
        the lock has been kept across windows for :data:`MAX_HOLD` already. Call it
        under ``serial``."""
        with self._cond:
            if self._closed:
                msg = "keep() on a closed store"  # the coordinator checks before
                raise RuntimeError(msg)
            now = time.monotonic()
            taken = self._taken.pop(session_id, None)
            since = taken[1] if taken is not None and taken[0] is state else now
            if now - since >= MAX_HOLD:
                return False
            deadline = now + seconds
            self._shortest = min(self._shortest, seconds)
            self._windows[session_id] = Kept(session, state, deadline, since)
            self._publish(session_id, True)
            if self._thread is None:
                # A thread of its own for the store's windows, gone a while after none
                # is open: an idle store (or process) runs none.
                self._thread = threading.Thread(
                    target=self._run, name="dsh-session: idle writer locks", daemon=True)
                self._thread.start()
            elif deadline < self._wake:
                # (A window ending later than the timer's wake is found when it wakes.)
                self._cond.notify()
            return True

    def take(self, session_id: str, session: Session | None = None, *,
             back: bool = False) -> Kept | None:
        """The window of ``session_id``, closed here (no timer lets it go); only if it
        holds ``session`` when that is given. ``back``: its session takes it back (its
        next release counts the lock kept since the window's start). Call it under
        ``serial``."""
        with self._cond:
            self._taken.pop(session_id, None)
            kept = self._windows.get(session_id)
            if kept is None or (session is not None and kept.session is not session):
                return None
            del self._windows[session_id]
            self._publish(session_id, False)
            if back:
                self._taken[session_id] = (kept.state, kept.since)
            return kept

    def end(self, session_id: str) -> None:
        """End the window of ``session_id`` now, if one is open (its lock released)."""
        with self._serial(session_id):
            kept = self.take(session_id)
            if kept is not None:
                self._let_go(session_id, kept)

    def end_elsewhere(self, session_id: str) -> None:
        """End the window another store object of this process keeps open on the same
        store for ``session_id``, if any: its holder is between two operations, and this
        store is about to take the session's writer lock. Call it holding no session's
        serialization (that store's is taken)."""
        ident = self._store()
        if ident is None:
            return
        with _OPEN_GUARD:
            other = _OPEN.get((ident, session_id))
        if other is not None and other is not self:
            other.end(session_id)

    def _store(self) -> Hashable | None:
        if not self._ident_known:
            self._ident, self._ident_known = self._identity(), True
        return self._ident

    def _publish(self, session_id: str, open_: bool) -> None:
        """Mark the window of ``session_id`` open in this process (or no longer)."""
        ident = self._store()
        if ident is None:
            return
        key = (ident, session_id)
        with _OPEN_GUARD:
            if open_:
                _OPEN[key] = self
            elif _OPEN.get(key) is self:
                del _OPEN[key]

    def open_windows(self) -> int:
        """How many windows are open (for tests and diagnostics)."""
        with self._cond:
            return len(self._windows)

    def close(self) -> None:
        """No window opens from now on, and the timer lets go of none: the store's close
        releases every lock it keeps, these too. A release the timer is making
        meanwhile is finished first (it holds the condition's lock)."""
        with self._cond:
            self._closed = True
            for session_id in self._windows:
                self._publish(session_id, False)
            self._windows.clear()
            self._taken.clear()
            self._cond.notify_all()

    def _run(self) -> None:
        empty_since: float | None = None
        while True:
            with self._cond:
                now = time.monotonic()
                if not self._windows and not self._closed:
                    # None open, often for an instant only (a call took its window
                    # back): wait as long as the shortest window lasts, so that a window
                    # opened meanwhile is seen in time without waking the timer (a
                    # shorter one wakes it); end after a while of none.
                    empty_since = now if empty_since is None else empty_since
                    if now - empty_since < _TIMER_LINGER:
                        self._wake = min(now + self._shortest, empty_since + _TIMER_LINGER)
                        self._cond.wait(self._wake - now)
                        self._wake = float("inf")
                        continue
                if self._closed or not self._windows:
                    self._thread = None
                    return
                empty_since = None
                due = [(sid, kept) for sid, kept in self._windows.items()
                       if kept.deadline <= now]
                if not due:
                    self._wake = min(k.deadline for k in self._windows.values())
                    self._cond.wait(self._wake - now)
                    self._wake = float("inf")
                    continue
            for sid, kept in due:
                # The session's serialization first, as every other path takes it, then
                # the condition: the window may have been taken back (or opened anew)
                # since it was found due.
                with self._serial(sid), self._cond:
                    if self._windows.get(sid) is not kept:  # (close() empties them)
                        continue
                    del self._windows[sid]
                    self._publish(sid, False)
                    self._let_go(sid, kept)


def _identity_of(backend: Backend) -> Hashable | None:
    """The store's identity (:meth:`~..base.Backend.store_identity`); ``None`` for a
    backend written before the protocol had it: its windows stay its own."""
    try:
        return backend.store_identity()
    except AttributeError:
        return None


class IdleWindows(WritePath):
    """The coordinator's idle windows (see the module's docstring): a base of
    :class:`~.coordinator.PersistencePlugin`, whose ``release`` opens one and whose
    ``resume`` takes one back."""

    def __init__(self, backend: Backend, registry: EventRegistry) -> None:
        super().__init__(backend, registry)
        #: The writer locks kept after a release with an idle window.
        self.idle = IdleLocks(self._serial, self._idle_over,
                              lambda: _identity_of(backend))

    def linger(self, session: Session, idle: float) -> bool:
        """``release`` a flushed ``session`` but keep its writer lock for ``idle``
        seconds (an idle window, :mod:`.idle`): its state stays, without a live session,
        until ``resume`` takes it back or the window ends. Memory only (no I/O);
        ``False`` when it cannot: something unflushed, a session this coordinator does
        not hold (or whose log does not exist yet), a closed store."""
        sid = session.id
        with self._serial(sid):
            state = self._states.get(sid)
            if (self._closed or state is None or state.owner is not session
                    or state.lock is None or not state.materialized
                    or self._buffers.get(session)):
                return False
            if not self.idle.keep(sid, session, state, idle):
                return False  # kept across windows long enough: released below
            state.owner = None
            self._buffers.pop(session, None)
            self._inited.discard(id(session))
            return True

    def end_idle(self, session_id: str, session: Session | None = None) -> None:
        """End the idle window of ``session_id`` now (its writer lock released), if it
        still has one (:meth:`linger` kept it, no ``resume`` took it back); only
        ``session``'s when that is given."""
        with self._serial(session_id):
            kept = self.idle.take(session_id, session)
            if kept is not None:
                self._idle_over(session_id, kept)

    def _idle_over(self, sid: str, kept: Kept) -> None:
        """Release the lock of a window that ended, if the state it kept is still the
        session's, without a live session (a load or an append may have taken it over
        meanwhile); under the session's serialization."""
        state = kept.state
        if self._states.get(sid) is not kept.state or state.owner is not None:
            return
        del self._states[sid]
        lock, state.lock = state.lock, None
        if lock is not None:
            # A release that fails (a connection gone) has let go of the lock with it.
            with contextlib.suppress(Exception):
                lock.release()
