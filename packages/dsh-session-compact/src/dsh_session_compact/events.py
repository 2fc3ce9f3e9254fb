"""The ``compact/*`` event types: the lock and the provenance of a compaction.

All three are log-only: they carry no surface op and produce no message. The surface
change itself is a core ``user/message`` with a replace op, appended between
``compact/summary`` and ``compact/end`` (see :func:`dsh_session_compact.compact_region`).

Payload fields are declared in the reference's key order, so encoding an event gives
its log line byte for byte; optional fields are omitted when unset.
"""

from __future__ import annotations

__all__ = [
    "CompactEnd",
    "CompactEndData",
    "CompactStart",
    "CompactStartData",
    "CompactSummary",
    "CompactSummaryData",
    "ShadowedRange",
]

from msgspec import UNSET, Struct, UnsetType

from dsh_session_core import Event
from dsh_session_core.vocabulary import ContentBlock


class _Payload(
    Struct, frozen=True, gc=False, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """Base of the payloads: immutable, camelCase on the wire, strict about unknown keys
    (a payload with extra keys is kept verbatim as an opaque event instead)."""


class ShadowedRange(_Payload, kw_only=True, frozen=True):
    """The first and last shadowed surface nodes, by seq.

    A surface-*position* span, not a numeric interval: after an earlier replace put a
    high-seq node at the head, ``start`` may be greater than ``end``.
    """

    start: int
    end: int


class CompactStartData(_Payload, kw_only=True, frozen=True):
    """``compact/start``: the open turn that holds the lock."""

    turn: int


class CompactSummaryData(_Payload, kw_only=True, frozen=True):
    """``compact/summary``: what was summarized, by which model, into what."""

    #: The raw (unframed) summary the model wrote.
    summary: tuple[ContentBlock, ...]
    shadowed_range: ShadowedRange
    #: Every shadowed surface seq, in surface order.
    shadowed_seqs: tuple[int, ...]
    #: The estimated tokens of the shadowed content.
    shadowed_token_count: int
    model: str
    #: The generation cap of the summarization call, when one applied.
    max_tokens: int | UnsetType = UNSET


class CompactEndData(_Payload, kw_only=True, frozen=True):
    """``compact/end``: the turn releasing the lock, and the error if the compaction
    failed."""

    turn: int
    error: str | UnsetType = UNSET


class CompactStart(Event, tag="compact/start", frozen=True):
    """Marks the start of a compaction — log-only, holds the lock until `compact/end`.

    Appended before summarization, so a crash mid-compaction leaves an orphan
    ``compact/start``, which is inert: the lock is scoped to its turn.
    """

    data: CompactStartData


class CompactSummary(Event, tag="compact/summary", frozen=True):
    """Provenance record of a completed summarization — log-only, no surfaceOp. The
    summary content is in `data.summary`; the actual surface replacement is performed
    by a subsequent `user/message` event that shadows the compacted range.

    That ``user/message`` lists this event's seq in its ``sourceEventSeqs``.
    """

    data: CompactSummaryData


class CompactEnd(Event, tag="compact/end", frozen=True):
    """Marks the end of a compaction — log-only, releases the lock. `error` set if
    summarization failed.

    Appended last, after the replace, so that a log holding it holds the whole
    compaction (or its failure).
    """

    data: CompactEndData
