"""``DshSession(..., keep_open=True)``: the session is opened (or created) by the first
operation and held until ``close()``; the items survive a close and a reopen equal as
JSON, and the log is the one the default mode writes; another process is refused while
it is held and let in after; each operation folds only what was appended since the last
(so an append costs its batch, not the log); a refused batch leaves nothing behind; a
cancelled operation keeps its turn until its thread is done; and the per-session lock
table (``_LOCKS``) holds only the sessions in use."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import DurableStore, Event, Session, open_store, to_wire
from dsh_session_core.errors import NotJsonError, TooDeepError
from dsh_session_openai_agents import DshSession, _view, fold_items
from dsh_session_openai_agents import _locks as module

ITEMS: list[Any] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": '{"city": "Paris"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 °C"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Sunny, 21 °C.", "annotations": []}]},
    {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"},
                                 {"type": "input_image", "image_url": "https://x/y.png",
                                  "detail": "auto"}]},
    {"type": "function_call", "call_id": "call_2", "name": "weather",
     "arguments": '{"city": "Paris", "day": 2}'},
    {"role": "assistant", "content": "Rain. 1.5e-7 chance of snow", "n": 1.5e-7, "big": 2**70},
]


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _stored(store_url: str, session_id: str) -> list[Event]:
    """The stored log, read without writing (an open would close a turn left open
    between calls as a crash's)."""
    with open_store(store_url) as store:
        return list(store.read_session(session_id).events)


def _shape(events: Iterable[Event]) -> list[tuple[str, Any]]:
    """The log without its times: each event's type and payload."""
    return [(e.type, to_wire(e)["data"]) for e in events]


async def _script(session: DshSession) -> list[Any]:
    """The same operations in either mode: single items and batches, an output in a
    later call than its call, a pop, a clear, and reads in between."""
    seen: list[Any] = []
    for item in ITEMS[:3]:
        await session.add_items([item])
    seen.append(await session.get_items())
    await session.add_items(ITEMS[3:6])
    assert await session.pop_item() == ITEMS[5]
    await session.add_items(ITEMS[5:])
    seen.append(await session.get_items(limit=3))
    await session.clear_session()
    seen.append(await session.get_items())
    await session.add_items(ITEMS)
    seen.append(await session.get_items())
    return seen


def test_items_survive_close_and_reopen_equal_as_json(store_url: str) -> None:
    async def main() -> None:
        held = DshSession("kept", store=store_url, keep_open=True)
        seen = await _script(held)
        await held.aclose()
        assert seen[-1] == ITEMS
        for keep_open in (True, False):
            again = DshSession("kept", store=store_url, keep_open=keep_open)
            assert json.dumps(await again.get_items()) == json.dumps(ITEMS)
            await again.aclose()

    asyncio.run(main())


def test_the_log_is_the_one_the_default_mode_writes(store_url: str) -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        default = DshSession("default", store=store_url)
        kept = DshSession("kept", store=store_url, keep_open=True)
        try:
            return await _script(default), await _script(kept)
        finally:
            await default.aclose()
            await kept.aclose()

    by_default, kept = asyncio.run(main())
    assert json.dumps(kept) == json.dumps(by_default)
    events = _stored(store_url, "kept")
    assert _shape(events) == _shape(_stored(store_url, "default"))
    assert [item for _, item in fold_items(events)] == ITEMS
    assert "tool/result" in {e.type for e in events}  # call_1 answered across calls


HOLD = textwrap.dedent("""
    import asyncio, sys
    from dsh_session_core import SessionLockedError
    from dsh_session_openai_agents import DshSession

    async def main():
        session = DshSession("kept", store=sys.argv[1], lock_timeout=0.2)
        try:
            if sys.argv[2] == "add":
                await session.add_items([{"role": "user", "content": "from elsewhere"}])
            print(len(await session.get_items()))
        except SessionLockedError:
            print("locked")
        finally:
            await session.aclose()

    asyncio.run(main())
""")


def _other_process(store_url: str, what: str = "get") -> str:
    """What another process's ``DshSession`` (``lock_timeout=0.2``) gets: the number of
    items, after adding one when ``what`` is ``"add"``; or ``locked``."""
    done = subprocess.run([sys.executable, "-c", HOLD, store_url, what], capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_another_process_is_refused_while_held_and_let_in_after_close(store_url: str) -> None:
    async def main() -> None:
        session = DshSession("kept", store=store_url, keep_open=True)
        await session.add_items(ITEMS[:2])
        assert await asyncio.to_thread(_other_process, store_url, "add") == "locked"
        # A read is never refused: it gets what the holder has made durable.
        assert await asyncio.to_thread(_other_process, store_url) == "2"
        await session.add_items(ITEMS[2:4])  # still ours
        assert await asyncio.to_thread(_other_process, store_url, "add") == "locked"
        await session.aclose()
        assert await asyncio.to_thread(_other_process, store_url, "add") == "5"
        await session.aclose()  # twice: nothing more to do

    asyncio.run(main())


def test_a_first_read_takes_the_session_too(tmp_path: Path) -> None:
    """Nothing stored yet: the first operation, a read, creates the session and holds
    it: another process finds nothing stored, and may not create it; released with
    nothing written, it stores nothing."""
    logs = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("kept", store=logs, keep_open=True)
        assert await session.get_items() == []
        assert await asyncio.to_thread(_other_process, logs, "add") == "locked"
        assert await asyncio.to_thread(_other_process, logs) == "0"
        await session.aclose()
        with open_store(logs) as store:
            assert [h.id for h in store.stored()] == []
        assert await asyncio.to_thread(_other_process, logs, "add") == "1"

    asyncio.run(main())


def test_the_default_mode_holds_nothing_between_operations(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")

    async def main() -> None:
        with open_store(logs) as store:
            session = DshSession("kept", store=store)
            await session.add_items(ITEMS[:1])
            assert store.get("kept") is None
            assert await asyncio.to_thread(_other_process, logs) == "1"
            kept = DshSession("kept", store=store, keep_open=True)
            await kept.get_items()
            assert store.get("kept") is not None
            await kept.aclose()
            assert store.get("kept") is None
            assert not store.persistence.closed  # the caller's store: left open

    asyncio.run(main())


def test_instances_on_one_store_object_share_the_held_session(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")

    async def main() -> None:
        with open_store(logs) as store:
            first = DshSession("kept", store=store, keep_open=True)
            second = DshSession("kept", store=store, keep_open=True)
            plain = DshSession("kept", store=store)
            await first.add_items(ITEMS[:2])
            live = store.get("kept")
            await second.add_items(ITEMS[2:4])
            await plain.add_items(ITEMS[4:6])
            assert store.get("kept") is live  # one live session, held by the first
            assert await second.get_items() == ITEMS[:6]
            await second.aclose()  # it holds nothing: the session stays open
            assert store.get("kept") is live
            await first.aclose()
            assert store.get("kept") is None
            await second.add_items(ITEMS[6:])  # opens and holds it anew
            assert store.get("kept") is not live
            assert await first.get_items() == ITEMS
            first.close()
            second.close()
            second.close()
            assert store.get("kept") is None

    asyncio.run(main())


def test_close_is_safe_twice_and_closes_only_its_own_store(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    session = DshSession("kept", store=logs, keep_open=True)
    asyncio.run(session.add_items(ITEMS[:1]))
    session.close()
    session.close()
    assert session.store.persistence.closed
    assert _other_process(logs) == "1"
    asynced = DshSession("kept", store=logs, keep_open=True)
    asyncio.run(asynced.get_items())

    async def twice() -> None:
        await asynced.aclose()
        await asynced.aclose()
        asynced.close()

    asyncio.run(twice())
    assert _other_process(logs) == "1"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the events each fold looks at."""
    folded: list[int] = []
    advance = _view._advance

    def counted(events: Any, items: Any, calls: Any) -> None:
        events = list(events)
        folded.append(len(events))
        advance(events, items, calls)

    monkeypatch.setattr(_view, "_advance", counted)
    return folded


def _folds_after_a_long_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: bool,
    then: Callable[[DshSession], Awaitable[None]],
) -> tuple[list[int], int]:
    """The events each fold of ``then``'s operations looked at, run on a session of 30
    batches, and the length of its log after."""
    logs = str(tmp_path / "logs")

    async def main() -> list[int]:
        session = DshSession("kept", store=logs, keep_open=keep_open)
        for _ in range(30):
            await session.add_items(ITEMS)
        folded = _counting(monkeypatch)
        await then(session)
        await session.aclose()
        return folded

    folded = asyncio.run(main())
    return folded, len(_stored(logs, "kept"))


@pytest.mark.parametrize("keep_open", [True, False])
def test_an_append_folds_only_what_it_appended_when_kept_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: bool
) -> None:
    """The cost of ``add_items`` is its batch's, kept open or not: each operation folds
    the events appended since the last one, not the log (the default mode takes its
    session back from the last call, ``store.open(id, resume=...)``)."""
    async def then(session: DshSession) -> None:
        await session.add_items(ITEMS[:1])
        await session.get_items()
        await session.pop_item()

    folded, log = _folds_after_a_long_log(tmp_path, monkeypatch, keep_open, then)
    assert log > 30 * len(ITEMS) * 2
    if keep_open:
        assert max(folded) < 10, folded  # a turn of one user message, then the pop
    else:
        # The append and the pop fold a few events each (in steps of their own); the read
        # folds nothing: it reads the item view's rows (the agents/items projection).
        assert sum(folded) < 20, folded


@pytest.mark.parametrize("keep_open", [True, False])
def test_a_refused_batch_costs_no_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: bool
) -> None:
    """A batch refused before anything of it was appended keeps the session taken
    back as it was: the next call folds its own events, not the log loaded again."""
    refused: Any = {"role": "user", "content": "x", "bad": {1, 2}}

    async def then(session: DshSession) -> None:
        with pytest.raises(NotJsonError):
            await session.add_items([refused])
        await session.add_items(ITEMS[:1])

    folded, log = _folds_after_a_long_log(tmp_path, monkeypatch, keep_open, then)
    assert log > 30 * len(ITEMS) * 2
    assert max(folded) < 10, folded


@pytest.mark.parametrize("keep_open", [True, False])
@pytest.mark.parametrize("bad", [{"no": {1, 2}}, {"nan": float("nan")}, "deep"])
def test_a_refused_batch_leaves_nothing_behind(
    tmp_path: Path, keep_open: bool, bad: Any
) -> None:
    """An item the log cannot keep refuses the whole batch before any of it is
    appended: nothing of it is in the log, in memory or on disk, and the next batch
    goes on as if it had not been tried (its output still answers the call)."""
    logs = str(tmp_path / "logs")
    if bad == "deep":
        nested: dict[str, Any] = {}
        bad = nested
        for _ in range(1200):
            nested["x"] = nested = {}
    batch = [ITEMS[3], {"role": "assistant", "content": "half", "extra": bad}]

    async def main() -> None:
        session = DshSession("kept", store=logs, keep_open=keep_open)
        await session.add_items(ITEMS[:3])
        before = _shape(_events_now(session, logs))
        with pytest.raises((NotJsonError, TooDeepError)):
            await session.add_items(batch)
        assert _shape(_events_now(session, logs)) == before
        assert await session.get_items() == ITEMS[:3]
        await session.add_items(ITEMS[3:])
        assert await session.get_items() == ITEMS
        await session.aclose()

    asyncio.run(main())
    events = _stored(logs, "kept")
    results = [e for e in events if e.type == "tool/result"]
    assert [to_wire(e)["data"]["callId"] for e in results] == ["call_1"]
    assert to_wire(results[0])["data"]["isError"] is False
    assert [item for _, item in fold_items(events)] == ITEMS


def _events_now(session: DshSession, store_url: str) -> list[Event]:
    """The log as it is now: the live session's, else the stored one."""
    live = session.store.get(session.session_id)
    return list(live.events) if live is not None else _stored(store_url, session.session_id)


def test_a_cancelled_operation_keeps_its_turn_until_its_thread_is_done(
    tmp_path: Path,
) -> None:
    """Kept open, an operation runs its appends and flush in a worker thread; cancelled
    meanwhile, it waits for that thread (the outcome is then known: durable) before it
    lets the next operation in and raises ``CancelledError``."""
    logs = str(tmp_path / "logs")

    async def main() -> None:
        store = open_store(logs)
        session = DshSession("kept", store=store, keep_open=True)
        await session.add_items(ITEMS[:1])
        entered, go = threading.Event(), threading.Event()
        flush = store.flush

        def slow_flush(live: Session) -> None:
            entered.set()
            assert go.wait(30)
            flush(live)

        store.flush = slow_flush  # type: ignore[method-assign,assignment]
        adding = asyncio.ensure_future(session.add_items(ITEMS[1:3]))
        assert await asyncio.to_thread(entered.wait, 30)
        adding.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not adding.done()  # still waiting for its thread, holding its turn
        reading = asyncio.ensure_future(session.get_items())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not reading.done()
        store.flush = flush  # type: ignore[method-assign]
        go.set()
        with pytest.raises(asyncio.CancelledError):
            await adding
        assert await reading == ITEMS[:3]
        await session.aclose()
        store.close()

    asyncio.run(main())
    assert [item for _, item in fold_items(_stored(logs, "kept"))] == ITEMS[:3]


def test_close_on_the_loop_thread_does_not_wait_for_a_running_operation(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        session = DshSession("kept", store=str(tmp_path / "logs"), keep_open=True)
        await session.add_items(ITEMS[:1])
        async with module._taking_turns(session._key()):  # an operation under way
            with pytest.raises(RuntimeError, match="await aclose"):
                session.close()
        session.close()  # now free: released and closed
        assert session.store.persistence.closed

    asyncio.run(main())


# --- the lock table -----------------------------------------------------------------------


def _keys(store: DurableStore) -> list[tuple[object, str]]:
    identity = store.backend.store_identity()
    return [key for key in module._LOCKS if key[0] in (identity, id(store))]


def test_the_lock_table_keeps_only_the_sessions_in_use(tmp_path: Path) -> None:
    async def main() -> None:
        with open_store(str(tmp_path / "logs")) as store:
            for i in range(40):
                session = DshSession(f"s{i}", store=store, keep_open=bool(i % 2))
                await session.add_items(ITEMS[:1])
                await session.get_items()
                await session.aclose()
            assert _keys(store) == []
            # In use: one entry, counting its holder and its waiters.
            session = DshSession("busy", store=store)
            async with module._taking_turns(session._key()):
                waiting = [asyncio.ensure_future(session.get_items()) for _ in range(3)]
                for _ in range(5):
                    await asyncio.sleep(0)
                assert _keys(store) == [session._key()]
                assert module._LOCKS[session._key()].users == 4
                waiting[0].cancel()  # a cancelled waiter leaves, the entry stays
                await asyncio.gather(waiting[0], return_exceptions=True)
                assert module._LOCKS[session._key()].users == 3
            assert await asyncio.gather(*waiting[1:]) == [[], []]
            assert _keys(store) == []

    asyncio.run(main())


def test_the_lock_table_keeps_operations_apart_across_threads(tmp_path: Path) -> None:
    """Two threads, each with its own event loop and store object over one folder,
    interleave appends to one session with no wait allowed (``lock_timeout=0``), new
    operations arriving while others wait: an entry dropped while another operation
    still held or awaited it would let a waiter and a newcomer in at once, and the
    other store's writer lock would refuse one of them."""
    logs = str(tmp_path / "logs")
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        async def main() -> None:
            store = open_store(logs)
            sessions = [DshSession("shared", store=store, lock_timeout=0) for _ in range(3)]

            async def appends(k: int) -> None:  # one after the other: new arrivals
                for i in range(k, 60, 3):
                    await sessions[k].add_items([{"role": "user", "content": f"{name}{i}"}])

            try:
                await asyncio.gather(*(appends(k) for k in range(3)))
            finally:
                store.close()

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    items = [item["content"] for _, item in fold_items(_stored(logs, "shared"))]
    assert sorted(items) == sorted(f"{n}{i}" for n in "ab" for i in range(60))
    assert not [key for key in module._LOCKS if key[1] == "shared"]


@pytest.mark.parametrize("keep_open", [True, False])
def test_a_failed_write_leaves_the_session_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: bool
) -> None:
    """The store's write fails (a full disk): ``add_items`` raises, nothing of the batch
    is stored, and nothing of it stays in memory (as ``SQLiteSession``'s rolled-back
    transaction): the next read does not show it, and no later operation writes it; the
    session is released (the default mode lets another process in)."""
    logs = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("kept", store=logs, keep_open=keep_open)
        await session.add_items(ITEMS[:3])
        backend = session.store.backend
        real = backend.append_batch

        def full(*args: Any, **kwargs: Any) -> None:
            monkeypatch.setattr(backend, "append_batch", real)  # once
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(backend, "append_batch", full)
        with pytest.raises(OSError, match="No space left"):
            await session.add_items(ITEMS[3:5])
        assert session.store.get("kept") is None  # released, its batch dropped
        assert [i for _, i in fold_items(_stored_now(logs))] == ITEMS[:3]
        assert await session.get_items() == ITEMS[:3]
        assert await asyncio.to_thread(_other_process, logs) == "3"
        await session.add_items(ITEMS[5:6])
        assert await session.get_items() == [*ITEMS[:3], ITEMS[5]]
        await session.aclose()

    asyncio.run(main())
    assert [item for _, item in fold_items(_stored(logs, "kept"))] == [*ITEMS[:3], ITEMS[5]]


def _stored_now(store_url: str) -> list[Event]:
    """The stored log, read without the writer lock (as ``dsh-session show`` reads)."""
    from dsh_session_core import read_session

    with open_store(store_url) as store:
        return list(read_session(store.location("kept")).events)


def _nested(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    inner = top
    for _ in range(depth - 1):
        inner["x"] = inner = {}
    return top


def test_an_item_as_deep_as_the_log_allows_is_kept_in_any_batch(tmp_path: Path) -> None:
    """The batch is checked at once, each item one level deeper than it is stored: an
    item at the deepest nesting the log keeps is still accepted in a batch of several,
    and one a level deeper refused, named by its own error."""
    from dsh_session_core import SessionStore

    probe = SessionStore().create("probe")
    deepest = next(d for d in range(1, 200)
                   if not _fits_alone(probe, _nested(d + 1)))
    assert _fits_alone(probe, _nested(deepest))
    logs = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("deep", store=logs)
        kept: Any = {"role": "user", "content": "x", "deep": _nested(deepest - 1)}
        refused: Any = {"role": "user", "content": "x", "deep": _nested(deepest)}
        await session.add_items([ITEMS[0], kept])
        with pytest.raises(TooDeepError):
            await session.add_items([ITEMS[0], refused])
        assert len(await session.get_items()) == 2
        await session.aclose()

    asyncio.run(main())


def _fits_alone(probe: Any, item: Any) -> bool:
    """Whether the log keeps ``item`` as an ``agents/item`` of its own."""
    from dsh_session_core.errors import AppendError

    try:
        probe.append("agents/item", {"item": item})
    except AppendError:
        return False
    return True
