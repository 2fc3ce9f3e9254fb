"""The sessions' listing as a projection (``claude-agent/sessions``): each main
transcript's summary row, kept by the store beside the log.

``claude-agent/summary`` (the last event of each append to a main transcript) puts the
row: the SDK's summary ``data`` verbatim, and ``mtime``, the time the store stamped on
that event (epoch milliseconds, the store's clock: what the append wrote, the same
clock for ``list_sessions`` and ``list_session_summaries``). So listing a project's
sessions reads their summary rows, never their logs.
"""

from __future__ import annotations

__all__ = ["SESSIONS", "SessionRow"]

from collections.abc import Iterator
from typing import Any

from msgspec import Struct

from dsh_session_core import Event
from dsh_session_core.projections import Change, Projection, Summary

from .events import ClaudeSummary


class SessionRow(Struct, array_like=True, frozen=True, gc=False):
    """A main transcript's listing: when its last append was stored, and the SDK's
    summary ``data`` as that append folded it."""

    mtime: int
    data: dict[str, Any]


def _fold(event: Event) -> Iterator[Change]:
    if event.__class__ is ClaudeSummary:
        yield Summary(SessionRow(int(event.time), event.data.data))


#: The projection: no rows, one summary row a main transcript.
SESSIONS = Projection(
    "claude-agent/sessions", 1, frozenset({"claude-agent/summary"}), SessionRow, _fold,
    summary=SessionRow,
    doc="the Claude Agent SDK's session listing: each main transcript's summary row")
