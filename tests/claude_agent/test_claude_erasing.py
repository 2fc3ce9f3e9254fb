"""The Claude Agent SDK row of docs/erasing.md, checked by searching every file of the
store for a marker: ``delete`` removes the main transcript's session and its subagents'
(what a store's delete leaves stays: a SQLite file's freed pages, the ledger's records
naming the ids); ``store.forget`` of each (``dsh_session_id`` of the key, and of each
subagent's key from ``list_subkeys``) leaves no byte of them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from claude_agent_sdk.types import SessionKey
from sdk_transcript import transcript

from dsh_session_claude_agent import DshSessionStore, dsh_session_id
from dsh_session_core import open_store
from erasing_support import files_holding, new_marker, no_file_holds, store_root

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")

KEY: SessionKey = {"project_key": "-home-ada-project", "session_id": "9d2e7c4a"}
SUB: SessionKey = {**KEY, "subpath": "subagents/agent-b2"}


def _with(entries: list[dict[str, Any]], marker: str) -> list[Any]:
    """The entries, the first prompt saying ``marker``."""
    prompt = next(e for e in entries if e.get("type") == "user"
                  and isinstance(e["message"]["content"], str))
    prompt["message"]["content"] = f"my name is {marker}"
    return list(entries)


def _write(url: str, marker: str) -> None:
    async def run() -> None:
        async with DshSessionStore(url) as store:
            await store.append(KEY, _with(transcript(1), marker))
            await store.append(SUB, _with(transcript(1, sidechain=True, seed=3), marker))
            assert await store.list_subkeys(KEY) == ["subagents/agent-b2"]

    asyncio.run(run())
    with open_store(url) as store:
        assert {h.session_id for h in store.search(marker)} == {
            dsh_session_id(KEY), dsh_session_id(SUB)}  # indexed, both


def test_delete_removes_the_session_and_its_subagents(store_url: str) -> None:
    marker = new_marker()
    _write(store_url, marker)

    async def delete() -> None:
        async with DshSessionStore(store_url) as store:
            await store.delete(KEY)
            assert await store.load(KEY) is None
            assert await store.load(SUB) is None

    asyncio.run(delete())
    with open_store(store_url) as store:
        assert [h.id for h in store.stored()] == ["dsh-session.retention"]
        assert list(store.search(marker)) == []
    root = store_root(store_url)
    assert files_holding(root, "9d2e7c4a")  # the ledger's removal records name them
    if store_url.startswith("sqlite:"):
        assert files_holding(root, marker)  # the freed pages still hold it


def test_forget_of_the_session_and_each_subagent_leaves_no_byte_of_them(
        store_url: str) -> None:
    marker = new_marker()
    _write(store_url, marker)

    async def subkeys() -> list[str]:
        async with DshSessionStore(store_url) as store:
            return await store.list_subkeys(KEY)

    ids = [dsh_session_id(KEY)] + [dsh_session_id({**KEY, "subpath": sub})
                                   for sub in asyncio.run(subkeys())]
    with open_store(store_url) as store:
        done = store.forget_all(ids=ids)
        assert [d.complete for d in done] == [True, True]
        assert [h.id for h in store.stored()] == ["dsh-session.retention"]
    no_file_holds(store_url, marker, "9d2e7c4a")
