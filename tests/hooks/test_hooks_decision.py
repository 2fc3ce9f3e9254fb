"""The hook/* append helpers beyond scenarios 79-80: the stderr summary (JS trim, UTF-16
length, exclusive cap), the decision rule, what the session refuses, and a replay of
reference records through the codec and the rule."""

from __future__ import annotations

import math

import msgspec
import pytest
from hooks_support import line_of, open_turn
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core import OpaqueEvent, Session
from dsh_session_core.errors import DshSessionError, NotJsonError, SchemaError
from dsh_session_hooks import (
    DEFAULT_STDERR_SUMMARY_MAX_CHARS,
    HookArgumentError,
    HookInvoked,
    HookOutput,
    HookResult,
    HookResultData,
    append_hook_invoked,
    append_hook_result,
    hook_result_decision,
    parse_hook_output,
    summarize_stderr,
)

ELLIPSIS = "\u2026"
# What JS trim() removes (ECMAScript WhiteSpace + LineTerminator), written out by hand.
JS_SPACE = [
    "\t", "\n", "\v", "\f", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a",
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
]  # fmt: skip


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# --- summarize_stderr ----------------------------------------------------------------------


def test_default_cap_is_the_references() -> None:
    assert DEFAULT_STDERR_SUMMARY_MAX_CHARS == 500


@pytest.mark.parametrize("space", JS_SPACE)
def test_summary_trims_what_js_trims(space: str) -> None:
    assert summarize_stderr(f"{space}boom{space}", 10) == "boom"
    assert summarize_stderr(space * 3, 10) is None


@pytest.mark.parametrize("char", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u200b"])
def test_summary_keeps_what_js_trim_keeps(char: str) -> None:
    # Python's strip() would remove the first five; JS trim() keeps all of them.
    assert summarize_stderr(f"{char}boom{char}", 10) == f"{char}boom{char}"


def test_summary_of_blank_or_empty_stderr_is_none() -> None:
    assert summarize_stderr("", 5) is None
    assert summarize_stderr(" \n\t ", 5) is None


def test_summary_cap_is_exclusive() -> None:
    assert summarize_stderr("abc", 3) == "abc"
    assert summarize_stderr("abcd", 3) == "abc" + ELLIPSIS
    assert summarize_stderr("  abcd  ", 4) == "abcd"  # the cap applies after trimming


def test_summary_counts_utf16_units() -> None:
    # An emoji is two units in JS: "a😀" has length 3.
    assert summarize_stderr("a\U0001f600", 3) == "a\U0001f600"
    assert summarize_stderr("ab\U0001f600", 3) == "ab" + ELLIPSIS  # the pair does not fit
    assert summarize_stderr("\U0001f600\U0001f600", 4) == "\U0001f600\U0001f600"
    # JS would keep "😀" plus a lone high surrogate here; the pair is dropped whole.
    assert summarize_stderr("\U0001f600\U0001f600", 3) == "\U0001f600" + ELLIPSIS


@pytest.mark.parametrize("cap", [0, -1, True, 1.5, "500", None])
def test_summary_cap_must_be_a_positive_int(cap: object) -> None:
    with pytest.raises(HookArgumentError) as info:
        summarize_stderr("boom", cap)  # type: ignore[arg-type]
    assert isinstance(info.value, DshSessionError)
    assert isinstance(info.value, ValueError)
    assert info.value.argument == "stderr_summary_max_chars"
    assert info.value.value is cap
    assert "stderr_summary_max_chars" in str(info.value)


@given(text=st.text(), cap=st.integers(min_value=1, max_value=40))
def test_summary_never_exceeds_cap_plus_one(text: str, cap: int) -> None:
    summary = summarize_stderr(text, cap)
    trimmed = text.strip("".join(JS_SPACE))
    if not trimmed:
        assert summary is None
        return
    assert summary is not None
    assert _utf16(summary) <= cap + 1
    assert len(summary) <= cap + 1
    if _utf16(trimmed) <= cap:
        assert summary == trimmed
    else:
        assert summary.endswith(ELLIPSIS)
        kept = summary[:-1]
        assert trimmed.startswith(kept)
        # At most one unit is given up, and only to keep a surrogate pair whole.
        assert _utf16(kept) in (cap, cap - 1)


# --- the decision rule -------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "allow", "block", "deny", "ask"])
def test_a_hooks_decision_is_recorded_raw(decision: str) -> None:
    assert hook_result_decision(HookOutput(decision=decision)) == decision  # type: ignore[arg-type]
    # ...whatever continue says.
    out = HookOutput(decision=decision, continue_=False)  # type: ignore[arg-type]
    assert hook_result_decision(out) == decision


def test_only_a_literal_false_continue_stops() -> None:
    assert hook_result_decision(HookOutput(continue_=False)) == "stop"
    assert hook_result_decision(HookOutput(continue_=True)) == "pass"
    assert hook_result_decision(HookOutput(continue_=None)) == "pass"


# --- appending ---------------------------------------------------------------------------------


def _append_result(session: Session, output: HookOutput, **kw: object) -> object:
    args: dict[str, object] = {
        "turn": 1,
        "point": "Stop",
        "handler_id": "claude:Stop:1",
        "output": output,
        "stderr_summary_max_chars": 500,
        "duration_ms": 1,
    }
    args.update(kw)
    return append_hook_result(session, **args)  # type: ignore[arg-type]


def test_explicit_match_all_matchers_are_written() -> None:
    session = open_turn()
    for matcher in ("", "*"):
        event = append_hook_invoked(
            session, turn=1, point="Stop", dialect="codex", handler_id="x", matcher=matcher
        )
        assert line_of(event)["data"]["matcher"] == matcher


def test_result_event_is_typed_and_immutable() -> None:
    session = open_turn()
    event = _append_result(session, HookOutput(exit_code=0), duration_ms=7.198671000000104)
    assert isinstance(event, HookResult)
    assert event.data == HookResultData(
        turn=1, point="Stop", handler_id="claude:Stop:1", decision="pass", exit_code=0,
        duration_ms=7.198671000000104,
    )  # fmt: skip
    assert line_of(event)["data"]["durationMs"] == 7.198671000000104
    with pytest.raises(AttributeError):
        event.data.decision = "block"  # type: ignore[misc]


def test_bad_cap_appends_nothing() -> None:
    session = open_turn()
    with pytest.raises(HookArgumentError):
        _append_result(session, HookOutput(), stderr_summary_max_chars=0)
    assert session.seq == 1


def test_unknown_dialect_is_refused_by_the_schema() -> None:
    session = open_turn()
    with pytest.raises(SchemaError) as info:
        append_hook_invoked(
            session, turn=1, point="Stop", dialect="native", handler_id="x"  # type: ignore[arg-type]
        )
    assert info.value.plugin == "hooks"
    assert session.seq == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [("turn", True), ("turn", "1"), ("point", 3), ("handler_id", None)],
)
def test_wrong_field_types_are_refused(field: str, value: object) -> None:
    session = open_turn()
    with pytest.raises(SchemaError):
        _append_result(session, HookOutput(), **{field: value})
    assert session.seq == 1


@pytest.mark.parametrize("duration", [math.nan, math.inf])
def test_non_finite_duration_is_refused(duration: float) -> None:
    session = open_turn()
    with pytest.raises(NotJsonError):
        _append_result(session, HookOutput(), duration_ms=duration)
    assert session.seq == 1


def test_a_session_without_the_plugin_logs_the_records_untyped() -> None:
    session = Session("bare", strict=False)  # core types only: the records are foreign
    event = append_hook_invoked(session, turn=1, point="Stop", dialect="claude", handler_id="x")
    assert type(event) is OpaqueEvent
    assert line_of(event)["data"] == {
        "turn": 1, "point": "Stop", "dialect": "claude", "handlerId": "x",
    }  # fmt: skip


def test_invoked_event_class_is_what_the_append_returns() -> None:
    event = append_hook_invoked(
        open_turn(), turn=1, point="Stop", dialect="claude", handler_id="x"
    )
    assert isinstance(event, HookInvoked)


# --- replaying reference records ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "stdout", "stderr", "point", "duration", "expected"),
    [
        pytest.param(
            2, "", "bash is disabled by policy in this session\n", "PreToolUse",
            14.296921000000111,
            b'{"turn":1,"point":"PreToolUse","handlerId":"claude:PreToolUse:1",'
            b'"decision":"block","exitCode":2,'
            b'"stderrSummary":"bash is disabled by policy in this session",'
            b'"durationMs":14.296921000000111}',
            id="hook-cc-pretool-deny",
        ),
        pytest.param(
            0,
            '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"}}\n',
            "", "PreToolUse", 16.16399199999978,
            b'{"turn":1,"point":"PreToolUse","handlerId":"claude:PreToolUse:1",'
            b'"decision":"ask","exitCode":0,"durationMs":16.16399199999978}',
            id="hook-cc-pretool-ask",
        ),
        pytest.param(
            0, "", "", "PreToolUse", 0,
            b'{"turn":1,"point":"PreToolUse","handlerId":"claude:PreToolUse:1",'
            b'"decision":"pass","exitCode":0,"durationMs":0}',
            id="pass",
        ),
    ],
)  # fmt: skip
def test_reference_records_are_reproduced_byte_for_byte(
    exit_code: int, stdout: str, stderr: str, point: str, duration: float, expected: bytes
) -> None:
    session = open_turn()
    output = parse_hook_output(exit_code, stdout, stderr, point)
    event = append_hook_result(
        session,
        turn=1,
        point=point,
        handler_id=f"claude:{point}:1",
        output=output,
        stderr_summary_max_chars=DEFAULT_STDERR_SUMMARY_MAX_CHARS,
        duration_ms=duration,
    )
    assert msgspec.json.encode(event.data) == expected
