"""The ``adk`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only (none imports ADK)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from dsh_session_core import Event, EventSpec, SessionHeader, SessionName, hookimpl
from dsh_session_core.projections import Projection, ProjectionView

from ._payload import names_in
from .events import AdkDeleted, AdkEvent, AdkSession, AdkState

#: The id prefixes of ``dsh_session_id``: an ADK session, an app's and a user's state.
_SESSION, _STATE = "adk-s-", ("adk-app-", "adk-user-")


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``adk/session``, ``adk/event``, ``adk/state`` and ``adk/deleted``.

    :returns: the event specs of this plugin.
    """
    return (EventSpec(AdkSession), EventSpec(AdkEvent, raw=True), EventSpec(AdkState),
            EventSpec(AdkDeleted))


@hookimpl
def register_projections() -> Iterable[Projection]:
    """Declare ``adk/sessions``: each ADK session's names (its summary row) and whether
    it is deleted, which listings and name lookups read without opening the log.

    :returns: the plugin's one projection.
    """
    from ._names import SESSIONS

    return (SESSIONS,)


@hookimpl
def name_session(header: SessionHeader,
                 projection: Callable[[str], ProjectionView[object] | None]
                 ) -> SessionName | None:
    """``app/user/session`` for an ADK session, and whether it is deleted, from its
    ``adk/sessions`` summary row (sealed on an encrypted store: read with keys only).

    :returns: the name, or ``None`` for a session not of this plugin, or whose summary
        does not read.
    """
    if not header.id.startswith(_SESSION):
        return None
    from ._names import name_of_view

    view = projection("adk/sessions")
    return None if view is None else name_of_view(view)


@hookimpl
def hide_session(header: SessionHeader) -> bool | None:
    """The app and user state sessions are hidden from lists (``ls --all`` shows them).

    :returns: ``True`` for a state session, else ``None`` (not this plugin's say).
    """
    return True if header.id.startswith(_STATE) else None


@hookimpl
def label_session(header: SessionHeader,
                  first_events: Callable[[int], Sequence[Event]]) -> str | None:
    """``app APP · user USER · session ID`` for an ADK session (``… state`` for a state
    session), from its ``adk/session`` (or first ``adk/state``), which the service writes
    as the second event of the log (the first opens its turn).

    :returns: the label, or ``None`` for a session not of this plugin, or whose first
        events do not say (none read: encrypted and listed without keys, its key gone;
        or a record without the names).
    """
    if not header.id.startswith((_SESSION, *_STATE)):
        return None
    for event in first_events(2):
        if event.type == "adk/session":
            d = names_in(event, "appName", "userId", "sessionId")
            if d is None:
                return None
            return f"app {d['appName']} · user {d['userId']} · session {d['sessionId']}"
        if event.type == "adk/state":
            d = names_in(event, "appName")
            if d is None:
                return None
            user = "" if d.get("userId") is None else f" · user {d['userId']}"
            return f"app {d['appName']}{user} · state"
    return None


@hookimpl
def session_labels(header: SessionHeader,
                   first_events: Callable[[int], Sequence[Event]]) -> Mapping[str, str] | None:
    """``{"app": APP, "user": USER}`` for an ADK session, from its ``adk/session`` (as
    :func:`label_session` reads it), so that retention keeps the latest sessions of each
    user or app (``per=("user",)``); the same for a user's state session (``{"app":
    APP}`` for the app's), from its first ``adk/state``, so that a forget by person
    (``store.forget_all({"app": ..., "user": ...})``, ``dsh-session forget --label``)
    takes the user's state with their sessions. (Retention keeps state sessions as
    hidden before it groups: they never count among a user's latest.)

    :returns: the named labels, or ``None`` for a session not of this plugin, or whose
        first events do not say.
    """
    if not header.id.startswith((_SESSION, *_STATE)):
        return None
    for event in first_events(2):
        if event.type == "adk/session":
            d = names_in(event, "appName", "userId")
            return None if d is None else {"app": str(d["appName"]), "user": str(d["userId"])}
        if event.type == "adk/state":
            d = names_in(event, "appName")
            if d is None:
                return None
            user = d.get("userId")
            return ({"app": str(d["appName"])} if user is None
                    else {"app": str(d["appName"]), "user": str(user)})
    return None
