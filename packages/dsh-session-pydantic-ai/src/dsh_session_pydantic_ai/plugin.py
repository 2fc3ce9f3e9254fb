"""The ``pydantic-ai`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only (none imports pydantic-ai)."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import PydanticAiDeleted, PydanticAiEntry, PydanticAiRecord


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``pydantic-ai/entry``, ``pydantic-ai/record`` and ``pydantic-ai/deleted``.

    :returns: the three event specs of this plugin.
    """
    return (EventSpec(PydanticAiEntry, raw=True), EventSpec(PydanticAiRecord),
            EventSpec(PydanticAiDeleted))
