"""The ``adk`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import AdkDeleted, AdkEvent, AdkSession, AdkState


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``adk/session``, ``adk/event``, ``adk/state`` and ``adk/deleted``.

    :returns: the event specs of this plugin.
    """
    return (EventSpec(AdkSession), EventSpec(AdkEvent), EventSpec(AdkState),
            EventSpec(AdkDeleted))
