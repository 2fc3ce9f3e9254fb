"""Framing (spec §3.5): how a raw summary lands in the history.

The model reads the checkpoint as a user message; the preamble tells it what the
message is, and the tags delimit the summary so that a later compaction can recognize
and merge an earlier one. The strings are the reference's, byte for byte: the token
estimates of the framed summary (85 and 9 tokens at 4 characters per token) depend on
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from dsh_session_core.vocabulary import TextBlock

__all__ = ["CHECKPOINT_CLOSE", "CHECKPOINT_OPEN", "PREAMBLE", "frame_summary"]

#: What the checkpoint is, for the model reading it (300 characters).
PREAMBLE: Final = (
    "This is an automatically generated checkpoint condensing an earlier span of the "
    "conversation to free up context. Treat the captured context as established "
    "background and build on it without restating it. Continue the task directly from "
    "the messages that follow, without acknowledging this checkpoint."
)
CHECKPOINT_OPEN: Final = "<compacted-summary>"
CHECKPOINT_CLOSE: Final = "</compacted-summary>"


def frame_summary(summary: Iterable[TextBlock]) -> tuple[TextBlock, ...]:
    """The checkpoint's content: the preamble and opening tag, the summary blocks, and
    the closing tag, each its own text block."""
    return (
        TextBlock(text=f"{PREAMBLE}\n\n{CHECKPOINT_OPEN}"),
        *summary,
        TextBlock(text=CHECKPOINT_CLOSE),
    )
