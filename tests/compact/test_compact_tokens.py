"""Token estimation (spec §3.2): the reference values, UTF-16 lengths, and the pieces
that make up a request's pressure."""

from __future__ import annotations

import math

import pytest
from compact_helpers import TS, A, U, call, make_store, text
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_compact import TokenEstimator
from dsh_session_core import Message
from dsh_session_core.vocabulary import TextBlock, ToolCallBlock, ToolResultBlock

EST = TokenEstimator()


@pytest.mark.parametrize(
    ("blocks", "tokens"),
    [
        ([text("this is a somewhat longer text block")], 13),
        ([text("short")], 6),
        ([{"type": "reasoning", "text": "thinking about this..."}], 10),
        ([call("c1", "bash", '{"command":"ls"}')], 9),
        ([{"type": "tool-result", "toolCallId": "c1", "content": [text("hello")]}], 10),
        ([{"type": "image", "data": "zzz"}], 12),
        ([], 0),
    ],
)
def test_the_reference_values(blocks: list[dict[str, object]], tokens: int) -> None:
    assert EST.estimate_content_tokens(blocks) == tokens


def test_typed_blocks_estimate_like_their_json() -> None:
    typed = [
        TextBlock(text="short"),
        ToolCallBlock(id="c1", name="bash", arguments='{"command":"ls"}'),
        ToolResultBlock(tool_call_id="c1", content=(TextBlock(text="hello"),)),
    ]
    assert EST.estimate_content_tokens(typed) == 6 + 9 + 10


def test_chars_per_token_may_be_fractional() -> None:
    block = [text("this is a somewhat longer text block")]
    assert TokenEstimator(2).estimate_content_tokens(block) == 22
    assert TokenEstimator(1.5).estimate_content_tokens(block) == 28


def test_the_system_prompt_counts_only_when_not_empty() -> None:
    message = Message(role="user", content=(TextBlock(text="short"),))
    assert EST.estimate_tokens([], "You are a helpful assistant.") == 7
    assert EST.estimate_tokens([message]) == 6 + 4
    assert EST.estimate_tokens([message], "") == 10
    assert EST.estimate_tokens([message, message], "You are a helpful assistant.") == 27


def test_lengths_are_utf16_code_units() -> None:
    # Python's len("😀" * 4) is 4; JS's is 8: ceil(8 / 4) + 4.
    assert EST.estimate_content_tokens([text("😀" * 4)]) == 6
    assert EST.estimate_content_tokens([text("é" * 4)]) == 5  # one unit each


def test_an_unknown_block_is_measured_by_its_js_json() -> None:
    # JSON.stringify writes 1, not 1.0: {"type":"x","n":1} is 18 characters.
    assert EST.estimate_content_tokens([{"type": "x", "n": 1.0}]) == 4 + math.ceil(18 / 4)
    assert EST.estimate_content_tokens([{"type": "x", "n": 1}]) == 9


def test_event_tokens_count_only_surface_types() -> None:
    s = make_store().create()
    start = TS(s, 1)
    user = U(s, "x" * 2000)
    assistant = A(s, 1, 1, [text("y" * 2000), call("c1")])
    context = s.append(
        "context/message",
        {"content": [text("short")], "source": {"kind": "plugin", "plugin": "fs"}},
        surface_op="append",
    )
    assert EST.estimate_event_tokens(start) == 0
    assert EST.estimate_event_tokens(user) == 504
    assert EST.estimate_event_tokens(assistant) == 504 + 1 + 1 + 4
    # The payload's content, not the <context> envelope the derived message adds.
    assert EST.estimate_event_tokens(context) == 6


def _oracle_units(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


@given(
    st.text(st.characters(exclude_categories=())),
    st.floats(min_value=0.1, max_value=16, allow_nan=False),
)
def test_text_tokens_are_the_ceiling_of_utf16_units_per_token(s: str, cpt: float) -> None:
    tokens = TokenEstimator(cpt).estimate_content_tokens([text(s)])
    assert tokens == math.ceil(_oracle_units(s) / cpt) + 4


@given(st.lists(st.text(max_size=50), max_size=8))
def test_a_list_costs_the_sum_of_its_blocks(texts: list[str]) -> None:
    blocks = [text(t) for t in texts]
    assert EST.estimate_content_tokens(blocks) == sum(
        EST.estimate_content_tokens([b]) for b in blocks
    )
