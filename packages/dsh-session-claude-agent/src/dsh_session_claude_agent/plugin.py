"""The ``claude-agent`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl
from dsh_session_core.projections import Projection

from .events import ClaudeEntries, ClaudeSummary


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``claude-agent/entries`` and ``claude-agent/summary``.

    :returns: the two event specs of this plugin.
    """
    return (EventSpec(ClaudeEntries, raw=True), EventSpec(ClaudeSummary))


@hookimpl
def register_projections() -> Iterable[Projection]:
    """Declare ``claude-agent/sessions``, the listing kept beside the logs.

    :returns: the plugin's one projection.
    """
    from ._projection import SESSIONS

    return (SESSIONS,)
