"""The pydantic-ai row of docs/erasing.md, checked by searching every file of the store
for a marker: ``delete`` removes the conversation's session (what a store's delete
leaves stays: a SQLite file's freed pages, the ledger's record naming the id);
``store.forget(conversation_id)`` leaves no byte of it."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.models.test import TestModel

from dsh_session_core import open_store
from dsh_session_core.errors import SessionNotStoredError
from dsh_session_pydantic_ai import DshConversationStore
from erasing_support import files_holding, new_marker, no_file_holds, store_root

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")

CID = "chat-q7"


def _save(url: str, marker: str) -> None:
    async def main() -> None:
        agent = Agent(TestModel(custom_output_text=f"hello {marker}"))
        async with DshConversationStore(url) as store:
            result = await agent.run(f"my name is {marker}",
                                     conversation=Conversation(conversation_id=CID))
            await store.save(result)

    asyncio.run(main())
    with open_store(url) as store:
        assert {h.session_id for h in store.search(marker)} == {CID}  # indexed


def test_delete_removes_the_session_and_leaves_what_a_delete_leaves(store_url: str) -> None:
    marker = new_marker()
    _save(store_url, marker)

    async def delete() -> None:
        async with DshConversationStore(store_url) as store:
            await store.delete(CID)
            assert await store.load(CID) is None

    asyncio.run(delete())
    with open_store(store_url) as store:
        assert CID not in {h.id for h in store.stored()}
        assert list(store.search(marker)) == []
        with pytest.raises(SessionNotStoredError):
            store.read(CID)
    root = store_root(store_url)
    assert files_holding(root, CID)  # the ledger's removal record names it
    if store_url.startswith("sqlite:"):
        assert files_holding(root, marker)  # the freed pages still hold it
    with open_store(store_url) as store:
        # Deleted, it is no longer stored, but the ledger names it: forget finds what
        # the delete left, and takes it (the ledger's records too).
        done = store.forget(CID)
        assert done.complete, done.left
        assert done.deleted is None
    no_file_holds(store_url, marker, CID)


def test_forget_leaves_no_byte_of_the_conversation(store_url: str) -> None:
    marker = new_marker()
    _save(store_url, marker)
    with open_store(store_url) as store:
        done = store.forget(CID)
        assert done.complete
    no_file_holds(store_url, marker, CID)
