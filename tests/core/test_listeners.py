"""Spec core.md §11 D: listener behaviour (``session_event`` plugins, ``on_append``)."""

from __future__ import annotations

import pytest
from helpers import SS, TS, U, step_data, u_data

from dsh_session_core import Event, PluginManager, Session, SessionStore, hookimpl


class Recorder:
    """A ``session_event`` plugin recording ``(session, event)`` pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[Session, Event]] = []

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.calls.append((session, event))

    @property
    def seqs(self) -> list[int]:
        return [e.seq for _, e in self.calls]


class Raiser(Recorder):
    """Records, then raises ``RuntimeError("boom")`` for the first ``times`` events."""

    def __init__(self, times: int = 1) -> None:
        super().__init__()
        self.times = times

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.calls.append((session, event))
        if self.times > 0:
            self.times -= 1
            raise RuntimeError("boom")


class TodoOnStepStart(Recorder):
    """Appends a ``todo/write`` re-entrantly when it sees ``step/start``."""

    def __init__(self) -> None:
        super().__init__()
        self.inner: list[Event] = []

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.calls.append((session, event))
        if event.type == "step/start":
            todo = {"todos": [{"content": "plan", "status": "pending"}]}
            self.inner.append(session.append("todo/write", todo))


def test_d31_one_call_per_append_with_the_logged_event(pm: PluginManager) -> None:
    rec = Recorder()
    pm.register(rec)
    store = SessionStore(pm)
    s = store.create("s")
    ev = U(s, "x")
    assert len(rec.calls) == 1
    session, event = rec.calls[0]
    assert session is s
    assert event is ev
    assert event is s.events[0]


def test_d31_listener_registered_after_the_store_is_built(pm: PluginManager) -> None:
    store = SessionStore(pm)
    s = store.create("s")
    rec = Recorder()
    pm.register(rec)
    ev = U(s, "x")
    assert [(a, b) for a, b in rec.calls] == [(s, ev)]


def test_d32_error_reaches_the_caller_and_the_event_stays(pm: PluginManager) -> None:
    raiser = Raiser(times=1)
    pm.register(raiser)
    store = SessionStore(pm)
    s = store.create("s")
    n = len(s.events)
    with pytest.raises(RuntimeError) as info:
        U(s, "x")
    assert info.value.args == ("boom",)
    assert len(s.events) == n + 1
    assert s.events[n].type == "user/message"
    assert s.seq == n + 1
    nxt = U(s, "y")
    assert nxt.seq == n + 1
    assert [e.seq for _, e in raiser.calls] == [n, n + 1]


@pytest.mark.parametrize("raiser_first", [True, False], ids=["raiser-first", "raiser-last"])
def test_d32_every_listener_sees_the_event_even_when_one_raises(
    pm: PluginManager, raiser_first: bool
) -> None:
    """Deviation 3: every listener sees every event even when another raises; the error
    reaches the caller after all ran, and the event stays logged. Tried with the raiser
    registered both before and after the other listener, so one of the two runs has it
    called first whatever order the store uses."""
    raiser = Raiser(times=1)
    other = Recorder()
    for plugin in (raiser, other) if raiser_first else (other, raiser):
        pm.register(plugin)
    store = SessionStore(pm)
    s = store.create("s")
    with pytest.raises(RuntimeError) as info:
        U(s, "x")
    assert info.value.args == ("boom",)
    assert len(s.events) == 1
    assert [e for _, e in other.calls] == [s.events[0]]
    assert [e for _, e in raiser.calls] == [s.events[0]]
    U(s, "y")
    assert other.seqs == [0, 1]
    assert raiser.seqs == [0, 1]


def test_d33_a_bare_session_notifies_nobody(pm: PluginManager) -> None:
    rec = Recorder()
    pm.register(rec)
    SessionStore(pm)
    s = Session("bare")
    assert s.on_append is None
    ev = U(s, "x")
    assert ev.seq == 0
    assert rec.calls == []


def test_d33_on_append_is_settable_on_a_bare_session() -> None:
    seen: list[Event] = []
    s = Session("bare")
    s.on_append = seen.append
    ev = U(s, "x")
    assert seen == [ev]
    assert seen[0] is ev
    s.on_append = None
    U(s, "y")
    assert seen == [ev]


def test_d34_disposed_scope_detaches_the_session(pm: PluginManager) -> None:
    """The reference disposes a child scope (fiber); the port's form is ``store.scope()``."""
    rec = Recorder()
    pm.register(rec)
    store = SessionStore(pm)
    with store.scope():
        s = store.create("scoped")
        assert store.get("scoped") is s
    assert store.get("scoped") is None
    assert s not in store.live()
    late = U(s, "late")
    assert late.seq == 0
    assert len(s.events) == 1
    assert rec.calls == []


def test_d34_scope_exit_by_exception_also_detaches(pm: PluginManager) -> None:
    rec = Recorder()
    pm.register(rec)
    store = SessionStore(pm)
    created: list[Session] = []

    def body() -> None:
        with store.scope():
            created.append(store.create("scoped"))
            raise KeyError("leave")

    with pytest.raises(KeyError):
        body()
    (s,) = created
    assert store.get("scoped") is None
    U(s, "late")
    assert rec.calls == []


def test_d35_reentrant_append_gets_the_next_seq(pm: PluginManager) -> None:
    plugin = TodoOnStepStart()
    pm.register(plugin)
    store = SessionStore(pm, foreign_types=["todo/write"])  # no todo plugin: opaque
    s = store.create("s")
    TS(s, 1)
    n = s.seq
    outer = SS(s, 1, 1)
    assert outer.seq == n
    assert outer is s.events[n]
    assert s.events[n].type == "step/start"
    assert s.events[n + 1].type == "todo/write"
    assert s.events[n + 1].seq == n + 1
    assert len(s.events) == n + 2
    assert [e.seq for e in plugin.inner] == [n + 1]
    assert plugin.inner[0] is s.events[n + 1]
    # The nested event is delivered too, after the outer one.
    assert plugin.seqs == [0, n, n + 1]


@pytest.mark.parametrize("appender_first", [True, False], ids=["appender-first", "appender-last"])
def test_d35_reentrant_events_reach_every_listener_in_seq_order(
    pm: PluginManager, appender_first: bool
) -> None:
    """Deviation 3: with a re-entrant append, every listener sees seqs in increasing
    order (the nested event is delivered after the current one reached everybody)."""
    appender = TodoOnStepStart()
    watcher = Recorder()
    for plugin in (appender, watcher) if appender_first else (watcher, appender):
        pm.register(plugin)
    store = SessionStore(pm, foreign_types=["todo/write"])  # no todo plugin: opaque
    s = store.create("s")
    TS(s, 1)
    SS(s, 1, 1)
    U(s, "after")
    assert [e.type for e in s.events] == ["turn/start", "step/start", "todo/write", "user/message"]
    for listener in (appender, watcher):
        assert listener.seqs == [0, 1, 2, 3]
        assert [e for _, e in listener.calls] == list(s.events)


def test_d35_nested_reentrant_appends_stay_in_order(pm: PluginManager) -> None:
    """A listener appending on every ``step/start`` and ``user/message`` twice deep."""

    class Chain(Recorder):
        @hookimpl
        def session_event(self, session: Session, event: Event) -> None:
            self.calls.append((session, event))
            if event.type == "step/start":
                session.append("user/message", u_data("from listener"), surface_op="append")
            elif event.type == "user/message" and event.seq < 4:
                session.append("step/end", step_data(1, 1))

    chain = Chain()
    watcher = Recorder()
    pm.register(chain)
    pm.register(watcher)
    store = SessionStore(pm)
    s = store.create("s")
    SS(s, 1, 1)
    assert [e.type for e in s.events] == ["step/start", "user/message", "step/end"]
    assert chain.seqs == [0, 1, 2]
    assert watcher.seqs == [0, 1, 2]


def test_d35_listener_sees_the_event_already_logged(pm: PluginManager) -> None:
    """§2.7: the listener runs after the push, so the event is in ``events`` already."""
    lengths: list[int] = []

    class Peek:
        @hookimpl
        def session_event(self, session: Session, event: Event) -> None:
            lengths.append(len(session.events))
            assert session.events[event.seq] is event

    pm.register(Peek())
    store = SessionStore(pm)
    s = store.create("s")
    U(s, "x")
    U(s, "y")
    assert lengths == [1, 2]


def test_d_store_listener_is_cleared_on_detach(pm: PluginManager) -> None:
    """§2.7: detaching unsets the session's listener; later appends notify nobody."""
    rec = Recorder()
    pm.register(rec)
    store = SessionStore(pm)
    s = store.create("s")
    U(s, "x")
    store.detach(s)
    assert store.get("s") is None
    assert s.on_append is None
    U(s, "y")
    assert rec.seqs == [0]
