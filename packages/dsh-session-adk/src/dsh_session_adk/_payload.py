"""Reading the names (app, user, session) a listing shows from an ADK record's payload,
defensively: a record kept opaque (written by hand, or a sealed box read without keys)
gives no names rather than an error, so a listing shows the session unlabelled."""

from __future__ import annotations

from collections.abc import Mapping

from dsh_session_core import Event, to_wire

__all__ = ["names_in"]


def names_in(event: Event, *required: str) -> Mapping[str, object] | None:
    """The payload of an ``adk/session`` or ``adk/state`` event as plain JSON, or
    ``None`` when it lacks one of ``required`` (a record kept opaque: written by hand,
    or a sealed box read without keys): a listing shows the session unlabelled rather
    than fail."""
    d = to_wire(event.data)
    if not isinstance(d, Mapping) or any(d.get(name) is None for name in required):
        return None
    return d
