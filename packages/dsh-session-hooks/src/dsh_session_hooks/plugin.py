"""The ``hooks`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import HookInvoked, HookResult


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``hook/invoked`` and ``hook/result`` (both log-only).

    :returns: one :class:`~dsh_session_core.EventSpec` per type; the doc lines are the
        first paragraphs of the event classes' docstrings.
    """
    return (EventSpec(HookInvoked), EventSpec(HookResult))
