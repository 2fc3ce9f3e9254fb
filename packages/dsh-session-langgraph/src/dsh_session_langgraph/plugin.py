"""The ``langgraph`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only (none imports LangGraph)."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl
from dsh_session_core.projections import Projection

from .events import LanggraphCheckpoint, LanggraphRemoved, LanggraphResume, LanggraphWrites


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``langgraph/checkpoint``, ``langgraph/writes``, ``langgraph/removed`` and
    ``langgraph/resume``.

    :returns: the four event specs of this plugin.
    """
    return (EventSpec(LanggraphCheckpoint, raw=True), EventSpec(LanggraphWrites, raw=True),
            EventSpec(LanggraphRemoved), EventSpec(LanggraphResume))


@hookimpl
def register_projections() -> Iterable[Projection]:
    """Declare ``langgraph/checkpoints``, the checkpoints and writes kept beside the log.

    :returns: the plugin's one projection.
    """
    from ._projection import CHECKPOINTS

    return (CHECKPOINTS,)
