"""Core's own plugin: it registers the core event vocabulary, like any other plugin."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import pluggy

from .._base.names import PROJECT_NAME
from .._schema.registry import EventRegistry, EventSpec
from .._schema.retention_events import (
    RetentionAbandoned,
    RetentionForgetting,
    RetentionForgotten,
    RetentionMark,
    RetentionRemoval,
    RetentionRemoving,
)
from ..events import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    SteeringMessage,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCodeDispatch,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = ["CORE_EVENT_SPECS", "core_registry", "register_event_types"]

_impl = pluggy.HookimplMarker(PROJECT_NAME)

CORE_EVENT_SPECS: tuple[EventSpec, ...] = (
    EventSpec(TurnStart),
    EventSpec(TurnEnd),
    EventSpec(StepStart),
    EventSpec(StepEnd),
    EventSpec(UserMessage),
    EventSpec(PromptBlocked),
    EventSpec(ContextMessage),
    EventSpec(AssistantChunk),
    EventSpec(AssistantMessage),
    EventSpec(ToolCall),
    EventSpec(ToolResult),
    EventSpec(ToolCodeDispatch),
    EventSpec(SteeringMessage),
    EventSpec(RequestHeader),
    EventSpec(RequestHeaderDelta),
    EventSpec(RetentionMark),
    EventSpec(RetentionRemoving),
    EventSpec(RetentionRemoval),
    EventSpec(RetentionAbandoned),
    EventSpec(RetentionForgetting),
    EventSpec(RetentionForgotten),
)


@_impl
def register_event_types() -> Iterable[EventSpec]:
    return CORE_EVENT_SPECS


@cache
def core_registry() -> EventRegistry:
    """The registry of the core types alone: what a bare ``Session`` validates against
    when it is given no registry (no entry point is loaded for it)."""
    return EventRegistry(("core", spec) for spec in CORE_EVENT_SPECS)
