"""Running one command hook through an executor the bridge supplies, and decoding what
it printed.

The process itself (shell, credential scrub, process group, timeout) is the executor's
business; this module builds the request (stdin framing, timeout), contains executor
failures, times the run, and decodes the outcome with
:func:`~dsh_session_hooks.parse_hook_output`. There is no abort signal: cancelling the
task awaiting :func:`run_hook` cancels the executor's ``run`` (``CancelledError`` is not
contained, so the caller's cancellation wins).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_HOOK_TIMEOUT_MS",
    "CommandHook",
    "HookExecutor",
    "HookProcessResult",
    "HookRunRequest",
    "RunHookResult",
    "run_hook",
]

import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import msgspec
from msgspec import Struct

from dsh_session_core.vocabulary import Number

from ._codec import HookOutput, parse_hook_output

#: The reference default per-hook timeout (10 minutes), the one Claude Code and Codex
#: apply to a hook whose config sets none. A bridge's default is its own to pass in.
DEFAULT_HOOK_TIMEOUT_MS: Final = 600_000



def _enc_hook(obj: object) -> object:
    # Read-only JSON taken from the log (JsonObject) is a Mapping: encode its items.
    if isinstance(obj, Mapping):
        return dict(obj)
    msg = f"{type(obj).__name__} is not a JSON value"
    raise TypeError(msg)


_encode_json = msgspec.json.Encoder(enc_hook=_enc_hook).encode


class CommandHook(Struct, frozen=True, kw_only=True):
    """One configured command hook (``{type: "command", command, timeout?}`` in both
    dialects' configs).

    :ivar command: the shell command line.
    :ivar timeout_sec: the hook's own timeout in seconds (the config's unit), or
        ``None`` for the bridge's default.
    """

    command: str
    timeout_sec: Number | None = None


class HookRunRequest(Struct, frozen=True, kw_only=True):
    """What the executor is asked to run.

    :ivar command: the shell command line.
    :ivar timeout_ms: kill the process after this many milliseconds.
    :ivar stdin: the text to write to the process's stdin.
    :ivar cwd: the working directory, or ``None`` for the executor's default.
    :ivar env: extra environment variables, or ``None``.
    """

    command: str
    timeout_ms: Number
    stdin: str
    cwd: str | None = None
    env: Mapping[str, str] | None = None


class HookProcessResult(Struct, frozen=True, kw_only=True):
    """What the executor reports of a finished process.

    :ivar exit_code: the exit code, or ``None`` when the process died by a signal
        (``subprocess`` reports a signal death as a negative code: map it to ``None``).
    :ivar stdout: the captured stdout.
    :ivar stderr: the captured stderr.
    """

    exit_code: int | None
    stdout: str
    stderr: str


class HookExecutor(Protocol):
    """Runs a hook's process; the bridge supplies one (a shell service, or a fake)."""

    async def run(self, request: HookRunRequest) -> HookProcessResult:
        """Run ``request`` to completion.

        :param request: the command, its stdin, timeout, cwd and env.
        :returns: the exit code and captured output.
        :raises Exception: only when the process could not be run at all (an unusable
            cwd, no shell): :func:`run_hook` turns it into a non-blocking outcome.
        """
        ...


class RunHookResult(Struct, frozen=True, kw_only=True):
    """One hook run: its decoded output and how long it took.

    :ivar output: the decoded output.
    :ivar duration_ms: wall-clock duration in milliseconds, for ``hook/result``.
    """

    output: HookOutput
    duration_ms: float


def _monotonic_ms() -> float:
    return time.perf_counter_ns() / 1_000_000


async def run_hook(
    executor: HookExecutor,
    hook: CommandHook,
    *,
    payload: Any,
    trailing_newline: bool,
    default_timeout_ms: Number,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    expected_event_name: str | None = None,
    now: Callable[[], float] = _monotonic_ms,
) -> RunHookResult:
    """Run ``hook`` with ``payload`` as JSON on stdin and decode its outcome.

    Never raises for a hook that cannot run: an executor failure becomes an output with
    no exit code and the error's message as stderr, so the calling turn proceeds.

    :param executor: runs the process.
    :param hook: the configured command; its ``timeout_sec`` overrides the default.
    :param payload: the JSON value written to stdin, compact.
    :param trailing_newline: end stdin with a newline (Claude Code does, Codex not).
    :param default_timeout_ms: the timeout when the hook sets none (the bridge's
        config; :data:`DEFAULT_HOOK_TIMEOUT_MS` is the reference default).
    :param env: extra environment variables for the process.
    :param cwd: the process's working directory.
    :param expected_event_name: the firing hook point, guarding ``hookSpecificOutput``
        (see :func:`~dsh_session_hooks.parse_hook_output`).
    :param now: a millisecond clock for the duration; monotonic by default.
    :returns: the decoded output and the run's duration.
    :raises TypeError: ``payload`` holds a value JSON cannot encode (raised before
        anything runs).
    """
    started = now()
    timeout_ms = hook.timeout_sec * 1000 if hook.timeout_sec is not None else default_timeout_ms
    stdin = _encode_json(payload).decode() + ("\n" if trailing_newline else "")
    request = HookRunRequest(
        command=hook.command, timeout_ms=timeout_ms, stdin=stdin, cwd=cwd, env=env
    )
    try:
        result = await executor.run(request)
    except Exception as exc:  # an infrastructure fault: the hook could not run
        output = parse_hook_output(None, "", str(exc))
    else:
        output = parse_hook_output(
            result.exit_code, result.stdout, result.stderr, expected_event_name
        )
    return RunHookResult(output=output, duration_ms=now() - started)
