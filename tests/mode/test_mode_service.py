"""Spec §5.3 and scenarios 85-86: the mode service (list/get/set), the boundary flush,
the notices, and both policy layers."""

from __future__ import annotations

import logging
import re

import pytest
from mode_support import (
    bare,
    header,
    mode_pm,
    notices,
    set_mode,
    step_end,
    turn_start,
    types,
    wired,
    wires,
)

from dsh_session_core import Event, Session, SessionStore, hookimpl
from dsh_session_mode import Modes, ModeSet, ModeState, UnknownModeError, fold_mode

PLAN_NOTICE = "The user switched this session to plan mode."
DEFAULT_NOTICE = "The user switched this session back to the default mode."
RETIRED_NOTICE = (
    'Mode "retired" is no longer defined in this deployment\'s configuration; the session '
    "continues in the default mode."
)
REVIEW = {"modes": {"review": {"section": "reviewing", "tools": ["read", "exit_plan_mode"]}}}


# --- list / get / set ------------------------------------------------------------------


def test_list_is_default_then_the_definitions() -> None:
    modes, _ = bare()
    assert modes.list() == ["default", "plan"]
    modes, _ = bare(REVIEW)
    assert modes.list() == ["default", "plan", "review"]


def test_get_reports_the_folded_mode_and_the_pending_switch() -> None:
    modes, s = bare()
    assert modes.get(s) == ModeState(current="default")
    set_mode(s, "plan")
    assert modes.get(s) == ModeState(current="plan")
    set_mode(s, "retired")
    assert modes.get(s) == ModeState(current="default")
    modes.set(s, "plan")
    assert modes.get(s) == ModeState(current="default", pending="plan")


def test_set_never_appends_and_the_latest_switch_wins() -> None:
    modes, s = bare(REVIEW)
    modes.set(s, "plan")
    modes.set(s, "review")
    assert len(s.events) == 0
    assert modes.get(s).pending == "review"


def test_set_drops_a_no_op() -> None:
    modes, s = bare()
    modes.set(s, "default")  # equals the current mode
    assert modes.get(s) == ModeState(current="default")
    modes.set(s, "plan")
    modes.set(s, "plan")  # equals the pending one
    assert modes.get(s) == ModeState(current="default", pending="plan")


def test_set_default_on_a_dropped_mode_is_a_no_op() -> None:
    # Spec §14.39: set() compares against the pending-or-effective mode.
    modes, s = bare()
    set_mode(s, "retired")
    modes.set(s, "default")
    assert modes.get(s).pending is None


def test_default_is_always_a_valid_target() -> None:
    modes, s = bare()
    set_mode(s, "plan")
    modes.set(s, "default")
    assert modes.get(s) == ModeState(current="plan", pending="default")


def test_pending_switches_are_per_session() -> None:
    modes, s = bare()
    other = SessionStore(mode_pm()).create()
    modes.set(s, "plan")
    assert modes.get(other).pending is None
    modes.forget(s)
    assert modes.get(s).pending is None


# --- scenario 85 -------------------------------------------------------------------------


def test_s85_unknown_mode_is_refused_naming_the_vocabulary() -> None:
    modes, s = bare()
    message = 'unknown mode "nope" — available modes: default, plan'
    with pytest.raises(UnknownModeError, match=f"^{re.escape(message)}$") as info:
        modes.set(s, "nope")
    assert (info.value.mode, info.value.available) == ("nope", ("default", "plan"))
    assert modes.get(s).pending is None


def test_s85_a_net_zero_flip_appends_nothing() -> None:
    modes, s = wired()
    modes.set(s, "plan")
    modes.set(s, "default")
    turn_start(s)
    assert types(s) == ["turn/start"]
    assert notices(s) == []


def test_s85_flush_at_turn_start_after_a_header_then_nothing_more() -> None:
    modes, s = wired()
    header(s)
    modes.set(s, "plan")
    turn_start(s)
    assert types(s) == ["request/header", "turn/start", "mode/set", "context/message"]
    logged = wires(s)
    assert logged[2]["data"] == {"mode": "plan"}
    assert type(s.events[2]) is ModeSet
    assert logged[3] == {
        "type": "context/message", "seq": 3, "time": logged[3]["time"],
        "data": {"content": [{"type": "text", "text": PLAN_NOTICE}],
                 "source": {"kind": "plugin", "plugin": "mode"}},
        "surfaceOp": "append",
    }
    assert modes.get(s) == ModeState(current="plan")
    step_end(s)  # a later boundary adds nothing
    assert types(s)[4:] == ["step/end"]


def test_s85_no_notice_without_any_header() -> None:
    modes, s = wired()
    modes.set(s, "plan")
    turn_start(s)
    assert types(s) == ["turn/start", "mode/set"]
    assert fold_mode(s.events) == "plan"


# --- the rest of the boundary flush -------------------------------------------------------


def test_step_end_is_a_boundary_too() -> None:
    modes, s = wired()
    modes.set(s, "plan")
    step_end(s)
    assert types(s) == ["step/end", "mode/set"]


def test_other_events_are_not_boundaries() -> None:
    modes, s = wired()
    modes.set(s, "plan")
    set_mode(s, "default")
    header(s)
    s.append("step/start", {"turn": 1, "step": 1})
    assert modes.get(s).pending == "plan"
    assert types(s) == ["mode/set", "request/header", "step/start"]


def test_the_switch_back_to_default_has_its_own_wording() -> None:
    modes, s = wired()
    set_mode(s, "plan")
    header(s)
    modes.set(s, "default")
    step_end(s)
    assert notices(s) == [DEFAULT_NOTICE]
    assert fold_mode(s.events) == "default"


def test_no_notice_when_the_header_already_shows_the_target() -> None:
    # The notice depends on the fold at the last header, not on the previous mode.
    modes, s = wired()
    set_mode(s, "plan")
    header(s)
    set_mode(s, "default")
    modes.set(s, "plan")
    step_end(s)
    assert fold_mode(s.events) == "plan"
    assert notices(s) == []


def test_a_header_delta_counts_as_a_header() -> None:
    modes, s = wired()
    header(s)
    set_mode(s, "plan")
    s.append("request/header-delta", {"config": {"model": "m2"}})
    modes.set(s, "default")
    step_end(s)
    assert notices(s) == [DEFAULT_NOTICE]


def test_a_dropped_mode_is_narrated_once_at_turn_starts_only() -> None:
    _, s = wired()
    set_mode(s, "retired")
    step_end(s)
    assert notices(s) == []  # not at a step/end
    turn_start(s)
    turn_start(s, 2)
    step_end(s, 2)
    assert notices(s) == [RETIRED_NOTICE]
    wire = wires(s)[3]
    assert wire["data"]["source"] == {"kind": "plugin", "plugin": "mode"}
    assert wire["surfaceOp"] == "append"


def test_a_newly_dropped_name_is_narrated_again() -> None:
    _, s = wired()
    set_mode(s, "retired")
    turn_start(s)
    set_mode(s, "gone")
    turn_start(s, 2)
    assert notices(s) == [RETIRED_NOTICE, RETIRED_NOTICE.replace('"retired"', '"gone"')]


def test_turn_start_order_dropped_notice_then_switch_then_its_notice() -> None:
    # Spec §14.40.
    modes, s = wired()
    set_mode(s, "retired")
    header(s)
    modes.set(s, "plan")
    turn_start(s)
    assert types(s)[2:] == ["turn/start", "context/message", "mode/set", "context/message"]
    assert notices(s) == [RETIRED_NOTICE, PLAN_NOTICE]


def test_every_listener_sees_the_nested_events_after_the_boundary_in_seq_order() -> None:
    # Spec §14.6: a persistence listener must see turn/start before what the flush adds.
    seen: list[int] = []

    class Recorder:
        @hookimpl
        def session_event(self, session: Session, event: Event) -> None:
            seen.append(event.seq)

    pm = mode_pm()
    modes = Modes()
    pm.register(Recorder(), name="before")
    pm.register(modes, name="modes")
    pm.register(Recorder(), name="after")
    s = SessionStore(pm).create()
    header(s)
    modes.set(s, "plan")
    turn_start(s)
    assert seen == [0, 0, 1, 1, 2, 2, 3, 3]


def test_an_explicit_flush_returns_what_it_appended() -> None:
    modes, s = bare()
    header(s)
    modes.set(s, "plan")
    turn_start(s)
    assert types(s) == ["request/header", "turn/start"]  # nobody watches this session
    appended = modes.flush(s, turn_start=True)
    assert [e.seq for e in appended] == [2, 3]
    assert types(s)[2:] == ["mode/set", "context/message"]
    assert modes.flush(s) == []


def test_a_failed_flush_is_logged_not_raised(caplog: pytest.LogCaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    modes, s = wired()

    def broken(session: Session, *, turn_start: bool = False) -> list[Event]:
        raise RuntimeError("backend gone")

    monkeypatch.setattr(modes, "flush", broken)
    with caplog.at_level(logging.WARNING, logger="dsh_session_mode"):
        turn_start(s)  # does not raise
    assert [r.getMessage() for r in caplog.records] == [
        "dsh-mode: boundary flush failed: backend gone"]
    assert types(s) == ["turn/start"]


def test_an_explicit_flush_lets_append_errors_through_with_the_switch_cleared() -> None:
    # The reference clears the intent before appending, so it is not retried.
    modes, s = bare()
    modes.set(s, "plan")

    def failing_listener(event: Event) -> None:
        raise RuntimeError("listener")

    s.on_append = failing_listener
    with pytest.raises(RuntimeError, match="listener"):
        modes.flush(s)
    # Core logs the event before a listener fails; the switch is not pending any more.
    assert modes.get(s) == ModeState(current="plan")


# --- scenario 86 and the hard layer -------------------------------------------------------

PLAN_DENIAL = (
    'Error: tool "write" is not available in plan mode; continue planning and present your '
    "plan with exit_plan_mode when ready"
)


def test_s86_plan_mode_gates_tools() -> None:
    modes, s = bare()
    set_mode(s, "plan")
    assert modes.gate(s, "write") == PLAN_DENIAL
    assert modes.deny_reason(s, "write") == PLAN_DENIAL.removeprefix("Error: ")
    assert modes.gate(s, "read") is None
    # A pending (not flushed) plan switch does not gate.
    _, idle = bare()
    modes.set(idle, "plan")
    assert modes.gate(idle, "write") is None


def test_the_gate_passes_agent_less_default_and_dropped_modes() -> None:
    modes, s = bare()
    assert modes.gate(None, "write") is None
    assert modes.gate(s, "write") is None
    set_mode(s, "retired")
    assert modes.gate(s, "write") is None


def test_a_custom_mode_denies_with_the_generic_reason() -> None:
    modes, s = bare(REVIEW)
    set_mode(s, "review")
    assert modes.gate(s, "write") == 'Error: tool "write" is not available in "review" mode'
    assert modes.gate(s, "read") is None
    # An allowlisted exit_plan_mode passes the gate (the tool itself then refuses).
    assert modes.gate(s, "exit_plan_mode") is None


# --- the soft layer -----------------------------------------------------------------------


def test_policy_section() -> None:
    modes, s = bare(REVIEW)
    assert modes.policy_section(None) == ""
    assert modes.policy_section(s) == ""
    set_mode(s, "plan")
    assert modes.policy_section(s).startswith("You are in plan mode: a read-only planning")
    set_mode(s, "review")
    assert modes.policy_section(s) == "reviewing"
    set_mode(s, "retired")
    assert modes.policy_section(s) == ""


def test_visible_tools() -> None:
    modes, s = bare(REVIEW)
    offered = ["exit_plan_mode", "read", "write", "todo_write"]
    assert modes.visible_tools(None, offered) == offered  # agent-less: untouched
    assert modes.visible_tools(s, offered) == ["read", "write", "todo_write"]
    set_mode(s, "plan")
    assert modes.visible_tools(s, offered) == ["exit_plan_mode", "read", "todo_write"]
    set_mode(s, "review")  # allowlists exit_plan_mode, shown only in plan mode
    assert modes.visible_tools(s, offered) == ["read"]
    set_mode(s, "retired")
    assert modes.visible_tools(s, offered) == ["read", "write", "todo_write"]


def test_repr() -> None:
    assert repr(bare()[0]) == "<Modes ['default', 'plan']>"
