"""Issue 40, point 4: a pydantic-ai conversation's log reads as the conversation. An
offline ``Agent`` run (``TestModel``, a tool) saved by ``DshConversationStore``: ``show``
folds the ``pydantic-ai/entry`` records away unless ``--raw``; the agent's system prompt
(its ``system_prompt`` parts, then its ``instructions``) is the request header of the
first step, so ``show`` prints it, and ``derive --to anthropic`` and the Anthropic
conversion send it as ``system``; a second run under the same prompt records no header
again; the log passes ``validate --strict``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.models.test import TestModel

from dsh_session_core import open_store, to_wire
from dsh_session_core.providers import to_anthropic, to_openai_chat
from dsh_session_pydantic_ai import DshConversationStore

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql")

_CLI = Path(sys.executable).parent / "dsh-session"
SYSTEM = "You are a terse pirate."
INSTRUCTIONS = "Answer in one word."


def _agent() -> Agent[None, str]:
    agent = Agent(TestModel(custom_output_text="Arr."), system_prompt=SYSTEM,
                  instructions=INSTRUCTIONS)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def _run(url: str, *prompts: str) -> None:
    async def main() -> None:
        async with DshConversationStore(url) as store:
            for prompt in prompts:
                conversation = await store.load("chat") or Conversation(conversation_id="chat")
                result = await _agent().run(prompt, conversation=conversation)
                await store.save(result)

    asyncio.run(main())


def _cli(*args: str) -> str:
    done = subprocess.run([str(_CLI), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _items(url: str, *flags: str) -> list[list[tuple[str, bool]]]:
    doc = json.loads(_cli("show", "--json", *flags, "--store", url, "chat"))
    return [[(i["type"], i.get("raw", False)) for i in b["items"]] for b in doc["timeline"]]


def test_show_reads_as_the_conversation_with_its_system_prompt(store_url: str) -> None:
    _run(store_url, "Add 1 and 2?", "And again?")
    turn = [("user/message", False), ("step/start", False), ("request/header", False),
            ("assistant/message", False), ("tool/call", False), ("tool/result", False),
            ("step/start", False), ("assistant/message", False),
            ("pydantic-ai/record", False)]
    # The second run (TestModel calls no tool now) under the same prompt: no new header.
    later = [("user/message", False), ("step/start", False), ("assistant/message", False),
             ("pydantic-ai/record", False)]
    assert _items(store_url) == [turn, later]
    raw = _items(store_url, "--raw")
    assert [[t for t in b if t[1]] for b in raw] == [[("pydantic-ai/entry", True)] * 4,
                                                     [("pydantic-ai/entry", True)] * 2]
    assert [[t for t in b if not t[1]] for b in raw] == [turn, later]
    system = f"{SYSTEM}\n\n{INSTRUCTIONS}"
    shown = _cli("show", "--store", store_url, "chat")
    assert "request    initial header · model test · system: You are" in shown
    doc = json.loads(_cli("show", "--json", "--store", store_url, "chat"))
    assert [i["text"] for i in doc["timeline"][0]["items"]
            if i["type"] == "request/header"] == [
        f"initial header · model test · system: {SYSTEM} {INSTRUCTIONS}"]
    assert "pydantic-ai/entry" not in shown
    assert "raw record(s) folded away (--raw shows them)" in shown
    derived = json.loads(_cli("derive", "--to", "anthropic", "--store", store_url, "chat"))
    assert derived["system"] == system
    assert [m["role"] for m in derived["messages"]] == ["user", "assistant", "user",
                                                        "assistant", "user", "assistant"]
    with open_store(store_url) as store:
        session = store.read_session("chat")
        assert to_anthropic(session)["system"] == system
        assert to_openai_chat(session)[0] == {"role": "system", "content": system}
        [header] = [to_wire(e.data) for e in session.events if e.type == "request/header"]
        assert header == {"header": {"config": {"model": "test"}, "system": system},
                          "reason": "initial"}
    _cli("validate", "--strict", "--store", store_url, "--id", "chat")


def test_a_changed_system_prompt_is_a_header_delta(store_url: str) -> None:
    async def main() -> None:
        async with DshConversationStore(store_url) as store:
            conversation: Any = Conversation(conversation_id="chat")
            for words in ("one", "two"):
                agent = Agent(TestModel(custom_output_text="ok"),
                              instructions=f"Answer in {words} word(s).")
                result = await agent.run("Hi?", conversation=conversation)
                await store.save(result)
                conversation = await store.load("chat")

    asyncio.run(main())
    with open_store(store_url) as store:
        session = store.read_session("chat")
        kinds = [e.type for e in session.events if e.type.startswith("request/")]
        assert kinds == ["request/header", "request/header-delta"]
        assert to_anthropic(session)["system"] == "Answer in two word(s)."
