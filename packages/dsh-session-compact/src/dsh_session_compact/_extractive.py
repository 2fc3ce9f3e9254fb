"""A deterministic summarizer for tests, demos and offline use: no model, no network.

It keeps the first line of each transcript entry, truncated, as a bullet list. That is
a poor summary, but a stable one, and it is smaller than the content it replaces as
soon as the shadowed entries have more than one line or more than ``max_line_chars``
characters (the checkpoint's framing costs about 94 tokens on top, so a range of a few
short messages still does not shrink, and compaction refuses it).

It is never the default: a user opts in by passing it as ``summarizer=`` or by
registering it as a plugin (``pm.register(ExtractiveSummarizer())``), which makes it
implement the ``compact_summarize`` hook.
"""

from __future__ import annotations

from dsh_session_core import hookimpl
from dsh_session_core.vocabulary import TextBlock

from ._summarizer import SummaryRequest, SummaryResult

__all__ = ["ExtractiveSummarizer"]


class ExtractiveSummarizer:
    """Summarizes a transcript by the first line of each entry.

    Use it as a summarizer (it is callable) or register it as a plugin.

    :param max_line_chars: longer lines are cut to this many characters, ending in
        ``…``.
    :param model: the model name to record in ``compact/summary``; by default the
        requested model.
    :raises ValueError: ``max_line_chars`` is not a positive integer.
    """

    __slots__ = ("max_line_chars", "model")

    def __init__(self, *, max_line_chars: int = 80, model: str | None = None) -> None:
        if isinstance(max_line_chars, bool) or not isinstance(max_line_chars, int) or (
            max_line_chars < 1
        ):
            msg = f"max_line_chars must be a positive integer, got {max_line_chars!r}"
            raise ValueError(msg)
        self.max_line_chars = max_line_chars
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_line_chars={self.max_line_chars}, model={self.model!r})"

    def summarize(self, transcript: str) -> str:
        """The summary text of a transcript (``""`` when it has no text)."""
        limit = self.max_line_chars
        lines: list[str] = []
        # Entries are separated by blank lines; a message's own paragraphs count as
        # entries too, which only makes the summary a little longer.
        for entry in transcript.split("\n\n"):
            first = entry.strip().split("\n", 1)[0].rstrip()
            if not first:
                continue
            if len(first) > limit:
                first = first[: limit - 1] + "…"
            lines.append(f"- {first}")
        return "\n".join(lines)

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        """Summarize the request's transcript."""
        text = self.summarize(request.transcript)
        # No text gives no block, which compaction reports as an empty summary.
        content = [TextBlock(text=text)] if text else []
        return SummaryResult(content=content, model=self.model)

    @hookimpl
    def compact_summarize(self, request: SummaryRequest) -> SummaryResult:
        """The ``compact_summarize`` hook: the same as calling the summarizer."""
        return self(request)
