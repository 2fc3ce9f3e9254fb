"""How the operations on one stored session take turns in this process: one lock per
stored session in use (:data:`_LOCKS`, pruned as its last user leaves), taken by an
asyncio task without blocking its loop (:func:`_taking_turns`) or by a thread
(:func:`_taking_turns_now`), and how an operation runs to its end when cancelled
(:func:`_settled`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

_T = TypeVar("_T")

class _Turns:
    """The lock the operations on one stored session take turns on, and how many hold
    it or wait for it (``users``): the entry leaves :data:`_LOCKS` when the last user
    lets go, so the table holds only the sessions in use."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


#: One lock per stored session in use in this process: keyed by the store's identity
#: (its folder, database file or server: two store objects over one store share it) and
#: the session id. The operations of every instance take turns, whichever store object,
#: thread and event loop each runs on, so none finds the session held by another, and
#: two instances never both create one new session (the second would write over the
#: first's first events). A thread lock, taken without blocking the loop. Across
#: processes the stores' writer locks decide. An entry is made by the first operation
#: that needs it and dropped by the last that leaves it (see :class:`_Turns`).
_LOCKS: dict[tuple[object, str], _Turns] = {}
_LOCKS_GUARD = threading.Lock()


def _join(key: tuple[object, str]) -> _Turns:
    """The entry of ``key``, made if need be, counting one more user."""
    with _LOCKS_GUARD:
        turns = _LOCKS.get(key)
        if turns is None:
            turns = _LOCKS[key] = _Turns()
        turns.users += 1
        return turns


def _leave(key: tuple[object, str], turns: _Turns) -> None:
    """One user fewer; the entry is dropped with its last user (no one holds its lock
    then, nor waits for it: the next user makes a new one)."""
    with _LOCKS_GUARD:
        turns.users -= 1
        if not turns.users and _LOCKS.get(key) is turns:
            del _LOCKS[key]


@contextlib.contextmanager
def _member(key: tuple[object, str]) -> Iterator[_Turns]:
    """The entry of ``key`` with one more user for as long as this lasts (both ways of
    taking turns count themselves in here, so the entry leaves with its last user)."""
    turns = _join(key)
    try:
        yield turns
    finally:
        _leave(key, turns)


@contextlib.asynccontextmanager
async def _taking_turns(key: tuple[object, str]) -> AsyncIterator[None]:
    """Hold the lock of ``key``, polling for it (1 ms, growing to 20 ms) while another
    holds it (a cancelled wait leaves the table as it found it)."""
    with _member(key) as turns:
        delay = 0.001
        while not turns.lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        try:
            yield
        finally:
            turns.lock.release()


@contextlib.contextmanager
def _taking_turns_now(key: tuple[object, str], timeout: float) -> Iterator[None]:
    """Hold the lock of ``key``, blocking this thread up to ``timeout`` seconds: for
    :meth:`DshSession.close`. On a thread running an event loop it does not wait (the
    holder may be a task of that very loop, which cannot run while this blocks).

    :raises RuntimeError: the lock was not had in time."""
    try:
        asyncio.get_running_loop()
        timeout = 0.0
    except RuntimeError:
        pass
    with _member(key) as turns:
        had = (turns.lock.acquire(timeout=timeout) if timeout > 0
               else turns.lock.acquire(blocking=False))
        if not had:
            msg = (f'an operation on session "{key[1]}" is still running: close() cannot '
                   f"wait for it on its event loop's thread; await aclose() instead")
            raise RuntimeError(msg)
        try:
            yield
        finally:
            turns.lock.release()


async def _settled(aw: Awaitable[_T], then: Callable[[_T], object] | None = None) -> _T:
    """Await ``aw`` to its end even when cancelled meanwhile: the work it waits for runs
    on in a thread regardless, and the caller's turn on the session must last as long.
    ``then`` gets its result first (also when cancelled); then a cancellation is raised.
    """
    task = asyncio.ensure_future(aw)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled() and task.exception() is None and then is not None:
            then(task.result())
        raise cancelled
    result = task.result()
    if then is not None:
        then(result)
    return result
