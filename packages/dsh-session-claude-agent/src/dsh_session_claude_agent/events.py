"""The plugin's log-only event types: what of a Claude Agent SDK transcript entry the
typed events do not hold, and the SDK's session summary.

``claude-agent/entry`` holds one transcript entry as the SDK appended it, less the
values its typed events (``user/message``, ``assistant/message``, ``tool/result``, which
follow it) hold: the texts, thinking, signatures and tool inputs, each left as ``null``
in its place (:mod:`._split`). ``moved`` says how many; an entry without it is whole
(no typed event holds any of it). ``claude-agent/summary`` holds the SDK's folded
summary of a main transcript after an append (``fold_session_summary``'s ``data``,
verbatim), which the ``claude-agent/sessions`` projection keeps as the session's summary
row.
"""

from __future__ import annotations

__all__ = ["ClaudeEntry", "ClaudeEntryData", "ClaudeSummary", "ClaudeSummaryData"]

from typing import Any

from msgspec import Struct

from dsh_session_core import Event


class ClaudeEntryData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True,
    omit_defaults=True, gc=False
):
    """The payload of ``claude-agent/entry``: ``{"entry": <the entry, its moved values
    null>, "moved": <how many>}``; ``moved`` absent: the entry is whole."""

    entry: Any
    moved: int | None = None


class ClaudeEntry(Event, tag="claude-agent/entry", frozen=True):
    """One Claude Agent SDK transcript entry (a line of its JSONL transcript): what the
    typed events following it do not hold, rebuilt with them, byte for byte, by
    ``DshSessionStore.load``. Log-only: the conversation is derived from the typed
    events."""

    data: ClaudeEntryData


class ClaudeSummaryData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``claude-agent/summary``: the SDK's summary ``data``."""

    data: dict[str, Any]


class ClaudeSummary(Event, tag="claude-agent/summary", frozen=True):
    """The SDK's summary of a main transcript as its append left it (the SDK's
    ``fold_session_summary``, persisted verbatim): the session's listing row, read by
    ``list_session_summaries`` and ``list_sessions`` without opening the log. Log-only."""

    data: ClaudeSummaryData
