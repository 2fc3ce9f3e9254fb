"""The Redis backend from asyncio: a store's awaited flushes, listings, followers and its
close take redis-py's asyncio client on the event loop (no worker thread, no thread of
the default pool), with the synchronous writes' checks and fencing; each event loop has
a client of its own, closed on that loop. Against real servers, started by the testing
kit.

How "on the loop, and the loop not blocked" is shown, with no wall-clock margin: the
server is made to hold the operation (``CLIENT PAUSE WRITE`` holds a flush's script; a
follower's ``XREAD`` blocks until an entry comes), a coroutine of the same loop sees the
server holding it (``CLIENT LIST``), and only then releases it; a blocked loop could
never do either. The synchronous twins are spied on and never called.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from persist_support import ONE_TURN, meta

from dsh_session_core import DurableStore, Session, create_plugin_manager
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core.errors import SessionLockedError
from dsh_session_core.testing import user_turn
from dsh_session_core.testing.redis import RedisServer
from redis_support import stored_wires, wire_events

#: A bound for what should take a few round trips: only a hang reaches it.
PATIENCE = 60.0
#: The name the asyncio clients of :class:`Named` give their connections.
ASYNC_NAME = "dsh-test-async"


class Named(RedisBackend):
    """The backend, its asyncio clients named (through the one method that makes them)
    so that the server's ``CLIENT LIST`` tells their connections apart."""

    def _async_client(self) -> Any:
        return redis.asyncio.Redis(**self.target.options, client_name=ASYNC_NAME)


class Spy:
    """Counts the calls of a bound method, and the threads they ran on, and makes them
    (a spy, not a stand-in)."""

    def __init__(self, method: Any) -> None:
        self.method = method
        self.threads: list[int] = []
        self._guard = threading.Lock()

    def _called(self) -> None:
        with self._guard:
            self.threads.append(threading.get_ident())

    @property
    def calls(self) -> int:
        return len(self.threads)


class AsyncSpy(Spy):
    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._called()
        return await self.method(*args, **kwargs)


class SyncSpy(Spy):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._called()
        return self.method(*args, **kwargs)


def _spy(backend: RedisBackend, *names: str) -> dict[str, Spy]:
    spies: dict[str, Spy] = {}
    for name in names:
        method = getattr(backend, name)
        spy = AsyncSpy(method) if asyncio.iscoroutinefunction(method) else SyncSpy(method)
        setattr(backend, name, spy)
        spies[name] = spy
    return spies


#: The synchronous twins of the native operations: never called by an awaited one.
#: (``tail_lines`` is also how a create finds whether the id is stored: see the tests.)
SYNC_TWINS = ("append_batch", "append_projected", "list", "follow_lines")


def _store(backend: RedisBackend) -> DurableStore:
    return DurableStore(backend, create_plugin_manager(autoload=False))


def _turn(s: Session, turn: int) -> None:
    user_turn(s, turn, f"hi {turn}")






@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own: one it pauses, or whose connections it counts."""
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


async def _until_held(admin: Any, command: str) -> None:
    """Return once the server holds a client's ``command`` (a blocked client, flag
    ``b``: a paused write, a waiting ``XREAD``); fail when none is within
    :data:`PATIENCE` (a bound against a hang). It polls every 10 ms, awaiting, so the
    held operation's task keeps its loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while loop.time() < deadline:
        for client in await admin.client_list():
            if "b" in client.get("flags", "") and client.get("cmd") == command:
                return
        await asyncio.sleep(0.01)
    pytest.fail(f"the server never held a client's {command}")


def _async_connections(url: str) -> int:
    """How many connections of :class:`Named`'s asyncio clients the server has."""
    raw: Any = redis.Redis.from_url(url)
    try:
        return sum(c.get("name") == ASYNC_NAME for c in raw.client_list())
    finally:
        raw.close()


def _until_no_async_connection(url: str) -> None:
    """Return once the server has no asyncio client's connection left (it drops a closed
    one shortly after the client left); fail when it keeps one past :data:`PATIENCE`."""
    deadline = time.monotonic() + PATIENCE
    while _async_connections(url):
        if time.monotonic() > deadline:
            pytest.fail("an asyncio client's connection was left open")
        time.sleep(0.01)


# --- writing ------------------------------------------------------------------------------


def test_aflush_is_awaited_on_the_loop_while_the_server_holds_it(
    own_server: RedisServer,
) -> None:
    """The flush's script waits on a paused server that only another coroutine of the
    same loop unpauses: if the flush blocked the loop, it could never finish."""
    url = own_server.url + "?prefix=p:"
    backend = RedisBackend(url)
    spies = _spy(backend, "aappend_batch", *SYNC_TWINS)
    store = _store(backend)

    async def main() -> int:
        async with store:
            assert store.capabilities.async_append is backend
            s = store.create("held", cwd="/w")  # takes the lease: flushes are native
            _turn(s, 1)
            await store.aflush(s)
            admin: Any = redis.asyncio.Redis.from_url(own_server.url)
            try:
                await admin.execute_command("CLIENT", "PAUSE", round(PATIENCE * 1000),
                                            "WRITE")
                _turn(s, 2)
                flush = asyncio.ensure_future(store.aflush(s))
                await _until_held(admin, "evalsha")
                assert not flush.done()
                await admin.execute_command("CLIENT", "UNPAUSE")  # the loop is free
                await asyncio.wait_for(flush, PATIENCE)
            finally:
                await admin.execute_command("CLIENT", "UNPAUSE")
                await admin.aclose()
            return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert spies["aappend_batch"].threads == [loop_thread, loop_thread]
    assert {name: spies[name].calls for name in SYNC_TWINS} == dict.fromkeys(SYNC_TWINS, 0)
    assert [e["seq"] for e in stored_wires(url, "held")] == list(range(6))


def test_a_writer_whose_lease_was_taken_over_is_refused_natively(redis_url: str) -> None:
    """The writer stalls past its lease (played by removing the lease key, as its expiry
    does) and another takes the session: the stalled writer's awaited flush, whose
    batch follows the stored log exactly, is refused by the lease check in the script,
    and nothing lands. Once the other writer is gone, the writer takes its lease back
    (in a thread) and the same flush lands."""
    backend = RedisBackend(redis_url)
    spies = _spy(backend, "aappend_batch", *SYNC_TWINS)
    raw: Any = redis.Redis.from_url(redis_url.partition("?")[0])
    thief = RedisBackend(redis_url)

    async def main() -> None:
        async with _store(backend) as store:
            s = store.create("taken", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            raw.delete(SessionKeys.of(redis_url.partition("prefix=")[2], "taken").lease)
            lease = thief.acquire(meta("taken"))
            try:
                _turn(s, 2)
                for _ in range(2):
                    with pytest.raises(SessionLockedError,
                                       match=r"lease was taken over .*epoch 2.*nothing of "
                                             r"it written"):
                        await store.aflush(s)
                assert len(stored_wires(redis_url, "taken")) == 3
            finally:
                lease.release()
            await store.aflush(s)  # the lease is free: taken back, the batch retried

    try:
        asyncio.run(main())
    finally:
        thief.close()
        raw.close()
    assert spies["aappend_batch"].calls == 4
    assert {name: spies[name].calls for name in SYNC_TWINS} == dict.fromkeys(SYNC_TWINS, 0)
    assert [e["seq"] for e in stored_wires(redis_url, "taken")] == list(range(6))


def test_a_batch_that_does_not_follow_the_stored_log_is_refused_natively(
    redis_url: str,
) -> None:
    """The synchronous append's seq checks, awaited: a gap and a rewritten event are
    refused and write nothing; a retry of a batch that landed (its reply lost) succeeds
    without writing it twice."""
    from dsh_session_core.errors import PersistenceError

    backend = RedisBackend(redis_url)
    h = meta("gap", "/w")

    async def main() -> None:
        await backend.aappend_batch(h, wire_events(ONE_TURN[:2]), b"", False)
        with pytest.raises(PersistenceError, match=r"ends at seq 1, but this batch starts at "
                                                   r"seq 3"):
            await backend.aappend_batch(h, wire_events(ONE_TURN[3:]), b"", True)
        rewritten = [{**ONE_TURN[1], "time": 99}, ONE_TURN[2]]
        with pytest.raises(PersistenceError, match="written by another writer"):
            await backend.aappend_batch(h, wire_events(rewritten), b"", True)
        await backend.aappend_batch(h, wire_events(ONE_TURN[2:]), b"", True)
        await backend.aappend_batch(h, wire_events(ONE_TURN[2:]), b"", True)  # reply lost
        await backend.aclose()

    asyncio.run(main())
    assert stored_wires(redis_url, "gap") == ONE_TURN


# --- reading ------------------------------------------------------------------------------


def test_a_follower_waits_on_xread_on_the_loop_and_gets_each_batch_and_a_cut(
    redis_url: str,
) -> None:
    writer, reader = RedisBackend(redis_url), RedisBackend(redis_url)
    h = meta("live", "/w")
    writer.append_batch(h, wire_events(ONE_TURN[:2]), b"", materialized=False)

    async def main() -> None:
        tail = await reader.atail_lines("live", 5)
        assert tail is not None
        assert (len(tail.lines), tail.position) == (2, 1)
        admin: Any = redis.asyncio.Redis.from_url(redis_url.partition("?")[0])
        news = reader.afollow_lines("live", tail.position, timeout=PATIENCE)
        try:
            first = asyncio.ensure_future(anext(news))
            await _until_held(admin, "xread")  # seen from the loop, while it waits
            assert not first.done()
            await asyncio.to_thread(writer.append_batch, h, wire_events(ONE_TURN[2:4]), b"",
                                    True)
            got = await asyncio.wait_for(first, PATIENCE)
            assert (len(got.lines), got.position, got.note) == (2, 3, None)
            await asyncio.to_thread(writer.commit_repair, h, 2,
                                    wire_events([{**ONE_TURN[2], "time": 70}]), b"")
            got = await asyncio.wait_for(anext(news), PATIENCE)
            assert (got.lines, got.position) == ([], 1)
            assert "cut back" in (got.note or "")
            got = await asyncio.wait_for(anext(news), PATIENCE)
            assert (len(got.lines), got.position) == (1, 2)
        finally:
            await news.aclose()
            await admin.aclose()
            await reader.aclose()

    try:
        asyncio.run(main())
    finally:
        writer.close()


def test_a_cancelled_follower_ends_wherever_the_cancel_finds_it(redis_url: str) -> None:
    """Cancelled at each step of its first rounds (its reads of the session's state, its
    ``XREAD``), the follower ends every time. redis-py waits on its socket writes with
    ``asyncio.wait_for``, which on Python 3.11 loses a cancellation that comes as the
    write is done: the follower raises it again, else it would follow on forever."""
    backend = RedisBackend(redis_url)
    backend.append_batch(meta("c", "/w"), wire_events(ONE_TURN[:2]), b"", materialized=False)

    async def follow() -> None:
        async with contextlib.aclosing(backend.afollow_lines("c", 1)) as news:
            async for _ in news:
                pass

    async def main() -> None:
        for steps in range(24):
            task = asyncio.ensure_future(follow())
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, PATIENCE)
        await backend.aclose()

    asyncio.run(main())


def test_the_store_lists_and_follows_natively_and_aclose_closes_the_loops_client(
    own_server: RedisServer,
) -> None:
    url = own_server.url + "?prefix=s:"
    backend = Named(url)
    spies = _spy(backend, "alist", "atail_lines", "tail_lines", *SYNC_TWINS)
    notes: list[str] = []

    async def main() -> None:
        store = _store(backend)
        s = await store.acreate("a", cwd="/w")
        _turn(s, 1)
        await store.aflush(s)
        assert [h.id for h in await store.astored()] == ["a"]
        assert [h.id async for h in store.astored()] == ["a"]
        spies["tail_lines"].threads.clear()  # the create's look at the id: not a follower
        follower = store.afollow("a", last=2, on_note=notes.append)
        async with contextlib.aclosing(follower) as events:
            got = [(await anext(events)).seq, (await anext(events)).seq]
            _turn(s, 2)
            await store.aflush(s)
            async for event in events:
                got.append(event.seq)
                if event.seq == 5:
                    break
        assert got == [1, 2, 3, 4, 5]
        assert _async_connections(own_server.url) > 0
        await store.aclose()

    asyncio.run(main())
    _until_no_async_connection(own_server.url)
    assert (spies["alist"].calls, spies["atail_lines"].calls) == (2, 1)
    assert spies["tail_lines"].calls == 0
    assert {name: spies[name].calls for name in SYNC_TWINS} == dict.fromkeys(SYNC_TWINS, 0)
    assert notes == []


# --- event loops --------------------------------------------------------------------------


def test_two_event_loops_use_one_store_each_with_a_client_of_its_own(
    own_server: RedisServer,
) -> None:
    """Two threads, each running its own loop (``asyncio.run``), write, list and follow
    through one store: each loop's operations take a client of that loop's, closed as
    that loop shuts down (a client shared by both would outlive the first loop, its
    connections left open)."""
    url = own_server.url + "?prefix=l:"
    backend = Named(url)
    spies = _spy(backend, "aappend_batch", *SYNC_TWINS)
    store = _store(backend)
    both = threading.Barrier(2, timeout=PATIENCE)
    results: dict[str, Any] = {}

    async def work(sid: str) -> list[int]:
        s = await store.acreate(sid, cwd="/w")
        for turn in (1, 2, 3):
            _turn(s, turn)
            await store.aflush(s)
            if turn == 1:
                await asyncio.to_thread(both.wait)  # both loops' clients are open now
        listed = sorted(h.id for h in await store.astored())
        assert listed == ["one", "two"]
        return [e.seq async for e in store.afollow(sid, last=9, timeout=0)]

    def run(sid: str) -> None:
        try:
            results[sid] = asyncio.run(work(sid))
        except BaseException as exc:
            results[sid] = exc

    threads = [threading.Thread(target=run, args=(sid,)) for sid in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE)
    try:
        assert results == {"one": list(range(9)), "two": list(range(9))}
        # Each loop closed its client as it shut down: no connection of theirs is left.
        _until_no_async_connection(own_server.url)
        assert spies["aappend_batch"].calls == 6
        assert len(set(spies["aappend_batch"].threads)) == 2  # on each loop's thread
        assert {name: spies[name].calls for name in SYNC_TWINS} == dict.fromkeys(
            SYNC_TWINS, 0)
    finally:
        store.close()
    for sid in ("one", "two"):
        assert [e["seq"] for e in stored_wires(url, sid)] == list(range(9))


def test_closing_the_store_from_another_thread_closes_a_running_loops_client(
    own_server: RedisServer,
) -> None:
    """A loop that runs on (a server's) keeps its client until the store is closed: the
    synchronous close hands the loop a task that closes it there. (The garbage collector
    is kept off meanwhile: dropping the client's keeper could have the loop close it
    too, by its finalizer of async generators, noisily, and by chance.)"""
    url = own_server.url + "?prefix=c:"
    store = _store(Named(url))
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    try:
        s = store.create("kept", cwd="/w")
        _turn(s, 1)
        asyncio.run_coroutine_threadsafe(store.aflush(s), loop).result(PATIENCE)
        assert _async_connections(own_server.url) > 0
        gc.disable()
        try:
            store.close()
            _until_no_async_connection(own_server.url)
        finally:
            gc.enable()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(PATIENCE)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    assert [e["seq"] for e in stored_wires(url, "kept")] == [0, 1, 2]
