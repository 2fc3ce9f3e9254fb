"""Recording an OpenAI response into the log: Chat Completions and the Responses API.

This module owns :func:`record_openai_chat` / :func:`arecord_openai_chat` (a
``ChatCompletion``, or a stream of ``ChatCompletionChunk``) and
:func:`record_openai_responses` / :func:`arecord_openai_responses` (a ``Response``, or
its stream events), and the recording machinery the Anthropic recorder shares:
:class:`RecordedResponse` (what every recorder returns) and the stream assembler that
turns provider deltas into the reference's chunk sequence.

What a recorder writes into the open step, as the reference's loop does:

- streamed: per content block, ``block-start``, one chunk per provider delta
  (``text-delta``, ``reasoning-delta``, ``tool-call-delta``), then, when the stream ends,
  ``block-end`` of each block (its assembled form), ``usage`` and ``finish``; then the
  ``assistant/message`` (its ``sourceEventSeqs``: those chunks, the builders' default);
- not streamed: the ``assistant/message`` alone (a response that was not streamed has no
  deltas to replay), its finish reason given to the builder for the turn's end reason;
- then one ``tool/call`` per tool-call block, in order: the refs the harness answers with
  ``step.tool_result``.

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

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

from ..vocabulary import (
    AbortedFinish,
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    ErrorFinish,
    FinishChunk,
    FinishReason,
    MaxTokensFinish,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StopFinish,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    ToolCallsFinish,
    UsageChunk,
)

if TYPE_CHECKING:
    from .._builders import ToolCallRef
    from .._step import Step
    from ..events import Event


@dataclasses.dataclass(frozen=True, slots=True)
class RecordedResponse:
    """What a recorder logged for one model call.

    :ivar message: the logged ``assistant/message``.
    :ivar tool_calls: the logged ``tool/call`` refs, in the message's order: answer each
        with ``step.tool_result(ref, ...)``.
    :ivar finish: how the call ended (``None`` when the response did not say).
    :ivar usage: its token accounting (``None`` when the response had none).
    :ivar skipped: the provider's output kinds that have no place in the log's vocabulary
        and were not recorded (``"redacted_thinking"``, ``"web_search_call"``...), in
        order, so a harness can tell that something was left out.
    """

    message: Event
    tool_calls: tuple[ToolCallRef, ...]
    finish: FinishReason | None
    usage: TokenUsage | None
    skipped: tuple[str, ...] = ()


# --- reading SDK objects and dicts alike -----------------------------------------------


def _get(obj: Any, name: str) -> Any:
    """A field of a response object: a dict's key or a pydantic model's attribute (its
    extra fields too, which OpenAI-compatible servers use: ``reasoning_content``)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(input_tokens: Any, output: Any, cached: Any = None, cache_write: Any = None,
           reasoning: Any = None, *, cached_in_input: bool = True) -> TokenUsage | None:
    """A :class:`TokenUsage` from a provider's counts (``None`` when it reported neither
    input nor output). The vocabulary's counts do not overlap: OpenAI's input count
    includes the cached part (``cached_in_input``), which is taken out of
    ``input_tokens``; Anthropic's does not. Optional counts are kept when reported, zero
    included (the reference writes ``cacheReadTokens: 0``). ``output_tokens`` stays the
    provider's, reasoning included, as the reference logs it."""
    inp, out = _int(input_tokens), _int(output)
    if inp is None and out is None:
        return None
    read, write, reason = _int(cached), _int(cache_write), _int(reasoning)
    fields: dict[str, int] = {}
    if read is not None:
        fields["cache_read_tokens"] = read
    if write is not None:
        fields["cache_write_tokens"] = write
    if reason is not None:
        fields["reasoning_tokens"] = reason
    if cached_in_input:
        inp = max((inp or 0) - (read or 0), 0)
    return TokenUsage(input_tokens=inp or 0, output_tokens=out or 0, **fields)


def _error(message: str, code: str | None) -> ErrorFinish:
    return ErrorFinish(message=message) if code is None else ErrorFinish(message=message,
                                                                          code=code)


def _log_calls(step: Step, content: Sequence[Recorded]) -> tuple[ToolCallRef, ...]:
    return tuple(step.tool_call(b) for b in content if isinstance(b, ToolCallBlock))


def _record_whole(step: Step, content: Sequence[Recorded], usage: TokenUsage | None,
                  finish: FinishReason | None, skipped: list[str]) -> RecordedResponse:
    """Log a response that was not streamed: its message, then its tool calls."""
    message = step.assistant(content, usage=usage, finish=finish)
    return RecordedResponse(message, _log_calls(step, content), finish, usage,
                            tuple(skipped))


class _Feed(Protocol):
    """A stream's state: fed its chunks or events one by one, then closed."""

    def feed(self, item: Any, /) -> None: ...

    def close(self) -> RecordedResponse: ...


def _drain(state: _Feed, response: Any) -> RecordedResponse:
    for item in response:
        state.feed(item)
    return state.close()


async def _adrain(state: _Feed, response: Any) -> RecordedResponse:
    """An async stream drained; a sync iterable too (recorded chunks replayed in a
    coroutine), so ``arecord_*`` takes whatever ``record_*`` does."""
    if not hasattr(response, "__aiter__"):
        return _drain(state, response)
    async for item in response:
        state.feed(item)
    return state.close()


# --- the stream assembler ----------------------------------------------------------------

BlockKind = Literal["text", "reasoning", "tool-call"]


#: A block as the recorders assemble it.
Recorded: TypeAlias = ContentBlock

#: The provider data a reasoning block keeps: its wire key -> its field.
_PROVIDER_FIELDS = {"signature": "signature", "redactedData": "redacted_data", "id": "id",
                    "encryptedContent": "encrypted_content"}


def _item_data(item_id: Any, encrypted: Any) -> dict[str, str]:
    """A Responses reasoning item's kept data, by wire key (what is a non-empty string)."""
    extra: dict[str, str] = {}
    if isinstance(item_id, str) and item_id:
        extra["id"] = item_id
    if isinstance(encrypted, str) and encrypted:
        extra["encryptedContent"] = encrypted
    return extra


def _reasoning(text: str, extra: Mapping[str, str] | None) -> Recorded:
    """A reasoning block, with the provider's data ``extra`` (by wire key) when kept."""
    if not extra:
        return ReasoningBlock(text=text)
    return ReasoningBlock(text=text, **{_PROVIDER_FIELDS[k]: v for k, v in extra.items()})


class _Block:
    """A content block being streamed: its kind, its index in the message, its text, and
    the provider's data a reasoning block keeps (unless ``provider_data=False``)."""

    __slots__ = ("call_id", "extra", "index", "kind", "name", "parts")

    def __init__(self, kind: BlockKind, index: int, call_id: str, name: str) -> None:
        self.kind: BlockKind = kind
        self.index = index
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []
        self.extra: dict[str, str] | None = None

    def assembled(self) -> Recorded:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text)
        if self.kind == "reasoning":
            return _reasoning(text, self.extra)
        return ToolCallBlock(id=self.call_id, name=self.name, arguments=text)


class _Assembler:
    """Turns a provider's deltas into the step's chunks and, at the end, its message.

    A provider names its blocks its own way (a choice's tool-call index, a Responses
    output item and content part, an Anthropic content-block index), and some of its
    blocks have no place in the log: each block is keyed by the provider's name for it
    and numbered in the order it opens, which is its index in the assembled message (what
    the chunks' ``index`` means). Every block stays open until the stream ends, as the
    reference's loop records them: a provider need not say when a block is complete.
    """

    __slots__ = ("blocks", "finish", "provider_data", "skipped", "step", "usage")

    def __init__(self, step: Step, provider_data: bool) -> None:
        self.step = step
        self.provider_data = provider_data
        self.blocks: dict[Hashable, _Block] = {}
        self.usage: TokenUsage | None = None
        self.finish: FinishReason | None = None
        self.skipped: list[str] = []

    def open(self, key: Hashable, kind: BlockKind, call_id: str = "", name: str = "") -> _Block:
        """The block ``key`` names, opened (``block-start``) on first use."""
        block = self.blocks.get(key)
        if block is None:
            block = _Block(kind, len(self.blocks), call_id, name)
            self.blocks[key] = block
            self.step.chunk(BlockStartChunk(index=block.index, block_type=kind))
        return block

    def text(self, key: Hashable, kind: Literal["text", "reasoning"], delta: Any) -> None:
        """More text or reasoning for block ``key``; an empty delta carries nothing (the
        first chunk of a Chat Completions stream has ``content: ""``) and opens no block."""
        if not isinstance(delta, str) or not delta:
            return
        block = self.open(key, kind)
        block.parts.append(delta)
        cls = TextDeltaChunk if block.kind == "text" else ReasoningDeltaChunk
        self.step.chunk(cls(index=block.index, text=delta))

    def call(self, key: Hashable, call_id: Any, name: Any, delta: Any) -> None:
        """More argument text for tool call ``key``: the first delta names the call (its
        id and name), later ones may carry neither."""
        block = self.blocks.get(key)
        first = block is None
        if block is None:
            block = self.open(key, "tool-call", call_id if isinstance(call_id, str) else "",
                              name if isinstance(name, str) else "")
        else:  # a late id or name (some servers send them after the first delta)
            if isinstance(call_id, str) and call_id and not block.call_id:
                block.call_id = call_id
            if isinstance(name, str) and name and not block.name:
                block.name = name
        text = delta if isinstance(delta, str) else ""
        if not text and not first:
            return
        block.parts.append(text)
        if first and block.name:
            chunk = ToolCallDeltaChunk(index=block.index, id=block.call_id, name=block.name,
                                       arguments_delta=text)
        else:
            chunk = ToolCallDeltaChunk(index=block.index, id=block.call_id,
                                       arguments_delta=text)
        self.step.chunk(chunk)

    def keep(self, key: Hashable, name: str, value: Any, *, append: bool = False) -> None:
        """Keep provider data (a signature, an item id...) on reasoning block ``key``,
        opened if need be (a reasoning item may stream no text), when asked to."""
        if not self.provider_data or not isinstance(value, str) or not value:
            return
        block = self.open(key, "reasoning")
        if block.extra is None:
            block.extra = {}
        block.extra[name] = block.extra.get(name, "") + value if append else value

    def set_arguments(self, key: Hashable, arguments: Any) -> None:
        """The provider's final argument text for a call, when it disagrees with the
        deltas (it is authoritative: the assembled block is what the model produced)."""
        block = self.blocks.get(key)
        if block is not None and isinstance(arguments, str) and "".join(block.parts) != arguments:
            block.parts = [arguments]

    def close(self, *, tool_calls_finish: bool = False) -> RecordedResponse:
        """End the stream: each block's ``block-end``, the ``usage`` and ``finish`` chunks,
        the ``assistant/message``, then one ``tool/call`` per call."""
        content: list[Recorded] = []
        step = self.step
        for block in self.blocks.values():
            if block.kind == "tool-call" and not block.parts:
                block.parts.append("")
            assembled = block.assembled()
            content.append(assembled)
            step.chunk(BlockEndChunk(index=block.index, block=assembled))
        if self.usage is not None:
            step.chunk(UsageChunk(usage=self.usage))
        finish = self.finish
        if (tool_calls_finish and isinstance(finish, StopFinish)
                and any(isinstance(b, ToolCallBlock) for b in content)):
            finish = ToolCallsFinish()  # the Responses API says "completed" either way
        if finish is not None:
            step.chunk(FinishChunk(reason=finish))
        message = step.assistant(content, usage=self.usage)
        return RecordedResponse(message, _log_calls(step, content), finish, self.usage,
                                tuple(self.skipped))


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

