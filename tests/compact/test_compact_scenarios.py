"""Spec plugins-persistence §13, scenarios 72-78: compaction's happy path, the
``compactIfNeeded`` loop, the rejections, the lock, failures, config validation and
transcript rendering. Expected values are the spec's."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest
from compact_helpers import (
    CONFIG_73,
    SE,
    SS,
    TE,
    TR,
    TS,
    A,
    U,
    call,
    make_store,
    nodes,
    scenario_log,
    stub,
    text,
    types_from,
    wire,
)

from dsh_session_compact import (
    PREAMBLE,
    BasicCompactConfig,
    Compactor,
    ShadowedRange,
    SummaryRequest,
    SummaryResult,
    compact_region,
    render_content_blocks,
    render_transcript,
    resolve_config,
)
from dsh_session_compact.errors import (
    CompactConfigError,
    CompactionInProgressError,
    CompactionPressureError,
    CompactRangeError,
    NoOpenTurnError,
    SummarizationError,
    SummaryTooLargeError,
)
from dsh_session_compact.events import CompactEnd, CompactStart, CompactSummary
from dsh_session_core import Session, to_wire
from dsh_session_core.vocabulary import MaxTokensFinish


def exact(message: str) -> str:
    return re.escape(message)


# --- 72: the happy path ------------------------------------------------------------------


def test_s72_compact_region_appends_the_five_step_sequence() -> None:
    s = scenario_log()
    assert nodes(s) == [2, 3, 8, 9]
    result = compact_region(s, 2, 3, summarizer=stub(), model="test-model")

    assert wire(s.events[13]) == {
        "type": "compact/start", "seq": 13, "time": 1, "data": {"turn": 3}
    }
    assert wire(s.events[14])["data"] == {
        "summary": [text("SUMMARY")],
        "shadowedRange": {"start": 2, "end": 3},
        "shadowedSeqs": [2, 3],
        "shadowedTokenCount": 1008,
        "model": "test-model",
    }  # no maxTokens: none was given
    checkpoint = wire(s.events[15])
    assert checkpoint["type"] == "user/message"
    assert checkpoint["surfaceOp"] == {"op": "replace", "start": 2, "end": 3}
    assert checkpoint["sourceEventSeqs"] == [13, 14, 2, 3]
    assert checkpoint["data"]["source"] == {"kind": "plugin", "plugin": "compact"}
    assert wire(s.events[16]) == {"type": "compact/end", "seq": 16, "time": 1, "data": {"turn": 3}}
    assert len(s.events) == 17
    assert nodes(s) == [15, 8, 9]

    assert (result.start_seq, result.summary_seq, result.end_seq) == (13, 14, 16)
    assert result.shadowed_range == ShadowedRange(start=2, end=3)
    assert result.shadowed_seqs == (2, 3)
    assert result.shadowed_token_count == 1008
    assert to_wire(result)["summary"] == [text("SUMMARY")]


def test_s72_the_compact_events_are_typed() -> None:
    s = scenario_log()
    compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    assert isinstance(s.events[13], CompactStart)
    assert isinstance(s.events[14], CompactSummary)
    assert isinstance(s.events[16], CompactEnd)
    assert s.events[14].data.shadowed_seqs == (2, 3)


def test_s72_the_derived_history_starts_with_the_framed_summary() -> None:
    s = scenario_log()
    compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    messages = to_wire(s.derive_messages())
    assert len(messages) == 3
    first = messages[0]
    assert first["role"] == "user"
    assert len(first["content"]) == 3
    assert "<compacted-summary>" in first["content"][0]["text"]
    assert first["content"][0]["text"] == PREAMBLE + "\n\n<compacted-summary>"
    assert first["content"][1] == text("SUMMARY")
    assert first["content"][2] == text("</compacted-summary>")
    assert messages[1] == {"role": "user", "content": [text("x" * 2000)]}
    assert messages[2] == {"role": "assistant", "content": [text("y" * 2000)]}


def test_s72_a_session_seeded_with_the_log_derives_the_same_messages() -> None:
    store = make_store()
    s = scenario_log(store)
    compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    replayed = Session("replay", seed=list(s.events), registry=store.registry)
    assert to_wire(replayed.derive_messages()) == to_wire(s.derive_messages())
    # ...also from the log's bytes, through a fresh store's decoder.
    reloaded = make_store().create(seed=[wire(e) for e in s.events])
    assert to_wire(reloaded.derive_messages()) == to_wire(s.derive_messages())
    assert isinstance(reloaded.events[14], CompactSummary)


def test_s72_the_built_in_path_records_the_configured_max_tokens() -> None:
    s = scenario_log()
    compactor = Compactor(CONFIG_73, summarizer=stub())
    compactor.compact_region(s, 2, 3, model="test-model")
    assert wire(s.events[14])["data"]["maxTokens"] == 8192
    assert list(wire(s.events[14])["data"])[-1] == "maxTokens"  # key order as the spec's


def test_s72_the_summarizer_is_asked_for_the_transcript_of_the_range() -> None:
    s = scenario_log()
    summarize = stub()
    compact_region(s, 2, 3, summarizer=summarize, model="test-model", max_tokens=77)
    (request,) = summarize.requests  # type: ignore[attr-defined]
    assert request.transcript == f"User: {'x' * 2000}\n\nAssistant: {'y' * 2000}"
    assert request.prompt == (
        f"Summarize this conversation history:\n\n{request.transcript}\n\nSummary:"
    )
    assert to_wire(request.messages) == [{"role": "user", "content": [text(request.prompt)]}]
    assert (request.model, request.max_tokens) == ("test-model", 77)
    assert request.shadowed_seqs == (2, 3)
    assert request.session_id == s.id
    for section in ("## Primary Request and Intent", "## Critical Context", "(none)"):
        assert section in request.system


def test_s72_the_model_that_wrote_the_summary_is_recorded() -> None:
    s = scenario_log()
    compact_region(s, 2, 3, summarizer=stub(model="actual-model"), model="test-model")
    assert wire(s.events[14])["data"]["model"] == "actual-model"


# --- 73: compactIfNeeded -------------------------------------------------------------------


def test_s73_compact_if_needed_compacts_once_and_returns() -> None:
    s = scenario_log()
    compactor = Compactor(CONFIG_73, summarizer=stub())
    assert compactor.threshold == 2000
    assert compactor.estimate_pressure(s) == 2032
    assert compactor.compactable_range(s) == ShadowedRange(start=2, end=3)

    result = compactor.compact_if_needed(s, model="test-model")
    assert result is not None
    assert (result.start_seq, result.summary_seq, result.end_seq) == (13, 14, 16)
    assert result.shadowed_range == ShadowedRange(start=2, end=3)
    assert result.shadowed_token_count == 1008
    assert nodes(s) == [15, 8, 9]
    assert compactor.estimate_pressure(s) == 1120
    assert types_from(s, 13).count("compact/start") == 1  # one compaction was enough


def test_s73_nothing_to_do_when_the_whole_surface_fits_the_retain_budget() -> None:
    s = scenario_log()
    compactor = Compactor({**CONFIG_73, "retainTokens": 5000}, summarizer=stub())
    assert compactor.compactable_range(s) is None
    assert compactor.compact_if_needed(s, model="test-model") is None
    assert len(s.events) == 13


def test_s73_nothing_to_do_below_the_threshold() -> None:
    s = scenario_log()
    compactor = Compactor({**CONFIG_73, "contextWindow": 4066}, summarizer=stub())
    assert compactor.threshold == 2033  # floor(4066 * 0.5); the pressure is 2032
    assert compactor.compact_if_needed(s, model="test-model") is None
    assert len(s.events) == 13


def test_s73_the_system_prompt_and_prefix_count_toward_the_pressure() -> None:
    s = scenario_log()
    compactor = Compactor({**CONFIG_73, "contextWindow": 4080}, summarizer=stub())
    assert compactor.threshold == 2040
    system = "You are a helpful assistant."  # 7 tokens
    assert compactor.estimate_pressure(s, system) == 2039
    assert compactor.compact_if_needed(s, system_prompt=system, model="m") is None
    prefix = s.derive_messages()[:1]  # 508 tokens more
    assert compactor.estimate_pressure(s, system, prefix) == 2547
    assert compactor.compact_if_needed(
        s, system_prompt=system, session_prefix=prefix, model="m"
    ) is not None


def test_s73_still_above_the_threshold_after_every_attempt() -> None:
    s = scenario_log()
    compactor = Compactor({**CONFIG_73, "contextWindow": 1000, "compactionRetries": 0},
                          summarizer=stub())
    with pytest.raises(CompactionPressureError, match=exact(
        "compaction still above threshold after 1 compaction attempts "
        "(1120 estimated tokens >= threshold 500)"
    )) as info:
        compactor.compact_if_needed(s, model="test-model")
    assert (info.value.attempts, info.value.pressure, info.value.threshold) == (1, 1120, 500)
    assert nodes(s) == [15, 8, 9]  # the compaction that ran stays


def _six_nodes() -> Session:
    """Three closed turns of a 2000-char user and assistant message (six 504-token
    nodes, seqs 1, 2, 5, 6, 9, 10), then turn 4 open (seq 12)."""
    s = make_store().create()
    for turn in (1, 2, 3):
        TS(s, turn)
        U(s, "x" * 2000)
        A(s, turn, 1, [text("y" * 2000)])
        TE(s, turn)
    TS(s, 4)
    return s


def _long_then_short() -> Callable[[SummaryRequest], SummaryResult]:
    answers = iter(["L" * 1000, "S"])  # framed: 348 tokens, then 99
    return lambda request: stub(next(answers))(request)


def test_s73_a_retry_resummarizes_the_head_checkpoint() -> None:
    # Keep 1500 tokens: the first compaction shadows seqs 1-5 behind a long summary
    # (pressure 1876 >= 1650); the retry's range is that checkpoint alone, at the head,
    # and its short summary brings the pressure to 1627 < 1650.
    s = _six_nodes()
    config = {**CONFIG_73, "contextWindow": 3300, "retainTokens": 1500}
    compactor = Compactor(config, summarizer=_long_then_short())
    assert compactor.estimate_pressure(s) == 3048
    result = compactor.compact_if_needed(s, model="m")
    assert result is not None
    assert types_from(s, 13) == ["compact/start", "compact/summary", "user/message",
                                 "compact/end"] * 2
    assert wire(s.events[14])["data"]["shadowedSeqs"] == [1, 2, 5]
    assert result.start_seq == 17
    assert result.shadowed_range == ShadowedRange(start=15, end=15)
    assert result.shadowed_token_count == 348
    assert nodes(s) == [19, 6, 9, 10]
    assert compactor.estimate_pressure(s) == 1627


def test_s73_still_above_the_threshold_after_the_retry() -> None:
    s = _six_nodes()
    config = {**CONFIG_73, "contextWindow": 3000, "retainTokens": 1500}
    compactor = Compactor(config, summarizer=_long_then_short())
    with pytest.raises(CompactionPressureError, match=exact(
        "compaction still above threshold after 2 compaction attempts (1627 estimated tokens "
        ">= threshold 1500)"
    )):
        compactor.compact_if_needed(s, model="m")
    assert types_from(s, 13).count("compact/end") == 2


# --- 74: rejections append nothing ---------------------------------------------------------


def _tool_log() -> Session:
    """Turn 1 open: user 2, assistant 3 calling c1, tool/call 4, result 5, step/end 6."""
    s = make_store().create()
    TS(s, 1)
    SS(s, 1, 1)
    U(s, "x" * 2000)
    A(s, 1, 1, [text("y" * 2000), call("c1")])
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash",
                           "arguments": "{}"})
    TR(s, 1, 1, "c1", "r" * 2000)
    SE(s, 1, 1)
    return s


def _rejects(s: Session, start: int, end: int, error: type[Exception], message: str) -> None:
    before = len(s.events)
    with pytest.raises(error, match=exact(message)):
        compact_region(s, start, end, summarizer=stub(), model="test-model")
    assert len(s.events) == before


def test_s74_start_not_on_the_surface() -> None:
    _rejects(scenario_log(), 999, 3, CompactRangeError,
             "compactRegion: start seq 999 not found in surface")


def test_s74_end_not_on_the_surface() -> None:
    _rejects(scenario_log(), 2, 4, CompactRangeError,
             "compactRegion: end seq 4 not found in surface")


def test_s74_start_after_end() -> None:
    _rejects(scenario_log(), 9, 2, CompactRangeError,
             "compactRegion: start seq 9 (position 3) is after end seq 2 (position 0) on the "
             "surface")


def test_s74_a_region_ending_on_a_call_whose_result_follows() -> None:
    s = _tool_log()
    assert nodes(s) == [2, 3, 5]
    _rejects(s, 2, 3, CompactRangeError,
             "compactRegion: end seq 3 is not a balanced boundary (would split a step, or the "
             "step is still open)")


def test_s74_a_region_starting_at_that_result() -> None:
    _rejects(_tool_log(), 5, 5, CompactRangeError,
             "compactRegion: start seq 5 is not a balanced boundary (would split a step's "
             "tool-call/result pair)")


def test_s74_a_region_ending_inside_an_open_step() -> None:
    s = make_store().create()
    TS(s, 1)
    U(s, "x" * 2000)
    A(s, 1, 1, [call("c1")])  # its result has not come yet
    _rejects(s, 1, 2, CompactRangeError, "compactRegion: end seq 2 is not a balanced boundary")


def test_s74_the_rejection_codes() -> None:
    s = _tool_log()
    codes = {}
    for start, end in ((99, 2), (2, 99), (5, 2), (5, 5), (2, 3)):
        with pytest.raises(CompactRangeError) as info:
            compact_region(s, start, end, summarizer=stub(), model="m")
        codes[(start, end)] = (info.value.code, info.value.start, info.value.end)
    assert codes == {
        (99, 2): ("START_NOT_FOUND", 99, 2),
        (2, 99): ("END_NOT_FOUND", 2, 99),
        (5, 2): ("REVERSED", 5, 2),
        (5, 5): ("START_UNBALANCED", 5, 5),
        (2, 3): ("END_UNBALANCED", 2, 3),
    }


def test_s74_a_balanced_region_around_the_pair_is_accepted() -> None:
    s = _tool_log()
    result = compact_region(s, 2, 5, summarizer=stub(), model="test-model")
    assert result.shadowed_seqs == (2, 3, 5)


def test_s74_a_fully_closed_session() -> None:
    s = scenario_log(open_turn=False)
    _rejects(s, 2, 3, NoOpenTurnError,
             "compactRegion: no open turn — compaction events must be enclosed in a turn")


def test_s74_a_trailing_compact_start_in_the_open_turn() -> None:
    s = scenario_log()
    s.append("compact/start", {"turn": 3})
    _rejects(s, 2, 3, CompactionInProgressError, "compaction already in progress")


def test_s74_boundary_checks_come_before_the_lock_and_the_turn() -> None:
    locked = scenario_log()
    locked.append("compact/start", {"turn": 3})
    _rejects(locked, 999, 3, CompactRangeError, "compactRegion: start seq 999 not found")
    closed = scenario_log(open_turn=False)
    _rejects(closed, 9, 2, CompactRangeError, "is after end seq 2 (position 0)")


def test_s74_the_lock_comes_before_the_open_turn() -> None:
    # A compact/start as the very last event of a closed log: both checks fail.
    s = scenario_log(open_turn=False)
    s.append("compact/start", {"turn": 2})
    _rejects(s, 2, 3, CompactionInProgressError, "compaction already in progress")


# --- 75: the lock is turn-scoped -----------------------------------------------------------


def test_s75_an_orphan_compact_start_of_a_closed_turn_does_not_block() -> None:
    s = make_store().create()
    TS(s, 1)
    SS(s, 1, 1)
    U(s, "x" * 2000)
    A(s, 1, 1, [text("y" * 2000)])
    s.append("compact/start", {"turn": 1})  # crashed mid-compaction, no compact/end
    SE(s, 1, 1)
    TE(s, 1)
    TS(s, 2)
    result = compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    assert types_from(s, result.start_seq) == [
        "compact/start", "compact/summary", "user/message", "compact/end"
    ]
    assert wire(s.events[result.start_seq])["data"] == {"turn": 2}


def test_s75_a_closed_compaction_in_the_open_turn_does_not_block() -> None:
    s = scenario_log()
    s.append("compact/start", {"turn": 3})
    s.append("compact/end", {"turn": 3})
    result = compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    assert result.start_seq == 15


# --- 76: a failure releases the lock -------------------------------------------------------


def _failed(s: Session, error: str) -> None:
    """The failure's effects: start and end{error} only, the surface untouched."""
    assert types_from(s, 13) == ["compact/start", "compact/end"]
    assert wire(s.events[-1])["data"] == {"turn": 3, "error": error}
    assert nodes(s) == [2, 3, 8, 9]


def test_s76_the_summarizer_raises() -> None:
    s = scenario_log()
    failure = RuntimeError("model unavailable")

    def summarize(request: SummaryRequest) -> SummaryResult:
        raise failure

    with pytest.raises(RuntimeError) as info:
        compact_region(s, 2, 3, summarizer=summarize, model="test-model")
    assert info.value is failure  # re-raised as is, not wrapped
    _failed(s, "model unavailable")
    # The lock is released: the next compaction goes through.
    assert compact_region(s, 2, 3, summarizer=stub(), model="test-model").start_seq == 15


def test_s76_a_summary_larger_than_the_shadowed_content() -> None:
    s = scenario_log()
    # framed: 85 + (ceil(5000 / 4) + 4) + 9 = 1348 >= 1008
    message = (
        "summary is not smaller than the shadowed content (1348 estimated framed tokens >= "
        "1008)"
    )
    with pytest.raises(SummaryTooLargeError, match=exact(message)) as info:
        compact_region(s, 2, 3, summarizer=stub("Z" * 5000), model="test-model")
    assert (info.value.framed_tokens, info.value.shadowed_tokens) == (1348, 1008)
    _failed(s, message)


def test_s76_an_equal_estimate_is_not_smaller() -> None:
    s = scenario_log()
    # 85 + (ceil(n / 4) + 4) + 9 == 1008 for n = 3640 chars
    assert 85 + math.ceil(3640 / 4) + 4 + 9 == 1008
    with pytest.raises(SummaryTooLargeError, match=r"\(1008 estimated framed tokens >= 1008\)"):
        compact_region(s, 2, 3, summarizer=stub("Z" * 3640), model="test-model")
    compact_region(s, 2, 3, summarizer=stub("Z" * 3636), model="test-model")  # 1007: fits


def test_s76_a_max_tokens_finish() -> None:
    s = scenario_log()
    with pytest.raises(SummarizationError) as info:
        compact_region(s, 2, 3, summarizer=stub(finish=MaxTokensFinish()), model="test-model")
    assert info.value.code == "MAX_TOKENS"
    assert str(info.value) == "summarization truncated at the token cap (incomplete checkpoint)"
    assert "truncated" in wire(s.events[-1])["data"]["error"]
    _failed(s, str(info.value))


def test_s76_no_model_fails_after_the_lock_is_taken() -> None:
    s = scenario_log()
    summarize = stub()
    with pytest.raises(SummarizationError, match=exact(
        "no model available for summarization: set BasicCompactConfig.summarizationModel or "
        "AgentOptions.model"
    )):
        compact_region(s, 2, 3, summarizer=summarize)
    assert summarize.requests == []  # type: ignore[attr-defined]  # before any model call
    _failed(s, wire(s.events[-1])["data"]["error"])


# --- 77: config validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"contextWindow": 0},
         "BasicCompactConfig: contextWindow (0) must be a positive integer."),
        ({"thresholdRatio": 1.1},
         "BasicCompactConfig: thresholdRatio (1.1) must be a number in (0, 1]."),
        ({"charsPerToken": math.nan},
         "BasicCompactConfig: charsPerToken (NaN) must be a positive finite number."),
        ({"auto": "no"}, "BasicCompactConfig: auto must be a boolean."),
    ],
)
def test_s77_config_validation(override: dict[str, object], message: str) -> None:
    with pytest.raises(CompactConfigError, match=f"^{exact(message)}$"):
        resolve_config({**CONFIG_73, **override})
    with pytest.raises(CompactConfigError, match=f"^{exact(message)}$"):
        Compactor({**CONFIG_73, **override})


def test_s77_the_python_constructor_validates_the_same_way() -> None:
    with pytest.raises(CompactConfigError, match=exact(
        "BasicCompactConfig: contextWindow (0) must be a positive integer."
    )) as info:
        BasicCompactConfig(context_window=0, threshold_ratio=0.5, retain_tokens=0,
                           summarization_model="", max_tokens=1, compaction_retries=0)
    assert info.value.key == "contextWindow"


# --- 78: rendering -------------------------------------------------------------------------


def test_s78_render_content_blocks() -> None:
    assert render_content_blocks([text("hello"), text(""), text("world")]) == "hello\nworld"
    assert render_content_blocks([
        {"type": "tool-result", "toolCallId": "c1", "content": [text("ok")]},
        {"type": "tool-result", "toolCallId": "c2", "content": []},
    ]) == "[tool-result: ok]\n[tool-result]"
    assert render_content_blocks([{"type": "image"}]) == "[image]"


def test_s78_render_transcript_keeps_the_given_order() -> None:
    s = make_store().create()
    first = U(s, "first")
    second = U(s, "second")
    assert render_transcript(s.events, [second.seq, first.seq]) == "User: second\n\nUser: first"


def test_s78_an_error_tool_result() -> None:
    s = make_store().create()
    result = TR(s, 0, 0, "c9", "boom", error=True)
    assert render_transcript(s.events, [result.seq]) == "Tool error (call c9): boom"
