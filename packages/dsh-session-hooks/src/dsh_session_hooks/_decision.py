"""Appending the ``hook/*`` records, and the rule that turns a hook's output into the
durable ``hook/result`` fields (decision, exit code, stderr summary).

The rule lives here, once, next to the events it fills, so that the Claude and Codex
bridges cannot drift apart on what a ``hook/result`` means.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_STDERR_SUMMARY_MAX_CHARS",
    "append_hook_invoked",
    "append_hook_result",
    "hook_result_decision",
    "summarize_stderr",
]

from typing import Any, Final

from dsh_session_core import Event, Session
from dsh_session_core.jscompat import js_trim, utf16_len, utf16_prefix

from ._codec import HookOutput
from .errors import HookArgumentError
from .events import HookDialect

#: The reference default cap for ``stderrSummary`` (both bridges' config default). The
#: cap itself is the bridge's to own and is passed in explicitly.
DEFAULT_STDERR_SUMMARY_MAX_CHARS: Final = 500

_ELLIPSIS: Final = "\u2026"


def summarize_stderr(stderr: str, max_chars: int) -> str | None:
    """A hook's stderr as ``hook/result`` records it: trimmed, capped, ``None`` if blank.

    Trimming and length follow JavaScript (``trim()``, UTF-16 ``length``), as the
    reference does. Text longer than ``max_chars`` keeps its first ``max_chars`` units
    and gains ``…`` (U+2026); text of exactly ``max_chars`` is kept as is. A surrogate
    pair that straddles the cap is dropped whole rather than cut in half (the reference
    would keep a lone surrogate, which the log cannot store).

    :param stderr: the hook's captured stderr.
    :param max_chars: the cap, a positive integer (the bridge's configured value).
    :returns: the summary, or ``None`` when stderr is blank.
    :raises HookArgumentError: ``max_chars`` is not a positive integer.
    """
    _check_cap(max_chars)
    text = js_trim(stderr)
    if not text:
        return None
    if utf16_len(text) > max_chars:
        return utf16_prefix(text, max_chars) + _ELLIPSIS
    return text


def _check_cap(max_chars: int) -> None:
    # The reference leaves this to the bridges' config checks; a Python caller gets the
    # error before anything is appended instead of a silently odd summary (JS slices
    # with a negative end, or keeps only the ellipsis for 0). bool is excluded: it is an
    # int to Python but not a number to JS.
    if type(max_chars) is not int or max_chars < 1:
        raise HookArgumentError(
            argument="stderr_summary_max_chars", value=max_chars, requirement="a positive integer"
        )


def hook_result_decision(output: HookOutput) -> str:
    """The ``decision`` a ``hook/result`` records for ``output``.

    The hook's own decision as parsed, not normalized (``approve`` stays ``approve``);
    else ``stop`` when it asked to halt (``continue`` literally ``False``); else ``pass``.

    :param output: the decoded hook output.
    :returns: the decision string.
    """
    if output.decision is not None:
        return output.decision
    return "stop" if output.continue_ is False else "pass"


def append_hook_invoked(
    session: Session,
    *,
    turn: int,
    point: str,
    dialect: HookDialect,
    handler_id: str,
    matcher: str | None = None,
) -> Event:
    """Append a ``hook/invoked`` record to ``session``.

    Nothing else is checked (not the id's shape, not turn enclosure): the payload
    schema is, by the session.

    :param session: the session whose open turn the invocation lives in.
    :param turn: the open turn.
    :param point: the hook point, e.g. ``PreToolUse``.
    :param dialect: the bridge running the command, ``claude`` or ``codex``.
    :param handler_id: the id pairing this record with its ``hook/result``.
    :param matcher: the matcher group's pattern as configured; ``None`` omits the key
        (``''`` and ``'*'`` are written as given).
    :returns: the logged event (a :class:`~dsh_session_hooks.HookInvoked` when the
        session's registry knows the ``hooks`` plugin's types).
    :raises dsh_session_core.errors.SchemaError: a field has the wrong type, or the
        dialect is neither ``claude`` nor ``codex``.
    """
    data: dict[str, Any] = {
        "turn": turn,
        "point": point,
        "dialect": dialect,
        "handlerId": handler_id,
    }
    if matcher is not None:
        data["matcher"] = matcher  # last, where the reference appends it
    return session.append("hook/invoked", data)


def append_hook_result(
    session: Session,
    *,
    turn: int,
    point: str,
    handler_id: str,
    output: HookOutput,
    stderr_summary_max_chars: int,
    duration_ms: float,
) -> Event:
    """Append the ``hook/result`` paired with a ``hook/invoked`` (same ``handler_id``).

    ``decision`` follows :func:`hook_result_decision`; ``exitCode`` is written only when
    the hook exited (``output.exit_code`` is not ``None``); ``stderrSummary`` follows
    :func:`summarize_stderr` and is written only when stderr was not blank;
    ``durationMs`` is always written.

    :param session: the session whose open turn the invocation lives in.
    :param turn: the turn of the paired ``hook/invoked``.
    :param point: the hook point.
    :param handler_id: the id of the paired ``hook/invoked``.
    :param output: the decoded hook output (:func:`~dsh_session_hooks.parse_hook_output`).
    :param stderr_summary_max_chars: the stderr cap, a positive integer
        (:data:`DEFAULT_STDERR_SUMMARY_MAX_CHARS` is the reference default).
    :param duration_ms: the run's wall-clock duration, in milliseconds.
    :returns: the logged event (a :class:`~dsh_session_hooks.HookResult` when the
        session's registry knows the ``hooks`` plugin's types).
    :raises HookArgumentError: the cap is not a positive integer (nothing is appended).
    :raises dsh_session_core.errors.SchemaError: a field has the wrong type.
    :raises dsh_session_core.errors.NotJsonError: ``duration_ms`` is NaN or infinite.
    """
    summary = summarize_stderr(output.stderr, stderr_summary_max_chars)
    # Keys in the reference's append order; optional ones only when present.
    data: dict[str, Any] = {
        "turn": turn,
        "point": point,
        "handlerId": handler_id,
        "decision": hook_result_decision(output),
    }
    if output.exit_code is not None:
        data["exitCode"] = output.exit_code
    if summary is not None:
        data["stderrSummary"] = summary
    data["durationMs"] = duration_ms
    return session.append("hook/result", data)
