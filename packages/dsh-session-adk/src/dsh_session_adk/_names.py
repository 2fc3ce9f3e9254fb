"""The name an ADK user knows a session by, kept beside the log: ``adk/sessions``.

An ADK session's dsh id is a digest of its app, user and session id
(:func:`~._service.dsh_session_id`), which says nothing to a person. This projection
keeps, as the session's summary row, the names its last ``adk/session`` gives, and a
``deleted`` row while an ``adk/deleted`` stands after it: so that ``dsh-session ls``
prints ``app/user/session`` and marks a deleted session, and ``show``, ``tail``, ``rm``,
``search`` and ``view`` take that name for the id, all without opening the log (and on
an encrypted store, with the summary sealed as the events are: read only with keys).
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from dsh_session_core import Event, SessionName, to_wire
from dsh_session_core.projections import Change, Delete, Projection, Put, Summary

__all__ = ["SESSIONS", "name_of_view", "session_name"]


class AdkNames(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """The summary row: who owns the session, as ADK names them."""

    app_name: str
    user_id: str
    session_id: str


class AdkGone(msgspec.Struct, frozen=True, gc=False):
    """The ``deleted`` row: when the session was deleted (epoch seconds, as ADK gives
    it)."""

    time: float


#: The key of the row that says the session is deleted (until it is created again).
_DELETED = "deleted"


def _fold(event: Event) -> Iterator[Change]:
    data = to_wire(event.data)
    if not isinstance(data, dict):  # a record kept opaque: nothing to say
        return
    if event.type == "adk/session":
        names = (data.get("appName"), data.get("userId"), data.get("sessionId"))
        if all(isinstance(n, str) for n in names):
            app, user, sid = names
            yield Summary(AdkNames(str(app), str(user), str(sid)))
        yield Delete(_DELETED)  # created (again): no longer deleted
    elif event.type == "adk/deleted":
        time = data.get("time")
        yield Put(_DELETED, AdkGone(float(time) if isinstance(time, int | float) else 0.0))


SESSIONS = Projection(
    "adk/sessions", 1, frozenset({"adk/session", "adk/deleted"}), AdkGone, _fold,
    summary=AdkNames,
    doc="an ADK session's app, user and session id (the summary), and whether it is "
        "deleted (the row 'deleted')",
)


def session_name(app_name: str, user_id: str, session_id: str) -> str:
    """The name the command line takes for an ADK session: ``app/user/session``."""
    return f"{app_name}/{user_id}/{session_id}"


def name_of_view(view: object) -> SessionName | None:
    """The :class:`~dsh_session_core.SessionName` of an ``adk/sessions`` view (``None``:
    no summary it can read)."""
    summary = getattr(view, "summary", None)
    names = summary() if callable(summary) else None
    if not isinstance(names, AdkNames):
        return None
    get = getattr(view, "get", None)
    deleted = callable(get) and get(_DELETED) is not None
    return SessionName(session_name(names.app_name, names.user_id, names.session_id),
                       deleted=deleted)
