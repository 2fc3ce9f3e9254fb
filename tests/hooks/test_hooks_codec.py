"""The codec beyond scenario 82: each structured field is applied only with its JSON type,
the hookSpecificOutput guard, strict JSON, read-only updatedInput, JS trimming, and
totality (no output makes it raise)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core import JsonObject
from dsh_session_hooks import HookOutput, parse_hook_output


def _parse(obj: Any, expected: str | None = None) -> HookOutput:
    return parse_hook_output(0, json.dumps(obj), "", expected)


# --- streams and exit codes --------------------------------------------------------------------


def test_streams_are_trimmed_as_js_trims_and_stdout_kept_verbatim() -> None:
    out = parse_hook_output(0, '\ufeff {"continue": false}\n', "\u3000warn\x1c\n")
    assert out.stdout == '{"continue": false}'
    assert out.stderr == "warn\x1c"  # U+001C is not JS whitespace
    assert out.continue_ is False
    plain = parse_hook_output(0, "  plain text  \n", "")
    assert plain == HookOutput(exit_code=0, stdout="plain text")


@pytest.mark.parametrize("exit_code", [None, 1, 3, 127, -1])
def test_other_exits_neither_decide_nor_parse(exit_code: int | None) -> None:
    out = parse_hook_output(exit_code, '{"decision":"block","continue":false}', " err ")
    assert out == HookOutput(
        exit_code=exit_code, stdout='{"decision":"block","continue":false}', stderr="err"
    )


def test_exit_two_keeps_only_the_block() -> None:
    out = parse_hook_output(2, '{"continue":false,"systemMessage":"m"}', " no \n")
    assert out == HookOutput(
        exit_code=2,
        stdout='{"continue":false,"systemMessage":"m"}',
        stderr="no",
        decision="block",
        reason="no",
    )


# --- top-level fields --------------------------------------------------------------------------


def test_top_level_fields_need_their_json_types() -> None:
    assert _parse({"continue": False}).continue_ is False
    assert _parse({"continue": True}).continue_ is True
    not_bools: list[object] = [0, 1, "false", None, []]
    for not_bool in not_bools:
        assert _parse({"continue": not_bool}).continue_ is None
    good = _parse({"stopReason": "s", "systemMessage": "m", "reason": "r"})
    assert (good.stop_reason, good.system_message, good.reason) == ("s", "m", "r")
    bad = _parse({"stopReason": 1, "systemMessage": ["m"], "reason": {"r": 1}})
    assert (bad.stop_reason, bad.system_message, bad.reason) == (None, None, None)


@pytest.mark.parametrize(
    ("decision", "kept"),
    [("approve", "approve"), ("block", "block"), ("allow", None), ("deny", None),
     ("ask", None), ("Block", None), (True, None)],
)  # fmt: skip
def test_top_level_decision_is_approve_or_block_only(decision: Any, kept: str | None) -> None:
    assert _parse({"decision": decision}).decision == kept


def test_strict_json_refuses_nan_and_infinity() -> None:
    # JSON.parse has no NaN/Infinity: the whole object is malformed, nothing applies.
    for literal in ("NaN", "Infinity", "-Infinity"):
        out = parse_hook_output(0, f'{{"continue":false,"x":{literal}}}', "")
        assert out.continue_ is None


def test_lone_surrogate_escapes_parse_as_js_does() -> None:
    out = parse_hook_output(0, '{"reason":"\\ud800"}', "")
    assert out.reason == "\ud800"


def test_nesting_too_deep_to_parse_is_neutral() -> None:
    stdout = '{"a":' * 100_000 + "1" + "}" * 100_000
    assert parse_hook_output(0, stdout, "") == HookOutput(exit_code=0, stdout=stdout)


# --- hookSpecificOutput --------------------------------------------------------------------------


def test_specific_output_applies_without_a_guard() -> None:
    out = _parse(
        {
            "hookSpecificOutput": {
                "permissionDecision": "ask",
                "permissionDecisionReason": "confirm",
                "additionalContext": "ctx",
                "updatedInput": {"command": "ls"},
            }
        }
    )
    assert out.decision == "ask"
    assert out.reason == "confirm"
    assert out.additional_context == "ctx"
    assert out.updated_input == {"command": "ls"}
    assert out.hook_event_name is None


def test_permission_reason_overrides_reason_without_a_decision() -> None:
    out = _parse(
        {
            "decision": "block",
            "reason": "top",
            "hookSpecificOutput": {"hookEventName": "Stop", "permissionDecisionReason": "why"},
        },
        "Stop",
    )
    assert (out.decision, out.reason) == ("block", "why")


def test_invalid_permission_decisions_are_ignored() -> None:
    for decision in ("approve", "block", "DENY", 3):
        specific = {"permissionDecision": decision}
        assert _parse({"decision": "approve", "hookSpecificOutput": specific}).decision == "approve"


def test_top_level_fields_survive_a_discarded_block() -> None:
    out = _parse(
        {
            "continue": False,
            "stopReason": "halt",
            "decision": "approve",
            "reason": "top",
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "scoped",
                "additionalContext": "ctx",
                "updatedInput": {"a": 1},
            },
        },
        "PreToolUse",
    )
    assert out == HookOutput(
        exit_code=0,
        stdout=out.stdout,
        continue_=False,
        stop_reason="halt",
        decision="approve",
        reason="top",
        hook_event_name="PostToolUse",
    )


def test_a_non_string_event_name_is_not_recorded_and_counts_as_missing() -> None:
    out = _parse({"hookSpecificOutput": {"hookEventName": 1, "additionalContext": "c"}}, "Stop")
    assert (out.hook_event_name, out.additional_context) == (None, None)
    # Without a guard the block applies anyway.
    out = _parse({"hookSpecificOutput": {"hookEventName": 1, "additionalContext": "c"}})
    assert (out.hook_event_name, out.additional_context) == (None, "c")


@pytest.mark.parametrize("specific", [None, "x", 1, ["permissionDecision", "deny"]])
def test_a_non_object_specific_output_is_ignored(specific: Any) -> None:
    out = _parse({"reason": "r", "hookSpecificOutput": specific})
    assert out == HookOutput(exit_code=0, stdout=out.stdout, reason="r")


@pytest.mark.parametrize("updated", [[1, 2], "x", 3, None, True])
def test_updated_input_must_be_an_object(updated: Any) -> None:
    assert _parse({"hookSpecificOutput": {"updatedInput": updated}}).updated_input is None


def test_updated_input_is_read_only() -> None:
    out = _parse({"hookSpecificOutput": {"updatedInput": {"a": [1, {"b": [2, 3]}], "c": {}}}})
    updated = out.updated_input
    assert isinstance(updated, JsonObject)
    assert updated == {"a": (1, JsonObject({"b": (2, 3)})), "c": JsonObject({})}
    assert list(updated) == ["a", "c"]
    with pytest.raises(TypeError):
        updated["a"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        out.updated_input = None  # type: ignore[misc]


def test_deep_updated_input_is_frozen_all_the_way_down() -> None:
    depth = 600
    stdout = '{"hookSpecificOutput":{"updatedInput":' + '{"a":' * depth + "1" + "}" * depth
    stdout += "}}"
    value: Any = parse_hook_output(0, stdout, "").updated_input
    for _ in range(depth - 1):
        assert isinstance(value, JsonObject)
        value = value["a"]
    assert value == {"a": 1}


# --- totality ------------------------------------------------------------------------------------

_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.sampled_from(["approve", "block", "allow", "deny", "ask", "Stop", "PreToolUse"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(
            ["continue", "stopReason", "decision", "reason", "systemMessage",
             "hookSpecificOutput", "hookEventName", "permissionDecision",
             "permissionDecisionReason", "additionalContext", "updatedInput", "x"]
        ),
        inner,
        max_size=5,
    ),
    max_leaves=12,
)  # fmt: skip


@given(
    exit_code=st.one_of(st.none(), st.integers(min_value=-3, max_value=3)),
    stdout=st.one_of(st.text(), _JSONISH.map(json.dumps)),
    stderr=st.text(),
    expected=st.one_of(st.none(), st.sampled_from(["Stop", "PreToolUse"])),
)
def test_parsing_is_total(
    exit_code: int | None, stdout: str, stderr: str, expected: str | None
) -> None:
    out = parse_hook_output(exit_code, stdout, stderr, expected)
    assert out.exit_code == exit_code
    assert out.decision in (None, "approve", "allow", "block", "deny", "ask")
    if exit_code == 2:
        assert out.decision == "block"
    if exit_code != 0:
        # Nothing but the decision and its reason come from anything but stdout JSON.
        assert (out.continue_, out.hook_event_name, out.updated_input) == (None, None, None)
    if exit_code not in (0, 2):
        assert out == HookOutput(exit_code=exit_code, stdout=out.stdout, stderr=out.stderr)
