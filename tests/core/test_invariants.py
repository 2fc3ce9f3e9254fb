"""Spec core.md §11 M (the opt-in dev invariants plugin, §10), plus §12 items 1, 2, 21.

Each ``test_m<n>_...`` pins scenario ``<n>``; expected details are the spec's, prefixed
with ``invariant violated: ``. Where our port deviates (the core refuses surface fields on
non-surface types, §12.2, and replace ops that do not fit the surface, HEAD's tightening,
§12.22) the live case expects the core's refusal, and the plugin's own check is pinned
through a seeded log, which the core keeps as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from dsh_session_core import (
    ENTRY_POINT_GROUP,
    OpaqueEvent,
    PluginManager,
    Session,
    SessionStore,
)
from dsh_session_core.errors import InvariantError, SurfaceIntentError
from dsh_session_core.invariants import InvariantsPlugin
from dsh_session_core.testing import (
    assistant_data,
    call_block,
    step_data,
    text_block,
    tool_call_data,
    tool_result_data,
    turn_end_data,
    turn_start_data,
    user_data,
)

JSON = Any
PREFIX = "invariant violated: "

# --- the §11 shorthands, as wire-shape payloads (the testing kit's, by short names) ------

text = text_block
ts = turn_start_data
te = turn_end_data
step = step_data
user = user_data
assistant = assistant_data
tc = tool_call_data


def chunk(t: int, s: int) -> dict[str, JSON]:
    return {"turn": t, "step": s, "chunk": {"type": "text-delta", "index": 0, "text": "h"}}


def tr(t: int, s: int, call_id: str, out: str = "out", **extra: JSON) -> dict[str, JSON]:
    return {**tool_result_data(t, s, call_id, out), **extra}


def line(etype: str, seq: int, data: JSON, **envelope: JSON) -> dict[str, JSON]:
    """One seed entry in its wire shape (``time`` 0)."""
    return {"type": etype, "seq": seq, "time": 0, "data": data, **envelope}


# --- fixtures and checks -------------------------------------------------------------------


@pytest.fixture
def plugin() -> InvariantsPlugin:
    return InvariantsPlugin()


@pytest.fixture
def store(pm: PluginManager, plugin: InvariantsPlugin) -> SessionStore:
    """A store whose manager has core and the invariants plugin, nothing else."""
    pm.register(plugin, name="invariants")
    return SessionStore(pm, clock=lambda: 1)


def violates(
    session: Session,
    etype: str,
    data: JSON,
    detail: str,
    **intent: Any,
) -> InvariantError:
    """Append, expect ``detail``, and check the event stayed in the log (§12.1)."""
    seq = session.seq
    with pytest.raises(InvariantError) as info:
        session.append(etype, data, **intent)
    err = info.value
    assert str(err) == PREFIX + detail
    assert err.detail == detail
    assert err.code == "INVARIANT"
    # A listener error is not a rollback: the event is logged and its seq used up.
    assert session.seq == seq + 1
    assert session.events[seq].type == etype
    return err


# --- M: one test per scenario --------------------------------------------------------------


def test_m143_well_formed_turn_raises_nothing(store: SessionStore) -> None:
    s = store.create()
    s.append("turn/start", ts(1))
    s.append("user/message", user("hi"), surface_op="append")
    s.append("step/start", step(1, 1))
    s.append("assistant/chunk", chunk(1, 1))
    s.append("assistant/message", assistant(1, 1, [call_block("c1")]), surface_op="append")
    s.append("tool/call", tc(1, 1, "c1"))
    s.append("tool/result", tr(1, 1, "c1"), surface_op="append")
    s.append("step/end", step(1, 1))
    s.append("turn/end", te(1))
    assert [e.type for e in s.events] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    # The plugin is really listening: the next turn must be numbered 2.
    violates(s, "turn/start", ts(3), "turn/start expected turn 2, got 3")


def test_m144_turn_nesting_and_numbering(store: SessionStore) -> None:
    a = store.create()
    a.append("turn/start", ts(1))
    violates(a, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")

    b = store.create()
    b.append("turn/start", ts(1))
    violates(b, "turn/end", te(2), "turn/end 2 does not match open turn 1")

    c = store.create()
    c.append("turn/start", ts(1))
    c.append("turn/end", te(1))
    violates(c, "turn/start", ts(3), "turn/start expected turn 2, got 3")


def test_m145_step_numbering_and_enclosure(store: SessionStore) -> None:
    a = store.create()
    a.append("turn/start", ts(1))
    a.append("step/start", step(1, 1))
    a.append("step/end", step(1, 1))
    violates(a, "step/start", step(1, 3), "step/start expected step 2 in turn 1, got 3")

    b = store.create()
    b.append("turn/start", ts(1))
    b.append("step/start", step(1, 1))
    violates(b, "turn/end", te(1), "turn/end 1 while step 1 is still open")

    c = store.create()
    c.append("turn/start", ts(1))
    violates(
        c,
        "assistant/chunk",
        chunk(1, 1),
        "assistant/chunk names turn 1/step 1 but open is turn 1/step null",
    )


def test_m146_every_other_type_must_be_turn_enclosed(
    pm: PluginManager, plugin: InvariantsPlugin
) -> None:
    pm.register(plugin, name="invariants")
    # compaction/marker is appended as a foreign type (the strict default refuses it).
    s = SessionStore(pm, clock=lambda: 1, foreign_types=["compaction/marker"]).create()
    outside = "appended outside any open turn (every event must be turn-enclosed)"
    violates(s, "user/message", user("hi"), f"user/message {outside}", surface_op="append")
    violates(s, "context/message", user("ctx"), f"context/message {outside}", surface_op="append")
    steering = {"turn": 1, "content": [text("go")], "source": {"kind": "user"}}
    violates(s, "steering/message", steering, f"steering/message {outside}", surface_op="append")
    # A plugin type no registry knows: logged opaque by the core, still held to the rule.
    violates(s, "compaction/marker", {"foo": "bar"}, f"compaction/marker {outside}")
    assert type(s.events[3]) is OpaqueEvent
    # Inside a turn, the same types pass.
    s.append("turn/start", ts(1))
    s.append("user/message", user("hi"), surface_op="append")
    s.append("compaction/marker", {"foo": "bar"})


def test_m147_tool_result_needs_a_call_in_the_same_step(store: SessionStore) -> None:
    a = store.create()
    a.append("turn/start", ts(1))
    a.append("step/start", step(1, 1))
    violates(
        a,
        "tool/result",
        tr(1, 1, "ghost"),
        "tool/result for ghost with no prior tool/call in this step",
        surface_op="append",
    )

    b = store.create()
    b.append("turn/start", ts(1))
    b.append("step/start", step(1, 1))
    b.append("tool/call", tc(1, 1, "c1"))
    b.append("step/end", step(1, 1))  # the call stays unanswered: legal
    b.append("step/start", step(1, 2))
    violates(
        b,
        "tool/result",
        tr(1, 2, "c1"),
        "tool/result for c1 with no prior tool/call in this step",
        surface_op="append",
    )

    # Crash repair's synthetic result answers a call no tool/call event announced.
    c = store.create()
    c.append("turn/start", ts(1))
    c.append("step/start", step(1, 1))
    c.append("assistant/message", assistant(1, 1, [call_block("crashed")]), surface_op="append")
    interrupted = {"name": "InterruptedError", "code": "interrupted"}
    c.append(
        "tool/result",
        tr(1, 1, "crashed", isError=True, error=interrupted),
        surface_op="append",
    )
    c.append("step/end", step(1, 1))
    c.append("turn/end", te(1))
    assert c.seq == 6

    # Only the interrupted code is exempt: another error still needs its call.
    d = store.create()
    d.append("turn/start", ts(1))
    d.append("step/start", step(1, 1))
    violates(
        d,
        "tool/result",
        tr(1, 1, "x", isError=True, error={"name": "Boom", "code": "boom"}),
        "tool/result for x with no prior tool/call in this step",
        surface_op="append",
    )


def test_m148_source_event_seqs_rules(store: SessionStore) -> None:
    a = store.create()
    a.append("turn/start", ts(1))
    a.append("user/message", user("a"), surface_op="append")
    violates(
        a,
        "user/message",
        user("b"),
        "sourceEventSeqs must not be empty when present",
        surface_op="append",
        source_event_seqs=[],
    )
    violates(
        a,
        "user/message",
        user("c"),
        "sourceEventSeqs must not contain duplicates",
        surface_op="append",
        source_event_seqs=[1, 1],
    )

    b = store.create()
    b.append("turn/start", ts(1))
    violates(
        b,
        "user/message",
        user("self"),
        "sourceEventSeqs must reference earlier events: 1 >= current seq 1",
        surface_op="append",
        source_event_seqs=[1],
    )

    c = store.create()
    c.append("turn/start", ts(1))
    violates(
        c,
        "user/message",
        user("future"),
        "sourceEventSeqs must reference earlier events: 99 >= current seq 1",
        surface_op="append",
        source_event_seqs=[99],
    )

    # Valid provenance passes.
    c.append("user/message", user("ok"), surface_op="append", source_event_seqs=[0])


def test_m149_replace_must_name_surface_nodes_and_record_them(store: SessionStore) -> None:
    """The first case is a deviation: ``Session.append`` checks replace ops before logging
    (HEAD's tightening), so the live append is refused by the core with its "not found"
    wording and the log is untouched. The plugin's "is not on the surface" wording is
    pinned on a seeded log, which the core accepts as written (§3.4)."""
    a = store.create()
    a.append("turn/start", ts(1))
    a.append("step/start", step(1, 1))
    a.append("user/message", user("a"), surface_op="append")
    with pytest.raises(SurfaceIntentError, match="start seq 1 not found in surface"):
        a.append(
            "assistant/message",
            assistant(1, 1, []),
            surface_op={"op": "replace", "start": 1, "end": 2},
            source_event_seqs=[1, 2],
        )
    assert a.seq == 3

    seed = [
        line("turn/start", 0, ts(1)),
        line("step/start", 1, step(1, 1)),
        line("user/message", 2, user("a"), surfaceOp="append"),
        line(
            "assistant/message",
            3,
            assistant(1, 1, []),
            sourceEventSeqs=[1, 2],
            surfaceOp={"op": "replace", "start": 1, "end": 2},
        ),
    ]
    with pytest.raises(InvariantError) as info:
        store.create("seeded", seed=seed)
    assert str(info.value) == PREFIX + "surface replace: start seq 1 is not on the surface"
    assert store.get("seeded") is None

    # Sources [2] for a replace over 2..3: the core accepts it, the plugin does not.
    b = store.create()
    b.append("turn/start", ts(1))
    b.append("step/start", step(1, 1))
    b.append("user/message", user("a"), surface_op="append")
    b.append("user/message", user("b"), surface_op="append")
    violates(
        b,
        "assistant/message",
        assistant(1, 1, [text("sum")]),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 3",
        surface_op={"op": "replace", "start": 2, "end": 3},
        source_event_seqs=[2],
    )

    # No sources at all.
    c = store.create()
    c.append("turn/start", ts(1))
    c.append("step/start", step(1, 1))
    c.append("user/message", user("a"), surface_op="append")
    violates(
        c,
        "assistant/message",
        assistant(1, 1, []),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 2",
        surface_op={"op": "replace", "start": 2, "end": 2},
    )


def test_m150_non_surface_types_carry_no_surface_fields(
    store: SessionStore, plugin: InvariantsPlugin
) -> None:
    """Deviation (§12.2): ``Session.append`` refuses surface fields on a non-surface type
    itself, before logging (SurfaceIntentError, log untouched), so the plugin never sees
    such an append. Its own check still guards seeded logs, where the core keeps such an
    event (opaque, as written); there, as in the spec, the event stays in the log."""
    s = store.create()
    s.append("turn/start", ts(1))
    # The core's message opens with the plugin's detail, then says what to do.
    seqs_detail = "turn/end cannot carry sourceEventSeqs (non-surface event)"
    with pytest.raises(SurfaceIntentError, match="^" + re.escape(seqs_detail)):
        s.append("turn/end", te(1), source_event_seqs=[0])
    op_detail = "turn/end cannot carry surfaceOp (non-surface event)"
    with pytest.raises(SurfaceIntentError, match="^" + re.escape(op_detail)):
        s.append("turn/end", te(1), surface_op="append")
    assert s.seq == 1

    cases: list[tuple[str, JSON, str]] = [
        ("sourceEventSeqs", [0], seqs_detail),
        ("surfaceOp", "append", op_detail),
    ]
    for field, value, detail in cases:
        seed = [line("turn/start", 0, ts(1)), line("turn/end", 1, te(1), **{field: value})]
        with pytest.raises(InvariantError) as info:
            store.create("seeded", seed=seed)
        assert str(info.value) == PREFIX + detail
        assert store.get("seeded") is None

        bare = Session("bare", seed=seed)
        with pytest.raises(InvariantError) as info:
            plugin.watch(bare)
        assert info.value.detail == detail
        logged = bare.events[1]
        assert type(logged) is OpaqueEvent
        assert logged.type == "turn/end"
        assert isinstance(logged.wire, Mapping)
        assert logged.wire[field] == (tuple(value) if isinstance(value, list) else value)


def test_m151_bad_seed_rolls_create_back(store: SessionStore) -> None:
    seed = [line("turn/start", 0, ts(1)), line("turn/start", 1, ts(2))]
    with pytest.raises(InvariantError) as info:
        store.create("s", seed=seed)
    assert str(info.value) == PREFIX + "turn/start 2 while turn 1 is still open"
    assert store.get("s") is None
    assert store.live() == []
    # The registration was rolled back, so the id is free again.
    good = store.create("s", seed=seed[:1])
    assert store.get("s") is good
    # The plugin replayed the good seed: turn 1 is open in its trace.
    violates(good, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")


# --- beyond the scenarios: what the port chose -------------------------------------------


def test_a_violating_event_never_enters_the_trace(store: SessionStore) -> None:
    s = store.create()
    s.append("turn/start", ts(1))
    violates(s, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")
    # Turn 1 is still the open one, and seq 1 (the bad event) is not a known seq.
    s.append("turn/end", te(1))
    s.append("turn/start", ts(2))
    violates(
        s,
        "user/message",
        user("x"),
        "sourceEventSeqs references unknown seq 1",
        surface_op="append",
        source_event_seqs=[1],
    )


def test_seq_must_strictly_increase(store: SessionStore, plugin: InvariantsPlugin) -> None:
    # Session.append keeps seq == index, so drive the hook directly with a stale event.
    s = store.create()
    first = s.append("turn/start", ts(1))
    with pytest.raises(InvariantError) as info:
        plugin.session_event(session=s, event=first)
    assert info.value.detail == "seq must strictly increase: saw 0 after 0"


def test_replace_order_is_positional_and_says_pos(store: SessionStore) -> None:
    """§12.3: the plugin folds its own surface and reports positions as ``pos``."""
    head = [
        line("turn/start", 0, ts(1)),
        line("step/start", 1, step(1, 1)),
        line("user/message", 2, user("a"), surfaceOp="append"),
        line("user/message", 3, user("b"), surfaceOp="append"),
        # The surface becomes [4, 3]: seq 4 now precedes seq 3.
        line(
            "assistant/message",
            4,
            assistant(1, 1, [text("s")]),
            sourceEventSeqs=[2],
            surfaceOp={"op": "replace", "start": 2, "end": 2},
        ),
    ]
    reversed_range = line(
        "assistant/message",
        5,
        assistant(1, 1, []),
        sourceEventSeqs=[3, 4],
        surfaceOp={"op": "replace", "start": 3, "end": 4},
    )
    with pytest.raises(InvariantError) as info:
        store.create("reversed", seed=[*head, reversed_range])
    assert info.value.detail == (
        "surface replace: start seq 3 (pos 1) is after end seq 4 (pos 0) on the surface"
    )
    # start 4 > end 3 numerically, but in surface order: accepted.
    s = store.create("positional", seed=head)
    s.append(
        "assistant/message",
        assistant(1, 1, []),
        surface_op={"op": "replace", "start": 4, "end": 3},
        source_event_seqs=[4, 3],
    )
    assert [n.seq for n in s.surface.nodes] == [5]


def test_traces_are_kept_per_session(store: SessionStore) -> None:
    a = store.create()
    b = store.create()
    a.append("turn/start", ts(1))
    b.append("turn/start", ts(1))  # b has no open turn of its own yet
    a.append("turn/end", te(1))
    violates(b, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")


def test_a_trace_belongs_to_one_session_object(pm: PluginManager) -> None:
    # Two stores on one manager both mint "session-1": each is judged by its own log.
    pm.register(InvariantsPlugin())
    first, second = SessionStore(pm).create(), SessionStore(pm).create()
    assert first.id == second.id
    first.append("turn/start", ts(1))
    second.append("turn/start", ts(1))
    first.append("turn/end", te(1))
    violates(second, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")
    violates(first, "turn/end", te(1), "turn/end 1 does not match open turn null")


def test_fork_replays_the_parent_prefix(store: SessionStore) -> None:
    parent = store.create()
    parent.append("turn/start", ts(1))
    parent.append("turn/end", te(1))
    child = store.fork(parent)
    violates(child, "turn/start", ts(1), "turn/start expected turn 2, got 1")


def test_sessions_created_before_registration_are_replayed(pm: PluginManager) -> None:
    """The reference replays existing sessions on apply; a pluggy plugin cannot list them,
    so it replays a session it never saw just before checking its next event."""
    store = SessionStore(pm)
    s = store.create()
    s.append("turn/start", ts(1))
    s.append("step/start", step(1, 1))
    pm.register(InvariantsPlugin())
    # Mid-step: no false positive for a chunk of the open step...
    s.append("assistant/chunk", chunk(1, 1))
    # ...and later violations are still caught.
    violates(s, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")


def test_watch_checks_an_existing_log_at_once(pm: PluginManager) -> None:
    store = SessionStore(pm)
    s = store.create()
    s.append("user/message", user("bare"), surface_op="append")  # outside any turn
    plugin = InvariantsPlugin()
    pm.register(plugin)
    with pytest.raises(InvariantError) as info:
        plugin.watch(s)
    assert info.value.detail == (
        "user/message appended outside any open turn (every event must be turn-enclosed)"
    )
    fine = store.create()
    fine.append("turn/start", ts(1))
    plugin.watch(fine)
    violates(fine, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")


def test_freeze_is_accepted_and_changes_nothing(pm: PluginManager) -> None:
    plugin = InvariantsPlugin(freeze=False)
    pm.register(plugin)
    s = SessionStore(pm).create()
    ev = s.append("turn/start", ts(1))
    violates(s, "turn/start", ts(2), "turn/start 2 while turn 1 is still open")
    # Events are immutable whatever ``freeze`` says.
    with pytest.raises(AttributeError):
        ev.seq = 5  # type: ignore[misc]
    assert msgspec.structs.asdict(ev)["seq"] == 0


def test_not_loaded_unless_registered(pm: PluginManager) -> None:
    """Opt-in: no entry point names it, and a default store does not check anything."""
    import importlib.metadata

    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    assert not [ep for ep in eps if "invariants" in ep.value]
    s = SessionStore(pm).create()
    s.append("turn/start", ts(1))
    s.append("turn/start", ts(2))  # no plugin: the core accepts any order (§12.21)
    assert s.seq == 2
