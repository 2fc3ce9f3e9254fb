"""Recording OpenAI responses (Chat Completions and the Responses API) into a step, driven
through the real ``openai`` client against a local transport that serves the recorded
bodies and streams of tests/providers/recordings/: no network.

Each response is checked on the log's wire (turn and step enclosure, one chunk per
delta, ``sourceEventSeqs``, usage, one ``tool/call`` per call), on the derived messages
(they equal the response's content exactly, streamed or not), on a store that checks
turn enclosure and tool pairing (and reads it back), and through ``to_openai_chat`` /
``to_openai_responses``: the converted request reproduces the response's content and
tool calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import replay
from msgspec import UNSET

from dsh_session_core import Session, SessionStore, create_plugin_manager, open_store, to_wire
from dsh_session_core import vocabulary as v
from dsh_session_core.providers import (
    RecordedResponse,
    arecord_openai_chat,
    arecord_openai_responses,
    record_openai_chat,
    record_openai_responses,
    to_openai_responses,
)

# --- the local replay.transport -----------------------------------------------------------------


def _client(name: str, seen: list[httpx2.Request] | None = None) -> openai.OpenAI:
    served = replay.transport(name, [] if seen is None else seen)
    return openai.OpenAI(api_key="sk-test", base_url="http://openai.test/v1",
                         http_client=httpx2.Client(transport=served))


def _async_client(name: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="sk-test", base_url="http://openai.test/v1",
                              http_client=httpx2.AsyncClient(
                                  transport=replay.transport(name, [])))


def _record(session: Session, call: Callable[[Any], RecordedResponse]) -> RecordedResponse:
    return replay.one_recorded_step(session, call, lambda ref: f"result of {ref.name}")


def _wire(session: Session) -> list[dict[str, Any]]:
    return [to_wire(e) for e in session.events]


def _chunks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]


def _assistant(session: Session) -> list[Any]:
    (message,) = [m for m in session.derive_messages() if m.role == "assistant"]
    return list(message.content)


def _check_enclosure(events: list[dict[str, Any]], calls: int) -> None:
    """turn/start, the prompt, step/start, the chunks, the message, the calls and their
    results, step/end, turn/end; every step event names turn 1, step 1."""
    types = [e["type"] for e in events]
    n_chunks = types.count("assistant/chunk")
    assert types == (["turn/start", "user/message", "step/start"]
                     + ["assistant/chunk"] * n_chunks + ["assistant/message"]
                     + ["tool/call"] * calls + ["tool/result"] * calls
                     + ["step/end", "turn/end"])
    for e in events[2:-1]:
        assert (e["data"]["turn"], e["data"]["step"]) == (1, 1), e
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


def _check_calls(events: list[dict[str, Any]], result: RecordedResponse,
                 expected: list[v.ToolCallBlock]) -> None:
    calls = [e for e in events if e["type"] == "tool/call"]
    assert [(c["data"]["callId"], c["data"]["name"], c["data"]["arguments"]) for c in calls] \
        == [(b.id, b.name, b.arguments) for b in expected]
    assert [r.seq for r in result.tool_calls] == [c["seq"] for c in calls]
    results = [e for e in events if e["type"] == "tool/result"]
    assert [r["sourceEventSeqs"] for r in results] == [[c["seq"]] for c in calls]


# --- Chat Completions --------------------------------------------------------------------

CHAT = "openai_chat.json"
CHAT_STREAM = "openai_chat_stream.sse"


def _chat_expected() -> list[Any]:
    """The content of the recorded ChatCompletion, as the log's blocks."""
    message = replay.recorded_json(CHAT)["choices"][0]["message"]
    return [v.TextBlock(text=message["content"])] + [
        v.ToolCallBlock(id=c["id"], name=c["function"]["name"],
                      arguments=c["function"]["arguments"])
        for c in message["tool_calls"]]


def _chat(stream: bool) -> Callable[[Any], RecordedResponse]:
    def call(step: Any) -> RecordedResponse:
        seen: list[httpx2.Request] = []
        client = _client(CHAT_STREAM if stream else CHAT, seen)
        if stream:
            response: Any = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": replay.PROMPT}], stream=True,
                stream_options={"include_usage": True})
        else:
            response = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": replay.PROMPT}])
        result = record_openai_chat(step, response)
        assert [r.url.path for r in seen] == ["/v1/chat/completions"]
        assert json.loads(seen[0].content).get("stream", False) is stream
        return result
    return call


def test_a_streamed_chat_completion_is_one_chunk_per_delta() -> None:
    session = replay.checked_session()
    result = _record(session, _chat(stream=True))
    events = _wire(session)
    _check_enclosure(events, calls=2)

    # What the server streamed: one chunk per non-empty content delta, per tool-call
    # delta; block-start before each block's first, block-end of each, usage, finish.
    raw = replay.sse_payloads(CHAT_STREAM)
    text = [c["choices"][0]["delta"].get("content") for c in raw if c["choices"]]
    expected: list[dict[str, Any]] = [{"type": "block-start", "index": 0, "blockType": "text"}]
    expected += [{"type": "text-delta", "index": 0, "text": t} for t in text if t]
    for call in (0, 1):
        deltas = [d for c in raw if c["choices"]
                  for d in c["choices"][0]["delta"].get("tool_calls") or ()
                  if d["index"] == call]
        expected.append({"type": "block-start", "index": 1 + call, "blockType": "tool-call"})
        first = deltas[0]
        expected.append({"type": "tool-call-delta", "index": 1 + call, "id": first["id"],
                         "name": first["function"]["name"], "argumentsDelta": ""})
        expected += [{"type": "tool-call-delta", "index": 1 + call, "id": first["id"],
                      "argumentsDelta": d["function"]["arguments"]} for d in deltas[1:]]
    content = [to_wire(b) for b in _chat_expected()]
    expected += [{"type": "block-end", "index": i, "block": b} for i, b in enumerate(content)]
    usage = {"inputTokens": 120 - 64, "outputTokens": 42, "cacheReadTokens": 64,
             "reasoningTokens": 0}
    expected += [{"type": "usage", "usage": usage},
                 {"type": "finish", "reason": {"kind": "tool-calls"}}]
    assert _chunks(events) == expected

    (message,) = [e for e in events if e["type"] == "assistant/message"]
    assert message["data"]["content"] == content
    assert message["data"]["usage"] == usage
    assert message["sourceEventSeqs"] == [
        e["seq"] for e in events if e["type"] == "assistant/chunk"]
    assert message["seq"] == result.message.seq
    assert result.finish == v.ToolCallsFinish()
    assert result.skipped == ()
    _check_calls(events, result, _chat_expected()[1:])


def test_a_whole_chat_completion_is_its_message_without_chunks() -> None:
    session = replay.checked_session()
    result = _record(session, _chat(stream=False))
    events = _wire(session)
    _check_enclosure(events, calls=2)
    assert _chunks(events) == []
    (message,) = [e for e in events if e["type"] == "assistant/message"]
    assert "sourceEventSeqs" not in message
    assert message["data"]["usage"] == {"inputTokens": 56, "outputTokens": 42,
                                        "cacheReadTokens": 64, "reasoningTokens": 0}
    assert result.finish == v.ToolCallsFinish()
    _check_calls(events, result, _chat_expected()[1:])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_chat_derives_the_response_content_exactly(stream: bool) -> None:
    session = replay.checked_session()
    _record(session, _chat(stream))
    assert _assistant(session) == _chat_expected()
    # The stream's deltas assemble to the very text and arguments of the whole response.
    raw = replay.sse_payloads(CHAT_STREAM)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in raw if c["choices"])
    assert text == _chat_expected()[0].text


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_chat_round_trips_through_to_openai_chat(stream: bool) -> None:
    from dsh_session_core.providers import to_openai_chat

    session = replay.checked_session()
    _record(session, _chat(stream))
    messages = to_openai_chat(session)
    (assistant,) = [m for m in messages if m["role"] == "assistant"]
    original = replay.recorded_json(CHAT)["choices"][0]["message"]
    assert assistant["content"] == original["content"]
    assert [(c["id"], c["type"], c["function"]) for c in assistant["tool_calls"]] == [
        (c["id"], c["type"], c["function"]) for c in original["tool_calls"]]
    # ...and the next request the harness sends is one the real client takes.
    _client(CHAT).chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]


def _chat_dict(finish: str, content: str = "Partial answer") -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


@pytest.mark.parametrize(("finish", "reason"), [
    ("stop", {"kind": "completed"}),
    ("length", {"kind": "max-tokens"}),
    ("content_filter", {"kind": "error", "step": 1,
                        "message": "the provider's content filter stopped the output",
                        "code": "content_filter"}),
])
def test_chat_finish_reasons_end_the_turn(finish: str, reason: dict[str, Any]) -> None:
    # Plain dicts of the same JSON are read as the SDK's objects are.
    for response in (_chat_dict(finish), _stream_of(_chat_dict(finish))):
        session = replay.checked_session()
        with session.turn() as turn, turn.step() as step:
            result = record_openai_chat(step, response)
        assert to_wire(session.events[-1])["data"]["reason"] == reason
        assert result.usage is not None
        assert result.usage.input_tokens == 10
        assert _assistant(session) == [v.TextBlock(text="Partial answer")]


def _stream_of(whole: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole chat completion as the stream of dict chunks a server would send."""
    choice = whole["choices"][0]
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": 1, "model": "m"}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    for word in choice["message"]["content"].split(" "):
        yield {**base, "choices": [{"index": 0, "delta": {"content": word}}]}
        if word != choice["message"]["content"].split(" ")[-1]:
            yield {**base, "choices": [{"index": 0, "delta": {"content": " "}}]}
    yield {**base, "choices": [{"index": 0, "delta": {},
                                "finish_reason": choice["finish_reason"]}]}
    yield {**base, "choices": [], "usage": whole["usage"]}


def test_chat_reasoning_content_of_compatible_servers_is_a_reasoning_block() -> None:
    # DeepSeek, vLLM...: the reasoning streams as delta.reasoning_content, first.
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"reasoning_content": r}}]}
              for r in ("Think", "ing.")]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": "Done."},
                                     "finish_reason": "stop"}]}]
    session = replay.checked_session()
    with session.turn() as turn, turn.step() as step:
        record_openai_chat(step, iter(chunks))
    assert _assistant(session) == [v.ReasoningBlock(text="Thinking."), v.TextBlock(text="Done.")]
    assert [c["type"] for c in _chunks(_wire(session))] == [
        "block-start", "reasoning-delta", "reasoning-delta", "block-start", "text-delta",
        "block-end", "block-end", "finish"]


def test_an_async_chat_stream_records_as_a_sync_one() -> None:
    async def run(session: Session) -> RecordedResponse:
        client = _async_client(CHAT_STREAM)
        with session.turn() as turn:
            turn.user(replay.PROMPT)
            with turn.step() as step:
                stream = await client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": replay.PROMPT}],
                    stream=True)
                result = await arecord_openai_chat(step, stream)
                for ref in result.tool_calls:
                    step.tool_result(ref, f"result of {ref.name}")
        return result

    session, sync = replay.checked_session(), replay.checked_session()
    asyncio.run(run(session))
    _record(sync, _chat(stream=True))
    assert [{**e, "time": 0} for e in _wire(session)] == [
        {**e, "time": 0} for e in _wire(sync)]


# --- the Responses API -------------------------------------------------------------------

RESPONSE = "openai_responses.json"
RESPONSE_STREAM = "openai_responses_stream.sse"


def _response_expected() -> list[Any]:
    out: list[Any] = []
    for item in replay.recorded_json(RESPONSE)["output"]:
        if item["type"] == "reasoning":
            # The item's id is kept on each of its blocks, by default.
            out += [v.ReasoningBlock(text=p["text"], id=item["id"]) for p in item["summary"]]
        elif item["type"] == "message":
            out += [v.TextBlock(text=p["text"]) for p in item["content"]]
        elif item["type"] == "function_call":
            out.append(v.ToolCallBlock(id=item["call_id"], name=item["name"],
                                     arguments=item["arguments"]))
    return out


def _responses(stream: bool) -> Callable[[Any], RecordedResponse]:
    def call(step: Any) -> RecordedResponse:
        seen: list[httpx2.Request] = []
        client = _client(RESPONSE_STREAM if stream else RESPONSE, seen)
        if stream:
            response: Any = client.responses.create(model="o4-mini", input=replay.PROMPT,
                                                    stream=True)
        else:
            response = client.responses.create(model="o4-mini", input=replay.PROMPT)
        result = record_openai_responses(step, response)
        assert [r.url.path for r in seen] == ["/v1/responses"]
        return result
    return call


RESPONSE_USAGE = {"inputTokens": 200 - 128, "outputTokens": 80, "cacheReadTokens": 128,
                  "reasoningTokens": 32}


def test_a_streamed_response_is_one_chunk_per_delta() -> None:
    session = replay.checked_session()
    result = _record(session, _responses(stream=True))
    events = _wire(session)
    _check_enclosure(events, calls=1)

    raw = replay.sse_payloads(RESPONSE_STREAM)
    summary = [e["delta"] for e in raw if e["type"] == "response.reasoning_summary_text.delta"]
    text = [e["delta"] for e in raw if e["type"] == "response.output_text.delta"]
    args = [e["delta"] for e in raw if e["type"] == "response.function_call_arguments.delta"]
    call = _response_expected()[2]
    content = [to_wire(b) for b in _response_expected()]
    assert _chunks(events) == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        *({"type": "reasoning-delta", "index": 0, "text": t} for t in summary),
        {"type": "block-start", "index": 1, "blockType": "text"},
        *({"type": "text-delta", "index": 1, "text": t} for t in text),
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        # output_item.added names the call, with its (empty) arguments so far
        {"type": "tool-call-delta", "index": 2, "id": call.id, "name": call.name,
         "argumentsDelta": ""},
        *({"type": "tool-call-delta", "index": 2, "id": call.id, "argumentsDelta": a}
          for a in args),
        *({"type": "block-end", "index": i, "block": b} for i, b in enumerate(content)),
        {"type": "usage", "usage": RESPONSE_USAGE},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    (message,) = [e for e in events if e["type"] == "assistant/message"]
    assert message["data"] == {"turn": 1, "step": 1, "content": content,
                               "usage": RESPONSE_USAGE}
    assert message["sourceEventSeqs"] == [
        e["seq"] for e in events if e["type"] == "assistant/chunk"]
    assert result.finish == v.ToolCallsFinish()
    _check_calls(events, result, [call])


def test_a_whole_response_is_its_message_without_chunks() -> None:
    session = replay.checked_session()
    result = _record(session, _responses(stream=False))
    events = _wire(session)
    _check_enclosure(events, calls=1)
    assert _chunks(events) == []
    (message,) = [e for e in events if e["type"] == "assistant/message"]
    assert message["data"]["usage"] == RESPONSE_USAGE
    assert "sourceEventSeqs" not in message
    assert result.finish == v.ToolCallsFinish()
    _check_calls(events, result, [_response_expected()[2]])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_responses_derive_the_response_content_exactly(stream: bool) -> None:
    session = replay.checked_session()
    _record(session, _responses(stream))
    assert _assistant(session) == _response_expected()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_responses_round_trip_through_to_openai_responses(stream: bool) -> None:

    session = replay.checked_session()
    _record(session, _responses(stream))
    items = to_openai_responses(session)
    output = replay.recorded_json(RESPONSE)["output"]
    # Each output item comes back as an input item of its kind, with its content.
    reasoning = [i for i in items if i["type"] == "reasoning"]
    assert [i["summary"] for i in reasoning] == [output[0]["summary"]]
    (assistant,) = [i for i in items if i["type"] == "message" and i["role"] == "assistant"]
    texts = [p["text"] for p in assistant["content"]] if isinstance(
        assistant["content"], list) else [assistant["content"]]
    assert texts == [p["text"] for p in output[1]["content"]]
    calls = [i for i in items if i["type"] == "function_call"]
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == [
        (output[2]["call_id"], output[2]["name"], output[2]["arguments"])]
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [output[2]["call_id"]]
    _client(RESPONSE).responses.create(model="o4-mini", input=items)  # type: ignore[arg-type]

    # The reasoning item keeps its own id (in a strict session).
    kept = SessionStore(create_plugin_manager(autoload=False), checks=True).create("kept")
    _record(kept, lambda step: record_openai_responses(step, _replay(stream)))
    (item,) = [i for i in to_openai_responses(kept) if i["type"] == "reasoning"]
    assert item == {"type": "reasoning", "id": output[0]["id"],
                    "summary": output[0]["summary"]}
    # With provider_data=False, the text alone: no id the API issued, so no item.
    bare = SessionStore(create_plugin_manager(autoload=False), checks=True).create("bare")
    _record(bare, lambda step: record_openai_responses(
        step, _replay(stream), provider_data=False))
    assert [b.id for b in _assistant(bare) if isinstance(b, v.ReasoningBlock)] == [UNSET]
    assert [i for i in to_openai_responses(bare) if i["type"] == "reasoning"] == []


def _replay(stream: bool) -> Any:
    """The recorded Responses stream or response, through the real client."""
    client = _client(RESPONSE_STREAM if stream else RESPONSE)
    if stream:
        return client.responses.create(model="o4-mini", input=replay.PROMPT, stream=True)
    return client.responses.create(model="o4-mini", input=replay.PROMPT)


def _response_dict(status: str, **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "model": "m",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                        "status": status,
                        "content": [{"type": "output_text", "text": "Part",
                                     "annotations": []}]}],
            "usage": {"input_tokens": 9, "output_tokens": 4}, **extra}


@pytest.mark.parametrize(("response", "reason"), [
    (_response_dict("completed"), {"kind": "completed"}),
    (_response_dict("incomplete", incomplete_details={"reason": "max_output_tokens"}),
     {"kind": "max-tokens"}),
    (_response_dict("incomplete", incomplete_details={"reason": "content_filter"}),
     {"kind": "error", "step": 1, "message": "the response is incomplete (content_filter)",
      "code": "content_filter"}),
    (_response_dict("failed", error={"code": "server_error", "message": "boom"}),
     {"kind": "error", "step": 1, "message": "boom", "code": "server_error"}),
    (_response_dict("cancelled"), {"kind": "aborted"}),
], ids=["completed", "max-tokens", "content-filter", "failed", "cancelled"])
def test_response_status_ends_the_turn(response: dict[str, Any],
                                       reason: dict[str, Any]) -> None:
    # The event a stream ends with: the response, as of its status (a cancelled one is
    # fetched after the fact; a stream of it ends as any other).
    end = {"completed": "response.completed", "incomplete": "response.incomplete",
           "failed": "response.failed", "cancelled": "response.completed"}
    stream = [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
         "delta": "Part"},
        {"type": end[response["status"]], "response": response},
    ]
    for source in (response, iter(stream)):
        session = replay.checked_session()
        with session.turn() as turn, turn.step() as step:
            record_openai_responses(step, source)
        assert to_wire(session.events[-1])["data"]["reason"] == reason
        assert _assistant(session) == [v.TextBlock(text="Part")]


def test_output_items_the_log_cannot_hold_are_named_as_skipped() -> None:
    response = _response_dict("completed")
    response["output"].insert(0, {"type": "web_search_call", "id": "ws_1",
                                  "status": "completed"})
    session = replay.checked_session()
    with session.turn() as turn, turn.step() as step:
        result = record_openai_responses(step, response)
    assert result.skipped == ("web_search_call",)
    assert result.finish == v.StopFinish()
    stream = [{"type": "response.output_item.added", "output_index": 0,
               "item": response["output"][0]},
              {"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
               "delta": "Part"},
              {"type": "response.completed", "response": response}]
    with session.turn() as turn, turn.step() as step:
        assert record_openai_responses(step, stream).skipped == ("web_search_call",)


def test_the_reasoning_items_id_and_encrypted_content_are_kept() -> None:
    response = replay.recorded_json(RESPONSE)
    response["output"][0]["encrypted_content"] = "gAAAAB-opaque"
    added = {"type": "response.output_item.added", "output_index": 0,
             "item": {**response["output"][0], "summary": []}}
    done = {"type": "response.output_item.done", "output_index": 0,
            "item": response["output"][0]}
    delta = {"type": "response.reasoning_summary_text.delta", "output_index": 0,
             "summary_index": 0, "delta": response["output"][0]["summary"][0]["text"]}
    expected = {"type": "reasoning", "text": response["output"][0]["summary"][0]["text"],
                "id": response["output"][0]["id"], "encryptedContent": "gAAAAB-opaque"}
    no_text = {**expected, "text": ""}  # an item that streamed no summary still counts
    for source, want in ((response, expected), ([added, delta, done], expected),
                         ([added, done], no_text)):
        # Fields of the reasoning block: a strict (default) session logs them.
        session = Session("strict")
        with session.turn() as turn, turn.step() as step:
            record_openai_responses(step, source)
        (message,) = [e for e in _wire(session) if e["type"] == "assistant/message"]
        assert message["data"]["content"][0] == want
        # ... and they load back typed, and go back to the API (the step's end answered
        # its unanswered call: the assistant message is the one before that answer).
        (said,) = [m for m in session.derive_messages() if m.role == "assistant"]
        block = said.content[0]
        assert isinstance(block, v.ReasoningBlock)
        assert (block.id, block.encrypted_content) == (want["id"], "gAAAAB-opaque")
        (item,) = [i for i in to_openai_responses(session) if i["type"] == "reasoning"]
        assert (item["id"], item["encrypted_content"]) == (want["id"], "gAAAAB-opaque")


def test_an_async_response_stream_records_as_a_sync_one() -> None:
    async def run(session: Session) -> None:
        client = _async_client(RESPONSE_STREAM)
        with session.turn() as turn:
            turn.user(replay.PROMPT)
            with turn.step() as step:
                stream = await client.responses.create(model="o4-mini", input=replay.PROMPT,
                                                       stream=True)
                result = await arecord_openai_responses(step, stream)
                for ref in result.tool_calls:
                    step.tool_result(ref, f"result of {ref.name}")

    session, sync = replay.checked_session(), replay.checked_session()
    asyncio.run(run(session))
    _record(sync, _responses(stream=True))
    assert [{**e, "time": 0} for e in _wire(session)] == [
        {**e, "time": 0} for e in _wire(sync)]


# --- on a durable store -------------------------------------------------------------------


def test_recorded_steps_pass_a_checking_store_and_read_back(tmp_path: Path) -> None:
    with open_store(tmp_path, checks=True) as store:
        session = store.create("agent")
        for call in (_chat(True), _chat(False), _responses(True), _responses(False)):
            _record(session, call)
        written = _wire(session)
        derived = session.derive_messages()
        store.flush(session)
    with open_store(tmp_path, checks=True) as store:
        again = store.open("agent")
        assert _wire(again) == written
        assert again.derive_messages() == derived


# --- plain JSON, read as the SDK's objects are ---------------------------------------------


@pytest.mark.parametrize(("name", "record", "sdk"), [
    (CHAT_STREAM, record_openai_chat, _chat(stream=True)),
    (CHAT, record_openai_chat, _chat(stream=False)),
    (RESPONSE_STREAM, record_openai_responses, _responses(stream=True)),
    (RESPONSE, record_openai_responses, _responses(stream=False)),
], ids=["chat-stream", "chat", "responses-stream", "responses"])
def test_plain_json_records_as_the_sdks_objects(
        name: str, record: Callable[[Any, Any], RecordedResponse],
        sdk: Callable[[Any], RecordedResponse]) -> None:
    plain = replay.sse_payloads(name) if name.endswith(".sse") else replay.recorded_json(name)
    from_json, from_sdk, replayed = (replay.checked_session() for _ in range(3))
    _record(from_json, lambda step: record(step, plain))
    _record(from_sdk, sdk)
    # arecord_* also takes a sync iterable (recorded chunks replayed in a coroutine).
    arecord = arecord_openai_chat if record is record_openai_chat else arecord_openai_responses

    async def record_async(step: Any) -> RecordedResponse:
        return await arecord(step, plain)
    _record(replayed, lambda step: asyncio.run(record_async(step)))
    expected = [{**e, "time": 0} for e in _wire(from_sdk)]
    assert [{**e, "time": 0} for e in _wire(from_json)] == expected
    assert [{**e, "time": 0} for e in _wire(replayed)] == expected


def test_a_custom_tool_call_is_named_as_skipped() -> None:
    response = _chat_dict("tool_calls")
    response["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_9", "type": "custom", "custom": {"name": "grammar", "input": "x"}}]
    session = replay.checked_session()
    with session.turn() as turn, turn.step() as step:
        result = record_openai_chat(step, response)
    assert result.skipped == ("custom tool call",)
    assert result.tool_calls == ()


def test_a_stream_that_raises_midway_keeps_its_chunks_and_fails_the_turn() -> None:
    def broken() -> Iterator[dict[str, Any]]:
        yield from replay.sse_payloads(CHAT_STREAM)[:4]  # the role chunk, then three words
        raise ConnectionError("connection reset")

    session = replay.checked_session()
    with pytest.raises(ConnectionError), session.turn() as turn, turn.step() as step:
        record_openai_chat(step, broken())
    events = _wire(session)
    assert [e["type"] for e in events] == ["turn/start", "step/start", *["assistant/chunk"] * 4,
                                           "step/end", "turn/end"]
    assert events[-1]["data"]["reason"] == {"kind": "error", "step": 1,
                                            "message": "connection reset"}
    assert session.derive_messages() == []
