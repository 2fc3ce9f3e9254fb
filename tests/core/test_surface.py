"""Spec core.md §11 E: the surface linked list (append and replace ops, lazy errors on
seeded logs, the replace generation, ``invalidate``)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import (
    REP,
    SE,
    SS,
    TE,
    TR,
    TS,
    A,
    U,
    a_data,
    exact,
    messages,
    node_seqs,
    raw,
    scratch,
    text,
    u_data,
    wires,
)

from dsh_session_core import ReplaceOp, Session, SurfaceNode
from dsh_session_core.errors import SurfaceError, SurfaceIntentError


def N(seq: int, prev: int | None, nxt: int | None) -> SurfaceNode:
    return SurfaceNode(seq=seq, prev=prev, next=nxt)


def links(s: Session) -> list[tuple[int, int | None, int | None]]:
    return [(n.seq, n.prev, n.next) for n in s.surface.nodes]


def rep_assistant(
    s: Session, start: int, end: int, sources: list[int] | None = None, body: str = "r"
) -> Any:
    """An assistant message appended with ``REP(start, end)``."""
    return s.append(
        "assistant/message",
        a_data(1, 1, [text(body)]),
        surface_op=REP(start, end),
        source_event_seqs=sources,
    )


def e36(s: Session) -> None:
    TS(s, 1)
    U(s, "hello")
    A(s, 1, 1, [text("hi")])
    TE(s, 1)


def test_e36_nodes_of_a_simple_turn() -> None:
    s = Session("s")
    e36(s)
    assert s.surface.nodes == (N(1, None, 2), N(2, 1, None))
    assert list(s.surface.seqs) == [1, 2]


def test_e37_no_messages_no_nodes() -> None:
    s = Session("s")
    TS(s, 1)
    SS(s, 1, 1)
    SE(s, 1, 1)
    TE(s, 1)
    assert list(s.surface.nodes) == []
    assert s.derive_messages() == []


def test_e38_incremental_append_after_a_read() -> None:
    s = Session("s")
    e36(s)
    assert node_seqs(s) == [1, 2]
    TR(s, 1, 1, "c1", "ok")
    nodes = s.surface.nodes
    assert [n.seq for n in nodes] == [1, 2, 4]
    assert nodes[2].prev == 2
    assert nodes[1].next == 4
    assert nodes == (N(1, None, 2), N(2, 1, 4), N(4, 2, None))


def test_e39_replace_everything() -> None:
    s = Session("s")
    e36(s)
    ev = s.append(
        "assistant/message",
        a_data(2, 1, [text("summary")]),
        surface_op=REP(1, 2),
        source_event_seqs=[1, 2],
    )
    assert ev.seq == 4
    assert s.surface.nodes == (N(4, None, None),)
    assert messages(s) == [{"role": "assistant", "content": [text("summary")]}]


def test_e39_replace_after_reading_the_nodes() -> None:
    """E39 again, with the surface read before the replace is appended."""
    s = Session("s")
    e36(s)
    assert node_seqs(s) == [1, 2]
    s.append(
        "assistant/message",
        a_data(2, 1, [text("summary")]),
        surface_op=REP(1, 2),
        source_event_seqs=[1, 2],
    )
    assert s.surface.nodes == (N(4, None, None),)
    assert messages(s) == [{"role": "assistant", "content": [text("summary")]}]


def test_e40_replace_a_head_range() -> None:
    s = Session("s")
    U(s, "a")
    U(s, "b")
    U(s, "c")
    rep_assistant(s, 0, 1, [0, 1])
    assert links(s) == [(3, None, 2), (2, 3, None)]


def test_e41_replace_the_tail() -> None:
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 1, 1, [1])
    assert links(s) == [(0, None, 2), (2, 0, None)]


def test_e42_replace_the_middle() -> None:
    s = Session("s")
    U(s, "a")
    U(s, "b")
    U(s, "c")
    rep_assistant(s, 1, 1, [1])
    assert links(s) == [(0, None, 3), (3, 0, 2), (2, 3, None)]


# --- E43-E48: bad replace ops. Deviation 2: a live append naming nodes that are not live,
# or not in order, is refused and the log is untouched; a *seeded* log holding one still
# loads and fails on every surface read (tested below through seeds).


def _refused(s: Session, op: Any, message: str) -> None:
    n = len(s.events)
    before = wires(s)
    with pytest.raises(SurfaceIntentError, match=exact(message)):
        s.append("assistant/message", a_data(1, 1, [text("r")]), surface_op=op)
    assert len(s.events) == n
    assert s.seq == n
    assert wires(s) == before


def test_e43_missing_start_is_refused_at_append() -> None:
    """Deviation 2: the reference logs the op and fails on reads; this port refuses it."""
    s = Session("s")
    U(s, "a")
    _refused(s, REP(5, 0), "surface replace: start seq 5 not found in surface")
    assert node_seqs(s) == [0]
    assert messages(s) == [{"role": "user", "content": [text("a")]}]


def test_e44_missing_end_is_refused_at_append() -> None:
    """Deviation 2."""
    s = Session("s")
    U(s, "a")
    _refused(s, REP(0, 99), "surface replace: end seq 99 not found in surface")
    assert node_seqs(s) == [0]


def test_e45_start_after_end_is_refused_at_append() -> None:
    """Deviation 2."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    _refused(s, REP(1, 0), "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)")
    assert node_seqs(s) == [0, 1]


def test_e46_shadowed_start_is_refused_at_append() -> None:
    """Deviation 2."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 0, 0, [0])
    assert node_seqs(s) == [2, 1]
    _refused(s, REP(0, 0), "surface replace: start seq 0 not found in surface")
    assert node_seqs(s) == [2, 1]


def test_e47_order_is_positional_not_numeric() -> None:
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 0, 0, [0])
    assert node_seqs(s) == [2, 1]
    rep_assistant(s, 2, 1, [2, 1])
    assert node_seqs(s) == [3]
    assert links(s) == [(3, None, None)]


def test_e47_without_reading_the_surface_in_between() -> None:
    """The same ops appended back to back, with no surface read before the second."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 0, 0, [0])
    rep_assistant(s, 2, 1, [2, 1])
    assert node_seqs(s) == [3]


def test_e48_numeric_order_is_not_positional_order() -> None:
    """Deviation 2."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 0, 0, [0])
    assert node_seqs(s) == [2, 1]
    _refused(s, REP(1, 2), "surface replace: start seq 1 (index 1) is after end seq 2 (index 0)")
    assert node_seqs(s) == [2, 1]


def test_e46_e48_refusal_does_not_break_the_surface() -> None:
    """After a refused replace, valid ops still apply and the derivation is sound."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    rep_assistant(s, 0, 0, [0], body="first")
    with pytest.raises(SurfaceIntentError):
        rep_assistant(s, 0, 0)
    with pytest.raises(SurfaceIntentError):
        rep_assistant(s, 1, 2)
    rep_assistant(s, 2, 1, [2, 1], body="second")
    assert node_seqs(s) == [3]
    assert messages(s) == [{"role": "assistant", "content": [text("second")]}]
    assert messages(s) == scratch(s)


def test_e_invalid_surface_op_value_is_refused() -> None:
    """§2.4: the reference treats any non-"append" value as a replace object; a
    misspelled op cannot name live nodes, so the port refuses it (deviation 2)."""
    s = Session("s")
    U(s, "a")
    with pytest.raises(SurfaceIntentError):
        s.append("user/message", u_data("b"), surface_op="apend")  # type: ignore[arg-type]
    with pytest.raises(SurfaceIntentError):
        s.append("user/message", u_data("b"), surface_op={"op": "replace", "start": 0})
    assert len(s.events) == 1


# --- the same bad ops in seeded logs: they load, and every surface read fails -------------


def _seed_with_bad_replace(prefix: list[dict[str, Any]], op: dict[str, Any]) -> Session:
    bad = raw("assistant/message", len(prefix), a_data(1, 1, [text("r")]), surface_op=op)
    return Session("s", seed=[*prefix, bad])


def _u(seq: int, x: str) -> dict[str, Any]:
    return raw("user/message", seq, u_data(x), surface_op="append")


def _every_read_fails(s: Session, message: str) -> None:
    for _ in range(2):
        with pytest.raises(SurfaceError, match=exact(message)):
            _ = s.surface.nodes
    with pytest.raises(SurfaceError, match=exact(message)):
        s.derive_messages()
    with pytest.raises(SurfaceError, match=exact(message)):
        _ = s.surface.replace_generation
    with pytest.raises(SurfaceError, match=exact(message)):
        _ = s.surface.nodes
    with pytest.raises(SurfaceError, match=exact(message)):
        s.derive_messages()


def test_e43_seeded_missing_start_fails_lazily_and_repeatedly() -> None:
    s = _seed_with_bad_replace([_u(0, "a")], REP(5, 0))
    assert len(s.events) == 2
    _every_read_fails(s, "surface replace: start seq 5 not found in surface")


def test_e43_seeded_bad_replace_error_carries_its_seq() -> None:
    s = _seed_with_bad_replace([_u(0, "a")], REP(5, 0))
    with pytest.raises(SurfaceError) as info:
        s.derive_messages()
    assert info.value.seq == 1


def test_e43_seeded_bad_replace_first_read_is_derive() -> None:
    """The first read being ``derive_messages`` fails the same way."""
    s = _seed_with_bad_replace([_u(0, "a")], REP(5, 0))
    msg = "surface replace: start seq 5 not found in surface"
    with pytest.raises(SurfaceError, match=exact(msg)):
        s.derive_messages()
    with pytest.raises(SurfaceError, match=exact(msg)):
        s.derive_messages()


def test_e44_seeded_missing_end() -> None:
    s = _seed_with_bad_replace([_u(0, "a")], REP(0, 99))
    _every_read_fails(s, "surface replace: end seq 99 not found in surface")


def test_e45_seeded_start_after_end() -> None:
    s = _seed_with_bad_replace([_u(0, "a"), _u(1, "b")], REP(1, 0))
    _every_read_fails(s, "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)")


def test_e46_seeded_shadowed_start() -> None:
    good = raw("assistant/message", 2, a_data(1, 1, [text("r")]), surface_op=REP(0, 0))
    s = _seed_with_bad_replace([_u(0, "a"), _u(1, "b"), good], REP(0, 0))
    _every_read_fails(s, "surface replace: start seq 0 not found in surface")


def test_e48_seeded_numeric_order() -> None:
    good = raw("assistant/message", 2, a_data(1, 1, [text("r")]), surface_op=REP(0, 0))
    s = _seed_with_bad_replace([_u(0, "a"), _u(1, "b"), good], REP(1, 2))
    _every_read_fails(s, "surface replace: start seq 1 (index 1) is after end seq 2 (index 0)")


def test_e43_seeded_bad_replace_stays_broken_after_append_and_invalidate() -> None:
    """A broken seeded surface stays broken after appends and after ``invalidate``
    (the same bad op is met again on the refold)."""
    s = _seed_with_bad_replace([_u(0, "a")], REP(5, 0))
    msg = "surface replace: start seq 5 not found in surface"
    U(s, "later")  # an append op does not depend on the broken surface
    assert len(s.events) == 3
    _every_read_fails(s, msg)
    s.surface.invalidate()
    _every_read_fails(s, msg)


# --- E49-E52 ------------------------------------------------------------------------------


def test_e49_replace_a_replacement() -> None:
    s = Session("s")
    U(s, "a")
    rep_assistant(s, 0, 0, [0], body="one")
    snapshot = wires(s)
    rep_assistant(s, 1, 1, [1], body="two")
    assert node_seqs(s) == [2]
    assert wires(s)[:2] == snapshot
    assert s.events[0].type == "user/message"
    assert s.events[1].type == "assistant/message"
    assert messages(s) == [{"role": "assistant", "content": [text("two")]}]


def test_e50_replace_generation_counts_and_invalidate_recounts() -> None:
    s = Session("s")
    TS(s, 1)
    U(s, "one")
    U(s, "two")
    assert s.surface.replace_generation == 0
    s.append(
        "context/message",
        {"content": [text("summary")], "source": {"kind": "plugin", "plugin": "compact"}},
        surface_op=REP(1, 2),
        source_event_seqs=[1, 2],
    )
    assert s.surface.replace_generation == 1
    s.surface.invalidate()
    assert s.surface.replace_generation == 3
    assert node_seqs(s) == [3]
    assert s.surface.replace_generation == 3


def test_e50_generation_only_goes_up() -> None:
    s = Session("s")
    U(s, "a")
    gens = [s.surface.replace_generation]
    for _ in range(3):
        s.surface.invalidate()
        gens.append(s.surface.replace_generation)
    rep_assistant(s, 0, 0, [0])
    gens.append(s.surface.replace_generation)
    assert gens == sorted(gens)
    assert len(set(gens)) == len(gens)


def test_e51_invalidate_rebuilds_identical_nodes() -> None:
    s = Session("s")
    e36(s)
    before = s.surface.nodes
    s.surface.invalidate()
    assert s.surface.nodes == before
    assert s.surface.nodes == (N(1, None, 2), N(2, 1, None))


def test_e51_invalidate_before_any_read() -> None:
    s = Session("s")
    e36(s)
    s.surface.invalidate()
    assert node_seqs(s) == [1, 2]


def test_e52_seeding_rebuilds_the_surface() -> None:
    s = Session("s")
    e36(s)
    TR(s, 1, 1, "c1", "ok")
    t = Session("t", seed=list(s.events))
    assert node_seqs(t) == [1, 2, 4]
    assert t.surface.nodes == s.surface.nodes
    assert messages(t) == messages(s)


def test_e52_seeding_replays_replaces() -> None:
    s = Session("s")
    U(s, "a")
    U(s, "b")
    U(s, "c")
    rep_assistant(s, 0, 1, [0, 1])
    s.append(
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c", "content": [], "isError": True},
        surface_op=ReplaceOp(3, 2),
    )
    t = Session("t", seed=list(s.events))
    assert node_seqs(t) == node_seqs(s) == [4]
    assert messages(t) == messages(s)
