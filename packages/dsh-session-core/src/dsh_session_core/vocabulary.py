"""The shared vocabulary the event payloads are made of.

Content blocks, messages, message sources, turn triggers and end reasons, stream chunks,
token usage, and the request header.

Every type here is a frozen msgspec Struct whose field order and wire names (camelCase)
are the reference's, so encoding one gives the reference's bytes. Arrays are tuples, so a
value, once built, cannot change. Discriminated families (``ContentBlock``, ``StreamChunk``,
``TurnEndReason``...) are msgspec tagged unions with explicit tags, never class names: the
tag strings are persisted identity.

The seeds call these families merge-extensible: a kind no schema here knows is not an
error. Such a value makes its event *opaque* (see :class:`dsh_session_core.OpaqueEvent`):
kept verbatim, still derived and exported, only not typed.
"""

from __future__ import annotations

__all__ = [
    "AbortedFinish",
    "AbortedReason",
    "BlockEndChunk",
    "BlockStartChunk",
    "CompletedReason",
    "ContentBlock",
    "DisposedReason",
    "EpochHeader",
    "ErrorFinish",
    "ErrorReason",
    "FinishChunk",
    "FinishReason",
    "ImageBlock",
    "InjectionTrigger",
    "InterruptedReason",
    "LlmCallConfig",
    "MaxTokensFinish",
    "MaxTokensReason",
    "Message",
    "MessageSource",
    "MessageTrigger",
    "Number",
    "PluginSource",
    "ReasoningBlock",
    "ReasoningDeltaChunk",
    "RejectedReason",
    "StopFinish",
    "StreamChunk",
    "SystemDelta",
    "TextBlock",
    "TextDeltaChunk",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDeltaChunk",
    "ToolCallsFinish",
    "ToolResultBlock",
    "ToolSchema",
    "ToolsDelta",
    "TurnEndReason",
    "TurnTrigger",
    "UsageChunk",
    "UserSource",
]

from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

_MAX = 1.7976931348623157e308
#: A JSON number: an int, or a *finite* float (NaN and infinities have no JSON form).
Number: TypeAlias = int | Annotated[float, Meta(ge=-_MAX, le=_MAX)]


class _Value(
    Struct, frozen=True, gc=False, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """Base of every vocabulary Struct: immutable, camelCase on the wire, and strict about
    unknown keys (a value with extra keys is kept verbatim as opaque data instead)."""


# --- content blocks and messages --------------------------------------------------------


class _Block(_Value, tag_field="type", frozen=True):
    @property
    def type(self) -> str:
        """Its kind on the wire (the tag), e.g. ``"text"``."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class TextBlock(_Block, tag="text", kw_only=True, frozen=True):
    """Plain text."""

    text: str


class ReasoningBlock(_Block, tag="reasoning", kw_only=True, frozen=True):
    """The model's reasoning text, and what its provider needs to take it back.

    The four optional fields are not in the reference (whose block is ``text`` alone; a
    reference reader keeps them verbatim): the recorders fill them (unless called with
    ``provider_data=False``) and the conversions send them back (docs/providers.md).

    :ivar signature: an Anthropic thinking block's ``signature`` (pydantic-ai's
        ``ThinkingPart.signature``).
    :ivar redacted_data: a ``redacted_thinking`` block's opaque ``data`` (``text`` empty).
    :ivar id: the provider's id of the reasoning (an OpenAI Responses reasoning item's).
    :ivar encrypted_content: a Responses reasoning item's ``encrypted_content``.
    """

    text: str
    signature: str | UnsetType = UNSET
    redacted_data: str | UnsetType = UNSET
    id: str | UnsetType = UNSET
    encrypted_content: str | UnsetType = UNSET


class ToolCallBlock(_Block, tag="tool-call", kw_only=True, frozen=True):
    """A tool call requested by the model. ``arguments`` is the raw JSON text the model
    produced, never parsed."""

    id: str
    name: str
    arguments: str


class ToolResultBlock(_Block, tag="tool-result", kw_only=True, frozen=True):
    """A tool's model-facing result, as derivation renders a ``tool/result`` event."""

    tool_call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool | UnsetType = UNSET


class ImageBlock(_Block, tag="image", kw_only=True, frozen=True):
    """An image: ``data`` (base64) or ``url``, exactly one, with its ``media_type``.

    Not in the reference (it dropped its image block); a reference reader keeps one
    verbatim, as it keeps any content-block kind it does not know.
    """

    media_type: str
    data: str | UnsetType = UNSET
    url: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if (self.data is UNSET) == (self.url is UNSET):
            msg = "an image block holds exactly one of data (base64) and url"
            raise ValueError(msg)


ContentBlock: TypeAlias = (
    TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock
)


class Message(_Value, kw_only=True, frozen=True):
    """One LLM message. Derived messages are only ever ``user`` or ``assistant``."""

    role: Literal["system", "user", "assistant"]
    content: tuple[ContentBlock, ...]


# --- where a message came from, what started and ended a turn ---------------------------


class _Kinded(_Value, tag_field="kind", frozen=True):
    @property
    def kind(self) -> str:
        """Its kind on the wire (the tag), e.g. ``"completed"``."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class UserSource(_Kinded, tag="user", kw_only=True, frozen=True):
    """The message came from the user."""


class PluginSource(_Kinded, tag="plugin", kw_only=True, frozen=True):
    """The message came from a plugin (named; the name is not rendered into messages)."""

    plugin: str


MessageSource: TypeAlias = UserSource | PluginSource


class MessageTrigger(_Kinded, tag="message", kw_only=True, frozen=True):
    """A drained batch of queued messages started the turn."""

    source: MessageSource


class InjectionTrigger(_Kinded, tag="injection", kw_only=True, frozen=True):
    """An idle-time context injection, wrapped in its own one-shot turn."""

    source: MessageSource


TurnTrigger: TypeAlias = MessageTrigger | InjectionTrigger


class CompletedReason(_Kinded, tag="completed", kw_only=True, frozen=True):
    """The turn ran to its natural end."""


class AbortedReason(_Kinded, tag="aborted", kw_only=True, frozen=True):
    """The turn was cancelled, usually by the user."""

    reason: str | UnsetType = UNSET


class ErrorReason(_Kinded, tag="error", kw_only=True, frozen=True):
    """A step failed; ``step`` is where, ``code`` the error's code when it had one."""

    step: int
    message: str
    code: str | UnsetType = UNSET


class DisposedReason(_Kinded, tag="disposed", kw_only=True, frozen=True):
    """The agent was disposed while the turn ran."""


class MaxTokensReason(_Kinded, tag="max-tokens", kw_only=True, frozen=True):
    """A step of the turn was cut short by the token limit."""


class RejectedReason(_Kinded, tag="rejected", kw_only=True, frozen=True):
    """A hook blocked the turn's whole prompt batch; no step ran."""

    reason: str


class InterruptedReason(_Kinded, tag="interrupted", kw_only=True, frozen=True):
    """The process died mid-turn; crash repair closed the turn on reload."""


TurnEndReason: TypeAlias = (
    CompletedReason
    | AbortedReason
    | ErrorReason
    | DisposedReason
    | MaxTokensReason
    | RejectedReason
    | InterruptedReason
)


# --- streaming ---------------------------------------------------------------------------


class TokenUsage(_Value, kw_only=True, frozen=True):
    """Token accounting of one model call. The counts do not overlap: ``input_tokens``
    covers uncached input only."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | UnsetType = UNSET
    cache_write_tokens: int | UnsetType = UNSET
    reasoning_tokens: int | UnsetType = UNSET


class StopFinish(_Kinded, tag="stop", kw_only=True, frozen=True):
    """The model stopped on its own."""


class ToolCallsFinish(_Kinded, tag="tool-calls", kw_only=True, frozen=True):
    """The model stopped to call tools."""


class MaxTokensFinish(_Kinded, tag="max-tokens", kw_only=True, frozen=True):
    """The model hit its token limit."""


class AbortedFinish(_Kinded, tag="aborted", kw_only=True, frozen=True):
    """The call was aborted."""


class ErrorFinish(_Kinded, tag="error", kw_only=True, frozen=True):
    """The model reported a failure."""

    message: str
    code: str | UnsetType = UNSET


FinishReason: TypeAlias = (
    StopFinish | ToolCallsFinish | MaxTokensFinish | AbortedFinish | ErrorFinish
)


class _Chunk(_Value, tag_field="type", frozen=True):
    @property
    def type(self) -> str:
        """Its kind on the wire (the tag), e.g. ``"text-delta"``."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class BlockStartChunk(_Chunk, tag="block-start", kw_only=True, frozen=True):
    """A content block of ``block_type`` opens at ``index``."""

    index: int
    block_type: str


class TextDeltaChunk(_Chunk, tag="text-delta", kw_only=True, frozen=True):
    """More text for the text block at ``index``."""

    index: int
    text: str


class ReasoningDeltaChunk(_Chunk, tag="reasoning-delta", kw_only=True, frozen=True):
    """More reasoning for the reasoning block at ``index``."""

    index: int
    text: str


class ToolCallDeltaChunk(_Chunk, tag="tool-call-delta", kw_only=True, frozen=True):
    """More argument text for the tool call at ``index``."""

    index: int
    id: str
    name: str | UnsetType = UNSET
    arguments_delta: str


class BlockEndChunk(_Chunk, tag="block-end", kw_only=True, frozen=True):
    """The block at ``index`` is complete; ``block`` is its assembled form."""

    index: int
    block: ContentBlock


class UsageChunk(_Chunk, tag="usage", kw_only=True, frozen=True):
    """The call's token accounting."""

    usage: TokenUsage


class FinishChunk(_Chunk, tag="finish", kw_only=True, frozen=True):
    """The call finished, for ``reason``."""

    reason: FinishReason


StreamChunk: TypeAlias = (
    BlockStartChunk
    | TextDeltaChunk
    | ReasoningDeltaChunk
    | ToolCallDeltaChunk
    | BlockEndChunk
    | UsageChunk
    | FinishChunk
)


# --- the request header ------------------------------------------------------------------


class LlmCallConfig(_Value, kw_only=True, frozen=True):
    """Model call settings. Compared field by field; an empty ``stop`` is not an absent one."""

    model: str
    temperature: Number | UnsetType = UNSET
    max_tokens: Number | UnsetType = UNSET
    stop: tuple[str, ...] | UnsetType = UNSET


class ToolSchema(_Value, kw_only=True, frozen=True):
    """A tool as offered to the model; ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


class EpochHeader(_Value, kw_only=True, frozen=True):
    """What a request is built under: config, system prompt, tools, session prefix.

    ``tools`` is also allowed to be a string: the reference's snapshot recorder writes the
    placeholder ``"{{tools}}"`` there, and its logs must validate.
    """

    config: LlmCallConfig
    system: str | UnsetType = UNSET
    tools: tuple[ToolSchema, ...] | str | UnsetType = UNSET
    message_prefix: tuple[Message, ...] | UnsetType = UNSET


class SystemDelta(_Value, kw_only=True, frozen=True):
    """A line edit of the system prompt: keep a prefix and a suffix, insert between."""

    keep_start: int
    keep_end: int
    insert: tuple[str, ...]


class ToolsDelta(_Value, kw_only=True, frozen=True):
    """A tool-list edit keyed by name: removed names, changed tools, tools added at the end."""

    added: tuple[ToolSchema, ...]
    removed: tuple[str, ...]
    changed: tuple[ToolSchema, ...]


# msgspec resolves the recursive ``ContentBlock`` reference lazily; building one decoder
# here makes a typo in an annotation fail at import, not at the first append.
msgspec.json.Decoder(Message)
