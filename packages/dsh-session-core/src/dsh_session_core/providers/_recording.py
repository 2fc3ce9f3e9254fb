"""What every recorder shares: :class:`RecordedResponse`, reading SDK objects, the assembler.

:class:`RecordedResponse` (what each returns), reading a provider's SDK objects and
plain dicts alike, logging a response that was not streamed, draining a stream, and the
stream assembler that turns provider deltas into the reference's chunk sequence. The
recorders are :mod:`._record_openai` (Chat Completions, the Responses API) and
:mod:`._record_anthropic` (Messages).

What a recorder writes into the open step, as the reference's loop does:

- streamed: per content block, ``block-start``, one chunk per provider delta
  (``text-delta``, ``reasoning-delta``, ``tool-call-delta``), then, when the stream ends,
  ``block-end`` of each block (its assembled form), ``usage`` and ``finish``; then the
  ``assistant/message`` (its ``sourceEventSeqs``: those chunks, the builders' default);
- not streamed: the ``assistant/message`` alone (a response that was not streamed has no
  deltas to replay), its finish reason given to the builder for the turn's end reason;
- then one ``tool/call`` per tool-call block, in order: the refs the harness answers with
  ``step.tool_result``.

No SDK is imported: a response is read by duck typing, as the SDK's pydantic object
(attributes) or as the plain JSON dict of the same shape, so core needs neither ``openai``
nor ``anthropic`` at run time.
"""

from __future__ import annotations

__all__ = ["BlockKind", "Recorded", "RecordedResponse"]

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from ..vocabulary import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    ErrorFinish,
    FinishChunk,
    FinishReason,
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
    from .._model.builders import ToolCallRef
    from .._model.step import Step
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
