"""The event registry (issue acceptance): for each event type it records the schema,
surface badge, doc line and declaring plugin; it is frozen once built; two plugins
declaring one type fail naming both."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import msgspec
import msgspec.inspect
import pytest

from dsh_session_core import (
    SURFACE_TYPES,
    Event,
    EventSpec,
    OpaqueEvent,
    PluginManager,
    Session,
    SessionStore,
    core_registry,
    encode_event,
    hookimpl,
)
from dsh_session_core.errors import (
    DuplicateEventTypeError,
    PluginError,
    SchemaError,
    UnknownEventTypeError,
)
from dsh_session_core.events import TurnStart

CORE_TYPES = {
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "prompt/blocked",
    "context/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "tool/code-dispatch",
    "steering/message",
    "request/header",
    "request/header-delta",
    # Core's own, not the reference's: the retention ledger's (docs/retention.md).
    "retention/mark",
    "retention/removing",
    "retention/removal",
    "retention/abandoned",
    "retention/forgetting",
    "retention/forgotten",
}
SURFACE = {
    "user/message",
    "assistant/message",
    "tool/result",
    "context/message",
    "steering/message",
}


# --- a plugin contributing one event type --------------------------------------------------


class PingData(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    count: int
    reply_to: str | None = None


class Ping(Event, tag="test/ping", frozen=True):
    """A liveness probe a test plugin logs.

    Only the first paragraph is the catalog's doc line.
    """

    data: PingData


class PingPlugin:
    """Declares ``test/ping``; register it under any name."""

    def __init__(self, spec: EventSpec | None = None) -> None:
        self.spec = spec if spec is not None else EventSpec(Ping)

    @hookimpl
    def register_event_types(self) -> Iterable[EventSpec]:
        return [self.spec]


# --- core's own vocabulary ----------------------------------------------------------------


def test_core_registry_has_exactly_the_core_types(pm: PluginManager) -> None:
    # The reference's fifteen, and the retention ledger's six.
    for registry in (core_registry(), SessionStore(pm).registry):
        assert set(registry.types) == CORE_TYPES
        assert len(registry) == 21
        assert list(registry.types) == sorted(CORE_TYPES)  # iterates in sorted order
        assert [entry.type for entry in registry] == sorted(CORE_TYPES)
        assert all(t in registry for t in CORE_TYPES)
        assert "compaction/marker" not in registry
        assert registry.get("compaction/marker") is None
        assert registry.plugin_for("compaction/marker") is None


def test_core_entries_record_badge_plugin_doc_and_schema(pm: PluginManager) -> None:
    registry = SessionStore(pm).registry
    assert {e.type for e in registry if e.surface} == SURFACE
    assert registry.surface_types == SURFACE == SURFACE_TYPES
    for entry in registry:
        assert entry.plugin == "core"
        assert registry.plugin_for(entry.type) == "core"
        assert entry.doc.strip()
        assert "\n" not in entry.doc  # one line, for the catalog
        info = msgspec.inspect.type_info(entry.event)
        assert isinstance(info, msgspec.inspect.StructType)
        assert info.tag == entry.type
        assert issubclass(entry.payload, msgspec.Struct)
        annotations = {f.name: f.type for f in msgspec.structs.fields(entry.event)}
        assert entry.payload is annotations["data"]
    turn_start = registry.get("turn/start")
    assert turn_start is not None
    assert turn_start.event is TurnStart


# --- frozen once built ----------------------------------------------------------------------


def test_registry_has_no_way_to_change_it(pm: PluginManager) -> None:
    registry = SessionStore(pm).registry
    for name in ("add", "register", "update", "pop", "clear", "__setitem__", "__delitem__"):
        assert not hasattr(registry, name), name
    with pytest.raises(AttributeError):
        registry.types = ("x/y",)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        registry.extra = 1  # type: ignore[attr-defined]
    assert isinstance(registry.types, tuple)
    assert isinstance(registry.surface_types, frozenset)


def test_entries_are_frozen(pm: PluginManager) -> None:
    entry = SessionStore(pm).registry.get("user/message")
    assert entry is not None
    for field in ("type", "event", "payload", "surface", "doc", "plugin", "untyped_fields"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(entry, field, None)
    assert SessionStore(pm).registry.get("user/message") == entry


def test_a_plugin_registered_after_the_build_does_not_reach_it(pm: PluginManager) -> None:
    store = SessionStore(pm, strict=False)
    strict = SessionStore(pm)
    pm.register(PingPlugin(), name="ping")
    assert "test/ping" not in store.registry
    # The type is unknown to this store: kept opaque, not typed (refused, when strict).
    assert type(store.create().append("test/ping", {"count": 1})) is OpaqueEvent
    with pytest.raises(UnknownEventTypeError, match='unknown event type "test/ping"'):
        strict.create().append("test/ping", {"count": 1})
    # A store built now sees it.
    assert SessionStore(pm).registry.plugin_for("test/ping") == "ping"


# --- a plugin's own type ---------------------------------------------------------------------


def test_plugin_type_is_recorded_with_its_plugin(pm: PluginManager) -> None:
    pm.register(PingPlugin(), name="ping")
    registry = SessionStore(pm).registry
    assert set(registry.types) == CORE_TYPES | {"test/ping"}
    entry = registry.get("test/ping")
    assert entry is not None
    assert entry.plugin == "ping"
    assert entry.event is Ping
    assert entry.payload is PingData
    assert entry.surface is False
    assert entry.doc == "A liveness probe a test plugin logs."
    assert "test/ping" not in registry.surface_types


def test_explicit_doc_line_wins(pm: PluginManager) -> None:
    pm.register(PingPlugin(EventSpec(Ping, doc="Pings.")), name="ping")
    entry = SessionStore(pm).registry.get("test/ping")
    assert entry is not None
    assert entry.doc == "Pings."


def test_store_appends_and_decodes_the_plugin_type(pm: PluginManager) -> None:
    pm.register(PingPlugin(), name="ping")
    store = SessionStore(pm, clock=lambda: 7)
    session = store.create()
    session.append(
        "turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    )
    event = session.append("test/ping", {"count": 3, "replyTo": "pong"})
    assert type(event) is Ping
    assert event.data == PingData(count=3, reply_to="pong")
    line = encode_event(event)
    assert msgspec.json.decode(line) == {
        "type": "test/ping",
        "seq": 1,
        "time": 7,
        "data": {"count": 3, "replyTo": "pong"},
    }
    decoded = store.registry.line_decoder.decode(line)
    assert type(decoded) is Ping
    assert decoded == event
    # A seeded log decodes the plugin type as typed, too.
    child = store.create(seed=[msgspec.json.decode(encode_event(e)) for e in session.events])
    assert type(child.events[1]) is Ping
    assert child.events[1] == event
    # A session that does not know the type keeps it opaque, as written.
    bare = Session("bare", seed=[msgspec.json.decode(encode_event(e)) for e in session.events])
    assert type(bare.events[1]) is OpaqueEvent
    assert bare.events[1].data == {"count": 3, "replyTo": "pong"}


def test_plugin_type_payload_is_checked_naming_the_plugin(pm: PluginManager) -> None:
    pm.register(PingPlugin(), name="ping")
    session = SessionStore(pm).create()
    with pytest.raises(SchemaError) as info:
        session.append("test/ping", {"count": "three"})
    assert info.value.plugin == "ping"
    assert "'ping'" in str(info.value)
    assert session.seq == 0


# --- conflicts and bad declarations -----------------------------------------------------------


def test_duplicate_type_across_plugins_names_both(pm: PluginManager) -> None:
    pm.register(PingPlugin(), name="ping-a")
    pm.register(PingPlugin(), name="ping-b")
    with pytest.raises(DuplicateEventTypeError) as info:
        SessionStore(pm)
    err = info.value
    assert isinstance(err, PluginError)
    assert err.event_type == "test/ping"
    assert err.plugins == ("ping-a", "ping-b")
    assert "'ping-a'" in str(err)
    assert "'ping-b'" in str(err)
    assert "'test/ping'" in str(err)


def test_redeclaring_a_core_type_names_core(pm: PluginManager) -> None:
    pm.register(PingPlugin(EventSpec(TurnStart)), name="rogue")
    with pytest.raises(DuplicateEventTypeError) as info:
        SessionStore(pm)
    assert info.value.event_type == "turn/start"
    assert info.value.plugins == ("core", "rogue")


def test_type_without_doc_line_is_refused(pm: PluginManager) -> None:
    class Mute(Event, tag="test/mute", frozen=True):
        data: PingData

    pm.register(PingPlugin(EventSpec(Mute)), name="mute")
    with pytest.raises(
        PluginError, match=r"1 event type\(s\) without a doc line.*'test/mute' \(plugin 'mute'\)"
    ):
        SessionStore(pm)


def test_spec_entries_must_be_event_specs(pm: PluginManager) -> None:
    class Sloppy:
        @hookimpl
        def register_event_types(self) -> Iterable[object]:
            return [Ping]  # the class, not EventSpec(Ping)

    pm.register(Sloppy(), name="sloppy")
    with pytest.raises(PluginError, match="'sloppy'"):
        SessionStore(pm)
