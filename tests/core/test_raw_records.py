"""Issue 40, point 4: an adapter's raw records (its framework's own record, kept whole,
whose content typed events tell) are declared so in their registration,
``EventSpec(raw=True)``, never listed in core: the registry names them
(``raw_types``), and the timeline (``show``, the viewer) folds them away unless asked,
counting them, or keeps them marked ``raw: true``."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from dsh_session_core import (
    Event,
    EventSpec,
    PluginManager,
    SessionStore,
    create_plugin_manager,
    hookimpl,
)
from dsh_session_core.inspect import Source, build_timeline, render_timeline


class RecordData(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A framework's own record of a message."""

    record: str


class Record(Event, tag="test/record", frozen=True):
    """A framework's record of a message, kept whole; its typed twin follows it."""

    data: RecordData


class Note(Event, tag="test/note", frozen=True):
    """A note of the plugin's own: no raw record."""

    data: RecordData


class Framework:
    @hookimpl
    def register_event_types(self) -> Iterable[EventSpec]:
        return [EventSpec(Record, raw=True), EventSpec(Note)]


def _plugins() -> PluginManager:
    pm = create_plugin_manager(autoload=False)
    pm.register(Framework(), name="framework")
    return pm


def _source() -> tuple[Source, SessionStore]:
    store = SessionStore(_plugins(), clock=lambda: 1_700_000_000_000)
    session = store.create("chat")
    with session.turn() as turn:
        session.append("test/record", {"record": "user said hello"})
        turn.user("hello")
        session.append("test/note", {"record": "a note"})
        with turn.step() as step:
            session.append("test/record", {"record": "model said hi"})
            step.assistant("hi")
    return Source(session.header, list(session.events), "chat"), store


def test_the_registry_names_the_raw_records() -> None:
    _, store = _source()
    assert store.registry.raw_types == frozenset({"test/record"})
    entry = store.registry.get("test/record")
    assert entry is not None
    assert entry.raw
    note = store.registry.get("test/note")
    assert note is not None
    assert not note.raw
    assert EventSpec(Note).raw is False


def test_the_timeline_folds_them_away_unless_asked() -> None:
    source, store = _source()
    pm = _plugins()
    doc = build_timeline(source, store.registry, plugins=pm)
    [turn] = doc["timeline"]
    assert [i["type"] for i in turn["items"]] == [
        "user/message", "test/note", "step/start", "assistant/message"]
    assert doc["rawFolded"] == 2
    text = render_timeline(doc)
    assert "2 raw record(s) folded away (--raw shows them)" in text
    assert "test/record" not in text
    kept = build_timeline(source, store.registry, plugins=pm, raw=True)
    assert "rawFolded" not in kept
    assert [(i["type"], i.get("raw", False)) for i in kept["timeline"][0]["items"]] == [
        ("test/record", True), ("user/message", False), ("test/note", False),
        ("step/start", False), ("test/record", True), ("assistant/message", False)]
    assert "test/record" in render_timeline(kept)
