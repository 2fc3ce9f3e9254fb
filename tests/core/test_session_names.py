"""Issue 40, point 3, from a third party's side: a plugin names its sessions through
``name_session``, from a projection's summary row it declares; core reads the name of
one stored session (``stored_name``) or of many (``stored_names``), asks the plugin for
every session and lets it decide from the header, and gives it nothing (no view, no
row) where the reader cannot read: an encrypted session read without keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from dsh_session_core import (
    Event,
    EventSpec,
    Keyring,
    PluginManager,
    SessionHeader,
    SessionName,
    create_plugin_manager,
    hookimpl,
    name_of,
    open_store,
    stored_name,
)
from dsh_session_core.projections import Change, Projection, ProjectionView, Summary


class TicketData(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Which ticket a session works on."""

    ticket: str


class Ticket(Event, tag="tickets/opened", frozen=True):
    """The session works on a ticket."""

    data: TicketData


class Named(msgspec.Struct, frozen=True):
    ticket: str


def _fold(event: Event) -> Iterator[Change]:
    yield Summary(Named(event.data.ticket))


TICKETS = Projection("tickets/names", 1, frozenset({"tickets/opened"}), Named, _fold,
                     summary=Named, doc="the ticket a session works on")


class Tickets:
    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def register_event_types(self) -> Iterable[EventSpec]:
        return [EventSpec(Ticket)]

    @hookimpl
    def register_projections(self) -> Iterable[Projection]:
        return [TICKETS]

    @hookimpl
    def name_session(self, header: SessionHeader,
                     projection: Callable[[str], ProjectionView[Any] | None]
                     ) -> SessionName | None:
        if not header.id.startswith("t-"):
            return None  # not ours: nothing read
        self.asked.append(header.id)
        view = projection("tickets/names")
        summary = None if view is None else view.summary()
        return None if summary is None else SessionName(f"ticket/{summary.ticket}")


def _plugins() -> tuple[PluginManager, Tickets]:
    pm = create_plugin_manager(autoload=False)
    tickets = Tickets()
    pm.register(tickets, name="tickets")
    return pm, tickets


def _fill(url: str, keys: Keyring | None = None) -> None:
    with open_store(url, plugin_manager=_plugins()[0], keys=keys) as store:
        for sid, ticket in (("t-1", "ABC-7"), ("other", "XYZ-1")):
            session = store.create(sid)
            session.append("turn/start", {"turn": 1, "trigger": {
                "kind": "message", "source": {"kind": "user"}}})
            session.append("tickets/opened", {"ticket": ticket})
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            store.flush(session)
            store.release(session)


def test_a_plugin_names_its_sessions_from_a_summary_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    _fill(url)
    pm, tickets = _plugins()  # a manager is one store's
    with open_store(url, plugin_manager=pm) as store:
        headers = {h.id: h for h in store.stored()}
        assert stored_name(store.backend, headers["t-1"], store.registry,
                           plugins=pm) == SessionName("ticket/ABC-7")
        assert stored_name(store.backend, headers["other"], store.registry,
                           plugins=pm) is None
    assert tickets.asked == ["t-1"]
    # Without a plugin naming sessions, nothing is asked, nothing read.
    bare = create_plugin_manager(autoload=False)
    assert name_of(headers["t-1"], lambda name: None, plugins=bare) is None


def test_a_sealed_session_read_without_keys_gives_no_name(tmp_path: Path) -> None:
    url = str(tmp_path / "sealed")
    keys = Keyring({"k1": bytes(32)})
    _fill(url, keys)
    pm, _ = _plugins()
    with open_store(url, plugin_manager=pm, keys=keys) as store:
        header = next(h for h in store.stored() if h.id == "t-1")
        assert stored_name(store.backend, header, store.registry,
                           plugins=pm) == SessionName("ticket/ABC-7")
    pm, _ = _plugins()
    with open_store(url, plugin_manager=pm) as store:  # no keys
        header = next(h for h in store.stored() if h.id == "t-1")
        assert stored_name(store.backend, header, store.registry, plugins=pm) is None
    for path in Path(url).rglob("*"):
        if path.is_file():
            assert b"ABC-7" not in path.read_bytes(), path
