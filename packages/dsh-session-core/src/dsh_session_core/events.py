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

from ._base.json_values import JsonObject, JsonValue
from ._schema import event_messages as _projection
from .vocabulary import (
    ContentBlock,
    EpochHeader,
    LlmCallConfig,
    Message,
    MessageSource,
    Number,
    StreamChunk,
    SystemDelta,
    TokenUsage,
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
        """The LLM message this event projects to, or ``None`` (log-only events).

        A plugin's surface type overrides it to project; the core types' projections are
        in :mod:`._schema.event_messages`, bound here as their ``message`` methods.
        """
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

    message = _projection.project_opaque


# --- turns and steps ---------------------------------------------------------------------


class _Payload(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
               forbid_unknown_fields=True):
    pass


class TurnStartData(_Payload, kw_only=True, frozen=True):
    turn: int
    trigger: TurnTrigger


class TurnStart(Event, tag="turn/start", frozen=True):
    """Opens turn `turn`. `trigger` records what started it — a drained message batch or an
    idle-time injection. The turn is the durability/replay boundary: every event sits
    between a `turn/start` and its matching `turn/end` (the turn-enclosure invariant).
    """

    data: TurnStartData


class TurnEndData(_Payload, kw_only=True, frozen=True):
    turn: int
    reason: TurnEndReason


class TurnEnd(Event, tag="turn/end", frozen=True):
    """Closes turn `turn` with the TurnEndReason that ended it. A harness flushes the
    store (`store.flush(session)`, or `await store.aflush(session)`) at every turn end, so
    the turn boundary is also the durable-commit boundary.
    """

    data: TurnEndData


class StepData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int


class StepStart(Event, tag="step/start", frozen=True):
    """Opens step `step` of turn `turn` — one model call plus the tool executions it
    requested.
    """

    data: StepData


class StepEnd(Event, tag="step/end", frozen=True):
    """Closes step `step` of turn `turn`."""

    data: StepData


# --- messages ----------------------------------------------------------------------------


class UserMessageData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource


class UserMessage(SurfaceEvent, tag="user/message", frozen=True):
    """A user-visible prompt (queued message drained at turn start)."""

    data: UserMessageData

    message = _projection.project_user_message


class PromptBlockedData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource
    reason: str


class PromptBlocked(Event, tag="prompt/blocked", frozen=True):
    """A queued prompt an `agent/prompt-submit` listener VETOED — the durable record of a
    blocked prompt and why. Appended in place of the `user/message` the prompt would
    have become, so the block survives replay even in a MIXED batch where another queued
    prompt is allowed (there the turn does not end `rejected`, so the boundary reason
    alone would not preserve it). `content` is the original prompt the listener
    rejected; `reason` is the veto text (PromptDecision `block.reason`). NOT a
    surface type: a blocked prompt produces no LLM message and never reaches
    `derive_messages()`.
    """

    data: PromptBlockedData


class ContextMessageData(_Payload, kw_only=True, frozen=True):
    content: tuple[ContentBlock, ...]
    source: MessageSource


class ContextMessage(SurfaceEvent, tag="context/message", frozen=True):
    """In-session context injection (file-change notices, subdir AGENTS.md, skill content,
    cron notifications, …). Rendered into the derived history as tagged synthetic
    context — NOT a user prompt.
    """

    data: ContextMessageData

    message = _projection.project_context_message


class SteeringMessageData(_Payload, kw_only=True, frozen=True):
    turn: int
    content: tuple[ContentBlock, ...]
    source: MessageSource


class SteeringMessage(SurfaceEvent, tag="steering/message", frozen=True):
    """Steering content injected between steps of a running turn."""

    data: SteeringMessageData

    message = _projection.project_steering_message


class AssistantChunkData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    chunk: StreamChunk


class AssistantChunk(Event, tag="assistant/chunk", frozen=True):
    """Raw stream chunk — token-level replay fidelity."""

    data: AssistantChunkData


class AssistantMessageData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    content: tuple[ContentBlock, ...]
    usage: TokenUsage | UnsetType = UNSET


class AssistantMessage(SurfaceEvent, tag="assistant/message", frozen=True):
    """Assembled assistant message for one step (derived history uses this). Carries the
    step's `usage` when the adapter reported token accounting, so the model output and
    its accounting travel together (there is no separate usage record). `usage` is
    absent when the adapter reported none.
    """

    data: AssistantMessageData

    message = _projection.project_assistant_message


# --- tools -------------------------------------------------------------------------------


class ToolCallData(_Payload, kw_only=True, frozen=True):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolCall(Event, tag="tool/call", frozen=True):
    """The model requested one tool invocation: `name` with the raw `arguments` JSON string
    exactly as the model produced it (unparsed). `callId` pairs the call with its
    `tool/result`.
    """

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
    """A completed tool call's model-facing result, plus an optional tool-private `meta`
    presentation payload. `meta` is opaque to the core (any JSON: the producing tool owns
    its shape and reads it back when it renders the result) but MUST be JSON:
    `Session.append` checks all event data, so a `meta` JSON cannot carry is refused at
    the source (`NotJsonError`), and the durable log reproduces the identical card on
    replay. Absent unless the tool attaches one (e.g. `dsh-tool-fs`
    carries its result-time contextual diff here).
    """

    data: ToolResultData

    message = _projection.project_tool_result


class ToolCodeDispatchData(_Payload, kw_only=True, frozen=True):
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: JsonValue
    is_error: bool
    result_summary: str


class ToolCodeDispatch(Event, tag="tool/code-dispatch", frozen=True):
    """One bridged sub-dispatch from a `run_code` program: the parent `run_code` call id,
    the deterministic sub-call id (`<parent>:code:<n>`), the tool `name` with its JSON-
    normalized `arguments` — the exact value dispatched, normalized BEFORE dispatch, so
    this append can never fail on payload shape — whether the sub-call errored, and a
    bounded `resultSummary` of its model-facing text. Log-only: `derive_messages()`
    ignores it, so sub-calls never re-enter model context; persistence and UIs get every
    call. Appended inside the parent `run_code`'s execution (the bridge drains its queue
    before returning), so the turn-enclosure invariant holds by construction.
    """

    data: ToolCodeDispatchData


# --- the request header ------------------------------------------------------------------


class RequestHeaderData(_Payload, kw_only=True, frozen=True):
    header: EpochHeader
    reason: Literal["initial", "resume", "fallback"]


class RequestHeader(Event, tag="request/header", frozen=True):
    """Full snapshot of the EpochHeader the NEXT request is built under, with the
    RequestHeaderReason it was recorded whole. Appended by the loop inside the step,
    before dispatch, on a loop instance's first request-building step
    (`'initial'`/`'resume'`) or when a delta failed its round-trip guard (`'fallback'`);
    always records what the request actually used, post-`agent/request`. Anchors the
    header fold: reconstruction reads the latest snapshot and applies the deltas after
    it. NOT a surface type: it produces no LLM message — it is the request envelope,
    logged so every request is a pure function of the session log (the
    reconstructability RFC).
    """

    data: RequestHeaderData


class RequestHeaderDeltaData(_Payload, kw_only=True, frozen=True):
    system: SystemDelta | UnsetType = UNSET
    tools: ToolsDelta | UnsetType = UNSET
    config: LlmCallConfig | UnsetType = UNSET
    message_prefix: tuple[Message, ...] | UnsetType = UNSET


class RequestHeaderDelta(Event, tag="request/header-delta", frozen=True):
    """Amendment to the folded EpochHeader: at least one of a SystemDelta, a ToolsDelta, a
    whole replacement LlmCallConfig (four scalars — not worth diffing), or a whole
    replacement session prefix (`messagePrefix` — small advisory content, replaced
    whole; an EMPTY array encodes the transition to "none", mirroring the canonical
    form's absent field — the loop never produces one in practice: the prefix is
    composed once per instance and anchored by that instance's snapshot, so this arm
    exists for codec totality). Appended by the loop inside the step, before dispatch,
    when the header for this request differs from the fold of the log so far; the writer
    verifies `apply_header_delta(previous, delta)` reproduces the new header exactly and
    falls back to a `'fallback'` `request/header` snapshot when it cannot, so a logged
    delta ALWAYS round-trips. NOT a surface type.
    """

    data: RequestHeaderDeltaData
