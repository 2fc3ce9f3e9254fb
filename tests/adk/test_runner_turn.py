"""An offline ADK ``Runner`` turn (a scripted model calling a function tool) with
``DshSessionService`` as its session service, on every store: the session ADK reads back
is the one ADK's in-memory service gives for the same run, and the dsh log passes
``dsh-session validate --strict`` and derives to the conversation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from adk_support import same_on_both
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import open_store, to_wire

APP, USER, SID = "weather", "ada", "chat-1"

#: Gemini's counts for the two model calls: the prompt includes its cached part, the
#: candidates exclude the thoughts.
USAGE = [
    types.GenerateContentResponseUsageMetadata(
        prompt_token_count=120, candidates_token_count=14, thoughts_token_count=30,
        cached_content_token_count=100, total_token_count=164),
    types.GenerateContentResponseUsageMetadata(
        prompt_token_count=180, candidates_token_count=9, total_token_count=189),
]
#: The same in core's vocabulary (no overlap: uncached input; output with the thoughts).
EXPECTED_USAGE = [
    {"inputTokens": 20, "outputTokens": 44, "cacheReadTokens": 100, "reasoningTokens": 30},
    {"inputTokens": 180, "outputTokens": 9},
]


class ScriptedModel(BaseLlm):
    """A model that answers from a script: a function call first, then the answer."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = any(p.function_response for c in llm_request.contents for p in c.parts or [])
        if not answered:
            call = types.FunctionCall(id="call-1", name="get_weather", args={"city": "Paris"})
            yield LlmResponse(content=types.Content(role="model", parts=[
                types.Part(text="Let me check."), types.Part(function_call=call)]),
                usage_metadata=USAGE[0])
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[
                types.Part(text="It is sunny in Paris.")]), usage_metadata=USAGE[1])


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"city": city, "weather": "sunny"}


# Each test runs on a fresh store of each kind (the testing kit's ``store_url``).
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

async def _turn(service: BaseSessionService) -> list[dict[str, Any]]:
    agent = LlmAgent(name="weather_agent", model=ScriptedModel(), tools=[get_weather],
                     instruction="Answer about the weather.")
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id=SID)
    message = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    async for _ in runner.run_async(user_id=USER, session_id=SID, new_message=message):
        pass
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SID)
    assert session is not None
    # Event ids, invocation ids and timestamps are minted per run: compare the rest.
    return [e.model_dump(mode="json", exclude={"id", "invocation_id", "timestamp"})
            for e in session.events]


def test_a_runner_turn_is_stored_and_derives_to_the_conversation(
        store_url: str, tmp_path: Path) -> None:
    got = same_on_both(store_url, _turn)
    # The tool's response as ADK recorded it, as JSON text.
    response = json.dumps(got[2]["content"]["parts"][0]["function_response"]["response"])
    assert json.loads(response) == get_weather("Paris")
    assert [e["author"] for e in got] == ["user", "weather_agent", "weather_agent",
                                          "weather_agent"]

    with open_store(store_url) as store:
        log = store.open(dsh_session_id(APP, USER, SID))
        types_ = [e.type for e in log.events]
        assert types_ == [
            "turn/start", "adk/session", "turn/end",
            "turn/start", "adk/event", "user/message",
            "step/start", "adk/event", "assistant/message", "tool/call",
            "adk/event", "tool/result", "step/end",
            "step/start", "adk/event", "assistant/message", "step/end", "turn/end",
        ]
        assert to_wire(log.derive_messages()) == [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool-call", "id": "call-1", "name": "get_weather",
                 "arguments": '{"city": "Paris"}'}]},
            {"role": "user", "content": [{"type": "tool-result", "toolCallId": "call-1",
                                          "content": [{"type": "text", "text": response}],
                                          "isError": False}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "It is sunny in Paris."}]},
        ]
        assert [to_wire(e.data)["usage"] for e in log.events
                if e.type == "assistant/message"] == EXPECTED_USAGE
        location = store.location(log.id)
    if Path(location).suffix == ".jsonl":
        target = Path(location)
    else:  # validate reads JSONL logs: copy the session out of the database first
        copy = subprocess.run(
            [sys.executable, "-m", "dsh_session_core", "copy", store_url, str(tmp_path / "out")],
            capture_output=True, text=True, check=False)
        assert copy.returncode == 0, copy.stderr
        target = next((tmp_path / "out").rglob("*.jsonl"))
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", "validate", "--strict",
                           str(target)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_show_and_stats(target)


def _cli_json(*args: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", *args, "--json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _check_show_and_stats(log: Path) -> None:
    """``show`` reads as the run: the service's record, then one turn of the user's
    message with its two steps (the call and its answer, the answer), with their usage,
    ADK's own records (``adk/event``, their typed twins' raw form) folded away unless
    ``--raw``; ``stats`` sums the usage."""
    total = {"inputTokens": 200, "outputTokens": 53, "cacheReadTokens": 100,
             "reasoningTokens": 30}  # EXPECTED_USAGE summed
    timeline = _cli_json("show", "--file", str(log))
    assert timeline["warnings"] == []
    assert timeline["unanswered"] == []
    record, run = timeline["timeline"]
    assert [i["type"] for i in record["items"]] == ["adk/session"]
    assert (run["trigger"], run["end"]["reason"], run["steps"]) == (
        "message from user", {"kind": "completed"}, 2)
    assert run["usage"] == total
    assert [i["usage"] for i in run["items"] if i["type"] == "assistant/message"] \
        == EXPECTED_USAGE
    assert [(i["type"], i["inStep"]) for i in run["items"]] == [
        ("user/message", False), ("step/start", False), ("assistant/message", True),
        ("tool/call", True), ("tool/result", True), ("step/start", False),
        ("assistant/message", True)]
    assert timeline["rawFolded"] == 4
    raw = _cli_json("show", "--raw", "--file", str(log))
    assert "rawFolded" not in raw
    assert [(i["type"], i.get("raw", False)) for i in raw["timeline"][1]["items"]] == [
        ("adk/event", True), ("user/message", False), ("step/start", False),
        ("adk/event", True), ("assistant/message", False), ("tool/call", False),
        ("adk/event", True), ("tool/result", False), ("step/start", False),
        ("adk/event", True), ("assistant/message", False)]
    stats = _cli_json("stats", "--file", str(log))
    assert stats["tokens"] == total
    assert (stats["steps"], stats["toolCalls"], stats["toolResults"]) == (2, 1, 1)


def test_the_log_keeps_cores_strictest_invariants(tmp_path: Path) -> None:
    """A store with ``checks=True`` (every event turn-enclosed, every tool result
    answering a call of its turn and step) accepts all the service writes."""
    from google.adk.events.event import Event

    async def run() -> None:
        async with open_store(str(tmp_path / "logs"), checks=True) as store:
            service = DshSessionService(store)
            await _turn(service)
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SID)
            assert session is not None
            await service.append_event(session, Event(author="user", invocation_id="x"))
            await service.create_session(app_name=APP, user_id=USER, session_id="other",
                                         state={"app:a": 1, "user:b": 2})
            await service.delete_session(app_name=APP, user_id=USER, session_id=SID)
            await service.close()

    asyncio.run(run())
