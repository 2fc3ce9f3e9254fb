"""``DshConversationStore`` with pydantic-ai itself: an ``Agent`` run with ``TestModel``
saved, then resumed and continued by another process; two processes saving one
conversation lose no save; a save the log refuses leaves it as it was; the dsh tools
(``derive``, ``show``) read the conversation, the branch it is on included."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.test import TestModel

from dsh_session_core import (
    MAX_JSON_DEPTH,
    Message,
    TextBlock,
    ToolResultBlock,
    open_store,
    to_wire,
)
from dsh_session_core.errors import TooDeepError
from dsh_session_core.testing import run_cli
from dsh_session_pydantic_ai import DshConversationStore, PydanticAiRecord

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def _agent() -> Agent[None, str]:
    agent = Agent(TestModel())

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def _first(message: Any) -> Any:
    """The content of a message's first part (typed ``Any``: parts of many kinds)."""
    return message.parts[0].content


def _python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


RESUME = """
    import asyncio, sys
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel
    from dsh_session_pydantic_ai import DshConversationStore

    async def main():
        async with DshConversationStore(sys.argv[1]) as store:
            conversation = await store.load("chat")
            print(len(conversation.messages), conversation.usage.requests)
            result = await Agent(TestModel(custom_output_text="again")).run(
                "And now?", conversation=conversation)
            await store.save(result)

    asyncio.run(main())
"""


def test_an_agent_run_is_saved_then_resumed_by_another_process(store_url: str) -> None:
    async def first() -> list[Any]:
        async with DshConversationStore(store_url) as store:
            conversation = await store.load("chat") or Conversation(conversation_id="chat")
            result = await _agent().run("Add please.", conversation=conversation)
            entries = await store.save(result)
            assert [e.message for e in entries] == result.all_messages()
            return result.all_messages()

    messages = asyncio.run(first())
    assert len(messages) == 4  # prompt, tool call, tool return, answer
    # A new process: a new store object, the conversation read from what is stored.
    out = _python(RESUME, store_url)
    assert out.split() == ["4", "2"]  # its messages, and the usage the runs accumulated

    async def after() -> Conversation | None:
        async with DshConversationStore(store_url) as store:
            return await store.load("chat")

    resumed = asyncio.run(after())
    assert resumed is not None
    assert resumed.messages[:4] == messages
    assert [type(m).__name__ for m in resumed.messages[4:]] == ["ModelRequest",
                                                                "ModelResponse"]
    assert _first(resumed.messages[-1]) == "again"
    assert resumed.usage.requests == 3
    # The dsh log reads as the conversation: user, assistant, tool result, assistant...
    with open_store(store_url) as store:
        derived = store.read_session("chat").derive_messages()
    assert [m.role for m in derived] == ["user", "assistant", "user", "assistant",
                                         "user", "assistant"]
    assert derived[0] == Message(role="user", content=(TextBlock(text="Add please."),))
    result = derived[2].content[0]
    assert isinstance(result, ToolResultBlock)
    call: Any = derived[1].content[0]
    assert result.tool_call_id == call.id
    assert derived[5] == Message(role="assistant", content=(TextBlock(text="again"),))


SAVER = """
    import asyncio, sys
    from pydantic_ai.conversation_store import ConversationConflict
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart
    from dsh_session_pydantic_ai import DshConversationStore

    async def main(name):
        conflicts = 0
        async with DshConversationStore(sys.argv[1]) as store:
            for i in range(int(sys.argv[3])):
                while True:
                    conversation = await store.load("shared")
                    conversation.messages.append(ModelRequest(
                        parts=[UserPromptPart(content=f"{name}-{i}")]))
                    try:
                        await store.save(conversation)
                        break
                    except ConversationConflict:
                        conflicts += 1  # the other process saved first: load again
        print(conflicts)

    asyncio.run(main(sys.argv[2]))
"""


def test_two_processes_saving_one_conversation_lose_no_save(store_url: str) -> None:
    """Each save is checked against the stored revision under the session's writer
    lock: whichever way the two processes' saves interleave, every one either lands
    on the revision it loaded or is refused, so the history holds each message once,
    in one chain (a lost update would drop one)."""
    async def create() -> None:
        async with DshConversationStore(store_url) as store:
            await store.save(Conversation(conversation_id="shared"))

    asyncio.run(create())
    count = 25
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(SAVER), store_url,
                               name, str(count)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err

    async def read() -> list[str]:
        async with DshConversationStore(store_url) as store:
            conversation = await store.load("shared")
            assert conversation is not None
            return [_first(m) for m in conversation.messages]

    texts = asyncio.run(read())
    assert sorted(texts) == sorted(f"{n}-{i}" for n in "ab" for i in range(count))
    # Each process's own messages in the order it saved them.
    for name in "ab":
        assert [t for t in texts if t.startswith(name)] == [
            f"{name}-{i}" for i in range(count)]


def test_a_save_the_log_refuses_leaves_it_as_it_was(store_url: str) -> None:
    """A message the log cannot keep (nested deeper than the log format's limit) is
    refused part way through the save's turn, after a message it kept: nothing of the
    save is stored, the conversation's revision is not advanced, and the next save
    works."""
    async def main() -> None:
        async with DshConversationStore(store_url) as store:
            conversation = Conversation(conversation_id="c", messages=[ModelRequest(
                parts=[UserPromptPart(content="fine")])])
            await store.save(conversation)
            revision = conversation.revision
            before = [to_wire(e) for e in store.store.read_session("c").events]
            conversation.messages.append(ModelRequest(parts=[UserPromptPart(content="ok")]))
            deep: Any = "x"
            for _ in range(MAX_JSON_DEPTH + 1):
                deep = [deep]
            conversation.messages.append(ModelRequest(parts=[ToolReturnPart(
                tool_name="f", content=deep, tool_call_id="k")]))
            with pytest.raises(TooDeepError):
                await store.save(conversation)
            assert conversation.revision == revision
            assert [to_wire(e) for e in store.store.read_session("c").events] == before
            del conversation.messages[-1]
            await store.save(conversation)
            loaded = await store.load("c")
            assert loaded is not None
            assert [_first(m) for m in loaded.messages] == ["fine", "ok"]

    asyncio.run(main())


def test_a_stale_save_is_refused_under_the_lock(store_url: str) -> None:
    """The primitive itself checks the revision (the ABC's early look cannot: another
    writer may save between it and the write): a write on a revision no longer stored
    is refused with the data to act on, and appends nothing."""
    from pydantic_ai.conversation_store import ConversationRecord

    from dsh_session_pydantic_ai import ConversationRevisionConflict

    async def main() -> None:
        async with DshConversationStore(store_url) as store:
            conversation = Conversation(conversation_id="c")
            await store.save(conversation)
            old = conversation.revision
            await store.save(conversation)  # a second save: a new revision
            before = len(store.store.read_session("c").events)
            with pytest.raises(ConversationRevisionConflict) as caught:
                await store.write_record(ConversationRecord(conversation_id="c",
                                                            head_id=None),
                                         expected_revision=old)
            assert isinstance(caught.value, ConversationConflict)
            assert (caught.value.conversation_id, caught.value.expected,
                    caught.value.stored) == ("c", old, conversation.revision)
            assert len(store.store.read_session("c").events) == before

    asyncio.run(main())


def test_the_dsh_tools_read_the_branch_the_conversation_is_on(store_url: str) -> None:
    """After a branch, the derived conversation (``derive``, ``show``) is the history
    the record's head reaches; the branch left stays in the log, shadowed."""
    async def main() -> None:
        async with DshConversationStore(store_url) as store:
            result = await Agent(TestModel(custom_output_text="first answer")).run(
                "Question one")
            await store.save(result)
            branched = await store.branch(result.conversation.conversation_id, at=1,
                                          expected_revision=result.conversation.revision)
            second = await Agent(TestModel(custom_output_text="other answer")).run(
                conversation=branched)
            await store.save(second)
            cid = branched.conversation_id
            record = await store.read_record(cid)
            assert record is not None
            assert len(record.branches) == 1
            session = store.store.read_session(cid)
            assert session.derive_messages() == [
                Message(role="user", content=(TextBlock(text="Question one"),)),
                Message(role="assistant", content=(TextBlock(text="other answer"),))]
            records = [e for e in session.events if isinstance(e, PydanticAiRecord)]
            assert [e.data.revision for e in records][-1] == second.conversation.revision
            code, out, err = run_cli("derive", "--store", store_url, "--id", cid)
            assert code == 0, err
            assert b"other answer" in out
            assert b"first answer" not in out

    asyncio.run(main())


def test_a_deleted_conversation_is_recorded_as_a_removal(store_url: str) -> None:
    async def run() -> None:
        async with DshConversationStore(store_url) as store:
            result = await _agent().run("Add please.",
                                        conversation=Conversation(conversation_id="gone"))
            await store.save(result)
            await store.delete("gone")

    asyncio.run(run())
    with open_store(store_url) as store:
        assert "gone" not in [h.id for h in store.stored()]
        # Recorded as every removal is, its door named (`dsh-session prune --log`).
        assert [(r.data.session_id, r.data.rule) for r in store.removals()] == [
            ("gone", "pydantic-ai-delete")]
