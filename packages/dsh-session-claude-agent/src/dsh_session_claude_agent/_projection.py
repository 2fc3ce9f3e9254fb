"""The sessions' listing as a projection (``claude-agent/sessions``): each session's
last append time as its summary row, and a main transcript's SDK summary as its one row,
kept by the store beside the log.

Each ``claude-agent/entries`` puts the summary row: ``mtime``, the time the store
stamped on the event (epoch milliseconds, the store's clock), so the last append's
(every append writes one). ``claude-agent/summary`` (written by an append that changed
the SDK's fold) puts the row ``summary``: the SDK's ``data`` verbatim. So listing a
project's sessions reads their summary rows (one call for all of them) and, for the
SDK's summaries, one row each: never a log.
"""

from __future__ import annotations

__all__ = ["SESSIONS", "SUMMARY_KEY", "LastAppend", "SummaryRow"]

from collections.abc import Iterator
from typing import Any

from msgspec import Struct

from dsh_session_core import Event
from dsh_session_core.projections import Change, Projection, Put, Summary

from .events import ClaudeEntries, ClaudeSummary

#: The key of the row holding the SDK's summary of a main transcript.
SUMMARY_KEY = "summary"


class LastAppend(Struct, array_like=True, frozen=True, gc=False):
    """A session's summary row: when its last append was stored (epoch ms)."""

    mtime: int


class SummaryRow(Struct, array_like=True, frozen=True, gc=False):
    """A main transcript's SDK summary ``data``, as its last append that changed it
    folded it."""

    data: dict[str, Any]


def _fold(event: Event) -> Iterator[Change]:
    cls = event.__class__
    if cls is ClaudeEntries:
        yield Summary(LastAppend(int(event.time)))
    elif cls is ClaudeSummary:
        yield Put(SUMMARY_KEY, SummaryRow(event.data.data))


#: The projection: the last append's time, and the SDK's summary.
SESSIONS = Projection(
    "claude-agent/sessions", 1, frozenset({"claude-agent/entries", "claude-agent/summary"}),
    SummaryRow, _fold, summary=LastAppend,
    doc="the Claude Agent SDK's session listing: last append time and SDK summary")
