"""The runner (spec §4.7), against a scripted executor: no process is started. It frames
stdin, picks the timeout, passes env/cwd through only when given, decodes the outcome,
contains executor failures, and times the run with the injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from dsh_session_core import JsonObject
from dsh_session_hooks import (
    DEFAULT_HOOK_TIMEOUT_MS,
    CommandHook,
    HookOutput,
    HookProcessResult,
    HookRunRequest,
    RunHookResult,
    parse_hook_output,
    run_hook,
)


class ScriptedExecutor:
    """Answers every run with a fixed result (or exception), recording the requests."""

    def __init__(self, result: HookProcessResult | BaseException) -> None:
        self.result = result
        self.requests: list[HookRunRequest] = []

    async def run(self, request: HookRunRequest) -> HookProcessResult:
        self.requests.append(request)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def _clock(*readings: float) -> Iterator[float]:
    return iter(readings)


def _run(
    executor: ScriptedExecutor,
    hook: CommandHook | None = None,
    *,
    payload: object = None,
    trailing_newline: bool = True,
    readings: tuple[float, float] = (0.0, 0.0),
    **kw: object,
) -> RunHookResult:
    clock = _clock(*readings)
    return asyncio.run(
        run_hook(
            executor,
            hook or CommandHook(command="./hook.sh"),
            payload=payload if payload is not None else {"hook_event_name": "Stop"},
            trailing_newline=trailing_newline,
            default_timeout_ms=kw.pop("default_timeout_ms", DEFAULT_HOOK_TIMEOUT_MS),  # type: ignore[arg-type]
            now=lambda: next(clock),
            **kw,  # type: ignore[arg-type]
        )
    )


OK = HookProcessResult(exit_code=0, stdout="", stderr="")


def test_default_timeout_is_ten_minutes() -> None:
    assert DEFAULT_HOOK_TIMEOUT_MS == 600_000


def test_stdin_is_compact_json_with_the_dialects_newline() -> None:
    executor = ScriptedExecutor(OK)
    payload = {"tool_name": "Bash", "tool_input": {"command": "ls -a"}, "n": [1, 2.5], "é": None}
    _run(executor, payload=payload, trailing_newline=True)
    _run(executor, payload=payload, trailing_newline=False)
    compact = '{"tool_name":"Bash","tool_input":{"command":"ls -a"},"n":[1,2.5],"é":null}'
    assert [r.stdin for r in executor.requests] == [compact + "\n", compact]
    assert executor.requests[0].command == "./hook.sh"


def test_read_only_log_data_can_be_the_payload() -> None:
    executor = ScriptedExecutor(OK)
    _run(executor, payload=JsonObject({"a": (1, JsonObject({"b": "c"}))}), trailing_newline=False)
    assert executor.requests[0].stdin == '{"a":[1,{"b":"c"}]}'


def test_a_payload_json_cannot_carry_fails_before_running() -> None:
    executor = ScriptedExecutor(OK)
    with pytest.raises(TypeError):
        _run(executor, payload={"x": object()})
    assert executor.requests == []


def test_timeout_is_the_hooks_own_in_seconds_else_the_default() -> None:
    executor = ScriptedExecutor(OK)
    _run(executor, CommandHook(command="x", timeout_sec=5))
    _run(executor, CommandHook(command="x", timeout_sec=0.25))
    _run(executor, CommandHook(command="x"), default_timeout_ms=30_000)
    assert [r.timeout_ms for r in executor.requests] == [5000, 250, 30_000]


def test_env_and_cwd_pass_through_only_when_given() -> None:
    executor = ScriptedExecutor(OK)
    _run(executor)
    _run(executor, env={"CLAUDE_PROJECT_DIR": "/work"}, cwd="/work")
    bare, full = executor.requests
    assert (bare.env, bare.cwd) == (None, None)
    assert (full.env, full.cwd) == ({"CLAUDE_PROJECT_DIR": "/work"}, "/work")


def test_outcome_is_decoded_and_timed() -> None:
    executor = ScriptedExecutor(HookProcessResult(exit_code=2, stdout="", stderr="no\n"))
    result = _run(executor, readings=(100.0, 114.25))
    assert result.output == parse_hook_output(2, "", "no\n")
    assert result.output.decision == "block"
    assert result.duration_ms == 14.25


def test_expected_event_guards_the_specific_output() -> None:
    stdout = '{"hookSpecificOutput":{"hookEventName":"Stop","permissionDecision":"deny"}}'
    executor = ScriptedExecutor(HookProcessResult(exit_code=0, stdout=stdout, stderr=""))
    assert _run(executor, expected_event_name="PreToolUse").output.decision is None
    assert _run(executor, expected_event_name="Stop").output.decision == "deny"


def test_a_signal_death_has_no_exit_code() -> None:
    executor = ScriptedExecutor(HookProcessResult(exit_code=None, stdout="{}", stderr="killed"))
    result = _run(executor)
    assert result.output == HookOutput(exit_code=None, stdout="{}", stderr="killed")


def test_an_executor_failure_is_a_non_blocking_outcome() -> None:
    executor = ScriptedExecutor(OSError("spawn /bin/sh ENOENT"))
    result = _run(executor, readings=(5.0, 6.5))
    assert result.output == HookOutput(exit_code=None, stdout="", stderr="spawn /bin/sh ENOENT")
    assert result.output.decision is None
    assert result.duration_ms == 1.5


def test_cancellation_is_not_contained() -> None:
    executor = ScriptedExecutor(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        _run(executor)
