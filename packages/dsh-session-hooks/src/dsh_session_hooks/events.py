"""The ``hook/*`` event types: log-only provenance of the hook commands a Claude or Codex
bridge runs, one ``hook/invoked`` and one ``hook/result`` per command, paired by
``handlerId``.

Both are log-only: they carry no ``surfaceOp``/``sourceEventSeqs`` and never become LLM
messages. Payload fields are declared in the key order the reference *appends* them
(which, for ``hook/invoked``, is not the order its type declaration lists them: the
``matcher`` key comes last), so an appended event encodes to the reference's log line.
Absent optional keys are ``UNSET`` and omitted, never ``null``.

Append them with :func:`dsh_session_hooks.append_hook_invoked` and
:func:`dsh_session_hooks.append_hook_result`, which own the payload rules.
"""

from __future__ import annotations

__all__ = [
    "HookDialect",
    "HookInvoked",
    "HookInvokedData",
    "HookResult",
    "HookResultData",
]

from typing import Literal, TypeAlias

from msgspec import UNSET, Struct, UnsetType

from dsh_session_core import Event
from dsh_session_core.vocabulary import Number

#: The bridge that ran a hook. There is no ``native`` dialect: a native plugin at the
#: interception points is not a bridge and writes no ``hook/*`` records.
HookDialect: TypeAlias = Literal["claude", "codex"]


class _HookPayload(
    Struct, frozen=True, gc=False, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """Base of the ``hook/*`` payloads: immutable, camelCase on the wire, and strict about
    unknown keys (a payload with extra keys is kept verbatim as an opaque event)."""


class HookInvokedData(_HookPayload, frozen=True, kw_only=True):
    """The payload of ``hook/invoked``.

    :ivar turn: the open turn the invocation lives inside.
    :ivar point: the hook point (``PreToolUse``, ``Stop``...).
    :ivar dialect: the bridge that ran the command.
    :ivar handler_id: the id pairing this record with its ``hook/result``
        (bridges mint ``<dialect>:<point>:<counter>``).
    :ivar matcher: the matcher-group pattern that selected the command; ``UNSET`` when
        the group had none (an explicit ``''`` or ``'*'`` is kept as written).
    """

    turn: int
    point: str
    dialect: HookDialect
    handler_id: str
    matcher: str | UnsetType = UNSET


class HookInvoked(Event, tag="hook/invoked", frozen=True):
    """A hook command was invoked at a hook point — log-only provenance (like `compact/*`; NOT a
    surface type, carries no `surfaceOp`). `dialect` is the bridge that ran it
    (`claude`/`codex`), `point` the hook point (`PreToolUse`, `Stop`, …), `matcher` the
    matcher-group pattern that selected it (absent for match-all), `handlerId` a stable id
    for the command (so an invoked/result pair correlates). `turn` is the open turn the
    invocation lives inside.

    The first paragraph is the reference's catalog line, verbatim. The bridges in fact
    write a configured ``''`` or ``'*'`` matcher as is; ``matcher`` is absent only when
    the matcher group had none.
    """

    data: HookInvokedData


class HookResultData(_HookPayload, frozen=True, kw_only=True):
    """The payload of ``hook/result``.

    :ivar turn: the turn of the paired ``hook/invoked``.
    :ivar point: the hook point.
    :ivar handler_id: the id of the paired ``hook/invoked``.
    :ivar decision: the dialect-neutral outcome: the hook's own decision as parsed
        (``approve``/``allow``/``block``/``deny``/``ask``, not normalized), else
        ``stop`` or ``pass``; any string decodes.
    :ivar exit_code: the process exit code; ``UNSET`` when the hook never exited
        normally (it could not run, or died by a signal).
    :ivar stderr_summary: trimmed stderr, capped; ``UNSET`` when stderr was blank.
    :ivar duration_ms: wall-clock run time in milliseconds; may be fractional.
    """

    turn: int
    point: str
    handler_id: str
    decision: str
    exit_code: int | UnsetType = UNSET
    stderr_summary: str | UnsetType = UNSET
    duration_ms: Number


class HookResult(Event, tag="hook/result", frozen=True):
    """A hook command's outcome — log-only, paired with a prior `hook/invoked` (same `handlerId`).
    `decision` is the dialect-neutral outcome derived by `append_hook_result()` (which owns the
    rule): the hook's parsed decision (`approve`/`allow`/`block`/`deny`/`ask`), else
    `'stop'` when it asked to halt via `continue:false`, else `'pass'`. `exitCode` is the
    process exit (absent if it never ran), `stderrSummary` the trimmed stderr truncated to
    the bridge's configured cap (the block reason source on exit 2), `durationMs` the
    wall-clock runtime (audit timing; snapshot replay normalizes it). `turn` matches the
    `hook/invoked`.

    The first paragraph is the reference's catalog line, verbatim; here the rule is
    :func:`dsh_session_hooks.append_hook_result`.
    """

    data: HookResultData
