"""Recording Anthropic Messages responses into a step, driven through the real
``anthropic`` client (``messages.create``, streamed or not, and the ``messages.stream``
helper) against a local transport serving tests/providers/recordings/: no network.

Checked as the OpenAI recordings are (tests/providers/test_record_openai.py): the wire
(enclosure, one chunk per delta, ``sourceEventSeqs``, usage, one ``tool/call`` per call),
the derived messages (the response's content exactly), a checking store, and the round
trip through ``to_anthropic``, which gives back the thinking block with its signature
(kept by default; ``provider_data=False`` records the thinking's text only).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
import replay

from dsh_session_core import Session, to_wire
from dsh_session_core import vocabulary as v
from dsh_session_core.providers import (
    RecordedResponse,
    arecord_anthropic,
    record_anthropic,
    to_anthropic,
)

MESSAGE = "anthropic_message.json"
STREAM = "anthropic_stream.sse"
USAGE = {"inputTokens": 15, "outputTokens": 90, "cacheReadTokens": 2048,
         "cacheWriteTokens": 1024}


def _client(name: str, seen: list[httpx2.Request] | None = None) -> anthropic.Anthropic:
    served = replay.transport(name, [] if seen is None else seen)
    return anthropic.Anthropic(api_key="sk-ant-test", base_url="http://anthropic.test",
                               http_client=httpx2.Client(transport=served))


def _message() -> Any:
    return replay.recorded_json(MESSAGE)


def _expected() -> list[Any]:
    out: list[Any] = []
    for block in _message()["content"]:
        if block["type"] == "thinking":
            out.append(v.ReasoningBlock(text=block["thinking"], signature=block["signature"]))
        elif block["type"] == "text":
            out.append(v.TextBlock(text=block["text"]))
        elif block["type"] == "tool_use":
            out.append(v.ToolCallBlock(id=block["id"], name=block["name"],
                                     arguments=json.dumps(block["input"],
                                                          separators=(",", ":"))))
    return out


Mode = str  # "create": messages.create; "stream": create(stream=True); "helper": .stream()
MODES = ["create", "stream", "helper"]


def _call(mode: Mode, **options: Any) -> Callable[[Any], RecordedResponse]:
    def call(step: Any) -> RecordedResponse:
        seen: list[httpx2.Request] = []
        client = _client(MESSAGE if mode == "create" else STREAM, seen)
        request: Any = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                        "messages": [{"role": "user", "content": replay.PROMPT}],
                        "thinking": {"type": "enabled", "budget_tokens": 512}}
        if mode == "helper":
            with client.messages.stream(**request) as stream:
                result = record_anthropic(step, stream, **options)
        else:
            response = client.messages.create(**request, stream=mode == "stream")
            result = record_anthropic(step, response, **options)
        assert [r.url.path for r in seen] == ["/v1/messages"]
        return result
    return call


def _record(session: Session, call: Callable[[Any], RecordedResponse]) -> RecordedResponse:
    return replay.one_recorded_step(session, call, lambda _: "18°C, sunny")


def _wire(session: Session) -> list[dict[str, Any]]:
    return [to_wire(e) for e in session.events]


def _assistant(session: Session) -> list[Any]:
    (message,) = [m for m in session.derive_messages() if m.role == "assistant"]
    return list(message.content)


@pytest.mark.parametrize("mode", ["stream", "helper"])
def test_a_streamed_message_is_one_chunk_per_delta(mode: Mode) -> None:
    session = replay.checked_session()
    result = _record(session, _call(mode))
    events = _wire(session)
    types = [e["type"] for e in events]
    n = types.count("assistant/chunk")
    assert types == ["turn/start", "user/message", "step/start", *["assistant/chunk"] * n,
                     "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
    assert all((e["data"]["turn"], e["data"]["step"]) == (1, 1) for e in events[2:-1])

    raw = replay.sse_payloads(STREAM)

    def deltas(index: int, kind: str, field: str) -> list[str]:
        return [e["delta"][field] for e in raw if e["type"] == "content_block_delta"
                and e["index"] == index and e["delta"]["type"] == kind]

    call = _expected()[2]
    content = [to_wire(b) for b in _expected()]
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        *({"type": "reasoning-delta", "index": 0, "text": t}
          for t in deltas(0, "thinking_delta", "thinking")),
        {"type": "block-start", "index": 1, "blockType": "text"},
        *({"type": "text-delta", "index": 1, "text": t}
          for t in deltas(1, "text_delta", "text")),
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        # content_block_start names the call; then one chunk per non-empty input_json_delta
        {"type": "tool-call-delta", "index": 2, "id": call.id, "name": call.name,
         "argumentsDelta": ""},
        *({"type": "tool-call-delta", "index": 2, "id": call.id, "argumentsDelta": t}
          for t in deltas(2, "input_json_delta", "partial_json") if t),
        *({"type": "block-end", "index": i, "block": b} for i, b in enumerate(content)),
        {"type": "usage", "usage": USAGE},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    (message,) = [e for e in events if e["type"] == "assistant/message"]
    assert message["data"] == {"turn": 1, "step": 1, "content": content, "usage": USAGE}
    assert message["sourceEventSeqs"] == [
        e["seq"] for e in events if e["type"] == "assistant/chunk"]
    (tool_call,) = [e for e in events if e["type"] == "tool/call"]
    assert tool_call["data"] == {"turn": 1, "step": 1, "callId": call.id, "name": call.name,
                                 "arguments": call.arguments}
    assert [r.seq for r in result.tool_calls] == [tool_call["seq"]]
    (tool_result,) = [e for e in events if e["type"] == "tool/result"]
    assert tool_result["sourceEventSeqs"] == [tool_call["seq"]]
    assert result.finish == v.ToolCallsFinish()
    assert result.skipped == ()


def test_a_whole_message_is_its_message_without_chunks() -> None:
    session = replay.checked_session()
    result = _record(session, _call("create"))
    events = _wire(session)
    assert [e["type"] for e in events] == [
        "turn/start", "user/message", "step/start", "assistant/message", "tool/call",
        "tool/result", "step/end", "turn/end"]
    message = events[3]
    assert message["data"]["usage"] == USAGE
    assert "sourceEventSeqs" not in message
    assert events[4]["data"]["callId"] == _expected()[2].id
    assert result.finish == v.ToolCallsFinish()


@pytest.mark.parametrize("mode", MODES)
def test_messages_derive_the_response_content_exactly(mode: Mode) -> None:
    session = replay.checked_session()
    _record(session, _call(mode))
    assert _assistant(session) == _expected()
    # The streamed input JSON is the very text the whole message's input encodes to.
    raw = "".join(e["delta"]["partial_json"] for e in replay.sse_payloads(STREAM)
                  if e["type"] == "content_block_delta"
                  and e["delta"]["type"] == "input_json_delta")
    assert json.loads(raw) == _message()["content"][2]["input"]


@pytest.mark.parametrize("mode", MODES)
def test_messages_round_trip_through_to_anthropic(mode: Mode) -> None:
    original = _message()["content"]
    # Kept by default, on the reasoning block of a strict (default) session.
    session = replay.checked_session()
    _record(session, _call(mode))
    request = to_anthropic(session)
    (assistant,) = [m for m in request["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == original  # thinking with its signature, text, tool_use
    (_, answer) = [m for m in request["messages"] if m["role"] == "user"]
    assert answer["content"][0]["tool_use_id"] == original[2]["id"]
    _client(MESSAGE).messages.create(model="claude-sonnet-4-5", max_tokens=1024, **request)

    # With provider_data=False, the unsigned thinking is what to_anthropic leaves out
    # (docs/providers.md); the text and the tool call come back exactly.
    session = replay.checked_session()
    _record(session, _call(mode, provider_data=False))
    (assistant,) = [m for m in to_anthropic(session)["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == original[1:]


@pytest.mark.parametrize(("stop", "reason"), [
    ("end_turn", {"kind": "completed"}),
    ("stop_sequence", {"kind": "completed"}),
    ("max_tokens", {"kind": "max-tokens"}),
    ("refusal", {"kind": "error", "step": 1, "message": "the model refused to answer",
                 "code": "refusal"}),
])
def test_stop_reasons_end_the_turn(stop: str, reason: dict[str, Any]) -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": "Hi"}], "stop_reason": stop,
               "usage": {"input_tokens": 3, "output_tokens": 1}}
    stream = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                      "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    for source in (message, stream):
        session = replay.checked_session()
        with session.turn() as turn, turn.step() as step:
            result = record_anthropic(step, source)
        assert to_wire(session.events[-1])["data"]["reason"] == reason
        assert _assistant(session) == [v.TextBlock(text="Hi")]
        assert to_wire(result.usage) == {"inputTokens": 3, "outputTokens": 1}


def test_a_call_without_input_has_empty_object_arguments_and_other_blocks_are_skipped() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgB"}
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
              "input": {"query": "paris"}}
    message: dict[str, Any] = {
               "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [server, redacted, use],
               "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 1}}
    stream = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": server},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"query":"paris"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": redacted},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": use},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 1}},
    ]
    for source in (message, stream):
        session = replay.checked_session()
        with session.turn() as turn, turn.step() as step:
            result = record_anthropic(step, source, provider_data=False)
            assert result.skipped == ("server_tool_use", "redacted_thinking")
            assert [(r.call_id, r.arguments) for r in result.tool_calls] == [("toolu_1", "{}")]
            step.tool_result(result.tool_calls[0], "noon")
        assert _assistant(session) == [v.ToolCallBlock(id="toolu_1", name="now",
                                                     arguments="{}")]
    # By default, redacted thinking is kept (as to_anthropic reads it back).
    for source in (message, stream):
        session = replay.checked_session()
        with session.turn() as turn, turn.step() as step:
            result = record_anthropic(step, source)
            assert result.skipped == ("server_tool_use",)
            step.tool_result(result.tool_calls[0], "noon")
        assert _assistant(session)[0] == v.ReasoningBlock(text="", redacted_data="EmwKAhgB")
        assert to_wire(_assistant(session)[0]) == {
            "type": "reasoning", "text": "", "redactedData": "EmwKAhgB"}
        (reply,) = [m for m in to_anthropic(session)["messages"] if m["role"] == "assistant"]
        assert reply["content"][0] == {"type": "redacted_thinking", "data": "EmwKAhgB"}


def test_an_async_stream_records_as_a_sync_one() -> None:
    async def run(session: Session) -> None:
        client = anthropic.AsyncAnthropic(
            api_key="sk-ant-test", base_url="http://anthropic.test",
            http_client=httpx2.AsyncClient(transport=replay.transport(STREAM, [])))
        with session.turn() as turn:
            turn.user(replay.PROMPT)
            with turn.step() as step:
                stream = await client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=1024, stream=True,
                    messages=[{"role": "user", "content": replay.PROMPT}])
                result = await arecord_anthropic(step, stream)
                for ref in result.tool_calls:
                    step.tool_result(ref, "18°C, sunny")

    session, sync = replay.checked_session(), replay.checked_session()
    asyncio.run(run(session))
    _record(sync, _call("stream"))
    assert [{**e, "time": 0} for e in _wire(session)] == [{**e, "time": 0} for e in _wire(sync)]


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_plain_json_records_as_the_sdks_objects(mode: Mode) -> None:
    plain = _message() if mode == "create" else replay.sse_payloads(STREAM)
    from_json, from_sdk, replayed = (replay.checked_session() for _ in range(3))
    _record(from_json, lambda step: record_anthropic(step, plain))
    _record(from_sdk, _call(mode))

    async def record_async(step: Any) -> RecordedResponse:
        return await arecord_anthropic(step, plain)  # a sync iterable: replayed as is
    _record(replayed, lambda step: asyncio.run(record_async(step)))
    expected = [{**e, "time": 0} for e in _wire(from_sdk)]
    assert [{**e, "time": 0} for e in _wire(from_json)] == expected
    assert [{**e, "time": 0} for e in _wire(replayed)] == expected
