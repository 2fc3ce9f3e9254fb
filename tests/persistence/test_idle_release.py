"""``DurableStore.release(session, idle=seconds)`` (issue 39, point 4): the session is
flushed and leaves the store, but its writer lock is kept for the window, so that
``open(id, resume=session)`` within it takes the session back without locking or
reading; another process's writer is refused meanwhile and gets in once the window has
passed (a timer thread releases it), or at once after ``end_idle`` or ``close``; another
store object of this process ends the window rather than wait for it; a writer that
never goes idle lets go after ``MAX_HOLD``."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from dsh_session_core import SessionLockedError, open_store
from dsh_session_core._persistence.store import idle as idle_module
from dsh_session_core.errors import SessionExistsError
from lifecycle_support import user_texts
from process_support import ask, line_worker

pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")

#: Another process: opens the store, says "ready", and at each line on stdin tries to
#: open session "s": once without waiting ("refused" or "opened": it then releases it),
#: or, given "wait", retrying until it gets in ("opened after <seconds>"). (An open that
#: read the log while a writer appended to it is refused as "removed or rewritten while
#: it was being opened": it is tried again, as its message says.)
OTHER = textwrap.dedent("""
    import sys, time
    from dsh_session_core import PersistenceError, SessionLockedError, open_store
    with open_store(sys.argv[1]) as store:
        print("ready", flush=True)
        for line in sys.stdin:
            t0 = time.monotonic()
            while True:
                try:
                    store.release(store.open("s"))
                except (SessionLockedError, PersistenceError):
                    if line.strip() != "wait":
                        print("refused", flush=True)
                        break
                    if time.monotonic() - t0 > 60:
                        raise
                    time.sleep(0.005)
                    continue
                print(f"opened after {time.monotonic() - t0:.3f}", flush=True)
                break
""")


def _written(store_url: str, text: str) -> None:
    with open_store(store_url) as store:
        session = store.create("s")
        with session.turn() as turn:
            turn.user(text)
        store.release(session)


def test_another_process_is_refused_in_the_window_and_gets_in_once_it_ends(
        store_url: str) -> None:
    _written(store_url, "one")
    with line_worker(OTHER, store_url, timeout=60) as other, open_store(store_url) as store:
        session = store.open("s")
        with session.turn() as turn:
            turn.user("two")
        store.release(session, idle=2.0)
        assert store.get("s") is None  # released: not live here
        # Durable at the release, as without a window: another reader sees it.
        with open_store(store_url) as reader:
            assert user_texts(reader.read_session("s")) == ["one", "two"]
        assert ask(other, "once") == "refused"  # the lock is kept
        answer = ask(other, "wait")  # the timer lets go of it, store left open
        assert answer.startswith("opened after "), answer
        assert float(answer.split()[-1]) < 30
        assert store.persistence.idle.open_windows() == 0
        # The window gone (and another writer in and out), the session is taken
        # back as any released one: the lock taken again, the log's end read.
        again = store.open("s", resume=session)
        assert user_texts(again) == ["one", "two"]
        store.release(again)


def test_end_idle_and_close_let_go_at_once(store_url: str) -> None:
    _written(store_url, "one")
    with line_worker(OTHER, store_url, timeout=60) as other:
        with open_store(store_url) as store:
            session = store.open("s")
            store.release(session, idle=600)
            assert ask(other, "once") == "refused"
            store.end_idle(session)
            assert ask(other, "once").startswith("opened")
            session = store.open("s", resume=session)
            store.release(session, idle=600)
            assert ask(other, "once") == "refused"
        # The store closed with the window open: its lock went with the close.
        assert ask(other, "once").startswith("opened")


def test_open_within_the_window_takes_the_session_back_as_it_was(store_url: str) -> None:
    with open_store(store_url) as store:
        session = store.create("s")
        with session.turn() as turn:
            turn.user("one")
        for text in ("two", "three"):
            store.release(session, idle=600)
            again = store.open("s", resume=session)
            assert again is session  # the very object: nothing was read
            assert store.persistence.idle.open_windows() == 0
            with again.turn() as turn:
                turn.user(text)
        store.release(session, idle=600)
        store.end_idle(session)
        store.end_idle(session)  # a second time: nothing left to end
        with open_store(store_url) as reader:
            stored = reader.read_session("s")
        assert user_texts(stored) == ["one", "two", "three"]
        assert [e.seq for e in stored.events] == list(range(len(stored.events)))


def test_another_store_object_of_this_process_ends_the_window(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        with mine.turn() as turn:
            turn.user("one")
        store.release(mine, idle=600)
        theirs = other.open("s")  # no wait: the window is ended, not waited for
        with theirs.turn() as turn:
            turn.user("theirs")
        other.release(theirs, idle=600)
        back = store.open("s", resume=mine)  # ends theirs in turn
        assert back is not mine
        assert user_texts(back) == ["one", "theirs"]
        store.release(back, idle=600)
        other.delete("s")  # a delete ends it too
        assert "s" not in {h.id for h in other.stored()}


def test_what_this_store_does_to_the_id_in_the_window(store_url: str) -> None:
    with open_store(store_url) as store:
        session = store.create("s")
        with session.turn() as turn:
            turn.user("one")
        store.release(session, idle=600)
        with pytest.raises(SessionExistsError):
            store.create("s")  # refused as stored, as without a window
        store.release(store.open("s", resume=session), idle=600)
        store.append_stored("s", [{"type": "turn/start", "seq": len(session.events),
                                   "time": 1, "data": {
                                       "turn": 9, "trigger": {
                                           "kind": "message", "source": {"kind": "user"}}}},
                                  {"type": "turn/end", "seq": len(session.events) + 1,
                                   "time": 1, "data": {
                                       "turn": 9, "reason": {"kind": "completed"}}}])
        # What the store appended under the kept lock is read when it is taken back.
        back = store.open("s", resume=session)
        assert back is not session
        assert [e.type for e in back.events[-2:]] == ["turn/start", "turn/end"]
        store.release(back, idle=600)
        store.delete("s")
        assert "s" not in {h.id for h in store.stored()}
        with open_store(store_url) as other:
            other.release(other.create("s"))  # nothing holds the id any more


def test_a_window_never_opens_on_an_unwritten_session(store_url: str) -> None:
    """A session with nothing stored is released at once (its lock file, on JSONL, goes
    with it), whatever the window asked."""
    with open_store(store_url) as store:
        session = store.create("s")
        store.release(session, idle=600)
        assert store.persistence.idle.open_windows() == 0
        with open_store(store_url) as other:
            other.release(other.create("s"))


def test_the_timer_ends_windows_in_order_and_then_stops(store_url: str) -> None:
    with open_store(store_url) as store:
        for sid, idle in (("a", 30.0), ("b", 0.05)):
            session = store.create(sid)
            with session.turn() as turn:
                turn.user(sid)
            store.release(session, idle=idle)
        # "b"'s window, shorter, ends first though the timer was waiting for "a"'s.
        windows = store.persistence.idle
        deadline = time.monotonic() + 20
        while windows.open_windows() != 1:
            assert time.monotonic() < deadline, "the short window did not end"
            time.sleep(0.01)
        assert windows.take("b") is None
        kept = windows.take("a")
        assert kept is not None
        windows.keep("a", kept.session, kept.state, 0.01)  # open again, to end now
        while windows.open_windows():
            assert time.monotonic() < deadline, "the timer did not end the window"
            time.sleep(0.01)
        with open_store(store_url) as other:
            other.release(other.open("a"))


def test_a_writer_that_never_goes_idle_lets_go_after_max_hold(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer writing within each window would keep the lock for good: past MAX_HOLD
    its release lets go, and another process's writer, polling, gets in between two of
    its calls."""
    monkeypatch.setattr(idle_module, "MAX_HOLD", 0.5)
    _written(store_url, "one")
    with line_worker(OTHER, store_url, timeout=60) as other, open_store(store_url) as store:
        assert other.stdin is not None
        assert other.stdout is not None
        session = store.open("s")
        other.stdin.write("wait\n")  # it polls from now on
        other.stdin.flush()
        t0 = time.monotonic()
        answered = threading.Event()
        answer: list[str] = []

        def read() -> None:
            answer.append(other.stdout.readline().strip())  # type: ignore[union-attr]
            answered.set()

        threading.Thread(target=read, daemon=True).start()
        while not answered.is_set():
            assert time.monotonic() - t0 < 30, "the other writer never got in"
            with session.turn() as turn:
                turn.user("more")
            store.release(session, idle=0.2)  # a window each call, the next within it
            time.sleep(0.05)
            while True:
                try:
                    session = store.open("s", resume=session)
                    break
                except SessionLockedError:  # the other writer's turn
                    time.sleep(0.01)
        store.release(session)
        assert answer[0].startswith("opened after "), answer


def _completes_without_suspending(coro: Coroutine[Any, Any, Any]) -> bool:
    """Whether ``coro`` runs to its end at its first step: it never awaited anything
    that suspends (no hop to a thread, no sleep)."""
    try:
        coro.send(None)
    except StopIteration:
        return True
    coro.close()
    return False


def test_aflush_of_nothing_and_a_windowed_arelease_stay_on_the_loop(store_url: str) -> None:
    """No hop to a thread for work of a few microseconds: an ``aflush`` with nothing
    buffered, and an ``arelease`` that opens a window (no I/O once flushed)."""

    async def main() -> None:
        with open_store(store_url) as store:
            session = store.create("s")
            with session.turn() as turn:
                turn.user("one")
            await store.aflush(session)  # something to write: off the loop
            assert _completes_without_suspending(store.aflush(session))
            assert _completes_without_suspending(store.arelease(session, idle=600))
            assert store.get("s") is None
            assert store.open("s", resume=session) is session

    asyncio.run(main())
