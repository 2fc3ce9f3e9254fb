"""Entry point of the example plugin: hook implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import ExampleNote, ExamplePing


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    return [EventSpec(ExampleNote), EventSpec(ExamplePing)]
