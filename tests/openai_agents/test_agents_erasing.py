"""The OpenAI Agents SDK row of docs/erasing.md, checked by searching every file of the
store for a marker: ``clear_session`` (and ``pop_item``) append events and the log keeps
every item; ``store.forget(session_id)`` leaves no byte of the session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession
from erasing_support import files_holding, new_marker, no_file_holds, store_root

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")


def _items(marker: str) -> list[Any]:
    return [{"role": "user", "content": f"my name is {marker}"},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": f"hello {marker}",
                          "annotations": []}]}]


def _chat(url: str, marker: str, *, clear: bool) -> None:
    async def main() -> None:
        session = DshSession("chat", store=url)
        await session.add_items(_items(marker))
        if clear:
            assert await session.pop_item() is not None
            await session.clear_session()
            assert await session.get_items() == []
        await session.aclose()

    asyncio.run(main())


def test_clear_leaves_every_item_in_the_log(store_url: str) -> None:
    marker = new_marker()
    _chat(store_url, marker, clear=True)
    assert files_holding(store_root(store_url), marker)
    with open_store(store_url) as store:
        text = [e for e in store.read("chat") if marker in str(e.data)]
        assert text  # the items, and the typed messages made of them
        assert {h.session_id for h in store.search(marker)} == {"chat"}  # indexed


def test_forget_leaves_no_byte_of_the_session(store_url: str) -> None:
    marker = new_marker()
    _chat(store_url, marker, clear=True)
    with open_store(store_url) as store:
        done = store.forget("chat")
        assert done.complete
        assert list(store.search(marker)) == []
    no_file_holds(store_url, marker)
