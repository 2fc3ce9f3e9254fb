"""The default mode's idle window (issue 39, point 4): after a write, ``DshSession``
keeps the session's writer lock for ``idle_window`` seconds, so that its next write
takes the session back without locking; a writer of another process waiting within its
``lock_timeout`` gets in once the instance is idle, and at once after ``aclose()``;
instances of this process on other store objects do not wait for it."""

from __future__ import annotations

import asyncio
import textwrap
import time
from typing import Any

import pytest

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession
from dsh_session_openai_agents._session import DEFAULT_IDLE_WINDOW, DEFAULT_LOCK_TIMEOUT
from process_support import ask, line_worker

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

#: Another worker: at each line on stdin, ``add_items`` of one user message (the line)
#: through a new ``DshSession`` whose lock timeout is the line's first word; it says
#: "added <seconds>" or "refused".
WORKER = textwrap.dedent("""
    import asyncio, sys, time
    from dsh_session_core import SessionLockedError
    from dsh_session_openai_agents import DshSession

    async def main():
        print("ready", flush=True)
        for line in sys.stdin:
            timeout, text = line.split()
            session = DshSession("s", store=sys.argv[1], lock_timeout=float(timeout),
                                 idle_window=0)
            t0 = time.monotonic()
            try:
                await session.add_items([{"role": "user", "content": text}])
                print(f"added {time.monotonic() - t0:.3f}", flush=True)
            except SessionLockedError:
                print("refused", flush=True)
            await session.aclose()

    asyncio.run(main())
""")


def _contents(items: list[Any]) -> list[str]:
    return [item["content"] for item in items]


def _texts(store_url: str) -> list[str]:
    with open_store(store_url) as store:
        return [e.data.content[0].text for e in store.read_session("s").events
                if e.type == "user/message"]


def test_the_window_is_far_below_the_lock_timeout() -> None:
    assert DEFAULT_IDLE_WINDOW * 20 <= DEFAULT_LOCK_TIMEOUT


def test_a_waiting_writer_of_another_process_gets_in_once_the_instance_is_idle(
        store_url: str) -> None:
    with line_worker(WORKER, store_url) as worker:
        async def main() -> None:
            session = DshSession("s", store=store_url, idle_window=2.0)
            await session.add_items([{"role": "user", "content": "one"}])
            assert ask(worker, "0 hasty") == "refused"  # the lock is kept
            t0 = time.monotonic()
            await session.add_items([{"role": "user", "content": "two"}])  # no wait
            assert time.monotonic() - t0 < 2.0
            # The instance left open and idle: the timer lets go after its window.
            answer = ask(worker, "30 patient")
            assert answer.startswith("added "), answer
            assert float(answer.split()[1]) < 30
            # Its next write takes the session back with the worker's item before it.
            await session.add_items([{"role": "user", "content": "three"}])
            assert _contents(await session.get_items()) == [
                "one", "two", "patient", "three"]
            await session.aclose()

        asyncio.run(main())
    assert _texts(store_url) == ["one", "two", "patient", "three"]


def test_aclose_and_close_end_the_window(store_url: str) -> None:
    with line_worker(WORKER, store_url) as worker:
        async def main() -> None:
            session = DshSession("s", store=store_url, idle_window=600)
            await session.add_items([{"role": "user", "content": "one"}])
            assert ask(worker, "0 hasty") == "refused"
            await session.aclose()
            assert ask(worker, "0 after-aclose").startswith("added")

        asyncio.run(main())
        with open_store(store_url) as store:  # a store of the caller's, left open
            session = DshSession("s", store=store, idle_window=600)
            asyncio.run(session.add_items([{"role": "user", "content": "two"}]))
            assert ask(worker, "0 hasty") == "refused"
            session.close()
            assert ask(worker, "0 after-close").startswith("added")
    assert _texts(store_url) == ["one", "after-aclose", "two", "after-close"]


def test_idle_window_zero_releases_at_each_write(store_url: str) -> None:
    with line_worker(WORKER, store_url) as worker:
        async def main() -> None:
            session = DshSession("s", store=store_url, idle_window=0)
            await session.add_items([{"role": "user", "content": "one"}])
            assert ask(worker, "0 at-once").startswith("added")
            await session.aclose()

        asyncio.run(main())


def test_instances_on_store_objects_of_their_own_take_turns_without_waiting(
        store_url: str) -> None:
    """Two instances of this process, each with a store opened from the URL, and no
    wait allowed: each ends the other's window rather than wait for it."""

    async def main() -> None:
        first = DshSession("s", store=store_url, lock_timeout=0, idle_window=600)
        second = DshSession("s", store=store_url, lock_timeout=0, idle_window=600)
        for i in range(3):
            await first.add_items([{"role": "user", "content": f"a{i}"}])
            await second.add_items([{"role": "user", "content": f"b{i}"}])
        assert _contents(await first.get_items()) == [
            "a0", "b0", "a1", "b1", "a2", "b2"]
        await first.aclose()
        await second.aclose()

    asyncio.run(main())


def test_a_kept_open_read_of_a_few_items_stays_on_the_loop(store_url: str) -> None:
    """No hop to a thread for a read of a few items of a session held open."""

    async def main() -> None:
        session = DshSession("s", store=store_url, keep_open=True)
        await session.add_items([{"role": "user", "content": "one"}])
        read = session.get_items()
        with pytest.raises(StopIteration) as done:  # ended at its first step
            read.send(None)
        assert _contents(done.value.value) == ["one"]
        await session.aclose()

    asyncio.run(main())
