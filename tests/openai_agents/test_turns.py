"""One ``Runner.run`` is one turn: an offline run (the SDK's scripted model, two tools)
logs one ``turn/start`` ... ``turn/end``, one step per model call with that call's usage,
a trigger saying where the input came from, and the end reason the run had; the log is
valid under ``dsh-session validate --strict`` (a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, MaxTurnsExceeded, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from dsh_session_core import open_store, to_wire
from dsh_session_openai_agents import DshSession


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool
def wind(city: str) -> str:
    """The wind in a city."""
    return f"calm in {city}"


@function_tool(needs_approval=True)
def launch(city: str) -> str:
    """Launch a balloon (needs an approval)."""
    return f"launched over {city}"


def _usage(inp: int, out: int) -> Usage:
    return Usage(requests=1, input_tokens=inp, output_tokens=out, total_tokens=inp + out)


def _reasoning() -> ResponseReasoningItem:
    return ResponseReasoningItem(id="rs_1", type="reasoning", encrypted_content="ENC",
                                 summary=[Summary(text="two tools", type="summary_text")])


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")

@pytest.fixture(params=[False, True], ids=["default", "keep_open"])
def keep_open(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _events(store_url: str, sid: str = "run") -> list[dict[str, Any]]:
    with open_store(store_url) as store:
        return [to_wire(e) for e in store.open(sid).events]


def _validate(store_url: str, sid: str = "run") -> None:
    cli = Path(sys.executable).parent / "dsh-session"
    done = subprocess.run([str(cli), "validate", "--strict", "--store", store_url, "--id", sid],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _turns(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The events of each turn, turn/start to turn/end."""
    turns: list[list[dict[str, Any]]] = []
    for event in events:
        if event["type"] == "turn/start":
            turns.append([])
        if turns:
            turns[-1].append(event)
    return turns


def _typed(turn: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in turn if e["type"] != "agents/item"]


def test_one_run_with_two_tools_is_one_turn(store_url: str, keep_open: bool) -> None:
    model = ScriptedModel([
        ModelStep(output=[_reasoning(), function_call("weather", {"city": "Paris"}, call_id="c1"),
                          function_call("wind", {"city": "Paris"}, call_id="c2")],
                  usage=_usage(120, 30)),
        ModelStep(output=[assistant_message("Sunny and calm.")], usage=_usage(200, 8)),
    ])
    agent = Agent(name="a", model=model, tools=[weather, wind])

    async def main() -> list[Any]:
        session = DshSession("run", store=store_url, keep_open=keep_open)
        result = await Runner.run(agent, "Weather in Paris?", session=session)
        assert result.final_output == "Sunny and calm."
        items = await session.get_items()
        await session.aclose()
        return items

    items = asyncio.run(main())
    events = _events(store_url)
    turns = _turns(events)
    assert len(turns) == 1
    turn = turns[0]
    assert turn[0]["data"] == {"turn": 1, "trigger": {"kind": "message",
                                                      "source": {"kind": "user"}}}
    assert turn[-1]["type"] == "turn/end"
    assert turn[-1]["data"]["reason"] == {"kind": "completed"}
    assert _typed(turn) == [
        "turn/start", "user/message",
        "step/start", "assistant/message", "assistant/message", "tool/call",
        "assistant/message", "tool/call", "tool/result", "tool/result", "step/end",
        "step/start", "assistant/message", "step/end", "turn/end"]
    messages = [e for e in turn if e["type"] == "assistant/message"]
    assert messages[0]["data"]["content"] == [
        {"type": "reasoning", "text": "two tools", "id": "rs_1", "encryptedContent": "ENC"}]
    assert messages[0]["data"]["usage"] == {"inputTokens": 120, "outputTokens": 30}
    assert messages[3]["data"]["usage"] == {"inputTokens": 200, "outputTokens": 8}
    assert [m["data"]["step"] for m in messages] == [1, 1, 1, 2]
    assert [e["type"] for e in events if e["type"] == "agents/item"] == ["agents/item"] * 7
    assert len(items) == 7
    _validate(store_url)
    _check_show(store_url)


def _check_show(store_url: str) -> None:
    """``show`` reads as the run: the SDK's items (``agents/item``, the raw form of the
    typed events) folded away unless ``--raw``, which marks them."""
    cli = Path(sys.executable).parent / "dsh-session"

    def items(*flags: str) -> list[tuple[str, bool]]:
        done = subprocess.run([str(cli), "show", "--json", *flags, "--store", store_url,
                               "run"], capture_output=True, text=True, check=True)
        doc = json.loads(done.stdout)
        return [(i["type"], i.get("raw", False))
                for block in doc["timeline"] for i in block["items"]]

    assert items() == [
        ("user/message", False), ("step/start", False), ("assistant/message", False),
        ("assistant/message", False), ("tool/call", False), ("assistant/message", False),
        ("tool/call", False), ("tool/result", False), ("tool/result", False),
        ("step/start", False), ("assistant/message", False)]
    raw = items("--raw")
    assert [t for t, is_raw in raw if is_raw] == ["agents/item"] * 7
    assert [item for item in raw if not item[1]] == items()
    done = subprocess.run([str(cli), "show", "--store", store_url, "run"],
                          capture_output=True, text=True, check=True)
    assert "7 raw record(s) folded away (--raw shows them)" in done.stdout
    assert "agents/item" not in done.stdout


def test_two_runs_are_two_turns_and_stats_count_the_usage(store_url: str) -> None:
    model = ScriptedModel([
        ModelStep(output=[assistant_message("Hello.")], usage=_usage(10, 2)),
        ModelStep(output=[assistant_message("Still here.")], usage=_usage(20, 3)),
    ])
    agent = Agent(name="a", model=model)

    async def main() -> None:
        session = DshSession("run", store=store_url)
        await Runner.run(agent, "Hi", session=session)
        await Runner.run(agent, "There?", session=session)
        await session.aclose()

    asyncio.run(main())
    turns = _turns(_events(store_url))
    assert [t[-1]["data"]["reason"]["kind"] for t in turns] == ["completed", "completed"]
    assert [t[0]["data"]["turn"] for t in turns] == [1, 2]
    cli = Path(sys.executable).parent / "dsh-session"
    done = subprocess.run([str(cli), "stats", "--store", store_url, "--json", "run"],
                          capture_output=True, text=True, check=True)
    stats = json.loads(done.stdout)
    assert stats["tokens"] == {"inputTokens": 30, "outputTokens": 5}
    assert stats["turns"] == 2
    assert stats["steps"] == 2
    _validate(store_url)


def test_max_turns_leaves_the_turn_open_until_the_next_run(store_url: str, keep_open: bool) -> None:
    looping = ScriptedModel([
        ModelStep(output=[function_call("weather", {"city": "P"}, call_id=f"m{k}")],
                  usage=_usage(5, 1)) for k in range(4)])
    done = ScriptedModel([ModelStep(output=[assistant_message("ok")])])

    async def main() -> None:
        session = DshSession("run", store=store_url, keep_open=keep_open)
        with pytest.raises(MaxTurnsExceeded):
            await Runner.run(Agent(name="a", model=looping, tools=[weather]), "loop",
                             session=session, max_turns=2)
        await Runner.run(Agent(name="a", model=done), "again", session=session)
        await session.aclose()

    asyncio.run(main())
    turns = _turns(_events(store_url))
    assert len(turns) == 2
    first = turns[0]
    assert [e["type"] for e in first].count("step/start") == 2
    reason = first[-1]["data"]["reason"]
    assert reason["kind"] == "error"
    assert reason["code"] == "no-final-output"
    assert reason["step"] == 2
    assert "max turns" in reason["message"]
    assert turns[1][-1]["data"]["reason"] == {"kind": "completed"}
    _validate(store_url)


def test_an_error_run_is_closed_when_the_session_closes(store_url: str, keep_open: bool) -> None:
    model = ScriptedModel([
        ModelStep(output=[function_call("weather", {"city": "P"}, call_id="c1")]),
        ModelStep(error=RuntimeError("model down")),
    ])

    async def main() -> None:
        session = DshSession("run", store=store_url, keep_open=keep_open)
        with pytest.raises(RuntimeError, match="model down"):
            await Runner.run(Agent(name="a", model=model, tools=[weather]), "go",
                             session=session)
        await session.aclose()

    asyncio.run(main())
    turns = _turns(_events(store_url))
    assert len(turns) == 1
    assert turns[0][-1]["type"] == "turn/end"
    assert turns[0][-1]["data"]["reason"]["kind"] == "error"
    assert "tool/result" in _typed(turns[0])
    _validate(store_url)


def test_an_approval_interruption_ends_the_turn_and_the_resume_is_the_next(
    store_url: str, keep_open: bool
) -> None:
    model = ScriptedModel([
        ModelStep(output=[function_call("launch", {"city": "P"}, call_id="c5")]),
        ModelStep(output=[assistant_message("Launched.")]),
    ])
    agent = Agent(name="a", model=model, tools=[launch])

    async def main() -> None:
        session = DshSession("run", store=store_url, keep_open=keep_open)
        first = await Runner.run(agent, "Launch it", session=session)
        assert first.interruptions
        state = first.to_state()
        for item in first.interruptions:
            state.approve(item)
        again = await Runner.run(agent, state, session=session)
        assert again.final_output == "Launched."
        await session.aclose()

    asyncio.run(main())
    events = _events(store_url)
    turns = _turns(events)
    assert len(turns) == 2
    assert turns[0][-1]["data"]["reason"] == {"kind": "aborted",
                                              "reason": "interrupted: awaiting tool approval"}
    assert turns[1][0]["data"]["trigger"] == {
        "kind": "message", "source": {"kind": "plugin", "plugin": "openai-agents"}}
    call = next(e for e in turns[0] if e["type"] == "tool/call")
    result = next(e for e in turns[1] if e["type"] == "tool/result")
    assert result["sourceEventSeqs"] == [call["seq"]]
    assert turns[1][-1]["data"]["reason"] == {"kind": "completed"}
    _validate(store_url)


def test_direct_add_items_keep_their_grouping(tmp_path: Path) -> None:
    """Without a run context (direct calls), each call's turns close when it returns."""
    store_url = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("run", store=store_url)
        await session.add_items([{"role": "user", "content": "a"},
                                 {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}])
        await session.aclose()

    asyncio.run(main())
    turns = _turns(_events(store_url))
    assert len(turns) == 2
    assert all(t[-1]["data"]["reason"] == {"kind": "completed"} for t in turns)
    assert json.dumps([e["type"] for e in turns[1]]).count("user/message") == 1
    _validate(store_url)
