"""Every error the compact plugin raises, as one hierarchy under core's base.

Errors carry the data a caller acts on (the requested range, a ``code``, the token
counts) as attributes. Messages quoting the reference keep its exact wording, since
tests on both sides match on them::

    DshSessionError (dsh_session_core.errors)
    └── CompactError
        ├── CompactConfigError (ValueError)        a BasicCompactConfig value is invalid
        ├── CompactRejectedError                   refused before anything was appended
        │   ├── CompactRangeError (ValueError)      start/end missing, reversed, unbalanced
        │   ├── CompactionInProgressError (RuntimeError)   the turn's lock is held
        │   ├── NoOpenTurnError (RuntimeError)     no turn is open to enclose the events
        │   └── NoSummarizerError (LookupError)    no summarizer given or registered
        ├── CompactFailedError                     failed after ``compact/start``; the
        │   │                                      ``compact/end {error}`` is logged
        │   ├── SummarizationError (RuntimeError)  no model, a failed or truncated
        │   │                                      stream, an empty summary
        │   └── SummaryTooLargeError (ValueError)  the framed summary does not shrink
        └── CompactionPressureError (RuntimeError) still above the threshold after
                                                   every attempt

A summarizer's own exception (a network error, say) is re-raised unchanged after the
lock is released: it is not wrapped in a :class:`CompactFailedError`.
"""

from __future__ import annotations

__all__ = [
    "CompactConfigError",
    "CompactError",
    "CompactFailedError",
    "CompactRangeError",
    "CompactRejectedError",
    "CompactionInProgressError",
    "CompactionPressureError",
    "NoOpenTurnError",
    "NoSummarizerError",
    "SummarizationError",
    "SummaryTooLargeError",
]

from typing import Literal

from dsh_session_core.errors import DshSessionError

RangeErrorCode = Literal[
    "START_NOT_FOUND", "END_NOT_FOUND", "REVERSED", "START_UNBALANCED", "END_UNBALANCED"
]


class CompactError(DshSessionError):
    """Base of every error raised by the compact plugin."""


class CompactConfigError(CompactError, ValueError):
    """A :class:`~dsh_session_compact.BasicCompactConfig` value breaks its rule.

    :ivar key: the offending key, as the reference spells it (``contextWindow``).
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class CompactRejectedError(CompactError):
    """A compaction was refused before anything was appended: the log is untouched.

    :ivar code: why, as a stable string (see the subclasses).
    """

    code: str = "REJECTED"


class CompactRangeError(CompactRejectedError, ValueError):
    """The requested range cannot be compacted.

    :ivar start: the requested first surface seq.
    :ivar end: the requested last surface seq.
    :ivar code: ``START_NOT_FOUND``, ``END_NOT_FOUND``, ``REVERSED``,
        ``START_UNBALANCED`` or ``END_UNBALANCED``.
    """

    def __init__(self, message: str, *, start: int, end: int, code: RangeErrorCode) -> None:
        super().__init__(message)
        self.start = start
        self.end = end
        self.code: RangeErrorCode = code


class CompactionInProgressError(CompactRejectedError, RuntimeError):
    """A ``compact/start`` of the open turn has no ``compact/end`` yet."""

    code = "IN_PROGRESS"

    def __init__(self) -> None:
        super().__init__("compaction already in progress")


class NoOpenTurnError(CompactRejectedError, RuntimeError):
    """No turn is open, so the ``compact/*`` events would sit outside any turn."""

    code = "NO_OPEN_TURN"

    def __init__(self) -> None:
        super().__init__(
            "compactRegion: no open turn — compaction events must be enclosed in a turn"
        )


class NoSummarizerError(CompactRejectedError, LookupError):
    """No ``summarizer=`` was given and no plugin implements ``compact_summarize``."""

    code = "NO_SUMMARIZER"


class CompactFailedError(CompactError):
    """A compaction failed after ``compact/start``; ``compact/end {turn, error}`` was
    appended with this message, and the surface is unchanged.

    :ivar code: a stable string naming the failure, or ``None``.
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class SummarizationError(CompactFailedError, RuntimeError):
    """The summarizer produced no usable summary.

    :ivar code: ``MAX_TOKENS`` (truncated at the cap), ``ABORTED``, the code the model
        reported with an error finish, ``NO_MODEL``, ``EMPTY_SUMMARY``, ``NO_SUMMARY``
        (every hook implementation declined), or ``None`` (an error finish without one).
    """


class SummaryTooLargeError(CompactFailedError, ValueError):
    """The framed summary is not smaller than the content it would shadow.

    :ivar framed_tokens: the estimate of the framed summary.
    :ivar shadowed_tokens: the estimate of the shadowed content.
    """

    def __init__(self, *, framed_tokens: int, shadowed_tokens: int) -> None:
        super().__init__(
            f"summary is not smaller than the shadowed content ({framed_tokens} estimated "
            f"framed tokens >= {shadowed_tokens})",
            code="SUMMARY_TOO_LARGE",
        )
        self.framed_tokens = framed_tokens
        self.shadowed_tokens = shadowed_tokens


class CompactionPressureError(CompactError, RuntimeError):
    """Every allowed compaction ran, and the pressure is still at or above the threshold.

    :ivar attempts: how many compactions were allowed (``compactionRetries + 1``).
    :ivar pressure: the last estimate.
    :ivar threshold: ``floor(contextWindow * thresholdRatio)``.
    """

    def __init__(self, *, attempts: int, pressure: int, threshold: int) -> None:
        super().__init__(
            f"compaction still above threshold after {attempts} compaction attempts "
            f"({pressure} estimated tokens >= threshold {threshold})"
        )
        self.attempts = attempts
        self.pressure = pressure
        self.threshold = threshold
