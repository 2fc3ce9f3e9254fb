"""The ``mode`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only.

The plugin contributes the ``mode/set`` event type. The session-mode *service*
(:class:`~dsh_session_mode.Modes`) holds deployment configuration and per-session state,
so it is not a module-level singleton here: a harness builds one and registers it on its
plugin manager (``pm.register(modes)``) to get the boundary flush on ``session_event``.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl

from .events import ModeSet


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``mode/set``.

    :returns: the one event spec of this plugin.
    """
    return (EventSpec(ModeSet),)
