"""dsh-session as Google ADK's session store: :class:`DshSessionService`, a
``google.adk.sessions.BaseSessionService`` whose sessions are dsh-session logs::

    from dsh_session_adk import DshSessionService

    service = DshSessionService("sqlite:///sessions.db")   # or a folder, postgresql://...
    runner = Runner(agent=agent, app_name="app", session_service=service)

The ``adk/*`` event types it writes are declared by this distribution's plugin (entry
point ``adk`` in the ``dsh_session.plugins`` group), which imports no part of ADK.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) must not import ADK.
if _typing.TYPE_CHECKING:
    from ._service import DshSessionService, dsh_session_id
    from .events import (
        AdkDeleted,
        AdkDeletedData,
        AdkEvent,
        AdkEventData,
        AdkSession,
        AdkSessionData,
        AdkState,
        AdkStateData,
    )

_LAZY: dict[str, str] = {
    "AdkDeleted": ".events",
    "AdkDeletedData": ".events",
    "AdkEvent": ".events",
    "AdkEventData": ".events",
    "AdkSession": ".events",
    "AdkSessionData": ".events",
    "AdkState": ".events",
    "AdkStateData": ".events",
    "DshSessionService": "._service",
    "dsh_session_id": "._service",
}

__all__ = [
    "AdkDeleted",
    "AdkDeletedData",
    "AdkEvent",
    "AdkEventData",
    "AdkSession",
    "AdkSessionData",
    "AdkState",
    "AdkStateData",
    "DshSessionService",
    "dsh_session_id",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-adk")
