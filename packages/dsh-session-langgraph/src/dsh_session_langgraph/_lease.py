"""How the saver holds a thread: :class:`Threads`, one in-process lock per thread, the
thread's index, and the session each write takes and releases.

A write takes the thread's writer lock (the store's: across processes and hosts, one
writer at a time), brings the index up to date with what other writers stored since
(``store.open(id, resume=...)`` reads only that), appends, flushes and releases it with
an idle window (``store.release(session, idle=...)``): the lock is kept that long, and
the next write within it (a ``put_writes`` after its ``put``, the graph's next step)
takes the session back at once, without locking or reading. A
read takes no writer lock: it folds the events stored after the last one it knows
(``store.read(id, after=...)``). A write that fails drops what it appended: the log is
left as it was (``store.discard``), and the index is rebuilt at the next call.
"""

from __future__ import annotations

__all__ = ["Threads", "Writing", "retrying"]

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dsh_session_core import DurableStore, PersistenceError, Session, SessionLockedError

from ._index import ThreadIndex


@dataclass
class Writing:
    """A write in progress: the session held, its index, and each namespace's latest
    checkpoint as the saver knew it before this write (to tell another writer's)."""

    session: Session
    index: ThreadIndex
    known: dict[str, str | None]


class Threads:
    """The threads of one saver (see the module's docstring)."""

    def __init__(self, store: DurableStore, lock_timeout: float,
                 idle_window: float = 0.0) -> None:
        self.store = store
        self.lock_timeout = lock_timeout
        self.idle_window = idle_window
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}
        self._indexes: dict[str, ThreadIndex] = {}
        self._released: dict[str, Session] = {}

    @contextlib.contextmanager
    def locked(self, *thread_ids: str) -> Iterator[None]:
        """Hold the in-process locks of ``thread_ids`` (in a fixed order)."""
        with contextlib.ExitStack() as stack:
            for tid in sorted(set(thread_ids)):
                with self._guard:
                    lock = self._locks.setdefault(tid, threading.RLock())
                stack.enter_context(lock)
            yield

    def stored(self, thread_id: str) -> bool:
        return self.store.backend.tail_lines(thread_id, 0) is not None

    def held(self, thread_id: str) -> bool:
        """Whether this saver holds the thread's index (it wrote or folded the thread)."""
        return thread_id in self._indexes

    def open_turn(self, thread_id: str) -> bool:
        """Whether the thread's log, as this saver last knew it, ends in an open turn
        (``True`` when this saver holds no index of it: the log says)."""
        index = self._indexes.get(thread_id)
        return index is None or index.open_turn is not None

    def forget(self, thread_id: str) -> None:
        """Drop what is known of the thread (its log was deleted or rewritten)."""
        self._indexes.pop(thread_id, None)
        self._released.pop(thread_id, None)

    def read(self, thread_id: str) -> ThreadIndex | None:
        """The thread's index, up to date with what is stored (``None``: nothing is);
        call it holding :meth:`locked`."""
        for attempt in range(2):
            index = self._indexes.get(thread_id)
            try:
                if index is not None and index.folded:
                    # From the last event folded on: it tells whether the log continues
                    # ours.
                    events = self.store.read(thread_id, after=index.folded - 2)
                    if events and events[0] == index.last:
                        index.fold(events[1:])
                        return index
                events = self.store.read(thread_id)
                break
            except PersistenceError:
                self.forget(thread_id)
                if not self.stored(thread_id):
                    return None
                if attempt:  # stored, yet unreadable twice: not a rewrite's gap
                    raise
                # Not found, then found: a rewrite recreated it meanwhile; read it anew.
        index = self._indexes[thread_id] = ThreadIndex(thread_id)
        index.fold(events)
        return index

    @contextlib.contextmanager
    def writing(self, thread_id: str, create: bool) -> Iterator[Writing | None]:
        """Hold the thread's writer lock for one write, the index brought up to date;
        ``None`` when nothing is stored and ``create`` is false. What the block appends
        is flushed when it ends; when it raises, dropped. Call it holding
        :meth:`locked`."""
        index = self._indexes.get(thread_id)
        known = {ns: index.latest(ns) for ns in index.namespaces()} if index else {}
        delay = 0.002
        while True:
            session = self._acquire(thread_id, create)
            if session is None:
                yield None
                return
            index = self._fold(thread_id, session)
            if not self._fenced(index):
                break
            # Another saver's rewrite is under way (its marker ends the log, which it is
            # about to delete): a write now would be deleted with it. Wait for the new
            # log, or until the marker is older than the lock timeout (its rewriter died).
            self._keep(thread_id, session, index)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        count = len(session.events)
        try:
            yield Writing(session, index, known)
        except BaseException:
            if len(session.events) != count:  # part of it appended: drop it all
                self.forget(thread_id)
                self.store.discard(session)
            else:
                self._keep(thread_id, session, index)
            raise
        try:
            self.store.release(session, idle=self.idle_window)
        except BaseException:
            self.forget(thread_id)
            with contextlib.suppress(Exception):
                self.store.discard(session)
            raise
        self._released[thread_id] = session
        self._indexes[thread_id] = index

    def end_idle(self) -> None:
        """End the idle windows of the sessions the writes released (at the saver's
        close: another writer need not wait for them)."""
        if self.store.persistence.closed:
            return
        for session in list(self._released.values()):
            self.store.end_idle(session)

    def _fold(self, thread_id: str, session: Session) -> ThreadIndex:
        """The thread's index brought up to ``session``'s events (folded anew when the
        log no longer continues what it folded)."""
        index = self._indexes.get(thread_id)
        events = session.events
        if index is None or not index.continues(events):
            index = ThreadIndex(thread_id)
            index.fold(events)
        else:
            index.fold(events[index.folded:])
        return index

    def _fenced(self, index: ThreadIndex) -> bool:
        """Whether a rewrite's pending marker ends the log and is younger than the lock
        timeout (an older one is a rewriter that died before deleting: passed over)."""
        return index.rewriting is not None and (
            time.time() * 1000 - index.rewriting < self.lock_timeout * 1000)

    def _keep(self, thread_id: str, session: Session, index: ThreadIndex) -> None:
        self.store.release(session)
        self._released[thread_id] = session
        self._indexes[thread_id] = index

    def _acquire(self, thread_id: str, create: bool) -> Session | None:
        """Open the thread (taking back the session the last write released, so only
        what others stored since is read), creating it when ``create``; retried while
        another writer holds it, up to ``lock_timeout``."""
        released = self._released.pop(thread_id, None)
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.002
        while True:
            try:
                try:
                    if released is not None or not create:
                        return self.store.open(thread_id, resume=released)
                    return self.store.open_or_create(thread_id)
                except SessionLockedError:
                    raise
                except PersistenceError:
                    opening = released is not None or not create
                    released = None
                    if self.stored(thread_id):
                        # Deleted and recreated while being opened (a rewrite's gap):
                        # open it again, as long as the lock would be waited for.
                        if time.monotonic() >= deadline:
                            raise
                        continue
                    if not create:
                        return None
                    if not opening:  # creating failed, nothing stored: not a race
                        raise
            except SessionLockedError:
                if time.monotonic() >= deadline:
                    if released is not None:
                        self._released[thread_id] = released
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)


def retrying(act: Callable[[], object], timeout: float) -> None:
    """``act()``, again while another writer holds the thread, up to ``timeout`` s
    (for the store's operations that take the writer lock without waiting: delete)."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            act()
            return
        except SessionLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
