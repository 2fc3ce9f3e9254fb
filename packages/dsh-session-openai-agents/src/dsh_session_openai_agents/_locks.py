"""How the operations on one stored session take turns in this process: one lock per
stored session in use (:data:`_LOCKS`, pruned as its last user leaves), taken by an
asyncio task without blocking its loop (:func:`_taking_turns`) or by a thread
(:func:`_taking_turns_now`); which instance's run holds the session meanwhile
(:func:`_hold`: the writes of the others wait for its end, up to a deadline, then are
refused, :func:`run_holds`); and how an operation runs off the loop (:func:`_off_loop`)
to its end when cancelled (:func:`_settled`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from dsh_session_core import SessionLockedError

_T = TypeVar("_T")

class _Turns:
    """The lock the operations on one stored session take turns on, and how many hold
    it or wait for it (``users``): the entry leaves :data:`_LOCKS` when the last user
    lets go, so the table holds only the sessions in use. ``holder``: the instance whose
    run has its turn open in the session (it counts as a user while it holds it)."""

    __slots__ = ("holder", "lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.holder: object | None = None


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


def _hold(key: tuple[object, str], holder: object) -> _Turns:
    """Mark ``key`` held by ``holder``'s run (its turn open in the log) until
    :func:`_unhold`: the writes of every other instance wait meanwhile."""
    turns = _join(key)
    turns.holder = holder
    return turns


def _unhold(key: tuple[object, str], turns: _Turns) -> None:
    """The run that :func:`_hold` marked has ended its turn: the writes waiting go on."""
    turns.holder = None
    _leave(key, turns)


def run_holds(session_id: str, lock_timeout: float, holder: str) -> SessionLockedError:
    """The refusal of a write that waited ``lock_timeout`` seconds for a run (or another
    writer: ``holder`` says what is known of it) to let the session go."""
    return SessionLockedError(session_id, (
        f"{holder}; waited {lock_timeout:g} s, the lock_timeout of this DshSession: a run "
        f"of the OpenAI Agents SDK holds its session from its first saved items until "
        f"its turn ends (its final output, an approval, or the end of the task running "
        f"it), a keep_open DshSession until close(); retry once it has ended, or give "
        f"this DshSession a longer lock_timeout"))


@contextlib.asynccontextmanager
async def _taking_turns(key: tuple[object, str], owner: object = None,
                        deadline: float | None = None,
                        refusal: Callable[[], BaseException] | None = None
                        ) -> AsyncIterator[None]:
    """Hold the lock of ``key``, polling for it (1 ms, growing to 20 ms) while another
    holds it (a cancelled wait leaves the table as it found it). With a ``deadline``
    (a write: ``time.monotonic()``), also wait while the run of another instance than
    ``owner`` holds the session (:func:`_hold`), letting the lock go meanwhile (the
    run's own calls take it); ``refusal()`` is raised when the deadline passes first.
    """
    with _member(key) as turns:
        delay = 0.001
        while True:
            while not turns.lock.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.02)
            if deadline is None or turns.holder is None or turns.holder is owner:
                break
            turns.lock.release()
            if time.monotonic() >= deadline:
                raise refusal() if refusal is not None else TimeoutError(key[1])
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


@contextlib.contextmanager
def _turn_if_free(key: tuple[object, str]) -> Iterator[bool]:
    """The lock of ``key`` if no one holds it (``True``), without waiting: for work on
    an event loop's thread that must not block it (a task's done callback)."""
    with _member(key) as turns:
        had = turns.lock.acquire(blocking=False)
        try:
            yield had
        finally:
            if had:
                turns.lock.release()


def _off_loop(fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """``fn(*args)`` in the loop's default executor, in a copy of the caller's context
    (as ``asyncio.to_thread`` runs it), as a future: :func:`_settled` awaits it as it
    is, where ``to_thread``'s coroutine would be wrapped in a task of its own (about a
    quarter of a hop's cost, measured: 60 against 45 µs a call)."""
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(
        None, functools.partial(contextvars.copy_context().run, fn, *args))


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
