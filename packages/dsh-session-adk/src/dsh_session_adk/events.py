"""The ``adk`` plugin's event types: ADK sessions kept losslessly, as log-only events.

An ADK session is one dsh session. Its log starts with ``adk/session`` (who owns it and
its session-scoped initial state); each persisted ADK event is an ``adk/event`` holding
the event exactly as ADK dumps it, followed by the dsh message events it maps onto;
``adk/deleted`` is the tombstone. App and user state live in a dsh session each, as
``adk/state`` deltas.
"""

from __future__ import annotations

from msgspec import Struct

from dsh_session_core import Event, JsonValue


class _Payload(Struct, frozen=True, kw_only=True, rename="camel", gc=False,
               forbid_unknown_fields=True):
    pass


class AdkSessionData(_Payload, kw_only=True, frozen=True):
    """Who owns the ADK session, its session-scoped initial state, and when it was made
    (epoch seconds, as ADK gives it)."""

    app_name: str
    user_id: str
    session_id: str
    state: JsonValue
    create_time: float


class AdkSession(Event, tag="adk/session", frozen=True):
    """An ADK session starts (again, after a delete): its app, user, id and state."""

    data: AdkSessionData


class AdkEventData(_Payload, kw_only=True, frozen=True):
    """One ADK event, as ``Event.model_dump(mode="json", by_alias=True)`` gives it."""

    event: JsonValue


class AdkEvent(Event, tag="adk/event", frozen=True):
    """An ADK event, kept whole: its content is also mapped onto dsh message events."""

    data: AdkEventData


class AdkStateData(_Payload, kw_only=True, frozen=True):
    """A state delta of one scope (``app`` or ``user``), keys without their prefix."""

    scope: str
    app_name: str
    user_id: str | None
    delta: JsonValue


class AdkState(Event, tag="adk/state", frozen=True):
    """A delta of the app or user state that all sessions of that app or user share."""

    data: AdkStateData


class AdkDeletedData(_Payload, kw_only=True, frozen=True):
    """When the session was deleted (epoch seconds)."""

    time: float


class AdkDeleted(Event, tag="adk/deleted", frozen=True):
    """The ADK session was deleted: listing and getting skip it; the log stays."""

    data: AdkDeletedData
