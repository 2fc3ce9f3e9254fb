"""Reasoning survives a tool loop: what a provider's reasoning carries (Anthropic's
thinking signature and redacted thinking, a Responses reasoning item's id and encrypted
content) is recorded by default and sent back in the next request.

Each test drives a two-request tool loop through the real ``anthropic`` / ``openai``
client over a local transport that keeps every request body: request 1 returns
reasoning and a tool call, which is recorded with the recorder's defaults (as
docs/providers.md shows it); the tool result is appended; request 2 is built with
``to_anthropic`` / ``to_openai_responses`` from the session. The body the transport
receives for request 2 must hold the reasoning as the provider sent it, before its call:
Anthropic answers HTTP 400 to a tool loop with thinking enabled whose last assistant turn
does not start with its signed thinking, and a stateless (``store=False``) Responses
request can only carry reasoning by its encrypted content under its own id. Whole
responses and streams, sync and async clients.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import (
    Session,
    SessionStore,
    Step,
    create_plugin_manager,
    open_store,
    to_wire,
)
from dsh_session_core.providers import (
    RecordedResponse,
    arecord_anthropic,
    arecord_openai_responses,
    record_anthropic,
    record_openai_responses,
    to_anthropic,
    to_openai_responses,
    to_pydantic_ai,
)

PROMPT = "What's the weather in Paris?"

# --- what the providers answer -------------------------------------------------------

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
THINKING = "The user wants the weather: I should call the tool."
CALL = {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
        "input": {"city": "Paris"}}
USAGE = {"input_tokens": 20, "output_tokens": 40}


def _anthropic_message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": content, "stop_reason": stop,
            "stop_sequence": None, "usage": USAGE}


FIRST = _anthropic_message([{"type": "thinking", "thinking": THINKING,
                             "signature": SIGNATURE},
                            {"type": "redacted_thinking", "data": REDACTED}, CALL],
                           "tool_use")
SECOND = _anthropic_message([{"type": "text", "text": "18°C and sunny."}], "end_turn")


def _anthropic_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """``message`` as the Messages API streams it (signature as a ``signature_delta``)."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **message, "content": [], "stop_reason": None,
        "usage": {"input_tokens": 20, "output_tokens": 1}}}]
    for i, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "thinking_delta", "thinking": block["thinking"][:20]}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "thinking_delta", "thinking": block["thinking"][20:]}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "signature_delta", "signature": block["signature"]}}]
        elif block["type"] == "redacted_thinking":
            events.append({"type": "content_block_start", "index": i,
                           "content_block": block})
        elif block["type"] == "tool_use":
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {**block, "input": {}}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "input_json_delta",
                           "partial_json": json.dumps(block["input"])}}]
        else:
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "text_delta", "text": block["text"]}}]
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 40}},
               {"type": "message_stop"}]
    return events


ENCRYPTED = "gAAAAABoX-encrypted-reasoning-state=="
SUMMARY = [{"type": "summary_text", "text": "The user asks for the weather."},
           {"type": "summary_text", "text": "I will call get_weather."}]
REASONING = {"type": "reasoning", "id": "rs_0a1b2c", "summary": SUMMARY,
             "encrypted_content": ENCRYPTED}
FUNCTION = {"type": "function_call", "id": "fc_0a1b2c", "call_id": "call_7",
            "name": "get_weather", "arguments": '{"city":"Paris"}', "status": "completed"}
RESPONSE_USAGE = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 40},
                  "total_tokens": 80}


def _response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "o4-mini",
            "status": "completed", "output": output, "usage": RESPONSE_USAGE,
            "store": False, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


R_FIRST = _response([REASONING, FUNCTION])
R_SECOND = _response([{"type": "message", "id": "msg_2", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": "18°C.", "annotations": []}]}])


def _response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """``response`` as the Responses API streams it."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0,
         "response": {**response, "status": "in_progress", "output": []}}]
    for out, item in enumerate(response["output"]):
        if item["type"] == "reasoning":
            events.append({"type": "response.output_item.added", "output_index": out,
                           "item": {"type": "reasoning", "id": item["id"], "summary": []}})
            for s, part in enumerate(item["summary"]):
                events.append({"type": "response.reasoning_summary_text.delta",
                               "item_id": item["id"], "output_index": out,
                               "summary_index": s, "delta": part["text"]})
        elif item["type"] == "function_call":
            events += [
                {"type": "response.output_item.added", "output_index": out,
                 "item": {**item, "arguments": ""}},
                {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                 "output_index": out, "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", "item_id": item["id"],
                 "output_index": out, "arguments": item["arguments"]}]
        else:
            events.append({"type": "response.output_item.added", "output_index": out,
                           "item": {**item, "content": []}})
            events.append({"type": "response.output_text.delta", "item_id": item["id"],
                           "output_index": out, "content_index": 0,
                           "delta": item["content"][0]["text"]})
        events.append({"type": "response.output_item.done", "output_index": out,
                       "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


# --- the local provider ----------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class Provider:
    """A local transport that answers the requests in turn and keeps their bodies."""

    def __init__(self, answers: list[dict[str, Any]], stream: bool,
                 events: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answers = answers
        self.stream = stream
        self.events = events

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        answer = self.answers[len(self.bodies) - 1]
        if self.stream:
            return httpx2.Response(200, content=_sse(self.events(answer)),
                                   headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=answer)


def _session() -> Session:
    # A strict session (the default) on a store that checks turns and tool pairing.
    return SessionStore(create_plugin_manager(autoload=False), checks=True).create("loop")


def _weather_loop(session: Session, ask: Callable[[Step], RecordedResponse]) -> None:
    """The tool loop every case runs: the prompt; a step whose model call is answered
    with the weather; a second step whose request carries that answer back."""
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            step.tool_result(ask(step).tool_calls[0], "18°C, sunny")
        with turn.step() as step:
            ask(step)


async def _aweather_loop(session: Session,
                         ask: Callable[[Step], Awaitable[RecordedResponse]]) -> None:
    """:func:`_weather_loop`, each model call awaited."""
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            step.tool_result((await ask(step)).tool_calls[0], "18°C, sunny")
        with turn.step() as step:
            await ask(step)


MODES = [(False, False), (True, False), (False, True), (True, True)]
IDS = ["whole-sync", "stream-sync", "whole-async", "stream-async"]

# --- Anthropic ---------------------------------------------------------------------------

THINKING_ON = {"type": "enabled", "budget_tokens": 1024}


def _anthropic_loop(stream: bool, is_async: bool) -> tuple[Session, Provider]:
    provider = Provider([FIRST, SECOND], stream, _anthropic_events)
    session = _session()
    request: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 2048,
                               "thinking": THINKING_ON, "stream": stream}
    if not is_async:
        client = anthropic.Anthropic(
            api_key="sk-ant-test", base_url="http://anthropic.test",
            http_client=httpx2.Client(transport=httpx2.MockTransport(provider)))
        _weather_loop(session, lambda step: record_anthropic(
            step, client.messages.create(**request, **to_anthropic(session))))
        return session, provider

    async def run() -> None:
        aclient = anthropic.AsyncAnthropic(
            api_key="sk-ant-test", base_url="http://anthropic.test",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(provider)))

        async def ask(step: Step) -> RecordedResponse:
            return await arecord_anthropic(
                step, await aclient.messages.create(**request, **to_anthropic(session)))

        await _aweather_loop(session, ask)

    asyncio.run(run())
    return session, provider


@pytest.mark.parametrize(("stream", "is_async"), MODES, ids=IDS)
def test_anthropic_thinking_goes_back_signed_before_its_tool_use(stream: bool,
                                                                 is_async: bool) -> None:
    _, provider = _anthropic_loop(stream, is_async)
    first, second = provider.bodies
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": PROMPT}]}]
    assert second["thinking"] == THINKING_ON
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C, sunny",
             "is_error": False}]},
    ]


def test_anthropic_provider_data_false_records_the_text_only() -> None:
    session = _session()
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            recorded = record_anthropic(step, FIRST, provider_data=False)
            step.tool_result(recorded.tool_calls[0], "18°C, sunny")
    assert recorded.skipped == ("redacted_thinking",)
    assert to_anthropic(session)["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
         "input": {"city": "Paris"}}]


# --- OpenAI Responses, stateless -----------------------------------------------------------


def _input(session: Session) -> Any:
    """The request's ``input`` (typed loosely: plain dicts of the SDK's TypedDicts)."""
    return to_openai_responses(session)


def _responses_loop(stream: bool, is_async: bool) -> tuple[Session, Provider]:
    provider = Provider([R_FIRST, R_SECOND], stream, _response_events)
    session = _session()
    request: dict[str, Any] = {"model": "o4-mini", "store": False,
                               "include": ["reasoning.encrypted_content"]}
    if stream:
        request["stream"] = True
    if not is_async:
        client = openai.OpenAI(
            api_key="sk-test", base_url="http://openai.test/v1",
            http_client=httpx2.Client(transport=httpx2.MockTransport(provider)))
        _weather_loop(session, lambda step: record_openai_responses(
            step, client.responses.create(**request, input=_input(session))))
        return session, provider

    async def run() -> None:
        aclient = openai.AsyncOpenAI(
            api_key="sk-test", base_url="http://openai.test/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(provider)))

        async def ask(step: Step) -> RecordedResponse:
            return await arecord_openai_responses(
                step, await aclient.responses.create(**request, input=_input(session)))

        await _aweather_loop(session, ask)

    asyncio.run(run())
    return session, provider


@pytest.mark.parametrize(("stream", "is_async"), MODES, ids=IDS)
def test_responses_reasoning_goes_back_as_its_item_with_encrypted_content(
        stream: bool, is_async: bool) -> None:
    _, provider = _responses_loop(stream, is_async)
    first, second = provider.bodies
    assert first["input"] == [{"type": "message", "role": "user", "content": PROMPT}]
    assert second["store"] is False
    # One reasoning item, under the id the API issued, both summary parts, its encrypted
    # state; then the call it led to and the call's output.
    assert second["input"] == [
        {"type": "message", "role": "user", "content": PROMPT},
        {"type": "reasoning", "id": "rs_0a1b2c", "summary": SUMMARY,
         "encrypted_content": ENCRYPTED},
        {"type": "function_call", "call_id": "call_7", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_7", "output": "18°C, sunny"},
    ]


def test_a_reasoning_item_without_summary_goes_back_by_its_encrypted_content() -> None:
    # No reasoning summary asked for: the item has no text, only its id and state.
    bare = {**REASONING, "summary": []}
    for source in (_response([bare, FUNCTION]), _response_events(_response([bare, FUNCTION]))):
        session = _session()
        with session.turn() as turn:
            turn.user(PROMPT)
            with turn.step() as step:
                recorded = record_openai_responses(step, source)
                step.tool_result(recorded.tool_calls[0], "18°C, sunny")
        assert to_openai_responses(session)[1] == {
            "type": "reasoning", "id": "rs_0a1b2c", "summary": [],
            "encrypted_content": ENCRYPTED}


def test_reasoning_recorded_without_its_id_is_not_sent_under_a_made_up_one() -> None:
    # The API answers 404 "Item with id ... not found" to an id it did not issue.
    session = _session()
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            recorded = record_openai_responses(step, R_FIRST, provider_data=False)
            step.tool_result(recorded.tool_calls[0], "18°C, sunny")
    assert [i["type"] for i in to_openai_responses(session)] == [
        "message", "function_call", "function_call_output"]


# --- pydantic-ai: its own models send the reasoning back --------------------------------


# The model's name is only what the replayed response carries; newer pydantic-ai warns
# when its provider has retired a name (claude-sonnet-4-5 on 2026-11-30), which says
# nothing about what this test checks. (Matched by text: pydantic-ai before 2.7x has no
# DeprecatedModelWarning class to name.)
@pytest.mark.filterwarnings("ignore:Model .* is deprecated by its provider:UserWarning")
def test_pydantic_ai_models_send_back_what_the_log_kept() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    session, _ = _anthropic_loop(stream=False, is_async=False)
    history = to_pydantic_ai(session)
    provider = Provider([SECOND], stream=True, events=_anthropic_events)  # it streams
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url="http://anthropic.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(provider)))
    model = AnthropicModel("claude-sonnet-4-5",
                           provider=AnthropicProvider(anthropic_client=client))
    asyncio.run(Agent(model).run("And in Rome?", message_history=history))
    (body,) = provider.bodies
    assert body["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED}]


# --- the log keeps it: stores, strict sessions, a reader of the file --------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_stored_log_reloads_with_the_reasoning_and_sends_it_back(kind: str,
                                                                   tmp_path: Path) -> None:
    url = str(tmp_path / "store") if kind == "jsonl" else f"sqlite:///{tmp_path}/s.db"
    with open_store(url) as store:  # strict, as opened by default
        session = store.create("loop")
        with session.turn() as turn:
            turn.user(PROMPT)
            with turn.step() as step:
                recorded = record_anthropic(step, FIRST)
                step.tool_result(recorded.tool_calls[0], "18°C, sunny")
            with turn.step() as step:
                recorded = record_openai_responses(step, R_FIRST)
                step.tool_result(recorded.tool_calls[0], "18°C, sunny")
        expected_anthropic, expected_responses = (to_anthropic(session),
                                                  to_openai_responses(session))
        wire = [to_wire(e) for e in session.events]
    with open_store(url) as store:
        reopened = store.open("loop")
        assert to_anthropic(reopened) == expected_anthropic
        assert to_openai_responses(reopened) == expected_responses
        # A recorded message appended into another default (strict) session is accepted
        # as it is, its reasoning fields included.
        copy = store.create("copy")
        for event in wire:
            copy.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                        source_event_seqs=event.get("sourceEventSeqs"))
        assert copy.derive_messages() == reopened.derive_messages()
    assert expected_anthropic["messages"][1]["content"][0]["signature"] == SIGNATURE
    assert [i for i in expected_responses if i["type"] == "reasoning"] == [
        {"type": "reasoning", "id": "rs_0a1b2c", "summary": SUMMARY,
         "encrypted_content": ENCRYPTED}]
    if kind == "jsonl":
        # The file holds the reference's block with the keys added (a reference reader
        # keeps a block's keys verbatim), and `derive --to` reads them back.
        (log,) = (tmp_path / "store").rglob("loop.jsonl")
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        (thinking,) = [b for e in lines if e.get("type") == "assistant/message"
                       for b in e["data"]["content"] if b.get("signature")]
        assert thinking == {"type": "reasoning", "text": THINKING, "signature": SIGNATURE}
        out = subprocess.run([sys.executable, "-m", "dsh_session_core", "derive", "--to",
                              "anthropic", str(log)], capture_output=True, text=True,
                             check=True).stdout
        assert json.loads(out) == expected_anthropic


_items = st.lists(
    st.tuples(st.lists(st.text(min_size=1, max_size=8), max_size=3),
              st.none() | st.text(alphabet="abcXYZ=", min_size=1, max_size=12)),
    max_size=4)


@settings(max_examples=60, deadline=None)
@given(_items, st.booleans())
def test_any_reasoning_items_go_back_as_they_came(items: list[tuple[list[str], str | None]],
                                                 stream: bool) -> None:
    output = []
    for n, (texts, encrypted) in enumerate(items):
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{n}", "summary": [
            {"type": "summary_text", "text": t} for t in texts]}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        output.append(item)
    response = _response([*output, FUNCTION])
    session = _session()
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            source: Any = _response_events(response) if stream else response
            recorded = record_openai_responses(step, source)
            step.tool_result(recorded.tool_calls[0], "18°C, sunny")
    sent = to_openai_responses(session)
    assert [i for i in sent if i["type"] == "reasoning"] == output
