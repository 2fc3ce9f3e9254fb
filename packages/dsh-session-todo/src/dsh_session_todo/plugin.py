"""The ``todo`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import TodoWrite


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``todo/write``.

    :returns: the one event spec of this plugin.
    """
    return (EventSpec(TodoWrite),)
