"""The event envelope and the core event types.

One log entry is ``{"type", "seq", "time", "data"[, "sourceEventSeqs"][, "surfaceOp"]}``
in that key order, absent keys omitted. Here each event type is its own frozen Struct
class, tagged by its type string, whose ``data`` field is the typed payload: encoding an
event gives exactly its log line, and a whole log decodes in one msgspec call into typed
events. ``match``/``isinstance`` on the class narrows ``data``.

Five core types are *surface* types (:class:`SurfaceEvent`): they produce LLM messages and
carry the surface fields. Every other type is log-only and carries neither field.

An event that fits no registered class (a type no installed plugin knows, a kind no
schema knows, a payload outside its schema, as a reference log may hold) is an
:class:`OpaqueEvent`: kept verbatim, read-only, still derived and exported.
"""

from __future__ import annotations

__all__ = [
    "SURFACE_TYPES",
    "AssistantChunk",
    "AssistantChunkData",
    "AssistantMessage",
    "AssistantMessageData",
    "ContextMessage",
    "ContextMessageData",
    "Event",
    "OpaqueEvent",
    "PromptBlocked",
    "PromptBlockedData",
    "ReplaceOp",
    "RequestHeader",
    "RequestHeaderData",
    "RequestHeaderDelta",
    "RequestHeaderDeltaData",
    "SteeringMessage",
    "SteeringMessageData",
    "StepData",
    "StepEnd",
    "StepStart",
    "SurfaceEvent",
    "SurfaceOp",
    "ToolCall",
    "ToolCallData",
    "ToolCodeDispatch",
    "ToolCodeDispatchData",
    "ToolError",
    "ToolResult",
    "ToolResultData",
    "TurnEnd",
    "TurnEndData",
    "TurnStart",
    "TurnStartData",
    "UserMessage",
    "UserMessageData",
    "is_surface_eligible_type",
    "is_surface_event",
]

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias

from msgspec import UNSET, Struct, UnsetType

from ._json import JsonObject, JsonValue
from .vocabulary import (
    ContentBlock,
    EpochHeader,
    LlmCallConfig,
    Message,
    MessageSource,
    Number,
    StreamChunk,
    SystemDelta,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolsDelta,
    TurnEndReason,
    TurnTrigger,
)

#: The closed set of core surface types.
SURFACE_TYPES: frozenset[str] = frozenset(
    {"user/message", "assistant/message", "tool/result", "context/message", "steering/message"}
)


def is_surface_eligible_type(event_type: str) -> bool:
    """Whether ``event_type`` is one of the five core message-producing types."""
    return event_type in SURFACE_TYPES


def is_surface_event(event: object) -> bool:
    """Whether ``event`` joins the surface: a surface type carrying a ``surfaceOp``.

    Accepts a logged :class:`Event` or a wire-shape mapping (a parsed log entry).
    """
    if isinstance(event, Event):
        return event.type in SURFACE_TYPES and getattr(event, "surface_op", UNSET) is not UNSET
    if isinstance(event, Mapping):
        return event.get("type") in SURFACE_TYPES and event.get("surfaceOp") is not None
    return False


class ReplaceOp(Struct, frozen=True, gc=False, tag_field="op", tag="replace"):
    """Shadow the surface nodes ``start`` through ``end`` (inclusive, by position) behind
    the new event."""

    start: int
    end: int


#: How a surface event joins the surface: appended at the tail, or replacing a range.
SurfaceOp: TypeAlias = Literal["append"] | ReplaceOp


class Event(
    Struct,
    frozen=True,
    gc=False,
    tag_field="type",
    rename="camel",
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    """One log entry. Subclasses fix ``type`` (their tag) and the payload type of ``data``.

    Events are immutable: the log is the source of truth and nothing may change it after
    the fact.
    """

    seq: int
    time: Number
    data: Any

    #: True for surface types: they carry ``surface_op`` and produce a message.
    surface: ClassVar[bool] = False

    @property
    def type(self) -> str:
        """The event type string, e.g. ``"user/message"``."""
        return self.__struct_config__.tag  # type: ignore[return-value]

    def message(self) -> Message | None:
        """The LLM message this event projects to, or ``None`` (log-only events)."""
        return None


class SurfaceEvent(Event, frozen=True):
    """A message-producing event: it says how it joins the surface list."""

    source_event_seqs: tuple[int, ...] | UnsetType = UNSET
    surface_op: SurfaceOp | UnsetType = UNSET

    surface: ClassVar[bool] = True


class OpaqueEvent(Event, tag="\x00opaque", frozen=True):
    """An event kept verbatim because no registered schema fits it.

    ``wire`` is the whole log entry, read-only, in its original key order; ``data`` is its
    payload. Derivation projects it by its type string, exactly as the reference does.
    """

    wire: JsonObject = JsonObject({})

    @property
    def type(self) -> str:
        t = self.wire.get("type")
        return t if isinstance(t, str) else ""

    @property
    def surface(self) -> bool:  # type: ignore[override]
        return self.type in SURFACE_TYPES

    @property
    def source_event_seqs(self) -> JsonValue | UnsetType:
        return self.wire.get("sourceEventSeqs", UNSET)

    @property
    def surface_op(self) -> JsonValue | UnsetType:
        return self.wire.get("surfaceOp", UNSET)

    def message(self) -> Message | None:
        from ._derive import project_opaque

        return project_opaque(self)


# --- turns and steps ---------------------------------------------------------------------


class _Payload(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
               forbid_unknown_fields=True):
    pass


class TurnStartData(_Payload, kw_only=True, frozen=True):
    turn: int
    trigger: TurnTrigger


class TurnStart(Event, tag="turn/start", frozen=True):
    """Opens turn ``turn``; ``trigger`` records what started it."""

    data: TurnStartData


class TurnEndData(_Payload, kw_only=True, frozen=True):
    turn: int
    reason: TurnEndReason


class TurnEnd(Event, tag="turn/end", frozen=True):
    """Closes turn ``turn`` with the reason it ended. The durable-commit boundary."""

    data: TurnEndData


class StepData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int


class StepStart(Event, tag="step/start", frozen=True):
    """Opens step ``step`` of turn ``turn``: one model call plus the tools it requested."""

    data: StepData


class StepEnd(Event, tag="step/end", frozen=True):
    """Closes step ``step`` of turn ``turn``."""

    data: StepData


# --- messages ----------------------------------------------------------------------------


def _envelope(tag: str, source: MessageSource, content: tuple[ContentBlock, ...]) -> Message:
    kind = source.__struct_config__.tag
    opened = TextBlock(text=f"<{tag} source={_json_string(kind)}>")
    return Message(role="user", content=(opened, *content, TextBlock(text=f"</{tag}>")))


def _json_string(value: object) -> str:
    from ._codec import json_string

    return json_string(value)


class UserMessageData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource


class UserMessage(SurfaceEvent, tag="user/message", frozen=True):
    """A user-visible prompt (a queued message drained at turn start)."""

    data: UserMessageData

    def message(self) -> Message:
        return Message(role="user", content=self.data.content)


class PromptBlockedData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource
    reason: str


class PromptBlocked(Event, tag="prompt/blocked", frozen=True):
    """A queued prompt a hook vetoed, with the veto text; it never becomes a message."""

    data: PromptBlockedData


class ContextMessageData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource


class ContextMessage(SurfaceEvent, tag="context/message", frozen=True):
    """In-session context injection, rendered as ``<context source="...">`` user content."""

    data: ContextMessageData

    def message(self) -> Message:
        return _envelope("context", self.data.source, self.data.content)


class SteeringMessageData(_Payload, kw_only=True, frozen=True):
    turn: int
    content: tuple[ContentBlock, ...]
    source: MessageSource


class SteeringMessage(SurfaceEvent, tag="steering/message", frozen=True):
    """Steering content injected between steps of a running turn."""

    data: SteeringMessageData

    def message(self) -> Message:
        return _envelope("steering", self.data.source, self.data.content)


class AssistantChunkData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    chunk: StreamChunk


class AssistantChunk(Event, tag="assistant/chunk", frozen=True):
    """One raw stream chunk, kept for token-level replay; derivation skips it."""

    data: AssistantChunkData


class AssistantMessageData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    content: tuple[ContentBlock, ...]
    usage: TokenUsage | UnsetType = UNSET


class AssistantMessage(SurfaceEvent, tag="assistant/message", frozen=True):
    """The assembled assistant message of one step, with its token usage. An empty one
    only hosts usage and projects to no message."""

    data: AssistantMessageData

    def message(self) -> Message | None:
        content = self.data.content
        return Message(role="assistant", content=content) if content else None


# --- tools -------------------------------------------------------------------------------


class ToolCallData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolCall(Event, tag="tool/call", frozen=True):
    """The model requested one tool invocation; ``call_id`` pairs it with its result."""

    data: ToolCallData


class ToolError(_Payload, kw_only=True, frozen=True):
    name: str
    code: str


class ToolResultData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool
    error: ToolError | UnsetType = UNSET
    meta: JsonValue | UnsetType = UNSET


class ToolResult(SurfaceEvent, tag="tool/result", frozen=True):
    """A completed tool call's model-facing result, plus an optional tool-private ``meta``."""

    data: ToolResultData

    def message(self) -> Message:
        d = self.data
        block = ToolResultBlock(tool_call_id=d.call_id, content=d.content, is_error=d.is_error)
        return Message(role="user", content=(block,))


class ToolCodeDispatchData(_Payload, kw_only=True, frozen=True):
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: JsonValue
    is_error: bool
    result_summary: str


class ToolCodeDispatch(Event, tag="tool/code-dispatch", frozen=True):
    """One sub-dispatch made by a ``run_code`` program; log-only."""

    data: ToolCodeDispatchData


# --- the request header ------------------------------------------------------------------


class RequestHeaderData(_Payload, kw_only=True, frozen=True):
    header: EpochHeader
    reason: Literal["initial", "resume", "fallback"]


class RequestHeader(Event, tag="request/header", frozen=True):
    """A full snapshot of the header the next request is built under."""

    data: RequestHeaderData


class RequestHeaderDeltaData(_Payload, kw_only=True, frozen=True):
    system: SystemDelta | UnsetType = UNSET
    tools: ToolsDelta | UnsetType = UNSET
    config: LlmCallConfig | UnsetType = UNSET
    message_prefix: tuple[Message, ...] | UnsetType = UNSET


class RequestHeaderDelta(Event, tag="request/header-delta", frozen=True):
    """An amendment to the folded request header; always round-trips."""

    data: RequestHeaderDeltaData
