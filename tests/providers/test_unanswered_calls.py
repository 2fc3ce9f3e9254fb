"""No conversion sends a tool call without its result (issue 24, point 3): a call that no
``tool/result`` answers gets a synthetic error result, where each provider wants it (right
after the assistant message and its results, before the next user or assistant message),
checked with the providers' own SDK request types; the derived messages are unchanged.

The rules checked are the providers' (an OpenAI Chat ``assistant`` message with
``tool_calls`` must be followed by a ``tool`` message for each id; an Anthropic
``tool_use`` must be answered by a ``tool_result`` at the head of the next user turn;
Responses pairs each ``function_call`` with a ``function_call_output``), written out here
rather than taken from the code under test.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sdk_check import check_anthropic, check_chat, check_pydantic_ai, check_responses

from dsh_session_core import Session
from dsh_session_core import testing as kit
from dsh_session_core.providers import (
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)
from dsh_session_core.vocabulary import Message, TextBlock, ToolCallBlock, ToolResultBlock

_NOTE = "no result was recorded"


def _unpaired_session() -> Session:
    """A log written by hand (not through the builders, which answer at step end): turn 1
    calls c1 and c2 and answers only c1, then a new prompt; turn 2 calls c3 and never
    answers it (its last event)."""
    s = Session("unpaired")
    kit.turn_start(s, 1)
    kit.user(s, "list and count")
    kit.step_start(s, 1, 1)
    kit.assistant(s, 1, 1, [kit.text_block("Two calls."),
                            kit.call_block("c1", arguments='{"cmd":"ls"}'),
                            kit.call_block("c2", arguments='{"cmd":"wc"}')])
    call = kit.tool_call(s, 1, 1, "c1", arguments='{"cmd":"ls"}')
    kit.tool_call(s, 1, 1, "c2", arguments='{"cmd":"wc"}')
    s.append("tool/result", kit.tool_result_data(1, 1, "c1", "a.txt"),
             surface_op="append", source_event_seqs=[call.seq])
    kit.step_end(s, 1, 1)
    kit.turn_end(s, 1)
    kit.turn_start(s, 2)
    kit.user(s, "again")
    kit.step_start(s, 2, 1)
    kit.assistant(s, 2, 1, [kit.call_block("c3", name="read")])
    return s


# --- the providers' pairing rules ----------------------------------------------------------


def _chat_paired(messages: list[dict[str, Any]]) -> set[str]:
    """Every assistant ``tool_calls`` id has a ``tool`` message in the run of tool
    messages right after it; the ids called."""
    called: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or "tool_calls" not in m:
            continue
        ids = {c["id"] for c in m["tool_calls"]}
        called |= ids
        answered: set[str] = set()
        for after in messages[i + 1:]:
            if after["role"] != "tool":
                break
            answered.add(after["tool_call_id"])
        assert ids <= answered, (ids - answered, messages)
    return called


def _responses_paired(items: list[dict[str, Any]]) -> set[str]:
    """Every ``function_call`` has a ``function_call_output`` after it, before the next
    item of another kind than a call or an output; the ids called."""
    called: set[str] = set()
    for i, item in enumerate(items):
        if item.get("type") != "function_call":
            continue
        called.add(item["call_id"])
        outputs: set[str] = set()
        for after in items[i + 1:]:
            kind = after.get("type")
            if kind == "function_call_output":
                outputs.add(after["call_id"])
            elif kind != "function_call" and after.get("role") != "assistant":
                break
        assert item["call_id"] in outputs, (item, items)
    return called


def _anthropic_paired(kwargs: dict[str, Any]) -> set[str]:
    """Every ``tool_use`` of an assistant turn is answered by a ``tool_result`` among the
    leading blocks of the next turn, a user turn; the ids called."""
    turns = kwargs["messages"]
    called: set[str] = set()
    for i, turn in enumerate(turns):
        if turn["role"] != "assistant":
            continue
        ids = {b["id"] for b in turn["content"] if b["type"] == "tool_use"}
        if not ids:
            continue
        called |= ids
        assert i + 1 < len(turns), ("a tool_use ends the request", turns)
        nxt = turns[i + 1]
        assert nxt["role"] == "user"
        head: set[str] = set()
        for b in nxt["content"]:
            if b["type"] != "tool_result":
                break
            head.add(b["tool_use_id"])
        assert ids <= head, (ids - head, turns)
    return called


def _pydantic_paired(history: list[Any]) -> set[str]:
    """Every ``ToolCallPart`` of a response has a ``ToolReturnPart`` in the next request."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

    called: set[str] = set()
    for i, message in enumerate(history):
        if not isinstance(message, ModelResponse):
            continue
        ids = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
        if not ids:
            continue
        called |= ids
        assert i + 1 < len(history), ("a tool call ends the history", history)
        nxt = history[i + 1]
        assert isinstance(nxt, ModelRequest)
        returned = {p.tool_call_id for p in nxt.parts if isinstance(p, ToolReturnPart)}
        assert ids <= returned, (ids - returned, history)
    return called


# --- a log with unpaired calls ---------------------------------------------------------------


def test_openai_chat_answers_every_unanswered_call_before_the_next_prompt() -> None:
    out = to_openai_chat(_unpaired_session())
    check_chat(out)
    assert _chat_paired(out) == {"c1", "c2", "c3"}
    roles = [(m["role"], m.get("tool_call_id")) for m in out]
    assert roles == [("user", None), ("assistant", None), ("tool", "c1"), ("tool", "c2"),
                     ("user", None), ("assistant", None), ("tool", "c3")]
    synthetic = [m for m in out if m.get("tool_call_id") in ("c2", "c3")]
    assert all(_NOTE in m["content"] for m in synthetic), synthetic


def test_openai_responses_answers_every_unanswered_call() -> None:
    out = to_openai_responses(_unpaired_session())
    check_responses(out)
    assert _responses_paired(out) == {"c1", "c2", "c3"}
    outputs = [i["call_id"] for i in out if i["type"] == "function_call_output"]
    assert outputs == ["c1", "c2", "c3"]


def test_anthropic_answers_every_unanswered_call_at_the_head_of_the_user_turn() -> None:
    out = to_anthropic(_unpaired_session())
    check_anthropic(out)
    assert _anthropic_paired(out) == {"c1", "c2", "c3"}
    second = out["messages"][2]
    assert [b["type"] for b in second["content"]] == ["tool_result", "tool_result", "text"]
    assert second["content"][1]["is_error"] is True
    assert _NOTE in second["content"][1]["content"]


def test_pydantic_ai_answers_every_unanswered_call() -> None:
    from pydantic_ai.messages import ToolReturnPart

    history = to_pydantic_ai(_unpaired_session())
    check_pydantic_ai(history)
    assert _pydantic_paired(history) == {"c1", "c2", "c3"}
    failed = [p for m in history for p in m.parts
              if isinstance(p, ToolReturnPart) and p.outcome == "failed"]
    assert [(p.tool_call_id, p.tool_name) for p in failed] == [("c2", "bash"), ("c3", "read")]


def test_the_derived_messages_keep_the_unanswered_calls() -> None:
    """The derivation is the reference's: only the request is answered."""
    s = _unpaired_session()
    before = s.derive_messages()
    results = [b.tool_call_id for m in before for b in m.content
               if isinstance(b, ToolResultBlock)]
    assert results == ["c1"]
    to_openai_chat(s)
    assert s.derive_messages() == before


# --- random pairing patterns -----------------------------------------------------------------


@st.composite
def _pairing_histories(draw: st.DrawFn) -> list[Message]:
    """Prompts and assistant messages; each assistant message makes 0-3 calls (unique
    ids), a random subset of which is answered right after it, in a random order, each
    result a user message of its own or several in one; a prompt may follow."""
    out: list[Message] = []
    n = 0
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            out.append(Message(role="user", content=(TextBlock(text="go"),)))
        calls = [f"c{n + k}" for k in range(draw(st.integers(0, 3)))]
        n += len(calls)
        text = (TextBlock(text="ok"),) if draw(st.booleans()) or not calls else ()
        out.append(Message(role="assistant", content=text + tuple(
            ToolCallBlock(id=c, name="bash", arguments="{}") for c in calls)))
        answered = draw(st.permutations(calls))[:draw(st.integers(0, len(calls)))]
        results = [ToolResultBlock(tool_call_id=c, content=(TextBlock(text="r"),),
                                   is_error=False) for c in answered]
        together: bool = draw(st.booleans())
        if results and together:
            out.append(Message(role="user", content=tuple(results)))
        else:
            out.extend(Message(role="user", content=(r,)) for r in results)
    return out


def _called(history: list[Message]) -> set[str]:
    return {b.id for m in history for b in m.content if isinstance(b, ToolCallBlock)}


@settings(max_examples=150, deadline=None)
@given(_pairing_histories())
def test_every_conversion_pairs_every_call(history: list[Message]) -> None:
    kept = list(history)
    calls = _called(history)
    chat = to_openai_chat(history)
    check_chat(chat)
    assert _chat_paired(chat) == calls
    items = to_openai_responses(history)
    check_responses(items)
    assert _responses_paired(items) == calls
    anthropic = to_anthropic(history)
    check_anthropic(anthropic)
    assert _anthropic_paired(anthropic) == calls
    pydantic = to_pydantic_ai(history)
    check_pydantic_ai(pydantic)
    assert _pydantic_paired(pydantic) == calls
    assert history == kept  # the source is not changed
