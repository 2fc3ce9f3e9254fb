"""Spec core.md §11 H: the SessionStore (§6.2)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from helpers import TE, TS, U, exact, raw, te_data, ts_data

from dsh_session_core import Event, PluginManager, Session, SessionStore, hookimpl
from dsh_session_core.errors import SeedError, SessionCwdError, SessionExistsError


class Watch:
    """Records ``session_created`` and ``session_event`` calls."""

    def __init__(self) -> None:
        self.created: list[Session] = []
        self.events: list[tuple[Session, Event]] = []

    @hookimpl
    def session_created(self, session: Session) -> None:
        self.created.append(session)

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.events.append((session, event))


@pytest.fixture
def watch(pm: PluginManager) -> Watch:
    w = Watch()
    pm.register(w)
    return w


@pytest.fixture
def store(pm: PluginManager, watch: Watch) -> SessionStore:
    return SessionStore(pm)


def header_json(s: Session) -> dict[str, Any]:
    """The header in its wire shape, without the JSONL line's ``type`` tag."""
    out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(s.header))
    out.pop("type", None)
    return out


def test_h78_create_mints_an_id_and_announces(store: SessionStore, watch: Watch) -> None:
    s = store.create()
    assert s.id == "session-1"
    assert watch.created == [s]
    assert store.get("session-1") is s
    assert store.live() == [s]


def test_h78_list_is_a_new_list(store: SessionStore) -> None:
    s = store.create("a")
    listed = store.live()
    listed.clear()
    assert store.live() == [s]
    assert store.live() is not store.live()


def test_list_is_a_deprecated_alias_of_live(store: SessionStore) -> None:
    # Issue 24: "list" read as "what `dsh-session ls` lists" (the stored sessions);
    # it gave the live ones. It still does, with a warning naming both.
    s = store.create("a")
    with pytest.warns(DeprecationWarning, match=r"store\.live\(\).*store\.stored\(\)"):
        listed = store.list()
    assert listed == [s]


def test_h79_duplicate_id(store: SessionStore, watch: Watch) -> None:
    first = store.create("fixed")
    with pytest.raises(SessionExistsError, match=exact('session "fixed" already exists')):
        store.create("fixed")
    assert store.get("fixed") is first
    assert watch.created == [first]
    assert str(SessionExistsError("fixed")) == 'session "fixed" already exists'


def test_h80_prepare_enter_announce_detach(store: SessionStore, watch: Watch) -> None:
    s = store.prepare("lifecycle")
    assert store.get("lifecycle") is None
    assert watch.created == []
    detach = store.enter(s)
    assert store.get("lifecycle") is s
    assert watch.created == []
    ev = U(s, "x")
    assert watch.events == [(s, ev)]
    store.announce(s)
    assert watch.created == [s]
    detach()
    assert store.get("lifecycle") is None
    U(s, "after")
    assert len(watch.events) == 1
    assert watch.created == [s]


def test_h81_enter_rechecks_the_id(store: SessionStore) -> None:
    stale = store.prepare("racy")
    live = store.create("racy")
    with pytest.raises(SessionExistsError, match=exact('session "racy" already exists')):
        store.enter(stale)
    assert store.get("racy") is live
    assert stale.on_append is None


def test_h82_default_header_shape(pm: PluginManager) -> None:
    store = SessionStore(pm, clock=lambda: 1234)
    s = store.create("plain")
    h = s.header
    assert h.version == 0
    assert h.id == "plain"
    assert isinstance(h.created_at, int)
    assert h.created_at == 1234
    assert h.cwd is msgspec.UNSET
    assert h.parent_session is msgspec.UNSET
    assert h.seed_length is msgspec.UNSET
    assert header_json(s) == {"version": 0, "id": "plain", "createdAt": 1234}
    assert list(header_json(s)) == ["version", "id", "createdAt"]


def test_h82_bare_session_header_has_the_same_shape() -> None:
    s = Session("bare", clock=lambda: 77)
    assert s.header.version == 0
    assert s.header.id == "bare"
    assert header_json(s) == {"version": 0, "id": "bare", "createdAt": 77}
    bare = Session("bare2")
    assert isinstance(bare.header.created_at, int)
    assert set(header_json(bare)) == {"version", "id", "createdAt"}


def test_h82_header_is_immutable() -> None:
    s = Session("bare")
    with pytest.raises(AttributeError):
        s.header.id = "other"  # type: ignore[misc]
    assert s.header.id == "bare"


def test_h83_header_with_cwd_and_parent(pm: PluginManager) -> None:
    store = SessionStore(pm, clock=lambda: 5)
    s = store.create("child", cwd="/srv/project", parent_session="parent")
    assert header_json(s) == {
        "version": 0,
        "id": "child",
        "createdAt": 5,
        "cwd": "/srv/project",
        "parentSession": "parent",
    }
    assert list(header_json(s)) == ["version", "id", "createdAt", "cwd", "parentSession"]


def test_h84_relative_cwd_is_rejected(store: SessionStore, watch: Watch) -> None:
    with pytest.raises(
        SessionCwdError, match=exact('session cwd must be an absolute path, got "relative/path"')
    ):
        store.create("rel", cwd="relative/path")
    assert store.get("rel") is None
    assert watch.created == []


def test_h84_empty_cwd_is_rejected(store: SessionStore) -> None:
    msg = 'session cwd must be an absolute path, got ""'
    with pytest.raises(SessionCwdError, match=exact(msg)):
        store.create("rel", cwd="")
    assert store.get("rel") is None


def test_h84_cwd_is_stored_as_given(store: SessionStore) -> None:
    s = store.create("a", cwd="/srv/../x//y/")
    assert s.header.cwd == "/srv/../x//y/"


def _ten_events() -> list[dict[str, Any]]:
    out = []
    for i in range(5):
        out.append(raw("turn/start", 2 * i, ts_data(i + 1)))
        out.append(raw("turn/end", 2 * i + 1, te_data(i + 1)))
    return out


def test_h85_created_at_and_seed_length_are_explicit(store: SessionStore) -> None:
    s = store.create("r", created_at=1700000000000, seed_length=7, seed=_ten_events())
    assert s.header.created_at == 1700000000000
    assert s.header.seed_length == 7
    assert len(s.events) == 10
    assert header_json(s)["seedLength"] == 7


def test_h85_created_at_zero_is_kept(pm: PluginManager) -> None:
    store = SessionStore(pm, clock=lambda: 99)
    s = store.create("z", created_at=0)
    assert s.header.created_at == 0


def test_h85_unchecked_header_fields(store: SessionStore) -> None:
    """§6.2 step 4: ``seedLength`` and ``parentSession`` are not checked."""
    s = store.create("u", seed_length=-3, parent_session="does-not-exist")
    assert s.header.seed_length == -3
    assert s.header.parent_session == "does-not-exist"


def test_h85_seed_errors_come_after_the_id_and_cwd_checks(store: SessionStore) -> None:
    bad_seed = [raw("turn/start", 3, ts_data(1))]
    with pytest.raises(SeedError):
        store.create("s", seed=bad_seed)
    assert store.get("s") is None
    with pytest.raises(SessionCwdError):
        store.create("s", cwd="rel", seed=bad_seed)
    store.create("taken")
    with pytest.raises(SessionExistsError):
        store.create("taken", cwd="rel", seed=bad_seed)


def test_h86_failing_created_listener_detaches(pm: PluginManager) -> None:
    class FailOnce:
        def __init__(self) -> None:
            self.failed = False

        @hookimpl
        def session_created(self, session: Session) -> None:
            if not self.failed:
                self.failed = True
                assert the_store.get(session.id) is session  # already registered and wired
                assert session.on_append is not None
                raise RuntimeError("boom created listener")

    watch = Watch()
    pm.register(watch)
    fail = FailOnce()
    pm.register(fail)
    the_store = SessionStore(pm)
    with pytest.raises(RuntimeError, match=exact("boom created listener")):
        the_store.create("fixed")
    assert the_store.get("fixed") is None
    assert the_store.live() == []
    s = the_store.create("fixed")
    assert the_store.get("fixed") is s
    ev = U(s, "x")
    assert watch.events == [(s, ev)]


def test_h86_failed_session_is_unwired(pm: PluginManager) -> None:
    """The detach clears ``on_append`` of the session that failed its announcement."""
    failed: list[Session] = []

    class Fail:
        @hookimpl
        def session_created(self, session: Session) -> None:
            failed.append(session)
            raise RuntimeError("boom created listener")

    watch = Watch()
    pm.register(watch)
    pm.register(Fail())
    store = SessionStore(pm)
    with pytest.raises(RuntimeError):
        store.create("x")
    (s,) = failed
    assert s.on_append is None
    U(s, "late")
    assert watch.events == []


def test_h87_minting_uses_up_a_number(store: SessionStore) -> None:
    store.create("session-1")
    with pytest.raises(SessionExistsError, match=exact('session "session-1" already exists')):
        store.create()
    s = store.create()
    assert s.id == "session-2"


def test_h87_prepare_mints_too(store: SessionStore) -> None:
    a = store.prepare()
    b = store.prepare()
    assert (a.id, b.id) == ("session-1", "session-2")
    assert store.live() == []
    assert store.create().id == "session-3"


def test_h87_empty_string_is_a_valid_id(store: SessionStore) -> None:
    s = store.create("")
    assert s.id == ""
    assert store.get("") is s
    assert store.create().id == "session-1"


def test_h88_list_keeps_insertion_order(store: SessionStore) -> None:
    store.create("b")
    store.create("a")
    assert [s.id for s in store.live()] == ["b", "a"]


def test_h89_id_check_runs_before_the_cwd_check(store: SessionStore) -> None:
    store.create("dup")
    with pytest.raises(SessionExistsError, match=exact('session "dup" already exists')):
        store.create("dup", cwd="rel")


def test_h_store_sessions_append_and_emit(store: SessionStore, watch: Watch) -> None:
    s = store.create("s")
    evs = [TS(s, 1), U(s, "x"), TE(s, 1)]
    assert [e for _, e in watch.events] == evs
    assert all(sess is s for sess, _ in watch.events)


def test_h_store_clock_times_events(pm: PluginManager) -> None:
    store = SessionStore(pm, clock=lambda: 42)
    s = store.create("s")
    assert TS(s, 1).time == 42
    assert s.header.created_at == 42
