"""The builders' fast path (issue 39, ``_model/built.py``): a payload the builder makes
itself is logged exactly as the wire dict it stands for would be, refusals included, and
everything that watches appends still sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import Session, SessionStore, create_plugin_manager, hookimpl
from dsh_session_core.errors import DshSessionError, InvariantError
from dsh_session_core.events import Event, SurfaceOp
from dsh_session_core.vocabulary import (
    PluginSource,
    ReasoningDeltaChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    UserSource,
)


def _clock() -> int:
    return 1_783_000_000_000


class _HandAppends(Session):
    """A session whose ``append`` is its own: the builders then write every event through
    it, as wire dicts (no fast path), and it records each type it was given."""

    __slots__ = ("given",)

    def __init__(self, id: str) -> None:
        super().__init__(id, clock=_clock)
        self.given: list[str] = []

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Iterable[int] | None = None,
    ) -> Event:
        self.given.append(type)
        return super().append(type, data, surface_op=surface_op,
                              source_event_seqs=source_event_seqs)


def test_a_session_whose_append_is_overridden_sees_every_builder_event() -> None:
    s = _HandAppends("sub")
    with s.turn() as turn:
        turn.user("hi")
        with turn.step() as step:
            step.chunk(TextDeltaChunk(index=0, text="t"))
            call = ToolCallBlock(id="c1", name="n", arguments="{}")
            step.assistant([call], usage=TokenUsage(input_tokens=1, output_tokens=1))
            step.tool_result(step.tool_call(call), "ok")
            step.tool_call("c2", "n", "{}")  # answered at the step's end
        turn.steer("more")
    assert s.given == [e.type for e in s.events]
    assert len(s.given) == 12


class _Seen:
    def __init__(self) -> None:
        self.events: list[Event] = []

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.events.append(event)


def test_a_stores_listener_and_checks_see_the_builders_events() -> None:
    seen = _Seen()
    pm = create_plugin_manager(autoload=False)
    pm.register(seen)
    s = SessionStore(pm, checks=True, clock=_clock).create("checked")
    turn = s.turn()
    turn.user("go")
    with turn.step() as step:
        step.chunk(TextDeltaChunk(index=0, text="t"))
        step.assistant("done")
    assert seen.events == list(s.events)
    # A turn ended by hand: the checks refuse the builder's step/start, and nothing is
    # logged or announced.
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    before, told = s.seq, len(seen.events)
    with pytest.raises(InvariantError, match="step/start in turn 1"):
        turn.step()
    assert (s.seq, len(seen.events)) == (before, told)


# --- the fast path against the dict path, on any input -------------------------------------

texts = st.text(max_size=6)
ints = st.integers(-3, 3) | st.just(2**70)
#: Values a caller may pass, right or wrong: what each builder argument is drawn from.
blocks = st.one_of(
    texts,
    st.builds(TextBlock, text=texts | ints),
    st.builds(ToolCallBlock, id=texts, name=texts | st.none(), arguments=texts),
    st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
    ints,
)
contents = texts | st.lists(blocks, max_size=3) | st.tuples(blocks) | ints | st.none()
sources = st.none() | st.just(UserSource()) | st.builds(PluginSource, plugin=texts | ints) \
    | st.just({"kind": "user"}) | st.just("user")
chunks = st.one_of(
    st.builds(TextDeltaChunk, index=ints | st.floats(0, 1), text=texts),
    st.builds(ReasoningDeltaChunk, index=ints, text=texts | ints),
    st.fixed_dictionaries({"type": st.just("text-delta"), "index": ints, "text": texts}),
    texts,
)
usages = st.none() | st.builds(TokenUsage, input_tokens=ints | texts, output_tokens=ints) \
    | st.just({"inputTokens": 1, "outputTokens": 2}) | ints
seqs = st.none() | st.lists(st.integers(0, 5) | texts, max_size=3) | ints
call_ids = st.sampled_from(["c1", "c2"])  # few, for results to find their calls

Op = Callable[[Any, Any], object]
ops: st.SearchStrategy[Op] = st.one_of(
    st.builds(lambda c, s: lambda t, _: t.user(c, source=s), contents, sources),
    st.builds(lambda c, s: lambda t, _: t.context(c, source=s), contents, sources),
    st.builds(lambda c: lambda t, _: t.steer(c), contents),
    st.builds(lambda c: lambda _, p: p.chunk(c), chunks),
    st.builds(lambda c, u, q: lambda _, p: p.assistant(c, usage=u, source_event_seqs=q),
              contents, usages, seqs),
    st.builds(lambda i, n, a: lambda _, p: p.tool_call(i, n, a),
              call_ids | ints, texts | ints, texts | st.none()),
    st.builds(lambda b: lambda _, p: p.tool_call(b),
              st.builds(ToolCallBlock, id=call_ids, name=texts, arguments=texts | ints)),
    st.builds(lambda i, c, e: lambda _, p: p.tool_result(i, c, is_error=e),
              call_ids, contents, st.booleans() | ints),
    st.just(lambda _, p: p.end()),
    st.just(lambda t, _: t.end()),
)


def _outcomes(s: Session, script: list[list[Op]]) -> list[str]:
    """Run each turn's ops (each in its turn's current step) and say how each went."""
    said: list[str] = []
    for turn_ops in script:
        try:
            with s.turn() as turn:
                step = turn.step()
                for op in turn_ops:
                    try:
                        op(turn, step)
                        said.append(f"ok {s.seq}")
                    except DshSessionError as exc:
                        said.append(f"{type(exc).__name__}: {exc}")
                    if step.end_event is not None and turn.end_event is None:
                        step = turn.step()
        except DshSessionError as exc:  # a turn ended by hand, left by its with block
            said.append(f"{type(exc).__name__}: {exc}")
    return said


@settings(max_examples=150, deadline=None)
@given(script=st.lists(st.lists(ops, max_size=8), min_size=1, max_size=3))
def test_the_fast_path_logs_and_refuses_as_the_dict_path_does(script: list[list[Op]]) -> None:
    fast, by_dict = Session("s", clock=_clock), _HandAppends("s")
    assert _outcomes(fast, script) == _outcomes(by_dict, script)
    assert fast.to_jsonl() == by_dict.to_jsonl()
    assert [type(e) for e in fast.events] == [type(e) for e in by_dict.events]
