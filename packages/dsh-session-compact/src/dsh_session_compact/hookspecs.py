"""The hook specifications the ``compact`` plugin publishes.

The plugin adds them to a manager through core's historic ``add_hookspecs`` hook, so
they exist on every manager the ``compact`` plugin is registered on (by entry point or
by hand). Implement them in any plugin with ``dsh_session_core.hookimpl``::

    from dsh_session_core import hookimpl
    from dsh_session_compact import SummaryRequest, SummaryResult

    class MySummarizer:
        @hookimpl
        def compact_summarize(self, request: SummaryRequest) -> SummaryResult | None:
            reply = my_llm(request.system, request.prompt, model=request.model,
                           max_tokens=request.max_tokens)
            return SummaryResult(content=[{"type": "text", "text": reply}])

Nothing implements them by default: a compaction with no summarizer is refused before
anything is appended. :class:`~dsh_session_compact.ExtractiveSummarizer` is a
deterministic implementation to register when you want one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from dsh_session_core import PROJECT_NAME

if TYPE_CHECKING:
    from ._summarizer import SummaryRequest, SummaryResult

__all__ = ["compact_summarize"]

_spec = pluggy.HookspecMarker(PROJECT_NAME)

# --- summarization -----------------------------------------------------------------------


@_spec(firstresult=True)
def compact_summarize(request: SummaryRequest) -> SummaryResult | None:
    """Summarize the transcript of a surface range that is being compacted.

    Called inside the compaction, after ``compact/start`` was appended, unless the
    caller passed its own ``summarizer=``. Send ``request.system`` and
    ``request.messages`` to ``request.model`` with the cap ``request.max_tokens``, and
    return the model's output with how its stream finished; the compactor keeps the
    text blocks and fails the compaction on an error, abort or truncated finish, or
    when no text is left. Raising fails the compaction too: the lock is released with
    the error recorded, and the error reaches the caller.

    An implementation may instead return an awaitable resolving to the result; only the
    async entry points (``acompact_region``, ``acompact_if_needed``) await it, the
    synchronous ones refuse it.

    :param request: the transcript, the model, the cap and the cancellation token.
    :returns: the summary, or ``None`` to let another implementation answer.

    Stops at first non-None result.

    .. versionadded:: 0.1
    """
