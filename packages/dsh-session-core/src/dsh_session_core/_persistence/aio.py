"""The asyncio side of a durable store: its worker thread, and its async iterators.

The iterators are over stored sessions and followed events.

The backend hooks (:class:`~.base.Backend`) are synchronous: file and SQLite I/O are,
and so are the coordinator's adoption, crash repair and writer lock. An asyncio host
must never wait on them on its event loop, so :class:`~.durable.DurableStore`'s ``a*``
methods run them elsewhere:

- **natively**, when the backend has an optional async capability for the operation
  (:mod:`.capabilities`): ``aappend_batch`` (a flush), ``alist`` (the stored headers),
  ``atail_lines`` and ``afollow_lines`` (following a session), ``aclose``. PostgreSQL
  has them all, on psycopg's ``AsyncConnection``, and Redis, on redis-py's asyncio
  client. They are not part of the
  :class:`~.base.Backend` protocol: a third-party backend without them works
  unchanged, through the worker thread. Which ones a backend has is the store's
  :class:`~.capabilities.Capabilities` record, made once;
- **in the store's worker thread** otherwise (:class:`StoreWorker`).

Thread-safety rule: the operations that run in the store's worker thread (``acreate``,
``aopen``, ``aopen_or_create``, ``aread_session``, ``afork``, ``arelease``,
``aappend_stored``, ``alocation``, the thread part of ``aclose``, and ``astored``
unless the backend lists natively) run one at a time, in the
order they were awaited, in one thread of the store's own, so two of them never race on
the store's sessions or the coordinator's states. ``aflush`` does not wait for them:
flushes of different sessions run at once (in the default thread pool, or natively),
and the coordinator serializes each session's own flushes and writes. Followers read
concurrently with everything (each poll holds the session's coordinator lock, so it
never overlaps a write of that session in this process).
Calling the synchronous methods from other threads while awaited operations run is not
supported: drive one store from one event loop, or from one thread.

A cancelled awaited operation stops being waited for at once, but what already runs in
the worker thread finishes: a cancelled ``aopen`` may still have opened the session (it
is then live in the store: :meth:`~._model.store.SessionStore.get`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from .._schema.decode import decode_line
from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from ..events import Event
from .base import POLL_SECONDS, Backend, LogNews, LogTail, not_found

if TYPE_CHECKING:
    from .store.coordinator import PersistencePlugin

__all__ = ["StoreWorker", "StoredHeaders", "follow_events", "follow_lines", "tail_lines"]

P = ParamSpec("P")
T = TypeVar("T")

#: Above this many lines, a batch of followed lines is decoded in a thread: decoding is
#: CPU work, and a long tail (``last=100_000``) would hold the event loop for a while.
_DECODE_ON_LOOP = 256


class StoreWorker:
    """One thread of a store's own, started at its first use, that runs the store's
    synchronous work for asyncio callers one call at a time, in submission order.

    One thread rather than the default pool plus a lock: a queue of awaited operations
    waits in the executor's queue, not in pool threads that every other
    ``asyncio.to_thread`` of the process shares (two cores give that pool six).
    """

    __slots__ = ("_executor", "_guard")

    def __init__(self) -> None:
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._guard = threading.Lock()

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` run in the worker thread, with the caller's
        context variables (as :func:`asyncio.to_thread` passes them)."""
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool(), call)

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._guard:
            if self._executor is None:  # first use, or first use after shutdown
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="dsh-session-store")
            return self._executor

    def shutdown(self) -> None:
        """Let the thread end once its queue is done (without waiting: this may be the
        worker thread itself, closing the store). A later :meth:`run` starts another."""
        with self._guard:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


class StoredHeaders:
    """The headers of a store's stored sessions, from asyncio: ``await`` it for the list
    (:meth:`~.durable.DurableStore.stored`'s), or ``async for`` over it.

    Each ``await`` or ``async for`` lists the store anew.
    """

    __slots__ = ("_fetch",)

    def __init__(self, fetch: Callable[[], Awaitable[list[SessionHeader]]]) -> None:
        self._fetch = fetch

    def __await__(self) -> Generator[Any, None, list[SessionHeader]]:
        return self._fetch().__await__()

    def __aiter__(self) -> AsyncIterator[SessionHeader]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SessionHeader]:
        for header in await self._fetch():
            yield header


async def tail_lines(
    backend: Backend, persistence: PersistencePlugin, session_id: str, count: int
) -> LogTail | None:
    """:meth:`~.base.Backend.tail_lines`, natively (``atail_lines``) or in a thread."""
    native = persistence.capabilities.async_tail
    if native is not None:
        return await native.atail_lines(session_id, count)

    def read() -> LogTail | None:
        with persistence.serialized(session_id):
            return backend.tail_lines(session_id, count)

    return await asyncio.to_thread(read)


async def follow_lines(
    backend: Backend,
    persistence: PersistencePlugin,
    session_id: str,
    position: object,
    timeout: float | None,
) -> AsyncGenerator[LogNews, None]:
    """:meth:`~.base.Backend.follow_lines` for asyncio: natively (``afollow_lines``),
    else by polling on the loop every :data:`~.base.POLL_SECONDS`, each poll one call
    of ``follow_lines(..., timeout=0)`` in a thread. A poll returns at once (it reports
    what is there and ends), so no thread is ever left waiting for news: cancelling the
    follower leaves nothing running."""
    native = persistence.capabilities.async_follow
    if native is not None:
        news_of = native.afollow_lines(session_id, position, timeout=timeout)
        async with contextlib.aclosing(news_of) as it:
            async for news in it:
                yield news
        return

    def poll(at: object) -> list[LogNews]:
        with persistence.serialized(session_id):
            return list(backend.follow_lines(session_id, at, timeout=0))

    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    while True:
        found = await asyncio.to_thread(poll, position)
        for news in found:
            position = news.position
            yield news
        if found:
            quiet_since = loop.time()
            continue
        wait = POLL_SECONDS
        if timeout is not None:
            left = quiet_since + timeout - loop.time()
            if left <= 0:
                return
            wait = min(wait, left)
        await asyncio.sleep(wait)


async def follow_events(
    backend: Backend,
    persistence: PersistencePlugin,
    session_id: str,
    last: int,
    timeout: float | None,
    on_note: Callable[[str], object] | None,
) -> AsyncGenerator[Event, None]:
    """The last ``last`` stored events of a session, then each event as it is
    committed, decoded with the store's event types (see
    :meth:`~.durable.DurableStore.afollow`)."""
    if last < 0:
        msg = f"last takes a count of events, got {last}"
        raise ValueError(msg)
    tail = await tail_lines(backend, persistence, session_id, last)
    if tail is None:
        raise not_found(session_id)
    registry = persistence.registry
    for event in await _decoded(registry, tail.lines):
        yield event
    news_of = follow_lines(backend, persistence, session_id, tail.position, timeout)
    async with contextlib.aclosing(news_of) as news_it:
        async for news in news_it:
            if news.note is not None and on_note is not None:
                on_note(news.note)
            for event in await _decoded(registry, news.lines):
                yield event


async def _decoded(registry: EventRegistry, lines: list[bytes]) -> list[Event]:
    if len(lines) <= _DECODE_ON_LOOP:
        return [decode_line(registry, line) for line in lines]
    return await asyncio.to_thread(lambda: [decode_line(registry, line) for line in lines])
