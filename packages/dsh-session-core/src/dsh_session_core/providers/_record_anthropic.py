"""Recording an Anthropic Messages response into the log.

This module owns :func:`record_anthropic` / :func:`arecord_anthropic`: a ``Message``
(``client.messages.create(...)``), or its stream events (``create(..., stream=True)``, or
the ``client.messages.stream(...)`` helper's stream, whose extra convenience events,
``text``, ``thinking``, ``input_json``..., are ignored: the raw events carry the same
deltas). It writes what :mod:`._recording` describes (chunks, message, tool calls)
with the assembler that module owns.

Anthropic's blocks map to the vocabulary's: ``text`` to a text block, ``thinking`` to a
reasoning block (its text), ``tool_use`` to a tool-call block whose ``arguments`` is
the input's JSON text (as streamed, or the non-streamed ``input`` encoded). A thinking
block's ``signature`` and a ``redacted_thinking`` block's ``data`` are kept on the
reasoning block (``signature``, ``redacted_data``): :func:`to_anthropic` sends them back,
as Anthropic requires of the thinking before a tool call when the loop goes on with
thinking enabled. ``provider_data=False`` drops a signature and skips a redacted block
(docs/decisions.md, "Provider data by default"). Every other block kind (a server tool's
use and result...) has no place in the log, and is listed in
:attr:`RecordedResponse.skipped`.
"""

from __future__ import annotations

__all__ = ["arecord_anthropic", "record_anthropic"]

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ..vocabulary import (
    FinishReason,
    MaxTokensFinish,
    StopFinish,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolCallsFinish,
)
from ._recording import (
    Recorded,
    RecordedResponse,
    _adrain,
    _Assembler,
    _drain,
    _error,
    _get,
    _reasoning,
    _record_whole,
    _usage,
)

if TYPE_CHECKING:
    from .._model.step import Step

#: ``stop_reason``, as the vocabulary's finish reasons. ``pause_turn`` (a server tool's
#: long turn, paused) is a stop: the harness continues it with a new request.
_STOP: Final[Mapping[str, FinishReason]] = {
    "end_turn": StopFinish(),
    "stop_sequence": StopFinish(),
    "pause_turn": StopFinish(),
    "tool_use": ToolCallsFinish(),
    "max_tokens": MaxTokensFinish(),
    "model_context_window_exceeded": MaxTokensFinish(),
}

#: The counts of a ``usage`` object that a stream's ``message_delta`` may update.
_COUNTS: Final = ("input_tokens", "output_tokens", "cache_read_input_tokens",
                  "cache_creation_input_tokens")


def _finish(reason: Any) -> FinishReason | None:
    if not isinstance(reason, str):
        return None
    known = _STOP.get(reason)
    if known is not None:
        return known
    if reason == "refusal":
        return _error("the model refused to answer", "refusal")
    return _error(f"stop_reason {reason!r}", reason)


def _anthropic_usage(counts: Mapping[str, Any]) -> TokenUsage | None:
    # Anthropic's input_tokens is the uncached input already: nothing to take out.
    return _usage(counts.get("input_tokens"), counts.get("output_tokens"),
                  counts.get("cache_read_input_tokens"),
                  counts.get("cache_creation_input_tokens"), cached_in_input=False)


def _counts(usage: Any, into: dict[str, Any]) -> None:
    """Overlay ``usage``'s reported counts on ``into``: a ``message_delta``'s usage is
    cumulative, and a count it leaves out (null) keeps ``message_start``'s."""
    for name in _COUNTS:
        value = _get(usage, name)
        if value is not None:
            into[name] = value


def _arguments(tool_input: Any) -> str:
    # The non-streamed input is an object: its JSON text, compact, as a stream sends it.
    return json.dumps(tool_input if tool_input is not None else {}, ensure_ascii=False,
                      separators=(",", ":"))


def _is_whole(response: Any) -> bool:
    return isinstance(response, Mapping) or (
        _get(response, "type") == "message" and _get(response, "content") is not None)


def _whole(step: Step, message: Any, provider_data: bool) -> RecordedResponse:
    content: list[Recorded] = []
    skipped: list[str] = []
    for block in _get(message, "content") or ():
        kind = _get(block, "type")
        if kind == "text":
            text = _get(block, "text")
            if isinstance(text, str) and text:
                content.append(TextBlock(text=text))
        elif kind == "thinking":
            text = _get(block, "thinking")
            signature = _get(block, "signature") if provider_data else None
            extra = {"signature": signature} if isinstance(signature, str) and signature else None
            if isinstance(text, str) and (text or extra):
                content.append(_reasoning(text, extra))
        elif kind == "redacted_thinking" and provider_data:
            content.append(_reasoning("", {"redactedData": str(_get(block, "data"))}))
        elif kind == "tool_use":
            content.append(ToolCallBlock(id=_get(block, "id"), name=_get(block, "name"),
                                         arguments=_arguments(_get(block, "input"))))
        else:
            skipped.append(str(kind))
    counts: dict[str, Any] = {}
    _counts(_get(message, "usage"), counts)
    return _record_whole(step, content, _anthropic_usage(counts),
                         _finish(_get(message, "stop_reason")), skipped)


class _Stream:
    """The state of one Messages stream, fed event by event. Blocks are keyed by
    Anthropic's content-block ``index``; a block of a kind the log has none for is
    skipped, so the log's indexes are the recorded blocks' own."""

    __slots__ = ("asm", "counts", "kinds")

    def __init__(self, step: Step, provider_data: bool) -> None:
        self.asm = _Assembler(step, provider_data)
        self.counts: dict[str, Any] = {}
        self.kinds: dict[Any, str] = {}  # each block index's kind, from its start

    def feed(self, event: Any) -> None:
        asm = self.asm
        kind = _get(event, "type")
        if kind == "content_block_delta":
            index = _get(event, "index")
            delta = _get(event, "delta")
            delta_kind = _get(delta, "type")
            if delta_kind == "text_delta":
                asm.text(index, "text", _get(delta, "text"))
            elif delta_kind == "thinking_delta":
                asm.text(index, "reasoning", _get(delta, "thinking"))
            elif delta_kind == "input_json_delta" and self.kinds.get(index) == "tool_use":
                asm.call(index, None, None, _get(delta, "partial_json"))
            elif delta_kind == "signature_delta":
                asm.keep(index, "signature", _get(delta, "signature"), append=True)
            # citations_delta: nothing the vocabulary holds (the cited text is streamed)
        elif kind == "content_block_start":
            index = _get(event, "index")
            block = _get(event, "content_block")
            block_kind = str(_get(block, "type"))
            self.kinds[index] = block_kind
            if block_kind == "tool_use":
                asm.call(index, _get(block, "id"), _get(block, "name"), "")
            elif block_kind == "text":
                asm.text(index, "text", _get(block, "text"))  # empty, but for a prefill
            elif block_kind == "thinking":
                asm.text(index, "reasoning", _get(block, "thinking"))
                # Streamed as signature_delta, but a server may send it whole here.
                asm.keep(index, "signature", _get(block, "signature"))
            elif block_kind == "redacted_thinking" and asm.provider_data:
                asm.keep(index, "redactedData", _get(block, "data"))
            else:
                asm.skipped.append(block_kind)
        elif kind == "content_block_stop":
            index = _get(event, "index")
            if self.kinds.get(index) == "tool_use":
                block = asm.blocks.get(index)
                if block is not None and not "".join(block.parts):
                    # A call with no input streams no delta: its input is {}.
                    asm.set_arguments(index, "{}")
        elif kind == "message_start":
            _counts(_get(_get(event, "message"), "usage"), self.counts)
        elif kind == "message_delta":
            _counts(_get(event, "usage"), self.counts)
            finish = _finish(_get(_get(event, "delta"), "stop_reason"))
            if finish is not None:
                asm.finish = finish
        elif kind == "error":
            error = _get(event, "error")
            message, code = _get(error, "message"), _get(error, "type")
            asm.finish = _error(message if isinstance(message, str) else "stream error",
                                code if isinstance(code, str) else None)

    def close(self) -> RecordedResponse:
        self.asm.usage = _anthropic_usage(self.counts)
        return self.asm.close()


def record_anthropic(step: Step, response: Any, *,
                     provider_data: bool = True) -> RecordedResponse:
    """Record an Anthropic Messages response into the open ``step``.

    :param response: a ``Message`` or its JSON dict, or an iterable of its stream events
        (``client.messages.create(..., stream=True)``, or the stream of ``with
        client.messages.stream(...) as stream:``) or their dicts.
    :returns: the logged message, tool calls, finish reason and usage; ``skipped`` names
        the blocks of kinds the log has none for.
    :param provider_data: keep thinking signatures and redacted thinking on reasoning
        blocks (``signature``, ``redacted_data``), which :func:`to_anthropic` sends back
        (the default: a tool loop with extended thinking needs them); ``False`` records
        the thinking's text only.
    """
    if _is_whole(response):
        return _whole(step, response, provider_data)
    return _drain(_Stream(step, provider_data), response)


async def arecord_anthropic(step: Step, response: Any, *,
                            provider_data: bool = True) -> RecordedResponse:
    """:func:`record_anthropic` of an async stream (``AsyncAnthropic``'s), or of a whole
    ``Message`` already awaited."""
    if _is_whole(response):
        return _whole(step, response, provider_data)
    return await _adrain(_Stream(step, provider_data), response)
