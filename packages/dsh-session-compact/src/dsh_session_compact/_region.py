"""Compacting one surface range (spec §2.4, §3.4): the checks, then the five-step append
sequence inside the open turn.

1. ``compact/start {turn}`` takes the lock;
2. the summarizer runs (no events);
3. ``compact/summary`` records the provenance;
4. one ``user/message`` replaces the range (the only surface change), its
   ``sourceEventSeqs`` being ``[startSeq, summarySeq, ...shadowedSeqs]``;
5. ``compact/end {turn}`` releases the lock, last, so a crash anywhere before it
   leaves an orphan ``compact/start`` (inert: the replace never landed).

Every check runs before anything is appended. Once ``compact/start`` is logged, any
failure appends ``compact/end {turn, error}`` and re-raises, leaving the surface as it
was. The synchronous and asynchronous entry points share :class:`_Transaction`; they
differ only in how they call the summarizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import pluggy
from msgspec import Struct

from dsh_session_core import ReplaceOp, Session, is_tool_pairing_balanced
from dsh_session_core.vocabulary import TextBlock

from ._framing import frame_summary
from ._render import render_transcript
from ._scan import compaction_in_progress, open_turn
from ._summarizer import (
    Summarizer,
    SummaryRequest,
    accept_summary,
    call_async,
    call_sync,
    resolve_summarizer,
)
from ._tokens import TokenEstimator
from .errors import (
    CompactFailedError,
    CompactionInProgressError,
    CompactRangeError,
    NoOpenTurnError,
    SummarizationError,
    SummaryTooLargeError,
)
from .events import ShadowedRange

__all__ = ["CHECKPOINT_SOURCE", "CompactionResult", "acompact_region", "compact_region"]

#: The ``source`` of a checkpoint ``user/message``: how readers recognise one.
CHECKPOINT_SOURCE: Final[Mapping[str, str]] = MappingProxyType(
    {"kind": "plugin", "plugin": "compact"}
)


class CompactionResult(Struct, frozen=True, kw_only=True, rename="camel"):
    """A completed compaction. Encodes to the reference's ``CompactionResult`` JSON.

    :param start_seq: the seq of ``compact/start``.
    :param summary_seq: the seq of ``compact/summary``.
    :param end_seq: the seq of ``compact/end``.
    :param summary: the raw (unframed) summary.
    :param shadowed_range: the first and last shadowed nodes (a position span).
    :param shadowed_seqs: every shadowed surface seq, in surface order.
    :param shadowed_token_count: the estimated tokens of the shadowed content.
    """

    start_seq: int
    summary_seq: int
    end_seq: int
    summary: tuple[TextBlock, ...]
    shadowed_range: ShadowedRange
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int


def _checked_range(session: Session, start: int, end: int) -> tuple[tuple[int, ...], int]:
    """Run checks 1-7 of §3.4, in order; return the shadowed seqs and the open turn."""
    nodes = session.surface.seqs
    if start not in nodes:
        msg = f"compactRegion: start seq {start} not found in surface"
        raise CompactRangeError(msg, start=start, end=end, code="START_NOT_FOUND")
    if end not in nodes:
        msg = f"compactRegion: end seq {end} not found in surface"
        raise CompactRangeError(msg, start=start, end=end, code="END_NOT_FOUND")
    i, j = nodes.index(start), nodes.index(end)
    if i > j:
        msg = (
            f"compactRegion: start seq {start} (position {i}) is after end seq {end} "
            f"(position {j}) on the surface"
        )
        raise CompactRangeError(msg, start=start, end=end, code="REVERSED")
    events = session.events
    if not is_tool_pairing_balanced(nodes, events, start):
        msg = (
            f"compactRegion: start seq {start} is not a balanced boundary (would split a "
            f"step's tool-call/result pair)"
        )
        raise CompactRangeError(msg, start=start, end=end, code="START_UNBALANCED")
    after_end = nodes[j + 1] if j + 1 < len(nodes) else None
    if not is_tool_pairing_balanced(nodes, events, after_end):
        msg = (
            f"compactRegion: end seq {end} is not a balanced boundary (would split a step, "
            f"or the step is still open)"
        )
        raise CompactRangeError(msg, start=start, end=end, code="END_UNBALANCED")
    # The lock and the turn come after the boundary checks (spec §14.31).
    if compaction_in_progress(events):
        raise CompactionInProgressError
    turn = open_turn(events)
    if turn is None:
        raise NoOpenTurnError
    return nodes[i : j + 1], turn


class _Transaction:
    """One compaction between its checks and its last append."""

    __slots__ = (
        "end",
        "estimator",
        "max_tokens",
        "model",
        "session",
        "shadowed",
        "signal",
        "start",
        "start_seq",
        "turn",
    )

    def __init__(
        self,
        session: Session,
        start: int,
        end: int,
        *,
        model: str,
        max_tokens: int | None,
        estimator: TokenEstimator,
        signal: object,
    ) -> None:
        self.shadowed, self.turn = _checked_range(session, start, end)
        self.session = session
        self.start = start
        self.end = end
        self.model = model
        self.max_tokens = max_tokens
        self.estimator = estimator
        self.signal = signal
        self.start_seq = session.seq
        try:
            session.append("compact/start", {"turn": self.turn})
        except BaseException as exc:
            # A listener may raise after the event was logged: the lock is then held,
            # and must be released like after any later failure.
            if session.seq > self.start_seq:
                self.abort(exc)
            raise

    def request(self) -> SummaryRequest:
        """The summarization request (the model is checked before any call)."""
        if not self.model:
            msg = (
                "no model available for summarization: set "
                "BasicCompactConfig.summarizationModel or AgentOptions.model"
            )
            raise SummarizationError(msg, code="NO_MODEL")
        return SummaryRequest(
            transcript=render_transcript(self.session.events, self.shadowed),
            model=self.model,
            max_tokens=self.max_tokens,
            session_id=self.session.id,
            shadowed_seqs=self.shadowed,
            signal=self.signal,
        )

    def commit(self, answer: object, request: SummaryRequest) -> CompactionResult:
        """Check the summary, then append the summary, the replace and the end."""
        session = self.session
        summary, model = accept_summary(answer, request)
        events = session.events
        estimate = self.estimator.estimate_event_tokens
        shadowed_tokens = sum(estimate(events[seq]) for seq in self.shadowed)
        framed = frame_summary(summary)
        framed_tokens = self.estimator.estimate_content_tokens(framed)
        if framed_tokens >= shadowed_tokens:
            raise SummaryTooLargeError(framed_tokens=framed_tokens, shadowed_tokens=shadowed_tokens)
        self._check_unchanged()
        data: dict[str, object] = {
            "summary": [{"type": "text", "text": b.text} for b in summary],
            "shadowedRange": {"start": self.start, "end": self.end},
            "shadowedSeqs": list(self.shadowed),
            "shadowedTokenCount": shadowed_tokens,
            "model": model,
        }
        if self.max_tokens is not None:
            data["maxTokens"] = self.max_tokens
        summary_seq = session.append("compact/summary", data).seq
        session.append(
            "user/message",
            {"content": [{"type": "text", "text": b.text} for b in framed],
             "source": dict(CHECKPOINT_SOURCE)},
            surface_op=ReplaceOp(start=self.start, end=self.end),
            source_event_seqs=[self.start_seq, summary_seq, *self.shadowed],
        )
        end_seq = session.append("compact/end", {"turn": self.turn}).seq
        return CompactionResult(
            start_seq=self.start_seq,
            summary_seq=summary_seq,
            end_seq=end_seq,
            summary=summary,
            shadowed_range=ShadowedRange(start=self.start, end=self.end),
            shadowed_seqs=self.shadowed,
            shadowed_token_count=shadowed_tokens,
        )

    def _check_unchanged(self) -> None:
        # An async summarizer yields to other code, which may change the surface; the
        # range must still be the one summarized, or the summary would replace other
        # content (the reference's later versions check this too).
        nodes = self.session.surface.seqs
        if self.start in nodes:
            i = nodes.index(self.start)
            if nodes[i : i + len(self.shadowed)] == self.shadowed:
                return
        msg = "compaction: session surface changed during summarization"
        raise CompactFailedError(msg, code="SURFACE_CHANGED")

    def abort(self, exc: BaseException) -> None:
        """Release the lock with the error, unless it is already released (a listener
        that raised on our own ``compact/end`` must not get a second one)."""
        if not compaction_in_progress(self.session.events):
            return
        # Python-only interruptions (cancellation, Ctrl-C) often carry no message.
        error = str(exc) if isinstance(exc, Exception) else str(exc) or type(exc).__name__
        try:
            self.session.append("compact/end", {"turn": self.turn, "error": error})
        except Exception as inner:  # the original error is the one to report
            exc.add_note(f"appending compact/end {{error}} also failed: {inner!r}")


def compact_region(
    session: Session,
    start: int,
    end: int,
    *,
    model: str = "",
    max_tokens: int | None = None,
    summarizer: Summarizer | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    estimator: TokenEstimator | None = None,
    signal: object = None,
) -> CompactionResult:
    """Summarize the surface nodes ``start`` through ``end`` and replace them with the
    summary, as one checkpoint ``user/message``.

    ``start`` and ``end`` name surface nodes by seq; the range is positional (after an
    earlier replace, ``start`` may be numerically greater than ``end``).

    :param session: the session; a turn must be open.
    :param start: the first surface node to shadow.
    :param end: the last surface node to shadow (inclusive).
    :param model: the model that summarizes; ``""`` fails with ``NO_MODEL`` (after
        ``compact/start``, as in the reference).
    :param max_tokens: the generation cap, recorded in ``compact/summary`` when given.
    :param summarizer: called with the request; wins over the hook.
    :param plugin_manager: where the ``compact_summarize`` hook is looked up.
    :param estimator: token estimation (4 characters per token by default).
    :param signal: passed to the summarizer untouched, for cancellation.
    :returns: the seqs of the events appended, the summary, and the shadowed range.
    :raises NoSummarizerError: no summarizer is available (nothing appended).
    :raises CompactRangeError: the range is not on the surface, reversed, or cuts a tool
        call from its result (nothing appended).
    :raises CompactionInProgressError: the open turn holds the lock (nothing appended).
    :raises NoOpenTurnError: no turn is open (nothing appended).
    :raises SummarizationError: no model, or the summary is unusable (lock released).
    :raises SummaryTooLargeError: the framed summary does not shrink the range (lock
        released).
    :raises TypeError: the summarizer is async: use :func:`acompact_region`.
    """
    call = resolve_summarizer(summarizer, plugin_manager)
    tx = _Transaction(
        session, start, end, model=model, max_tokens=max_tokens,
        estimator=estimator if estimator is not None else TokenEstimator(), signal=signal,
    )
    try:
        request = tx.request()
        return tx.commit(call_sync(call, request), request)
    except BaseException as exc:
        tx.abort(exc)
        raise


async def acompact_region(
    session: Session,
    start: int,
    end: int,
    *,
    model: str = "",
    max_tokens: int | None = None,
    summarizer: Summarizer | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    estimator: TokenEstimator | None = None,
    signal: object = None,
) -> CompactionResult:
    """:func:`compact_region` for asyncio: awaits the summarizer when it is async.

    The checks and ``compact/start`` run before the first ``await``, so two concurrent
    compactions of one session cannot both take the lock. Cancelling the task releases
    the lock (``compact/end {error: "CancelledError"}``) and re-raises.
    """
    call = resolve_summarizer(summarizer, plugin_manager)
    tx = _Transaction(
        session, start, end, model=model, max_tokens=max_tokens,
        estimator=estimator if estimator is not None else TokenEstimator(), signal=signal,
    )
    try:
        request = tx.request()
        return tx.commit(await call_async(call, request), request)
    except BaseException as exc:
        tx.abort(exc)
        raise
