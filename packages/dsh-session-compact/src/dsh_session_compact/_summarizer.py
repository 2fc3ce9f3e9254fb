"""The summarizer seam (spec §3.6): what a summarizer is asked, what it answers, and how
the answer is checked before it may replace history.

A summarizer is any callable taking a :class:`SummaryRequest` and returning a
:class:`SummaryResult` (or an awaitable of one, for the async entry points). It is
found in this order: the ``summarizer=`` argument of the call, the one the
:class:`~dsh_session_compact.Compactor` was built with, then the ``compact_summarize``
hook of the plugin manager. The compactor owns everything around the model call:
the model choice, the prompt, and the acceptance rules below, so a summarizer is a
thin adapter over an LLM client.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import pluggy
from msgspec import UNSET

from dsh_session_core import Message
from dsh_session_core.jscompat import js_trim
from dsh_session_core.vocabulary import (
    AbortedFinish,
    ContentBlock,
    ErrorFinish,
    FinishReason,
    MaxTokensFinish,
    TextBlock,
)

from ._blocks import field, kind_of
from .errors import NoSummarizerError, SummarizationError

__all__ = [
    "SUMMARIZATION_SYSTEM_PROMPT",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "accept_summary",
    "call_async",
    "call_sync",
    "resolve_summarizer",
    "summary_prompt",
]

#: The system prompt of a summarization call.
SUMMARIZATION_SYSTEM_PROMPT: Final = """\
You are a compaction engine. You are given the transcript of an earlier span of a \
conversation between a user and an AI assistant, and you write the checkpoint that \
replaces that span in the assistant's context. Reply with EXACTLY these Markdown \
sections, in this order, and nothing else:

## Primary Request and Intent
## Key Technical Concepts
## Files and Code
## Errors and Fixes
## Pending Tasks
## Current Work
## Next Step
## Critical Context

Write (none) under a section that has nothing to report.

Rules:
- Preserve exact file paths, commands, identifiers, values and error messages verbatim.
- Keep the user's feedback, corrections and explicit requests.
- Do not mention compaction, this instruction, or that this is a summary.
- If the transcript holds an earlier <compacted-summary> block, merge its content into \
your sections instead of copying the block."""


def summary_prompt(transcript: str) -> str:
    """The user message of a summarization call: the instruction around the transcript."""
    return f"Summarize this conversation history:\n\n{transcript}\n\nSummary:"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """What a summarizer is asked to do. Send :attr:`system` and :attr:`messages` to
    :attr:`model` with a generation cap of :attr:`max_tokens`.

    :param transcript: the rendered transcript of the shadowed surface nodes.
    :param model: the model to call; never empty (the compactor checks first).
    :param max_tokens: the generation cap, or ``None`` for none.
    :param session_id: the session being compacted.
    :param shadowed_seqs: the surface seqs being summarized, in surface order.
    :param signal: the caller's cancellation token, passed through untouched; a
        summarizer that makes a network call should honour it.
    """

    transcript: str
    model: str
    max_tokens: int | None
    session_id: str
    shadowed_seqs: tuple[int, ...]
    signal: Any = None
    system: str = SUMMARIZATION_SYSTEM_PROMPT

    @property
    def prompt(self) -> str:
        """The text of the one user message: :func:`summary_prompt` of the transcript."""
        return summary_prompt(self.transcript)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The request's messages: one user message holding :attr:`prompt`."""
        return (Message(role="user", content=(TextBlock(text=self.prompt),)),)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    """What a summarizer answers: the model's output, as the model finished it.

    :param content: the output blocks. Only ``text`` blocks are kept; reasoning and
        tool calls are dropped.
    :param finish: how the stream finished; ``None`` means it stopped normally. An
        error, an abort or a truncation at the token cap fails the compaction.
    :param model: the model that actually wrote it, when it differs from the one asked.
    """

    content: Sequence[ContentBlock | Mapping[str, Any]]
    finish: FinishReason | None = None
    model: str | None = None


#: A summarizer: sync, or async for the ``acompact_*`` entry points.
Summarizer: TypeAlias = Callable[[SummaryRequest], "SummaryResult | Awaitable[SummaryResult]"]

def accept_summary(
    result: object, request: SummaryRequest
) -> tuple[tuple[TextBlock, ...], str]:
    """Check a summarizer's answer and keep what may land in the history.

    :returns: the summary's text blocks, and the model that wrote them.
    :raises SummarizationError: the stream failed, was aborted or truncated, every
        implementation declined, or no text block holds non-blank text.
    :raises TypeError: the summarizer answered something else than a result.
    """
    if result is None:
        msg = "no compact_summarize implementation produced a summary (all returned None)"
        raise SummarizationError(msg, code="NO_SUMMARY")
    if not isinstance(result, SummaryResult):
        msg = f"a summarizer must return a SummaryResult, got {type(result).__name__}"
        raise TypeError(msg)
    finish = result.finish
    if isinstance(finish, ErrorFinish):
        code = None if finish.code is UNSET else finish.code
        raise SummarizationError(finish.message, code=code)
    if isinstance(finish, AbortedFinish):
        msg = "summarization stream aborted"
        raise SummarizationError(msg, code="ABORTED")
    if isinstance(finish, MaxTokensFinish):
        msg = "summarization truncated at the token cap (incomplete checkpoint)"
        raise SummarizationError(msg, code="MAX_TOKENS")
    summary = tuple(
        TextBlock(text=text)
        for block in result.content
        if kind_of(block) == "text" and isinstance(text := field(block, "text"), str)
    )
    if not any(js_trim(block.text) for block in summary):
        msg = "summarization produced no text summary content"
        raise SummarizationError(msg, code="EMPTY_SUMMARY")
    return summary, result.model or request.model


def _call_hook(caller: pluggy.HookCaller, request: SummaryRequest) -> Any:
    # The hook is firstresult: pluggy returns the first non-None answer (or None).
    return caller(request=request)


def resolve_summarizer(
    summarizer: Summarizer | None, plugin_manager: pluggy.PluginManager | None
) -> Summarizer:
    """The summarizer to call: ``summarizer`` if given, else the ``compact_summarize``
    hook of ``plugin_manager``.

    :raises NoSummarizerError: neither is available (checked before anything is
        appended, so the log stays untouched).
    """
    if summarizer is not None:
        return summarizer
    if plugin_manager is not None:
        caller: pluggy.HookCaller | None = getattr(plugin_manager.hook, "compact_summarize", None)
        if caller is not None and caller.get_hookimpls():
            if caller.spec is None:
                msg = (
                    "compact_summarize is implemented but its hookspec was never added: "
                    "register the 'compact' plugin (dsh_session_compact.plugin) on this "
                    "plugin manager"
                )
                raise NoSummarizerError(msg)
            return functools.partial(_call_hook, caller)
    msg = (
        "no summarizer: pass summarizer=..., or register a plugin implementing "
        "compact_summarize (such as dsh_session_compact.ExtractiveSummarizer()) on the "
        "plugin manager given to the compactor"
    )
    raise NoSummarizerError(msg)


def call_sync(summarizer: Summarizer, request: SummaryRequest) -> object:
    """Call a summarizer from the synchronous API, refusing an async answer."""
    result = summarizer(request)
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()  # never awaited: close it so Python does not warn
        msg = (
            "the summarizer returned an awaitable; use the async API "
            "(acompact_region, acompact_if_needed) with an async summarizer"
        )
        raise TypeError(msg)
    return result


async def call_async(summarizer: Summarizer, request: SummaryRequest) -> object:
    """Call a summarizer from the async API, awaiting its answer when it is awaitable."""
    result = summarizer(request)
    if inspect.isawaitable(result):
        return await result
    return result
