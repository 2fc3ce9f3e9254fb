"""``DshSession`` on the JSONL, SQLite and PostgreSQL stores: the items come back equal as
JSON, the mapping onto typed events, pops and clears as events, two instances sharing one
history, the one-writer rule across processes, and an offline ``Runner.run`` with the
SDK's scripted model and a tool whose log ``validate --strict`` accepts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, Runner, SessionSettings, function_tool
from agents.memory import Session as SdkSession
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dsh_session_core import SessionLockedError, open_store, to_wire
from dsh_session_openai_agents import DshSession, fold_items

ITEMS: list[Any] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": '{"city": "Paris"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 °C"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Sunny, 21 °C.", "annotations": []}]},
    {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow? \ud83c"[:-1]},
                                 {"type": "input_image", "image_url": "https://x/y.png",
                                  "detail": "auto"}]},
    {"role": "assistant", "content": "Rain. 1.5e-7 chance of snow", "n": 1.5e-7, "big": 2**70},
]


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _log(store_url: str, session_id: str) -> Any:
    with open_store(store_url) as store:
        session = store.open(session_id)
        return list(session.events), session.derive_messages()


def test_it_is_an_sdk_session(tmp_path: Path) -> None:
    session = DshSession("s", store=str(tmp_path))
    assert isinstance(session, SdkSession)
    assert session.session_settings == SessionSettings()
    session.close()


def test_items_come_back_equal_as_json_and_typed(store_url: str) -> None:
    async def main() -> None:
        session = DshSession("chat", store=store_url)
        await session.add_items(ITEMS[:3])
        await session.add_items(ITEMS[3:])
        assert json.dumps(await session.get_items()) == json.dumps(ITEMS)
        assert await session.get_items(limit=2) == ITEMS[-2:]
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=-1) == ITEMS
        await session.aclose()

    asyncio.run(main())
    events, messages = _log(store_url, "chat")
    types = [e.type for e in events]
    assert types.count("agents/item") == len(ITEMS)
    assert [t for t in types if not t.startswith(("agents/", "turn/", "step/"))] == [
        "user/message", "assistant/message", "assistant/message", "tool/call", "tool/result",
        "assistant/message", "user/message", "assistant/message"]
    wire = [to_wire(m) for m in messages]
    assert [m["role"] for m in wire] == ["user", "assistant", "assistant", "user",
                                         "assistant", "user", "assistant"]
    assert wire[1]["content"] == [{"type": "reasoning", "text": "look", "id": "rs_1"}]
    assert wire[2]["content"] == [{"type": "tool-call", "id": "call_1", "name": "weather",
                                   "arguments": '{"city": "Paris"}'}]
    assert wire[3]["content"][0]["toolCallId"] == "call_1"
    assert wire[4]["content"] == [{"type": "text", "text": "Sunny, 21 °C."}]


def test_pop_and_clear_are_events_and_nothing_is_deleted(store_url: str) -> None:
    async def main() -> None:
        session = DshSession("chat", store=store_url, session_settings={"limit": 3})
        assert await session.pop_item() is None
        await session.add_items(ITEMS)
        assert await session.get_items() == ITEMS[-3:]  # session_settings.limit
        assert await session.pop_item() == ITEMS[-1]
        assert await session.get_items(limit=100) == ITEMS[:-1]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items(ITEMS[:1])
        assert await session.get_items() == ITEMS[:1]
        await session.aclose()

    asyncio.run(main())
    events, _ = _log(store_url, "chat")
    types = [e.type for e in events]
    assert types.count("agents/item") == len(ITEMS) + 1
    assert types.count("agents/pop") == 1
    assert types.count("agents/clear") == 1
    assert [item for _, item in fold_items(events)] == ITEMS[:1]
    # The fold up to the pop is the view at that moment: the log is forkable anywhere.
    pop = next(i for i, e in enumerate(events) if e.type == "agents/pop")
    assert [item for _, item in fold_items(events[: pop + 1])] == ITEMS[:-1]


def test_two_instances_share_one_history(store_url: str) -> None:
    async def main() -> None:
        with open_store(store_url) as store:
            first = DshSession("shared", store=store)
            second = DshSession("shared", store=store_url)  # another store object
            try:
                await asyncio.gather(*(
                    (first if i % 2 else second).add_items(
                        [{"role": "user", "content": str(i)}])
                    for i in range(10)))
                got = {cast(Any, item)["content"] for item in await first.get_items()}
                assert got == {str(i) for i in range(10)}
                assert await second.get_items() == await first.get_items()
            finally:
                await second.aclose()  # its connections, even when the test fails

    asyncio.run(main())


def test_a_writer_in_another_process_is_waited_for_then_refused(tmp_path: Path) -> None:
    """The one-writer rule: while another process holds the session, a write waits up to
    ``lock_timeout``, then raises ``SessionLockedError``; once it lets go, the write goes
    through. A read never waits: it reads what is stored. (The holder waits for the
    lock itself: the first instance, never closed, keeps it for its idle window.)"""
    logs = str(tmp_path / "logs")
    asyncio.run(DshSession("held", store=logs).add_items(ITEMS[:1]))
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from dsh_session_core import SessionLockedError, open_store
            with open_store({logs!r}) as store:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        store.open("held")
                        break
                    except SessionLockedError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.01)
                print("held", flush=True)
                sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        session = DshSession("held", store=logs, lock_timeout=0.3)
        with pytest.raises(SessionLockedError):
            asyncio.run(session.add_items(ITEMS[1:2]))
        assert asyncio.run(session.get_items()) == ITEMS[:1]
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(60) == 0
    asyncio.run(session.add_items(ITEMS[1:2]))
    assert asyncio.run(session.get_items()) == ITEMS[:2]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_an_offline_runner_run_with_a_tool(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    model = ScriptedModel([
        ModelStep(output=[function_call("weather", {"city": "Paris"}, call_id="call_w")]),
        ModelStep(output=[assistant_message("It is sunny in Paris.")]),
        ModelStep(output=[assistant_message("You asked about Paris.")]),
    ])
    agent = Agent(name="forecaster", model=model, tools=[weather])

    async def main() -> list[Any]:
        session = DshSession("run", store=logs)
        first = await Runner.run(agent, "Weather in Paris?", session=session)
        assert first.final_output == "It is sunny in Paris."
        again = DshSession("run", store=logs)  # a fresh instance: the history reloads
        second = await Runner.run(agent, "What did I ask?", session=again)
        assert second.final_output == "You asked about Paris."
        items = await again.get_items()
        await session.aclose()
        await again.aclose()
        return items

    items = asyncio.run(main())
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message", "message", "message"]
    with open_store(logs) as store:
        path = store.location("run")
        session = store.open("run")
        conversation = [to_wire(m) for m in session.derive_messages()]
    checked = subprocess.run(
        [str(Path(sys.executable).parent / "dsh-session"), "validate", "--strict", path],
        capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The derived conversation is the items' conversation, message for message.
    assert conversation == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [{"type": "tool-call", "id": "call_w",
                                           "name": "weather",
                                           "arguments": items[1]["arguments"]}]},
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "call_w",
                                      "content": [{"type": "text", "text": "sunny in Paris"}],
                                      "isError": False}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is sunny in Paris."}]},
        {"role": "user", "content": [{"type": "text", "text": "What did I ask?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "You asked about Paris."}]},
    ]
