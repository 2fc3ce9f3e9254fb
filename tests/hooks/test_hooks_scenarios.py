"""Acceptance scenarios 79-83 of the plugins spec (§13): the hook/result decision rule,
hook/invoked, the matcher, the codec and the merge. Every expected value is the spec's."""

from __future__ import annotations

from typing import Any

from hooks_support import line_of, open_turn

from dsh_session_hooks import (
    HookInvoked,
    HookOutput,
    HookResult,
    MatcherMode,
    MergedHookOutput,
    append_hook_invoked,
    append_hook_result,
    matches_matcher,
    merge_hook_outputs,
    parse_hook_output,
)


def _result_data(output: HookOutput, *, cap: int = 500, duration: float = 5) -> dict[str, Any]:
    session = open_turn()
    event = append_hook_result(
        session,
        turn=1,
        point="PreToolUse",
        handler_id="h1",
        output=output,
        stderr_summary_max_chars=cap,
        duration_ms=duration,
    )
    assert type(event) is HookResult
    data: dict[str, Any] = line_of(event)["data"]
    return data


# --- 79. hook/result rule --------------------------------------------------------------------


def test_s79_hook_result_decision_rule() -> None:
    # The full record, key for key and in the reference's order.
    data = _result_data(HookOutput(exit_code=2, stderr="blocked", stdout="", decision="deny"))
    assert list(data.items()) == [
        ("turn", 1),
        ("point", "PreToolUse"),
        ("handlerId", "h1"),
        ("decision", "deny"),
        ("exitCode", 2),
        ("stderrSummary", "blocked"),
        ("durationMs", 5),
    ]
    # The decision when the hook gave none: stop on continue:false, else pass; a decision
    # wins over continue:false.
    assert _result_data(HookOutput(continue_=False))["decision"] == "stop"
    assert _result_data(HookOutput())["decision"] == "pass"
    assert _result_data(HookOutput(continue_=False, decision="block"))["decision"] == "block"
    # No exit code: no key (and blank stderr: no summary key either).
    assert list(_result_data(HookOutput(exit_code=None))) == [
        "turn",
        "point",
        "handlerId",
        "decision",
        "durationMs",
    ]
    # stderr of 600 x padded with spaces: trimmed, then cut at 500 plus the ellipsis.
    padded = "   " + "x" * 600 + "   "
    assert _result_data(HookOutput(stderr=padded))["stderrSummary"] == "x" * 500 + "\u2026"
    # Exactly the cap: kept verbatim (the cap is exclusive).
    assert _result_data(HookOutput(stderr="y" * 500))["stderrSummary"] == "y" * 500


# --- 80. hook/invoked --------------------------------------------------------------------------


def test_s80_hook_invoked_with_and_without_matcher() -> None:
    session = open_turn()
    event = append_hook_invoked(
        session, turn=1, point="PreToolUse", dialect="claude", handler_id="h1", matcher="Bash"
    )
    assert type(event) is HookInvoked
    line = line_of(event)
    # Log-only: the envelope has no surfaceOp (nor sourceEventSeqs).
    assert list(line) == ["type", "seq", "time", "data"]
    assert line["type"] == "hook/invoked"
    assert list(line["data"].items()) == [
        ("turn", 1),
        ("point", "PreToolUse"),
        ("dialect", "claude"),
        ("handlerId", "h1"),
        ("matcher", "Bash"),
    ]
    bare = append_hook_invoked(
        session, turn=1, point="PreToolUse", dialect="claude", handler_id="h1"
    )
    assert "matcher" not in line_of(bare)["data"]
    assert line_of(bare)["data"] == {
        "turn": 1,
        "point": "PreToolUse",
        "dialect": "claude",
        "handlerId": "h1",
    }


# --- 81. matcher -------------------------------------------------------------------------------

MATCHER_CASES: list[tuple[str | None, str, MatcherMode, bool]] = [
    ("Bash", "Bash", "claude", True),
    ("Bash", "BashOutput", "claude", False),
    ("Edit|Write", "EditFile", "claude", False),
    ("Bash.*", "BashOutput", "claude", True),
    ("(", "x", "claude", False),
    ("Bash", "BashOutput", "codex", True),
    ("^Bash$", "BashOutput", "codex", False),
    ("[", "x", "codex", False),
]


def test_s81_matcher() -> None:
    for matcher, query, mode, expected in MATCHER_CASES:
        assert matches_matcher(matcher, query, mode) is expected, (matcher, query, mode)
    # None, '' and '*' match anything, in both modes.
    for sentinel in (None, "", "*"):
        for mode_ in ("claude", "codex"):
            for query in ("Bash", "", "anything at all", "("):
                assert matches_matcher(sentinel, query, mode_) is True


# --- 82. codec ---------------------------------------------------------------------------------


def test_s82_codec() -> None:
    # Exit 2 blocks, with the trimmed stderr as the reason.
    out = parse_hook_output(2, "", "this command is not allowed")
    assert out.decision == "block"
    assert out.reason == "this command is not allowed"
    # Exit 2 with blank stderr: block, no reason.
    out = parse_hook_output(2, "", "   ")
    assert out.decision == "block"
    assert out.reason is None
    # Exit 1: a non-blocking error, no decision.
    assert parse_hook_output(1, '{"decision":"block"}', "oops").decision is None
    # A top-level "deny" is not a valid top-level decision.
    assert parse_hook_output(0, '{"decision":"deny"}', "").decision is None
    # The permission decision overrides the top-level one, its reason the reason.
    out = parse_hook_output(
        0,
        '{"decision":"approve","hookSpecificOutput":{"permissionDecision":"deny",'
        '"permissionDecisionReason":"denied by policy"}}',
        "",
    )
    assert out.decision == "deny"
    assert out.reason == "denied by policy"
    # A block for another event: its name is recorded, its decision discarded.
    out = parse_hook_output(
        0,
        '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"}}',
        "",
        "Stop",
    )
    assert out.hook_event_name == "PreToolUse"
    assert out.decision is None
    # A block naming no event, with an expected event: discarded.
    out = parse_hook_output(
        0,
        '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"r",'
        '"additionalContext":"c"}}',
        "",
        "Stop",
    )
    assert (out.decision, out.reason, out.additional_context, out.hook_event_name) == (
        None,
        None,
        None,
        None,
    )
    # A JSON array, or malformed JSON: neutral (nothing but the raw streams).
    for stdout in ("[1,2,3]", "{ not valid json"):
        assert parse_hook_output(0, stdout, "") == HookOutput(exit_code=0, stdout=stdout)
    # Exit 2 ignores stdout entirely, even a valid approve.
    out = parse_hook_output(2, '{"decision":"approve"}', "")
    assert out.decision == "block"
    assert out.reason is None


# --- 83. merge ---------------------------------------------------------------------------------


def _o(decision: Any = None, reason: str | None = None, **kw: Any) -> HookOutput:
    return HookOutput(decision=decision, reason=reason, **kw)


def test_s83_merge() -> None:
    # The most restrictive decision wins.
    assert merge_hook_outputs([_o("allow"), _o("ask")]).decision == "ask"
    # Only the winning rank's reasons are surfaced.
    merged = merge_hook_outputs([_o("ask", "ask reason"), _o("deny", "the real objection")])
    assert (merged.decision, merged.reason) == ("deny", "the real objection")
    # deny and block share the top rank: both reasons, in hook order; allow's is dropped.
    merged = merge_hook_outputs(
        [_o("deny", "first objection"), _o("allow", "x"), _o("block", "second objection")]
    )
    assert (merged.decision, merged.reason) == ("deny", "first objection\n\nsecond objection")
    # Continues [true, false('halt now'), false('second')]: stop, with the first reason.
    halting = merge_hook_outputs(
        [
            _o(continue_=True),
            _o(continue_=False, stop_reason="halt now"),
            _o(continue_=False, stop_reason="second"),
        ]
    )
    assert (halting.stop, halting.stop_reason) == (True, "halt now")
    # No output at all: the neutral outcome, with no reason and no stop reason.
    empty = merge_hook_outputs([])
    assert empty == MergedHookOutput(
        decision="none", stop=False, additional_context=(), system_messages=()
    )
    assert (empty.reason, empty.stop_reason) == (None, None)
