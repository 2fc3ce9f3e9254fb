"""Spec core.md §11 G: seeding a session with complete events (§6.1)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from helpers import (
    REP,
    TE,
    TS,
    U,
    a_data,
    exact,
    messages,
    node_seqs,
    raw,
    te_data,
    text,
    ts_data,
    u_data,
    wires,
)

from dsh_session_core import Event, PluginManager, Session, SessionStore, hookimpl
from dsh_session_core.errors import SeedError, SurfaceError


def test_g70_non_json_seed_data() -> None:
    """JS ``1n`` has no Python twin; a ``Decimal`` is the number of another type."""
    seed = [raw("user/message", 0, {**u_data("x"), "extra": Decimal(1)}, surface_op="append")]
    with pytest.raises(
        SeedError,
        match=exact('seed event "user/message" (seq 0) carries non-JSON-serializable data'),
    ):
        Session("s", seed=seed)


@pytest.mark.parametrize(
    "bad",
    [float("nan"), {1, 2}, (1, 2), b"x", {1: "a"}],
    ids=["nan", "set", "tuple", "bytes", "int-key"],
)
def test_g70_python_non_json_seed_data(bad: Any) -> None:
    seed = [
        raw("turn/start", 0, ts_data(1)),
        raw("user/message", 1, {**u_data("x"), "extra": bad}, surface_op="append"),
    ]
    with pytest.raises(
        SeedError,
        match=exact('seed event "user/message" (seq 1) carries non-JSON-serializable data'),
    ):
        Session("s", seed=seed)


def test_g70_non_json_in_a_typed_field() -> None:
    seed = [
        raw(
            "user/message",
            0,
            {"content": [{"type": "text", "text": b"x"}], "source": {"kind": "user"}},
            surface_op="append",
        )
    ]
    with pytest.raises(
        SeedError,
        match=exact('seed event "user/message" (seq 0) carries non-JSON-serializable data'),
    ):
        Session("s", seed=seed)


def test_g71_seed_must_be_contiguous() -> None:
    seed = [raw("turn/start", 0, ts_data(1)), raw("turn/end", 5, te_data(1))]
    with pytest.raises(
        SeedError,
        match=exact("seed event at index 1 has seq 5 (expected 1); seed must be contiguous from 0"),
    ):
        Session("s", seed=seed)


def test_g71_seed_must_start_at_zero() -> None:
    seed = [raw("turn/start", 1, ts_data(1))]
    with pytest.raises(
        SeedError,
        match=exact("seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"),
    ):
        Session("s", seed=seed)


def test_g71_seq_check_comes_before_the_json_check() -> None:
    """§6.1: per event, the seq check runs first, then the JSON check."""
    seed = [
        raw("turn/start", 0, ts_data(1)),
        raw("user/message", 5, {**u_data("x"), "extra": Decimal(1)}, surface_op="append"),
    ]
    with pytest.raises(
        SeedError,
        match=exact("seed event at index 1 has seq 5 (expected 1); seed must be contiguous from 0"),
    ):
        Session("s", seed=seed)


def test_g72_seed_surface_event_without_marker() -> None:
    seed = [
        raw("turn/start", 0, ts_data(1)),
        raw("user/message", 1, u_data("x")),
        raw("turn/end", 2, te_data(1)),
    ]
    with pytest.raises(
        SeedError,
        match=exact(
            'seed event "user/message" (seq 1) is surface-eligible but carries no surfaceOp marker'
        ),
    ):
        Session("s", seed=seed)


def test_g72_json_check_comes_before_the_marker_check() -> None:
    seed = [raw("user/message", 0, {**u_data("x"), "extra": Decimal(1)})]
    with pytest.raises(
        SeedError,
        match=exact('seed event "user/message" (seq 0) carries non-JSON-serializable data'),
    ):
        Session("s", seed=seed)


def test_g72_opaque_surface_event_without_marker() -> None:
    """A surface type whose payload fits no schema still needs its marker."""
    seed = [raw("user/message", 0, {**u_data("x"), "extra": 1})]
    with pytest.raises(
        SeedError,
        match=exact(
            'seed event "user/message" (seq 0) is surface-eligible but carries no surfaceOp marker'
        ),
    ):
        Session("s", seed=seed)


def test_g73_valid_seed_keeps_its_times() -> None:
    seed = [
        raw("turn/start", 0, ts_data(1), time=1),
        raw("user/message", 1, u_data("original"), time=2, surface_op="append"),
        raw("turn/end", 2, te_data(1), time=3),
    ]
    s = Session("s", seed=seed, clock=lambda: 999)
    assert len(s.events) == 3
    assert s.seq == 3
    assert [e.time for e in s.events] == [1, 2, 3]
    assert wires(s) == seed
    assert U(s, "next").seq == 3
    assert s.events[3].time == 999


def test_g73_empty_seed_is_fine() -> None:
    s = Session("s", seed=[])
    assert list(s.events) == []
    assert s.seq == 0
    assert U(s, "x").seq == 0


def test_g73_seed_keeps_its_key_order() -> None:
    """§1: seeded events keep the seed's key order when written again."""
    line = {
        "type": "user/message",
        "seq": 0,
        "time": 1,
        "data": u_data("x"),
        "surfaceOp": "append",
        "sourceEventSeqs": [],
    }
    s = Session("s", seed=[line])
    assert list(wires(s)[0]) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]


def test_g74_seed_is_copied() -> None:
    user = raw("user/message", 1, u_data("original"), time=2, surface_op="append")
    seed = [raw("turn/start", 0, ts_data(1), time=1), user, raw("turn/end", 2, te_data(1))]
    s = Session("s", seed=seed)
    user["data"]["content"][0]["text"] = "HACKED"
    user["data"]["injected"] = True
    seed.append(raw("turn/start", 3, ts_data(2)))
    logged = wires(s)[1]["data"]
    assert logged["content"] == [text("original")]
    assert "injected" not in logged
    assert len(s.events) == 3
    assert messages(s) == [{"role": "user", "content": [text("original")]}]


def test_g75_todo_write_seed_needs_no_marker() -> None:
    seed = [
        raw("todo/write", 0, {"todos": [{"content": "first", "status": "pending"}]}),
        raw("todo/write", 1, {"todos": [{"content": "only", "status": "completed"}]}),
    ]
    s = Session("s", seed=seed)
    last = [e for e in s.events if e.type == "todo/write"][-1]
    assert wires(s)[last.seq]["data"]["todos"] == [{"content": "only", "status": "completed"}]
    assert node_seqs(s) == []


class _Counter:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.created: list[Session] = []

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.events.append(event)

    @hookimpl
    def session_created(self, session: Session) -> None:
        self.created.append(session)


def test_g76_no_session_event_for_seeded_events(pm: PluginManager) -> None:
    counter = _Counter()
    pm.register(counter)
    store = SessionStore(pm)
    a = Session("a")
    TS(a, 1)
    U(a, "hi")
    TE(a, 1)
    forked = store.create("fork", seed=[*a.events])
    assert counter.events == []
    assert counter.created == [forked]
    assert len(forked.events) == 3
    assert wires(forked) == wires(a)
    # Later appends do fire.
    ev = U(forked, "more")
    assert counter.events == [ev]


def test_g77_seeded_missing_start_fails_lazily() -> None:
    seed = [
        raw("user/message", 0, u_data("a"), surface_op="append"),
        raw("assistant/message", 1, a_data(1, 1, [text("r")]), surface_op=REP(7, 0)),
    ]
    s = Session("s", seed=seed)
    assert len(s.events) == 2
    for _ in range(3):
        with pytest.raises(
            SurfaceError,
            match=r"surface replace: start seq \d+ not found in "
            r"surface",
        ):
            s.derive_messages()
    with pytest.raises(SurfaceError, match=exact("surface replace: start seq 7 not found")):
        _ = s.surface.nodes


def test_g77_seeded_bad_replace_in_a_store_session(pm: PluginManager) -> None:
    """A store loads such a log too (construction succeeds); reads fail."""
    store = SessionStore(pm)
    seed = [
        raw("user/message", 0, u_data("a"), surface_op="append"),
        raw("assistant/message", 1, a_data(1, 1, [text("r")]), surface_op=REP(7, 0)),
    ]
    s = store.create("loaded", seed=seed)
    assert store.get("loaded") is s
    with pytest.raises(SurfaceError, match=exact("surface replace: start seq 7 not found")):
        s.derive_messages()


def test_g_seed_does_not_check_non_surface_fields_or_time() -> None:
    """§6.1 lists what seeding does not check: time, provenance shape, surface fields on
    non-surface types, turn nesting."""
    seed: list[dict[str, Any]] = [
        raw("turn/end", 0, te_data(9), time=-5),
        raw("turn/start", 1, ts_data(1), surface_op="append", source_event_seqs=[7, 7]),
        raw("user/message", 2, u_data("x"), surface_op="append", source_event_seqs=[99]),
    ]
    s = Session("s", seed=seed)
    assert len(s.events) == 3
    assert node_seqs(s) == [2]
    assert wires(s) == seed


def test_g72_seq_check_comes_before_the_marker_check() -> None:
    """§6.1: on one event, a wrong seq is reported before a missing marker."""
    seed = [raw("turn/start", 0, ts_data(1)), raw("user/message", 5, u_data("x"))]
    with pytest.raises(
        SeedError,
        match=exact("seed event at index 1 has seq 5 (expected 1); seed must be contiguous from 0"),
    ):
        Session("s", seed=seed)


def test_g72_first_failing_event_is_reported() -> None:
    """§6.1: events are checked in index order; the first failure wins."""
    seed = [raw("user/message", 0, u_data("x")), raw("turn/end", 5, te_data(1))]
    with pytest.raises(
        SeedError,
        match=exact(
            'seed event "user/message" (seq 0) is surface-eligible but carries no surfaceOp marker'
        ),
    ):
        Session("s", seed=seed)
