"""Properties over random logs: for any range of any surface (including surfaces already
compacted, where seqs are out of order), ``compact_region`` either refuses it exactly
when an independent oracle says it must, appending nothing, or splices one checkpoint
into the surface, keeps every other node's message, and derives the same messages when
the log is replayed."""

from __future__ import annotations

from dataclasses import dataclass

from compact_helpers import SE, SS, TE, TR, TS, A, U, call, make_store, text
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_compact import (
    Compactor,
    SummaryRequest,
    SummaryResult,
    TokenEstimator,
    compact_region,
)
from dsh_session_compact.errors import CompactRangeError, SummaryTooLargeError
from dsh_session_core import Message, Session, SessionStore, to_wire

#: The framed estimate of the one-character summary "S": 85 + 5 + 9.
FRAMED_S = 99
LENGTHS = st.sampled_from([0, 3, 40, 400, 2000])


@dataclass(frozen=True)
class Step:
    user: int | None  # a user message's length, if the step has one
    assistant: int
    results: tuple[int, ...]  # one tool call (and result) per entry


@dataclass(frozen=True)
class Plan:
    turns: tuple[tuple[Step, ...], ...]
    open_calls: int  # calls of an open tail step still waiting for their results


steps = st.builds(Step, st.none() | LENGTHS, LENGTHS, st.lists(LENGTHS, max_size=2).map(tuple))
plans = st.builds(
    Plan,
    st.lists(st.lists(steps, min_size=1, max_size=3).map(tuple), min_size=1, max_size=4).map(
        tuple
    ),
    st.integers(0, 2),
)


def build(plan: Plan) -> tuple[SessionStore, Session]:
    """Closed turns as planned, then one open turn (with an open step if planned)."""
    store = make_store()
    s = store.create()
    turn = 0
    for turn, turn_steps in enumerate(plan.turns, start=1):
        TS(s, turn)
        for n, step in enumerate(turn_steps, start=1):
            SS(s, turn, n)
            if step.user is not None:
                U(s, "u" * step.user)
            calls = [call(f"c{turn}.{n}.{k}") for k in range(len(step.results))]
            A(s, turn, n, [text("a" * step.assistant), *calls])
            for k, length in enumerate(step.results):
                TR(s, turn, n, f"c{turn}.{n}.{k}", "r" * length)
            SE(s, turn, n)
        TE(s, turn)
    turn += 1
    TS(s, turn)
    if plan.open_calls:
        SS(s, turn, 1)
        A(s, turn, 1, [text("open"), *(call(f"open{k}") for k in range(plan.open_calls))])
    return store, s


def depths(s: Session) -> list[int]:
    """The oracle: unanswered calls before each cut, read off the wire JSON."""
    out = [0]
    for seq in s.surface.seqs:
        entry = to_wire(s.events[seq])
        if entry["type"] == "assistant/message":
            delta = sum(1 for b in entry["data"]["content"] if b["type"] == "tool-call")
        else:
            delta = -1 if entry["type"] == "tool/result" else 0
        out.append(out[-1] + delta)
    return out


def by_node(s: Session) -> dict[int, Message | None]:
    return {seq: Session.derive_event_message(s.events[seq]) for seq in s.surface.seqs}


def check_attempt(store: SessionStore, s: Session, i: int, j: int) -> None:
    nodes = list(s.surface.seqs)
    start, end = nodes[i], nodes[j]
    before = len(s.events)
    lines = [to_wire(e) for e in s.events]
    messages = by_node(s)
    d = depths(s)
    estimate = TokenEstimator().estimate_event_tokens
    shadowed_tokens = sum(estimate(s.events[seq]) for seq in nodes[i : j + 1])

    refusal = None
    if i > j:
        refusal = "REVERSED"
    elif d[i] != 0:
        refusal = "START_UNBALANCED"
    elif d[j + 1] != 0:
        refusal = "END_UNBALANCED"

    failure: Exception | None = None
    try:
        result = compact_region(s, start, end, summarizer=_s, model="m")
    except (CompactRangeError, SummaryTooLargeError) as exc:
        failure = exc
    if isinstance(failure, CompactRangeError):
        assert failure.code == refusal
        assert len(s.events) == before
        return
    assert refusal is None
    if isinstance(failure, SummaryTooLargeError):
        assert shadowed_tokens <= FRAMED_S
        assert [e.type for e in s.events[before:]] == ["compact/start", "compact/end"]
        assert list(s.surface.seqs) == nodes
        return
    assert shadowed_tokens > FRAMED_S
    assert [to_wire(e) for e in s.events[:before]] == lines  # the past is untouched
    appended = s.events[before:]
    assert [e.type for e in appended] == [
        "compact/start", "compact/summary", "user/message", "compact/end"
    ]
    checkpoint = appended[2]
    assert to_wire(checkpoint)["sourceEventSeqs"] == [
        result.start_seq, result.summary_seq, *nodes[i : j + 1]
    ]
    assert list(s.surface.seqs) == [*nodes[:i], checkpoint.seq, *nodes[j + 1 :]]
    kept = [m for seq in nodes[:i] if (m := messages[seq]) is not None]
    rest = [m for seq in nodes[j + 1 :] if (m := messages[seq]) is not None]
    assert s.derive_messages() == [*kept, checkpoint.message(), *rest]
    replayed = Session("replay", seed=list(s.events), registry=store.registry)
    assert replayed.derive_messages() == s.derive_messages()
    reloaded = make_store().create(seed=[to_wire(e) for e in s.events])
    assert to_wire(reloaded.derive_messages()) == to_wire(s.derive_messages())


def _s(request: SummaryRequest) -> SummaryResult:
    return SummaryResult(content=[text("S")])


@settings(max_examples=150, deadline=None)
@given(plans, st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1,
                       max_size=3))
def test_compact_region_on_any_range_of_any_surface(
    plan: Plan, picks: list[tuple[int, int]]
) -> None:
    store, s = build(plan)
    for a, b in picks:
        count = len(s.surface.seqs)
        if count == 0:
            return
        check_attempt(store, s, a % count, b % count)


@settings(max_examples=100, deadline=None)
@given(plans, st.integers(0, 3000))
def test_the_compactable_range_is_head_anchored_and_balanced(plan: Plan, retain: int) -> None:
    _store, s = build(plan)
    compactor = Compactor({"contextWindow": 1, "thresholdRatio": 1, "retainTokens": retain,
                           "summarizationModel": "", "maxTokens": 1, "compactionRetries": 0})
    found = compactor.compactable_range(s)
    nodes = list(s.surface.seqs)
    if found is None:
        return
    assert found.start == nodes[0]
    j = nodes.index(found.end)
    assert j < len(nodes) - 1  # something is always kept
    assert depths(s)[j + 1] == 0  # the cut after the range is balanced
    estimate = TokenEstimator().estimate_event_tokens
    tail = sum(estimate(s.events[seq]) for seq in nodes[j + 1 :])
    # Without an unbalanced cut to step over, the kept tail is the shortest one (of one
    # node at least) that reaches the retain budget.
    if all(d == 0 for d in depths(s)[j + 1 :]):
        assert tail >= retain
        if len(nodes) - (j + 1) > 1:
            assert tail - estimate(s.events[nodes[j + 1]]) < retain
