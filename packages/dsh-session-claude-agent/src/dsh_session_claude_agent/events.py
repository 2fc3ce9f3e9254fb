"""The plugin's log-only event types: what of a Claude Agent SDK transcript entry the
typed events do not hold, and the SDK's session summary.

``claude-agent/entries`` holds the transcript entries of one turn as the SDK appended
them, less the values the turn's typed events (``user/message``, ``assistant/message``,
``tool/result``, which follow it) hold: the texts, thinking, signatures and tool inputs,
each left as ``null`` in its place (:mod:`._split`). ``whole`` names the entries kept
whole (no typed event holds any of them). ``claude-agent/summary`` holds the SDK's folded
summary of a main transcript after an append (``fold_session_summary``'s ``data``,
verbatim), which the ``claude-agent/sessions`` projection keeps as the session's summary
row.
"""

from __future__ import annotations

__all__ = ["ClaudeEntries", "ClaudeEntriesData", "ClaudeSummary", "ClaudeSummaryData"]

from typing import Any

from msgspec import Struct

from dsh_session_core import Event


class ClaudeEntriesData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True,
    omit_defaults=True, gc=False
):
    """The payload of ``claude-agent/entries``: ``{"entries": [<each entry, its moved
    values null>...], "whole": [<the index of each entry kept whole>...]}``."""

    entries: Any
    whole: tuple[int, ...] = ()


class ClaudeEntries(Event, tag="claude-agent/entries", frozen=True):
    """The Claude Agent SDK transcript entries of one turn (lines of its JSONL
    transcript): what the typed events following it in the turn do not hold, rebuilt
    with them, each as it was appended, by ``DshSessionStore.load``. Log-only: the
    conversation is derived from the typed events."""

    data: ClaudeEntriesData


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
