"""Recording an OpenAI response into the log: Chat Completions and the Responses API.

This module owns :func:`record_openai_chat` / :func:`arecord_openai_chat` (a
``ChatCompletion``, or a stream of ``ChatCompletionChunk``) and
:func:`record_openai_responses` / :func:`arecord_openai_responses` (a ``Response``, or
its stream events). What they write into the open step, and the machinery they share
with the Anthropic recorder (:class:`~._recording.RecordedResponse`, the stream
assembler), are :mod:`._recording`'s.

What the log's vocabulary has no place for is never dropped unsaid: an output kind
with no block (a built-in tool's call...) is named in :attr:`RecordedResponse.skipped`.
A reasoning item's id and encrypted content are kept on its reasoning blocks (``id`` on
each block of the item, ``encrypted_content`` on its first), which
:func:`~dsh_session_core.providers.to_openai_responses` sends back as the one item it
was: the next request of a stateless (``store=False``) tool loop needs them.
``provider_data=False`` leaves them out (docs/decisions.md, "Provider data by default").

No SDK is imported: a response is read by duck typing, as the SDK's pydantic object
(attributes) or as the plain JSON dict of the same shape, so core needs neither ``openai``
nor ``anthropic`` at run time.
"""

from __future__ import annotations

__all__ = [
    "RecordedResponse",
    "arecord_openai_chat",
    "arecord_openai_responses",
    "record_openai_chat",
    "record_openai_responses",
]

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..vocabulary import (
    AbortedFinish,
    ErrorFinish,
    FinishReason,
    MaxTokensFinish,
    ReasoningBlock,
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
    _item_data,
    _reasoning,
    _record_whole,
    _usage,
)

if TYPE_CHECKING:
    from .._model.step import Step


# --- Chat Completions --------------------------------------------------------------------

#: ``finish_reason`` of a choice, as the vocabulary's finish reasons.
_CHAT_FINISH: Final[Mapping[str, FinishReason]] = {
    "stop": StopFinish(),
    "length": MaxTokensFinish(),
    "tool_calls": ToolCallsFinish(),
    "function_call": ToolCallsFinish(),
    "content_filter": ErrorFinish(message="the provider's content filter stopped the output",
                                  code="content_filter"),
}


def _chat_finish(reason: Any) -> FinishReason | None:
    if not isinstance(reason, str):
        return None
    known = _CHAT_FINISH.get(reason)
    return known if known is not None else _error(f"finish_reason {reason!r}", reason)


def _chat_usage(usage: Any) -> TokenUsage | None:
    if usage is None:
        return None
    return _usage(_get(usage, "prompt_tokens"), _get(usage, "completion_tokens"),
                  _get(_get(usage, "prompt_tokens_details"), "cached_tokens"),
                  None,
                  _get(_get(usage, "completion_tokens_details"), "reasoning_tokens"))


def _reasoning_text(obj: Any) -> Any:
    # Not OpenAI's own field: OpenAI-compatible servers (DeepSeek, vLLM, OpenRouter...)
    # stream the model's reasoning under one of these names.
    text = _get(obj, "reasoning_content")
    return text if text is not None else _get(obj, "reasoning")


def _first_choice(obj: Any) -> Any:
    """Choice 0: a harness asks for one (``n`` > 1 has no place in one step's message)."""
    for choice in _get(obj, "choices") or ():
        if _get(choice, "index") in (0, None):
            return choice
    return None


class _ChatStream:
    """The state of one Chat Completions stream, fed chunk by chunk."""

    __slots__ = ("asm",)

    def __init__(self, step: Step) -> None:
        self.asm = _Assembler(step, provider_data=False)

    def feed(self, chunk: Any) -> None:
        asm = self.asm
        usage = _get(chunk, "usage")
        if usage is not None:  # the last chunk's, with include_usage (choices is empty)
            asm.usage = _chat_usage(usage)
        choice = _first_choice(chunk)
        if choice is None:
            return
        delta = _get(choice, "delta")
        if delta is not None:
            asm.text("reasoning", "reasoning", _reasoning_text(delta))
            asm.text("text", "text", _get(delta, "content"))
            asm.text("text", "text", _get(delta, "refusal"))
            for call in _get(delta, "tool_calls") or ():
                function = _get(call, "function")
                asm.call(("call", _get(call, "index")), _get(call, "id"),
                         _get(function, "name"), _get(function, "arguments"))
        finish = _chat_finish(_get(choice, "finish_reason"))
        if finish is not None:
            asm.finish = finish

    def close(self) -> RecordedResponse:
        return self.asm.close()


def _is_whole_chat(response: Any) -> bool:
    # A ChatCompletion (or its dict) has choices; a stream is an iterator of chunks.
    return isinstance(response, Mapping) or _get(response, "choices") is not None


def _chat_whole(step: Step, response: Any) -> RecordedResponse:
    choice = _first_choice(response)
    message = _get(choice, "message")
    content: list[Recorded] = []
    reasoning = _reasoning_text(message)
    if isinstance(reasoning, str) and reasoning:
        content.append(ReasoningBlock(text=reasoning))
    for text in (_get(message, "content"), _get(message, "refusal")):
        if isinstance(text, str) and text:
            content.append(TextBlock(text=text))
    skipped: list[str] = []
    for call in _get(message, "tool_calls") or ():
        function = _get(call, "function")
        if function is None:  # a custom tool's call: free text, not a function's JSON
            skipped.append(f"{_get(call, 'type')} tool call")
            continue
        content.append(ToolCallBlock(id=_get(call, "id"), name=_get(function, "name"),
                                     arguments=_get(function, "arguments") or ""))
    return _record_whole(step, content, _chat_usage(_get(response, "usage")),
                         _chat_finish(_get(choice, "finish_reason")), skipped)


def record_openai_chat(step: Step, response: Any) -> RecordedResponse:
    """Record a Chat Completions response into the open ``step``.

    :param response: a ``ChatCompletion`` (``client.chat.completions.create(...)``) or
        its JSON dict, or an iterable of ``ChatCompletionChunk`` (what
        ``create(..., stream=True)`` returns) or their dicts. Pass
        ``stream_options={"include_usage": True}`` to get usage on a stream.
    :returns: the logged message, tool calls, finish reason and usage.
    """
    if _is_whole_chat(response):
        return _chat_whole(step, response)
    return _drain(_ChatStream(step), response)


async def arecord_openai_chat(step: Step, response: Any) -> RecordedResponse:
    """:func:`record_openai_chat` of an async stream (``AsyncOpenAI``'s), or of a whole
    response already awaited."""
    if _is_whole_chat(response):
        return _chat_whole(step, response)
    return await _adrain(_ChatStream(step), response)


# --- the Responses API -------------------------------------------------------------------


def _responses_usage(usage: Any) -> TokenUsage | None:
    if usage is None:
        return None
    return _usage(_get(usage, "input_tokens"), _get(usage, "output_tokens"),
                  _get(_get(usage, "input_tokens_details"), "cached_tokens"),
                  None,
                  _get(_get(usage, "output_tokens_details"), "reasoning_tokens"))


def _responses_finish(response: Any, has_calls: bool) -> FinishReason | None:
    """The finish reason of a ``Response`` from its ``status``: "completed" is a stop, or
    a tool-calls stop when it called functions (the API has no separate reason)."""
    status = _get(response, "status")
    if status == "completed":
        return ToolCallsFinish() if has_calls else StopFinish()
    if status == "incomplete":
        reason = _get(_get(response, "incomplete_details"), "reason")
        if reason == "max_output_tokens":
            return MaxTokensFinish()
        return _error(f"the response is incomplete ({reason})",
                      reason if isinstance(reason, str) else None)
    if status == "failed":
        error = _get(response, "error")
        message = _get(error, "message")
        code = _get(error, "code")
        return _error(message if isinstance(message, str) else "the response failed",
                      code if isinstance(code, str) else None)
    if status == "cancelled":
        return AbortedFinish()
    return None


#: Output item kinds recorded; any other (a built-in tool's call, an image...) is skipped.
_RESPONSES_ITEMS: Final = frozenset({"message", "function_call", "reasoning"})


def _responses_whole(step: Step, response: Any, provider_data: bool) -> RecordedResponse:
    content: list[Recorded] = []
    skipped: list[str] = []
    for item in _get(response, "output") or ():
        kind = _get(item, "type")
        if kind == "reasoning":
            # One reasoning block per summary part, then per raw reasoning part: the same
            # blocks a stream opens, one per part it streams. When kept, the item's id is
            # on each of them (so that they go back as one item) and its encrypted content
            # on the first (one block when the item has no text).
            item_id = _get(item, "id") if provider_data else None
            encrypted = _get(item, "encrypted_content") if provider_data else None
            texts = [t for part in (*(_get(item, "summary") or ()),
                                    *(_get(item, "content") or ()))
                     if isinstance(t := _get(part, "text"), str) and t]
            if not texts and ((isinstance(item_id, str) and item_id)
                              or (isinstance(encrypted, str) and encrypted)):
                texts = [""]
            for text in texts:
                content.append(_reasoning(text, _item_data(item_id, encrypted)))
                encrypted = None
        elif kind == "message":
            for part in _get(item, "content") or ():
                text = _get(part, "text") if _get(part, "type") == "output_text" else (
                    _get(part, "refusal"))
                if isinstance(text, str) and text:
                    content.append(TextBlock(text=text))
        elif kind == "function_call":
            content.append(ToolCallBlock(id=_get(item, "call_id"), name=_get(item, "name"),
                                         arguments=_get(item, "arguments") or ""))
        else:
            skipped.append(str(kind))
    has_calls = any(isinstance(b, ToolCallBlock) for b in content)
    return _record_whole(step, content, _responses_usage(_get(response, "usage")),
                         _responses_finish(response, has_calls), skipped)


class _ResponsesStream:
    """The state of one Responses stream, fed event by event.

    Blocks are keyed by the output item's index and the part's: ``("text", item,
    part)``, ``("summary", item, part)``, ``("reasoning", item, part)``, ``("call",
    item)``. A ``*.done`` event repeats the whole text of its part: only the deltas are
    chunks, but a call's final arguments win (the model's output is what was assembled).
    """

    __slots__ = ("asm", "parts")

    def __init__(self, step: Step, provider_data: bool) -> None:
        self.asm = _Assembler(step, provider_data)
        # Each reasoning item's blocks (their keys, in order): when provider data is kept,
        # each keeps the item's id, and the first its encrypted content.
        self.parts: dict[Any, list[Hashable]] = {}

    def _part(self, out: Any, key: Hashable) -> None:
        keys = self.parts.setdefault(out, [])
        if key not in keys:
            keys.append(key)

    def feed(self, event: Any) -> None:
        asm = self.asm
        kind = _get(event, "type")
        out = _get(event, "output_index")
        key: Hashable
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            asm.text(("text", out, _get(event, "content_index")), "text", _get(event, "delta"))
        elif kind == "response.reasoning_summary_text.delta":
            key = ("summary", out, _get(event, "summary_index"))
            self._part(out, key)
            asm.text(key, "reasoning", _get(event, "delta"))
        elif kind == "response.reasoning_text.delta":
            key = ("reasoning", out, _get(event, "content_index"))
            self._part(out, key)
            asm.text(key, "reasoning", _get(event, "delta"))
        elif kind == "response.output_item.done":
            item = _get(event, "item")
            if asm.provider_data and _get(item, "type") == "reasoning":
                # Only the parts that streamed text opened a block; an item that streamed
                # none (no summary asked for) keeps its data on a block of its own.
                keys = [k for k in self.parts.get(out, ()) if k in asm.blocks]
                for key in keys or [("summary", out, 0)]:
                    asm.keep(key, "id", _get(item, "id"))
                asm.keep((keys or [("summary", out, 0)])[0], "encryptedContent",
                         _get(item, "encrypted_content"))
        elif kind == "response.output_item.added":
            item = _get(event, "item")
            item_kind = _get(item, "type")
            if item_kind == "function_call":
                asm.call(("call", out), _get(item, "call_id"), _get(item, "name"),
                         _get(item, "arguments"))
            elif item_kind not in _RESPONSES_ITEMS:
                asm.skipped.append(str(item_kind))
        elif kind == "response.function_call_arguments.delta":
            asm.call(("call", out), None, None, _get(event, "delta"))
        elif kind == "response.function_call_arguments.done":
            asm.set_arguments(("call", out), _get(event, "arguments"))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = _get(event, "response")
            asm.usage = _responses_usage(_get(response, "usage"))
            asm.finish = _responses_finish(response, has_calls=False)
        elif kind == "error":
            message, code = _get(event, "message"), _get(event, "code")
            asm.finish = _error(message if isinstance(message, str) else "stream error",
                                code if isinstance(code, str) else None)

    def close(self) -> RecordedResponse:
        return self.asm.close(tool_calls_finish=True)


def _is_whole_response(response: Any) -> bool:
    return isinstance(response, Mapping) or _get(response, "output") is not None


def record_openai_responses(step: Step, response: Any, *,
                            provider_data: bool = True) -> RecordedResponse:
    """Record a Responses API response into the open ``step``.

    :param response: a ``Response`` (``client.responses.create(...)``) or its JSON dict,
        or an iterable of its stream events (``create(..., stream=True)``, or the
        ``client.responses.stream(...)`` manager's stream) or their dicts.
    :returns: the logged message, tool calls, finish reason and usage; ``skipped`` names
        the output items of kinds the log has no block for (built-in tools' calls...).
    :param provider_data: keep each reasoning item's ``id`` and ``encrypted_content``
        (asked for with ``include=["reasoning.encrypted_content"]``) on its reasoning
        blocks, which :func:`to_openai_responses` sends back (the default: a stateless
        tool loop needs them); ``False`` records the reasoning's text only.
    """
    if _is_whole_response(response):
        return _responses_whole(step, response, provider_data)
    return _drain(_ResponsesStream(step, provider_data), response)


async def arecord_openai_responses(step: Step, response: Any, *,
                                   provider_data: bool = True) -> RecordedResponse:
    """:func:`record_openai_responses` of an async stream, or of a whole response."""
    if _is_whole_response(response):
        return _responses_whole(step, response, provider_data)
    return await _adrain(_ResponsesStream(step, provider_data), response)
