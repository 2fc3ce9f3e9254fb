"""The ADK view of a session: what ``DshSessionService`` folds from a dsh log (its
last ``adk/session``, the ``adk/event`` records after it, ``adk/deleted``), the app's
and a user's state folded from their ``adk/state`` deltas, and the events it hands out
(shallow copies of the events it validated once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.adk.events.event import Event as AdkEvent
from google.adk.sessions.state import State
from pydantic_core import PydanticUndefined

from dsh_session_core import to_wire

from ._mapping import TurnCursor

__all__ = ["View", "copy_of", "fold_records", "fold_session", "fold_state", "view_of"]

_new = object.__new__
_set = object.__setattr__


@dataclass
class View:
    """An ADK session folded from its dsh log (from its last ``adk/session`` on)."""

    app_name: str
    user_id: str
    session_id: str
    state: dict[str, Any]
    create_time: float
    events: list[dict[str, Any]] = field(default_factory=list)
    event_ids: dict[str, int] = field(default_factory=dict)
    #: Each event validated, once (``None`` until asked for): ``get_session`` hands out
    #: shallow copies of these, as validating a dump costs ~140 us (ADK's pydantic Event).
    objects: list[AdkEvent | None] = field(default_factory=list)
    last_update_time: float = 0.0
    deleted: bool = False
    #: The dsh seq after the last event: the storage revision stale writers are told by.
    revision: int = 0

    def add(self, dump: dict[str, Any], event: AdkEvent | None = None) -> None:
        """Fold one persisted ADK event (its JSON dump, and the event when in hand: a
        private copy of it, which nobody else holds)."""
        self.event_ids[dump["id"]] = len(self.events)
        self.events.append(dump)
        self.objects.append(event)
        actions = dump.get("actions") or {}
        delta = actions.get("stateDelta") or actions.get("state_delta") or {}
        for key, value in delta.items():
            if not key.startswith((State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX)):
                self.state[key] = value
        self.last_update_time = float(dump["timestamp"])


def fold_session(events: Iterable[Any]) -> tuple[View | None, TurnCursor]:
    view: View | None = None
    cursor = TurnCursor()
    for e in events:
        cursor.see(e)
        if e.type == "adk/session":
            d = to_wire(e.data)
            view = View(d["appName"], d["userId"], d["sessionId"], dict(d["state"]),
                         d["createTime"], last_update_time=d["createTime"])
        elif view is None:
            continue
        elif e.type == "adk/event":
            view.add(to_wire(e.data)["event"])
        elif e.type == "adk/deleted":
            view.deleted = True
        view.revision = e.seq + 1
    return view, cursor


def view_of(records: list[dict[str, Any]]) -> View | None:
    """The view folded from a log's ``adk/*`` records (decoded lines), from its last
    ``adk/session`` on (its revision left to the caller)."""
    start = max((i for i, r in enumerate(records) if r["type"] == "adk/session"),
                default=None)
    if start is None:
        return None
    d = records[start]["data"]
    view = View(d["appName"], d["userId"], d["sessionId"], dict(d["state"]),
                 d["createTime"], last_update_time=d["createTime"])
    fold_records(view, records[start + 1:])
    return view


def fold_records(view: View, records: list[dict[str, Any]]) -> None:
    """Fold decoded log lines after the view's ``adk/session`` (other types skipped)."""
    for r in records:
        if r["type"] == "adk/event":
            view.add(r["data"]["event"])
        elif r["type"] == "adk/deleted":
            view.deleted = True


def fold_state(events: Iterable[Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for e in events:
        if e.type == "adk/state":
            state.update(to_wire(e.data)["delta"])
    return state


def copy_of(view: View, index: int) -> AdkEvent:
    """Event ``index`` of ``view`` as a new ``Event`` (validated on first use). The copy
    is shallow: its content and actions are the view's, to be read, not changed in place
    (ADK's Runner appends events; it does not edit stored ones)."""
    event = view.objects[index]
    if event is None:
        event = view.objects[index] = AdkEvent.model_validate(view.events[index])
    # What pydantic's ``model_copy()`` does, without its generic ``copy.copy`` calls (a
    # third of ``get_session``'s time for a window of recent events).
    copy = _new(AdkEvent)
    _set(copy, "__dict__", event.__dict__.copy())
    extra, private = event.__pydantic_extra__, event.__pydantic_private__
    _set(copy, "__pydantic_extra__", None if extra is None else dict(extra))
    _set(copy, "__pydantic_fields_set__", set(event.__pydantic_fields_set__))
    _set(copy, "__pydantic_private__", None if private is None else {
        k: v for k, v in private.items() if v is not PydanticUndefined})
    return copy
