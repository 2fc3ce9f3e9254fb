"""A durable store from asyncio: every awaited operation leaves the event loop running,
on every backend, and gives what its synchronous twin gives.

How "never blocked" is shown, with no wall-clock margin (it holds on a loaded machine):

- the store writes through :class:`Slow`, a wrapper that records the thread each
  synchronous backend call runs on and makes each such call wait, as slow storage
  would, until a heartbeat coroutine of the loop has ticked :data:`TICKS` more times.
  The test asserts that no such call ever ran on the event loop's thread, and that
  every call saw its ticks: the loop ran *while* the call ran. A call made on the loop
  thread, or a loop blocked waiting for the worker thread, gives no tick at all (the
  first is recorded at once, the second when :data:`STALL` runs out, a bound that only
  a hang reaches);
- PostgreSQL's and Redis's native operations make no synchronous call at all
  (asserted); that PostgreSQL's wait on the loop is shown by holding a table lock on
  the server that only another coroutine of the same loop releases: a blocked loop
  could never finish them (Redis's: ``test_redis_async.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest
from pg_support import until_a_query_waits_on_a_lock

from dsh_session_core import DurableStore, Session, create_plugin_manager, encode_events
from dsh_session_core._persistence.base import Backend
from dsh_session_core.errors import PersistenceError, SessionExistsError
from dsh_session_core.testing import user_turn

#: How many heartbeat ticks each synchronous call of a :class:`Slow` backend waits for.
TICKS = 3
#: How long a :class:`Slow` call waits for its ticks before it records a stall: a
#: running loop ticks every few milliseconds, so only a blocked loop reaches it.
STALL = 30.0
#: A bound for what should take a few ticks: only a hang reaches it.
PATIENCE = 60

USER = {"kind": "user"}

T = TypeVar("T")


class Recorder:
    """What the :class:`Slow` backends of a test did: their synchronous calls, those
    that ran on the event loop's thread, and those that saw no loop tick."""

    def __init__(self) -> None:
        self.loop_thread: int | None = None
        self.heart: Heartbeat | None = None
        self.calls: list[str] = []
        self.on_loop: list[str] = []
        self.stalled: list[str] = []

    def slow(self, name: str) -> None:
        """Record the call ``name`` and, off the loop thread while a heartbeat beats,
        wait until the loop has ticked :data:`TICKS` times (slow storage the loop
        keeps running beside)."""
        self.calls.append(name)
        if threading.get_ident() == self.loop_thread:
            # Waiting for ticks here would wait on itself: the fault is recorded.
            self.on_loop.append(name)
            return
        heart = self.heart
        if heart is not None and not heart.wait_ticks(TICKS, STALL):
            self.stalled.append(name)


class Slow:
    """A backend whose every synchronous call first waits as :meth:`Recorder.slow` says,
    recorded in a :class:`Recorder`; its async hooks (PostgreSQL's, Redis's) pass through
    untouched, so the store's native paths are the ones taken."""

    def __init__(self, inner: Backend, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or inspect.iscoroutinefunction(attr) or (
                inspect.isasyncgenfunction(attr)):
            return attr
        recorder = self._recorder

        def slow(*args: Any, **kwargs: Any) -> Any:
            recorder.slow(name)
            result = attr(*args, **kwargs)
            # Releasing a writer lock is I/O too (closing a file, a connection).
            return _SlowLock(result, recorder) if name == "acquire" else result

        return slow


class _SlowLock:
    """A writer lock whose release is slow (and recorded) like a :class:`Slow` call."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def release(self) -> None:
        self._recorder.slow("release")
        self._inner.release()


class Heartbeat:
    """Ticks every few milliseconds on the loop while :meth:`beating`; other threads
    wait for ticks with :meth:`wait_ticks`."""

    def __init__(self) -> None:
        self.ticks = 0
        self._ticked = threading.Condition()

    def wait_ticks(self, count: int, timeout: float) -> bool:
        """From a thread other than the loop's: whether the loop ticked ``count`` more
        times within ``timeout`` (a bound on a hang, not a margin)."""
        with self._ticked:
            target = self.ticks + count
            return self._ticked.wait_for(lambda: self.ticks >= target, timeout)

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[Heartbeat]:
        started = asyncio.Event()

        async def beat() -> None:
            started.set()
            while True:
                await asyncio.sleep(0.002)
                with self._ticked:
                    self.ticks += 1
                    self._ticked.notify_all()

        task = asyncio.ensure_future(beat())
        await started.wait()
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Probe:
    """Runs awaited operations of one store under a heartbeat and checks each."""

    def __init__(self, slow: Recorder, native: set[str], native_backend: set[str]) -> None:
        self.slow = slow
        self.native = native
        #: Ops whose backend part is native but which may also release locks in a thread.
        self.native_backend = native_backend
        self.heart = Heartbeat()

    async def check(self, op: str, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` (the store's ``op``) and assert the loop ran throughout:
        no sync call on its thread, every sync call saw the loop tick; a thread-run op
        made backend calls, and a native one made no synchronous call."""
        self.slow.loop_thread = threading.get_ident()
        before = len(self.slow.calls)
        try:
            async with self.heart.beating():
                self.slow.heart = self.heart
                result = await asyncio.wait_for(awaitable, PATIENCE)
        finally:
            # The test's own synchronous comparisons, between checks, may block.
            self.slow.loop_thread = None
            self.slow.heart = None
        calls = self.slow.calls[before:]
        assert self.slow.on_loop == [], f"{op}: {self.slow.on_loop} ran on the loop"
        assert self.slow.stalled == [], f"{op}: the loop stalled during {self.slow.stalled}"
        if op in self.native:
            assert calls == [], f"{op} is native here, yet called {calls}"
        elif op in self.native_backend:
            # The writer locks are released in the worker thread, the backend closed
            # natively: only lock releases (if any lock was held) are synchronous.
            assert set(calls) <= {"release"}, f"{op} called {calls}"
        else:
            assert calls, f"{op} made no backend call"
        return result


def _turn(s: Session, turn: int) -> None:
    user_turn(s, turn, f"hi {turn}")


def _store(backend: Any) -> DurableStore:
    return DurableStore(backend, create_plugin_manager(autoload=False))


def _is_postgres(backend: Backend) -> bool:
    return type(backend).__name__ == "PostgresBackend"


def _is_native(backend: Backend) -> bool:
    """Whether the backend has the asyncio twins (PostgreSQL's and Redis's)."""
    return type(backend).__name__ in ("PostgresBackend", "RedisBackend")


#: The operations PostgreSQL and Redis await natively (the others run in the worker
#: thread).
NATIVE = {"aflush", "astored", "astored-iter", "afollow"}


def test_every_operation_leaves_the_loop_running(storage: Callable[[], Backend]) -> None:
    recorder = Recorder()
    inner = storage()
    native = _is_native(inner)
    probe = Probe(recorder, NATIVE if native else set(), {"aclose"} if native else set())

    async def main() -> None:
        store = _store(Slow(inner, recorder))
        check = probe.check
        s = await check("acreate", store.acreate("a", cwd="/w"))
        assert store.get("a") is s
        assert s.header.cwd == "/w"
        _turn(s, 1)
        await check("aflush", store.aflush(s))

        headers = await check("astored", store.astored())
        assert headers == store.stored()
        assert [h.id for h in headers] == ["a"]

        async def listed() -> list[Any]:
            return [h async for h in store.astored()]

        assert await check("astored-iter", listed()) == headers

        child = await check("afork", store.afork(s, child_id="b"))
        assert child.header.parent_session == "a"
        assert encode_events(child.events) == encode_events(s.events)
        assert await check("alocation", store.alocation("a")) == store.location("a")
        await check("arelease", store.arelease(child))
        assert store.get("b") is None

        # A second store (a second process) follows "a" while the first writes it.
        other = _store(Slow(storage(), recorder))

        async def follow_while_written() -> list[Any]:
            async with contextlib.aclosing(other.afollow("a", last=2)) as follower:
                # The tail is read at the first step: take it before the write.
                got = [await anext(follower), await anext(follower)]
                _turn(s, 2)
                await store.aflush(s)
                async for event in follower:
                    got.append(event)
                    if len(got) == 5:
                        break
            return got

        got = await check("afollow", follow_while_written())
        assert encode_events(got) == encode_events(s.events[1:])

        await check("arelease", store.arelease(s))
        opened = await check("aopen", other.aopen("a"))
        assert encode_events(opened.events) == encode_events(s.events)
        await check("aclose", other.aclose())
        await check("aclose", store.aclose())

    asyncio.run(main())
    # What was written is what a synchronous store reads.
    with _store(storage()) as reader:
        assert [e.type for e in reader.open("a").events][-3:] == [
            "turn/start", "user/message", "turn/end"]
        assert len(reader.open("b").events) == 3


def test_an_interrupted_turn_is_repaired_by_aopen(storage: Callable[[], Backend]) -> None:
    """aopen does the crash repair of open, in the worker thread."""
    writer = _store(storage())
    s = writer.create("cut", cwd="/w")
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
    writer.flush(s)
    writer.release(s)
    recorder = Recorder()
    probe = Probe(recorder, set(), set())

    async def main() -> Session:
        async with _store(Slow(storage(), recorder)) as store:
            return await probe.check("aopen", store.aopen("cut"))

    opened = asyncio.run(main())
    assert [e.type for e in opened.events] == ["turn/start", "turn/end"]
    assert "commit_repair" in recorder.calls
    writer.close()


def test_awaited_operations_of_one_store_run_one_at_a_time(
    storage: Callable[[], Backend],
) -> None:
    """Two acreate of one id at once: one creates it, the other is refused, as two
    synchronous creates in a row would be (never two sessions bound to one id)."""

    async def main() -> None:
        async with _store(storage()) as store:
            results = await asyncio.gather(store.acreate("same", cwd="/w"),
                                           store.acreate("same", cwd="/w"),
                                           return_exceptions=True)
            created = [r for r in results if isinstance(r, Session)]
            refused = [r for r in results if isinstance(r, SessionExistsError)]
            assert len(created) == 1, results
            assert len(refused) == 1, results
            assert store.get("same") is created[0]
            many = await asyncio.gather(*(store.acreate(f"s{i}") for i in range(8)))
            for s in many:
                _turn(s, 1)
            await asyncio.gather(*(store.aflush(s) for s in many))
            ids = sorted(h.id for h in await store.astored())
            assert ids == sorted(f"s{i}" for i in range(8))

    asyncio.run(main())


def test_a_cancelled_follower_ends_cleanly(storage: Callable[[], Backend]) -> None:
    """Cancelling the consumer of afollow ends it at once, closing what it opened."""
    backend = storage()

    async def main() -> None:
        async with _store(backend) as store:
            s = await store.acreate("f", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            first = asyncio.Event()

            async def follow() -> None:
                async for _ in store.afollow("f", last=1):
                    first.set()

            task = asyncio.ensure_future(follow())
            await asyncio.wait_for(first.wait(), PATIENCE)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # A follower gone: the session is still written and followed anew.
            _turn(s, 2)
            await store.aflush(s)
            seen = [e.seq async for e in store.afollow("f", last=6, timeout=0)]
            assert seen == list(range(6))

    asyncio.run(main())
    if _is_postgres(backend):
        assert _listeners(backend.url) == 0  # type: ignore[attr-defined]


def test_following_a_session_not_stored_is_refused(storage: Callable[[], Backend]) -> None:
    async def main() -> None:
        async with _store(storage()) as store:
            store.create("unflushed")
            for sid in ("nowhere", "unflushed"):
                with pytest.raises(PersistenceError, match="not found"):
                    async for _ in store.afollow(sid):
                        pass

    asyncio.run(main())


def test_stored_headers_await_and_iterate(storage: Callable[[], Backend]) -> None:
    async def main() -> None:
        async with _store(storage()) as store:
            assert await store.astored() == []
            for sid in ("x", "y"):
                s = await store.acreate(sid)
                _turn(s, 1)
                await store.aflush(s)
            listed = [h.id async for h in store.astored()]
            assert sorted(listed) == ["x", "y"]
            assert [h.id for h in await store.astored()] == listed

    asyncio.run(main())


# --- PostgreSQL: the native reads wait on the server, not on the loop ------------------


def test_postgres_native_reads_leave_the_loop_running(postgresql_url: str) -> None:
    """astored and afollow's first read wait on a table lock that only another
    coroutine of the same loop releases: if either blocked the loop, it could never
    finish."""
    from dsh_session_core import PostgresBackend

    async def held(table: str, start: Callable[[], Any]) -> Any:
        blocker = await psycopg.AsyncConnection.connect(postgresql_url)
        try:
            await blocker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            task = asyncio.ensure_future(start())
            await until_a_query_waits_on_a_lock(postgresql_url)
            assert not task.done()
            await blocker.rollback()  # only possible if the loop is free
            return await asyncio.wait_for(task, PATIENCE)
        finally:
            await blocker.close()

    async def main() -> None:
        async with _store(PostgresBackend(postgresql_url)) as store:
            s = await store.acreate("pg", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            headers = await held("sessions", store.astored)
            assert headers == store.stored()

            async def first_three() -> list[Any]:
                follower = store.afollow("pg", last=3)
                async with contextlib.aclosing(follower):
                    return [await anext(follower) for _ in range(3)]

            events = await held("events", first_three)
            assert encode_events(events) == encode_events(s.events)

    asyncio.run(main())
    assert _listeners(postgresql_url) == 0


def _listeners(url: str) -> int:
    """How many follower connections are still open on the server, once those being
    closed are gone (a deadline loop: the server ends a closed connection's process
    shortly after the client left)."""
    deadline = time.monotonic() + PATIENCE
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE 'dsh-session follower%'").fetchone()
            count = 0 if row is None else int(row[0])
            if count == 0 or time.monotonic() > deadline:
                return count
            time.sleep(0.01)
