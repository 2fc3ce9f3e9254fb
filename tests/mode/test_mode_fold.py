"""Spec §5.1 and scenario 84: the ``mode/set`` event and ``fold_mode``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mode_support import bare, header, set_mode, wires

from dsh_session_core import Event, OpaqueEvent, Session, SessionStore, create_plugin_manager
from dsh_session_core.events import TurnStart, TurnStartData
from dsh_session_core.vocabulary import MessageTrigger, UserSource
from dsh_session_mode import (
    DEFAULT_MODE,
    EXIT_PLAN_MODE,
    PLAN_MODE,
    ModeSet,
    ModeSetData,
    fold_mode,
    mode_at_last_header,
)


def test_constants() -> None:
    assert (DEFAULT_MODE, PLAN_MODE, EXIT_PLAN_MODE) == ("default", "plan", "exit_plan_mode")


def test_s84_fold_mode() -> None:
    modes, s = bare()
    assert fold_mode(s.events) == "default"  # []
    for m in ("plan", "default", "plan"):
        set_mode(s, m)
    assert fold_mode(s.events) == "plan"

    _, two = bare()
    set_mode(two, "plan")
    set_mode(two, "default")
    assert fold_mode(two.events, 1) == "plan"
    assert fold_mode(two.events, 0) == "default"

    _, retired = bare()
    set_mode(retired, "retired")
    assert fold_mode(retired.events) == "retired"  # unknown names come back verbatim
    assert modes.get(retired).current == "default"  # ... but read as the default mode


def test_mode_set_is_typed_log_only_and_in_wire_shape() -> None:
    _, s = bare()
    ev = set_mode(s, "plan")
    assert type(ev) is ModeSet
    assert ev.data == ModeSetData(mode="plan")
    assert ev.surface is False
    assert wires(s)[0] == {"type": "mode/set", "seq": 0, "time": ev.time,
                           "data": {"mode": "plan"}}
    assert s.derive_messages() == []  # log-only: no message


def test_mode_set_is_never_validated_against_a_config() -> None:
    _, s = bare()
    assert type(set_mode(s, "")) is ModeSet
    assert fold_mode(s.events) == ""


def test_mode_set_refuses_surface_fields() -> None:
    from dsh_session_core.errors import SurfaceIntentError

    _, s = bare()
    with pytest.raises(SurfaceIntentError, match="cannot carry surfaceOp"):
        s.append("mode/set", {"mode": "plan"}, surface_op="append")
    assert len(s.events) == 0


def test_end_beyond_the_log_folds_everything_and_negative_folds_nothing() -> None:
    _, s = bare()
    set_mode(s, "plan")
    assert fold_mode(s.events, 5) == "plan"
    assert fold_mode(s.events, -1) == "default"


def test_fold_reads_untyped_mode_sets() -> None:
    # Without the mode plugin in the registry, mode/set is an unknown type: opaque.
    s = SessionStore(create_plugin_manager(autoload=False), strict=False).create()
    ev = s.append("mode/set", {"mode": "plan"})
    assert type(ev) is OpaqueEvent
    assert fold_mode(s.events) == "plan"
    # One with extra keys, or a mode that is not a string, in a loaded log.
    s.append("mode/set", {"mode": "review", "by": "picker"})
    assert fold_mode(s.events) == "review"
    s.append("mode/set", {"mode": 5})
    assert fold_mode(s.events) == "review"  # names no mode: skipped


def test_mode_at_last_header() -> None:
    _, s = bare()
    set_mode(s, "plan")
    assert mode_at_last_header(s.events) is None
    header(s)
    set_mode(s, "default")
    assert mode_at_last_header(s.events) == "plan"
    s.append("request/header-delta", {"config": {"model": "m2"}})
    assert mode_at_last_header(s.events) == "default"


# --- property: the fold is "the last mode/set before end, else default" --------------------

_TRIGGER = MessageTrigger(source=UserSource())


def _event(i: int, kind: tuple[str, Any]) -> Event:
    tag, value = kind
    if tag == "typed":
        return ModeSet(seq=i, time=i, data=ModeSetData(mode=value))
    if tag == "opaque":
        wire = {"type": "mode/set", "seq": i, "time": i, "data": {"mode": value}}
        event = _opaque(wire)
        assert type(event) is OpaqueEvent
        return event
    return TurnStart(seq=i, time=i, data=TurnStartData(turn=1, trigger=_TRIGGER))


def _opaque(wire: dict[str, Any]) -> Event:
    # The public way to get an opaque event: seed a core-only session with its wire shape.
    return Session("o", seed=[{**wire, "seq": 0}]).events[0]


_kinds = st.one_of(
    st.tuples(st.just("typed"), st.text(max_size=3)),
    st.tuples(st.just("opaque"), st.one_of(st.text(max_size=3), st.integers(), st.none())),
    st.tuples(st.just("other"), st.none()),
)


@given(st.lists(_kinds, max_size=12), st.one_of(st.none(), st.integers(-3, 15)))
def test_fold_is_the_last_mode_set_before_end(kinds: list[tuple[str, Any]],
                                              end: int | None) -> None:
    events = [_event(i, k) for i, k in enumerate(kinds)]
    stop = len(kinds) if end is None else end
    expected = "default"
    for i, (tag, value) in enumerate(kinds):
        if i < stop and tag in ("typed", "opaque") and isinstance(value, str):
            expected = value
    assert fold_mode(events, end) == expected
