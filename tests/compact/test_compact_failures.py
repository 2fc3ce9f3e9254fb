"""Failures after the lock is taken (spec §3.4, §3.6): every one releases the lock with
``compact/end {turn, error}`` and leaves the surface as it was, including failures the
reference has no Python counterpart for (listeners raising on our own events, a
surface changed under the summarizer, an interrupt)."""

from __future__ import annotations

from typing import Any

import pytest
from compact_helpers import (
    compact_pm,
    make_store,
    nodes,
    scenario_log,
    stub,
    text,
    types_from,
    wire,
)

from dsh_session_compact import SummaryRequest, SummaryResult, compact_region
from dsh_session_compact.errors import CompactFailedError, SummarizationError
from dsh_session_core import Event, ReplaceOp, Session, hookimpl
from dsh_session_core.vocabulary import AbortedFinish, ErrorFinish


def _released(s: Session, error: str) -> None:
    assert types_from(s, 13) == ["compact/start", "compact/end"]
    assert wire(s.events[-1])["data"] == {"turn": 3, "error": error}
    assert nodes(s) == [2, 3, 8, 9]


def _compact(s: Session, summarizer: Any) -> None:
    compact_region(s, 2, 3, summarizer=summarizer, model="test-model")


# --- how the summary is judged ---------------------------------------------------------------


def test_an_aborted_stream() -> None:
    s = scenario_log()
    with pytest.raises(SummarizationError, match=r"^summarization stream aborted$") as info:
        _compact(s, stub(finish=AbortedFinish()))
    assert info.value.code == "ABORTED"
    _released(s, "summarization stream aborted")


def test_an_error_finish_keeps_its_message_and_code() -> None:
    s = scenario_log()
    with pytest.raises(SummarizationError, match=r"^rate limited$") as info:
        _compact(s, stub(finish=ErrorFinish(message="rate limited", code="RATE_LIMIT")))
    assert info.value.code == "RATE_LIMIT"
    _released(s, "rate limited")
    s2 = scenario_log()
    with pytest.raises(SummarizationError) as info:
        _compact(s2, stub(finish=ErrorFinish(message="boom")))
    assert info.value.code is None


def test_only_text_blocks_are_kept() -> None:
    s = scenario_log()

    def summarize(request: SummaryRequest) -> SummaryResult:
        return SummaryResult(content=[
            {"type": "reasoning", "text": "hmm"},
            text("KEEP"),
            {"type": "tool-call", "id": "c", "name": "x", "arguments": "{}"},
            text(""),
        ])

    result = compact_region(s, 2, 3, summarizer=summarize, model="m")
    assert wire(s.events[14])["data"]["summary"] == [text("KEEP"), text("")]
    assert len(result.summary) == 2


@pytest.mark.parametrize("blank", ["", "  \n\t", "\ufeff", "\u3000"])
def test_a_summary_without_non_blank_text(blank: str) -> None:
    s = scenario_log()
    with pytest.raises(SummarizationError, match=r"^summarization produced no text summary "
                                                 r"content$") as info:
        _compact(s, stub(blank))
    assert info.value.code == "EMPTY_SUMMARY"
    _released(s, str(info.value))


def test_blankness_is_judged_as_js_trim_judges_it() -> None:
    # U+001C is whitespace to Python's str.strip but not to JS's trim.
    s = scenario_log()
    _compact(s, stub("\x1c"))
    assert nodes(s) == [15, 8, 9]


def test_a_summarizer_answering_something_else() -> None:
    s = scenario_log()
    with pytest.raises(TypeError, match="must return a SummaryResult, got str"):
        _compact(s, lambda request: "a plain string")
    _released(s, "a summarizer must return a SummaryResult, got str")


def test_an_interrupt_releases_the_lock_and_propagates() -> None:
    s = scenario_log()

    def summarize(request: SummaryRequest) -> SummaryResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _compact(s, summarize)
    _released(s, "KeyboardInterrupt")


def test_an_async_summarizer_on_the_sync_api() -> None:
    s = scenario_log()

    async def summarize(request: SummaryRequest) -> SummaryResult:  # never awaited
        return SummaryResult(content=[text("S")])

    with pytest.raises(TypeError, match="use the async API"):
        _compact(s, summarize)
    assert "returned an awaitable" in wire(s.events[-1])["data"]["error"]
    assert types_from(s, 13) == ["compact/start", "compact/end"]


def test_a_surface_changed_during_summarization() -> None:
    s = scenario_log()

    def summarize(request: SummaryRequest) -> SummaryResult:
        # Something else replaces node 3 while the summary is being written.
        s.append("user/message", {"content": [text("r")], "source": {"kind": "user"}},
                 surface_op=ReplaceOp(start=3, end=3))
        return SummaryResult(content=[text("S")])

    with pytest.raises(CompactFailedError, match="surface changed during summarization") as info:
        _compact(s, summarize)
    assert info.value.code == "SURFACE_CHANGED"
    assert types_from(s, 13) == ["compact/start", "user/message", "compact/end"]
    assert "compact/summary" not in types_from(s, 0)


def test_an_unrelated_append_during_summarization_is_fine() -> None:
    s = scenario_log()

    def summarize(request: SummaryRequest) -> SummaryResult:
        s.append("user/message", {"content": [text("late")], "source": {"kind": "user"}},
                 surface_op="append")
        return SummaryResult(content=[text("S")])

    result = compact_region(s, 2, 3, summarizer=summarize, model="m")
    assert nodes(s) == [16, 8, 9, 14]
    assert wire(s.events[16])["sourceEventSeqs"] == [13, 15, 2, 3]
    assert result.summary_seq == 15


# --- listeners raising on the compaction's own events ------------------------------------------


class RaisesOn:
    """A plugin whose ``session_event`` raises on one event type."""

    def __init__(self, event_type: str) -> None:
        self.event_type = event_type

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        if event.type == self.event_type and "error" not in wire(event)["data"]:
            msg = f"listener refused {event.type}"
            raise RuntimeError(msg)


def _listened(event_type: str) -> Session:
    pm = compact_pm()
    pm.register(RaisesOn(event_type))
    return scenario_log(make_store(pm))


def test_a_listener_raising_on_compact_start_still_gets_the_lock_released() -> None:
    s = _listened("compact/start")
    with pytest.raises(RuntimeError, match="listener refused compact/start"):
        _compact(s, stub())
    _released(s, "listener refused compact/start")


def test_a_listener_raising_on_compact_summary_leaves_the_surface_alone() -> None:
    s = _listened("compact/summary")
    with pytest.raises(RuntimeError, match="listener refused compact/summary"):
        _compact(s, stub())
    assert types_from(s, 13) == ["compact/start", "compact/summary", "compact/end"]
    assert wire(s.events[-1])["data"]["error"] == "listener refused compact/summary"
    assert nodes(s) == [2, 3, 8, 9]


def test_a_listener_raising_on_compact_end_gets_no_second_compact_end() -> None:
    s = _listened("compact/end")
    with pytest.raises(RuntimeError, match="listener refused compact/end"):
        _compact(s, stub())
    assert types_from(s, 13) == ["compact/start", "compact/summary", "user/message",
                                 "compact/end"]
    assert wire(s.events[16])["data"] == {"turn": 3}
    assert nodes(s) == [15, 8, 9]
