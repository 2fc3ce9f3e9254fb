"""Entry point of the example plugin: hook implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, UnionMember, hookimpl

from .events import ExampleNote, ExamplePing
from .members import BudgetReason, ProgressChunk, ScheduleTrigger, StickerBlock, WebhookSource


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    return [EventSpec(ExampleNote), EventSpec(ExamplePing)]


@hookimpl
def register_union_members() -> Iterable[UnionMember]:
    return [
        UnionMember("content-block", StickerBlock),
        UnionMember("stream-chunk", ProgressChunk),
        UnionMember("turn-trigger", ScheduleTrigger),
        UnionMember("turn-end-reason", BudgetReason),
        UnionMember("message-source", WebhookSource),
    ]
