"""The project's own plugins, by the event-type namespace each adds.

It says what to install when a log holds events no installed plugin declares.

Core alone loads any log, keeping the events of an absent plugin verbatim; this table
only lets ``validate --strict`` (and errors) say which distribution declares them. It is
data, not an import: core never imports a plugin.
"""

from __future__ import annotations

__all__ = ["missing_plugin_hint"]

#: Event-type namespace (the part before ``/``) → the distribution that declares it.
DISTRIBUTIONS = {
    "compact": "dsh-session-compact",
    "hook": "dsh-session-hooks",
    "mode": "dsh-session-mode",
    "todo": "dsh-session-todo",
}


def missing_plugin_hint(event_type: str) -> str | None:
    """``"install dsh-session-compact"`` for ``compact/summary``, or ``None`` when no
    plugin of this project declares the type's namespace."""
    namespace, slash, _ = event_type.partition("/")
    distribution = DISTRIBUTIONS.get(namespace) if slash else None
    return None if distribution is None else f"install {distribution}"
