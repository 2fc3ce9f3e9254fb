"""The log's history is the SDK's history: after any sequence of ``add_items``,
``pop_item`` and ``clear_session``, ``derive_messages()`` equals the conversation of what
``get_items()`` returns (a surface ``replace``: the shadowed events stay in the log),
and the log is valid under the strict checks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsh_session_core import Session, open_store
from dsh_session_core._logformat.check import check_log
from dsh_session_core.errors import LogFormatError
from dsh_session_openai_agents import DshSession, record_items

ITEMS: list[Any] = [
    {"role": "user", "content": "hi"},
    {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "r"}]},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c", "output": "out"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    {"type": "web_search_call", "id": "ws"},
]


def _conversation(items: list[Any], like: Session) -> list[Any]:
    """The messages of ``items`` recorded afresh, on a session of their own."""
    fresh = Session("fresh", registry=like.registry)
    record_items(fresh, items)
    return fresh.derive_messages()


ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.sampled_from(range(len(ITEMS))), min_size=1,
                                       max_size=5)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("clear"), st.none()),
), max_size=12)


@settings(max_examples=40, deadline=None)
@given(ops)
# Two calls of one id, the second popped: the output answers the first (found by this
# test: the pop forgot both).
@example([("add", [2, 2]), ("pop", None), ("add", [3])])
# An output popped: its call is open again, and the next output answers it.
@example([("add", [2, 3]), ("pop", None), ("add", [3])])
def test_derived_messages_are_the_items_conversation(tmp_path_factory: Any,
                                                     steps: list[Any]) -> None:
    url = str(tmp_path_factory.mktemp("h") / "logs")

    async def main() -> list[Any]:
        session = DshSession("h", store=url, keep_open=True)
        for op, arg in steps:
            if op == "add":
                await session.add_items(cast(Any, [dict(ITEMS[k]) for k in arg]))
            elif op == "pop":
                await session.pop_item()
            else:
                await session.clear_session()
        items = await session.get_items()
        await session.aclose()
        return items

    items = asyncio.run(main())
    with open_store(url) as store:
        if not store.stored():
            assert items == []
            return
        log = store.open("h")
        assert log.derive_messages() == _conversation(items, log)
        problems = [p for p in check_log(log.events, registry=log.registry, strict=True)
                    if "no tool/result" not in str(p)]
        assert problems == []


def test_pop_shadows_the_popped_message(tmp_path: Path) -> None:
    url = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("p", store=url)
        await session.add_items([{"role": "user", "content": "a"},
                                 {"role": "assistant", "content": "b"}])
        assert await session.pop_item() == {"role": "assistant", "content": "b"}
        await session.aclose()

    asyncio.run(main())
    with open_store(url) as store:
        log = store.open("p")
        assert [m.role for m in log.derive_messages()] == ["user"]
        assert [e.type for e in log.events].count("assistant/message") == 2  # kept
        last = log.events[-1]
        assert last.type == "assistant/message"
        assert last.data.content == ()


def test_a_limit_reads_only_the_end_of_the_log(tmp_path: Path) -> None:
    """``get_items(limit=N)`` reads the last items, not the log: with the log's early
    part made unreadable (a line of garbage), the last items still come back; so does
    the whole view, read from the item view's rows (the agents/items projection, kept
    while the log was whole), while a load of the log itself fails."""
    url = str(tmp_path / "logs")
    items = [{"role": "user", "content": f"message {k}"} for k in range(200)]

    async def write() -> None:
        session = DshSession("t", store=url)
        for k in range(0, 200, 4):
            await session.add_items(cast(Any, items[k:k + 4]))
        await session.pop_item()
        await session.aclose()

    asyncio.run(write())
    log = next((tmp_path / "logs").rglob("t.jsonl"))
    lines = log.read_bytes().split(b"\n")
    first = next(k for k, line in enumerate(lines) if b'"agents/item"' in line)
    lines[first] = b'{"type":"agents/item","seq":'  # torn mid-log: no reader takes it
    log.write_bytes(b"\n".join(lines))

    async def read() -> None:
        session = DshSession("t", store=url, session_settings={"limit": 3})
        assert await session.get_items() == items[-4:-1]
        assert await session.get_items(limit=1) == items[-2:-1]
        assert await session.get_items(limit=-1) == items[:-1]  # the rows, not the log
        with pytest.raises(LogFormatError):  # the whole log: its early part read too
            session.store.open("t")
        await session.aclose()

    asyncio.run(read())
