"""Transcript rendering (spec §2.7) beyond scenario 78: every label, the skip rules,
typed and JSON blocks alike, and that no block list, however odd, makes it raise."""

from __future__ import annotations

from typing import Any

from compact_helpers import TR, TS, A, U, call, make_store, text
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_compact import TokenEstimator, render_content_blocks, render_transcript
from dsh_session_core.vocabulary import ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock


def test_every_block_kind() -> None:
    assert render_content_blocks([
        {"type": "reasoning", "text": "think"},
        {"type": "reasoning", "text": ""},
        call("c1", "read", '{"filePath":"a"}'),
    ]) == '[reasoning: think]\n[tool-call: read({"filePath":"a"})]'
    assert render_content_blocks([]) == ""


def test_typed_blocks_render_like_their_json() -> None:
    typed = (
        TextBlock(text="hello"),
        ReasoningBlock(text="think"),
        ToolCallBlock(id="c1", name="read", arguments="{}"),
        ToolResultBlock(tool_call_id="c1", content=(TextBlock(text="ok"),)),
    )
    assert render_content_blocks(typed) == (
        "hello\n[reasoning: think]\n[tool-call: read({})]\n[tool-result: ok]"
    )


def test_every_surface_type_has_its_label() -> None:
    s = make_store().create()
    user = U(s, "fix the bug")
    assistant = A(s, 0, 0, [text("looking")])
    result = TR(s, 0, 0, "c1", "exit 0")
    context = s.append(
        "context/message",
        {"content": [text("file changed")], "source": {"kind": "plugin", "plugin": "fs"}},
        surface_op="append",
    )
    steering = s.append(
        "steering/message",
        {"turn": 0, "content": [text("stop that")], "source": {"kind": "user"}},
        surface_op="append",
    )
    seqs = [user.seq, assistant.seq, result.seq, context.seq, steering.seq]
    assert render_transcript(s.events, seqs) == "\n\n".join([
        "User: fix the bug",
        "Assistant: looking",
        "Tool result (call c1): exit 0",
        "[Context: file changed]",
        "[Steering: stop that]",
    ])


def test_empty_entries_log_only_events_and_missing_seqs_are_skipped() -> None:
    s = make_store().create()
    start = TS(s, 1)
    empty = U(s, "")
    empty_result = TR(s, 1, 1, "c3", "")
    lock = s.append("compact/start", {"turn": 1})
    seqs = [start.seq, empty.seq, empty_result.seq, lock.seq, 9999, -1]
    assert render_transcript(s.events, seqs) == ""


def test_opaque_events_render_by_their_type() -> None:
    # A block kind no schema knows makes the whole event opaque (read-only JSON); only a
    # lenient store appends it (the strict default refuses the unknown member).
    s = make_store(strict=False).create()
    event = s.append(
        "user/message",
        {"content": [text("look"), {"type": "audio", "data": "zzz"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    assert type(event).__name__ == "OpaqueEvent"
    assert render_transcript(s.events, [event.seq]) == "User: look\n[audio]"


# --- properties ------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_kinds = st.sampled_from(["text", "reasoning", "tool-call", "tool-result", "image", ""])


def _block() -> st.SearchStrategy[Any]:
    """Any dict with a ``type``, with fields of any JSON type (not only the right ones)."""
    fields = st.dictionaries(
        st.sampled_from(["text", "name", "arguments", "content", "id", "toolCallId", "x"]),
        _json, max_size=4,
    )
    return st.builds(lambda kind, rest: {**rest, "type": kind}, _kinds | st.text(), fields)


_blocks = st.lists(st.recursive(_block(), lambda inner: st.builds(
    lambda content: {"type": "tool-result", "toolCallId": "c", "content": content},
    st.lists(inner, max_size=3),
), max_leaves=6) | _json, max_size=6)


@given(_blocks)
def test_rendering_and_estimating_never_raise(blocks: list[Any]) -> None:
    rendered = render_content_blocks(blocks)
    assert isinstance(rendered, str)
    # Every block costs at least its overhead, whatever it holds.
    assert TokenEstimator().estimate_content_tokens(blocks) >= 4 * len(blocks)


@given(_blocks)
def test_a_list_renders_as_its_non_empty_parts_joined(blocks: list[Any]) -> None:
    parts = [render_content_blocks([b]) for b in blocks]
    assert render_content_blocks(blocks) == "\n".join(p for p in parts if p)
