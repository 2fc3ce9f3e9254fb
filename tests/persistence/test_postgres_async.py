"""The PostgreSQL backend from asyncio: ``DurableStore.aflush`` awaits psycopg's
``AsyncConnection`` on the event loop (no worker thread), and ``afollow`` streams a
session as it is committed. Against a real server, a database per test."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from pg_support import until_a_query_waits_on_a_lock

from dsh_session_core import DurableStore, PostgresBackend, Session, create_plugin_manager

USER = {"kind": "user"}


def _turn(s: Session, turn: int) -> None:
    s.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _store(url: str) -> DurableStore:
    return DurableStore(PostgresBackend(url), create_plugin_manager(autoload=False))


class _Counting:
    """Counts the calls of a bound method and makes them (a spy, not a stand-in)."""

    def __init__(self, method: Any) -> None:
        self.method = method
        self.calls = 0

    async def __call__(self, *args: Any) -> None:
        self.calls += 1
        await self.method(*args)


def _seqs(url: str, sid: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT seq FROM events WHERE session_id = %s ORDER BY seq",
                            (sid,)).fetchall()
    return [r[0] for r in rows]


def test_aflush_writes_natively_and_durably(postgresql_url: str) -> None:
    async def main() -> None:
        async with _store(postgresql_url) as store:
            backend = store.backend
            assert isinstance(backend, PostgresBackend)
            spy = _Counting(backend.aappend_batch)
            backend.aappend_batch = spy  # type: ignore[method-assign,assignment]
            sessions = [store.create(f"s{i}", cwd="/w") for i in range(4)]
            for turn in range(1, 6):
                for s in sessions:
                    _turn(s, turn)
                await asyncio.gather(*(store.aflush(s) for s in sessions))
            # create took each session's lease: every flush is awaited on the loop.
            assert spy.calls == 4 * 5

    asyncio.run(main())
    for i in range(4):
        assert _seqs(postgresql_url, f"s{i}") == list(range(10))


def test_concurrent_aflushes_of_one_session_never_overlap(postgresql_url: str) -> None:
    async def main() -> None:
        async with _store(postgresql_url) as store:
            s = store.create("one", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            flushes = []
            for turn in range(2, 12):
                _turn(s, turn)
                flushes.append(store.aflush(s))
            await asyncio.gather(*flushes)

    asyncio.run(main())
    assert _seqs(postgresql_url, "one") == list(range(22))


def test_aflush_leaves_the_loop_running_while_the_server_works(postgresql_url: str) -> None:
    """The insert waits on a row lock that only another coroutine of the same loop can
    release: if aflush blocked the loop, it could never finish."""

    async def main() -> None:
        async with _store(postgresql_url) as store:
            s = store.create("held", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            blocker = await psycopg.AsyncConnection.connect(postgresql_url)
            try:
                # Inserting an event takes a share lock on its session's row (the
                # foreign key): holding FOR UPDATE on it makes the flush wait.
                await blocker.execute("SELECT 1 FROM sessions WHERE id = 'held' FOR UPDATE")
                _turn(s, 2)
                flush = asyncio.ensure_future(store.aflush(s))
                await until_a_query_waits_on_a_lock(postgresql_url)
                assert not flush.done()
                await blocker.rollback()  # only possible if the loop is free
                await asyncio.wait_for(flush, timeout=30)
            finally:
                await blocker.close()

    asyncio.run(main())
    assert _seqs(postgresql_url, "held") == [0, 1, 2, 3]


def test_afollow_streams_each_commit(postgresql_url: str) -> None:
    async def main() -> list[tuple[int, int]]:
        async with _store(postgresql_url) as store:
            s = store.create("live", cwd="/w")
            _turn(s, 1)
            await store.aflush(s)
            follower = PostgresBackend(postgresql_url)
            seen: list[tuple[int, int]] = []

            async def follow() -> None:
                async for last, lines in follower.afollow("live", 1, timeout=30):
                    seen.append((last, len(lines)))
                    if last == 7:
                        return

            task = asyncio.ensure_future(follow())
            for turn in (2, 3, 4):
                _turn(s, turn)
                await store.aflush(s)
            await asyncio.wait_for(task, timeout=30)
            await follower.aclose()
            return seen

    seen = asyncio.run(main())
    assert seen[-1][0] == 7
    assert sum(n for _, n in seen) == 6  # seqs 2-7, each once
