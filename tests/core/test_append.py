"""Spec core.md §11 A (append and the envelope), B (JSON-value validation), C (surface
marker and type guards)."""

from __future__ import annotations

import collections
import datetime
import fractions
import types
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from helpers import (
    CALL,
    REP,
    TS,
    U,
    a_data,
    chunk_data,
    exact,
    messages,
    node_seqs,
    raw,
    step_data,
    tc_data,
    te_data,
    text,
    tr_data,
    ts_data,
    u_data,
    wire,
    wires,
)

from dsh_session_core import (
    SURFACE_TYPES,
    OpaqueEvent,
    ReplaceOp,
    Session,
    core_registry,
    encode_event,
)
from dsh_session_core.errors import (
    AppendError,
    NotJsonError,
    SchemaError,
    SurfaceIntentError,
    UnknownEventTypeError,
    UnknownFieldError,
)

FIVE = ("user/message", "assistant/message", "tool/result", "context/message", "steering/message")

NOT_JSON = 'session event "user/message" carries non-JSON-serializable data'


def _surface_data(type_: str) -> dict[str, Any]:
    """A valid payload for each of the five surface types."""
    return {
        "user/message": u_data("hi"),
        "assistant/message": a_data(1, 1, [text("h")]),
        "tool/result": tr_data(1, 1, "c1", "out"),
        "context/message": {"content": [text("ctx")], "source": {"kind": "user"}},
        "steering/message": {"turn": 1, "content": [text("s")], "source": {"kind": "user"}},
    }[type_]


# --- A. Append and the envelope ----------------------------------------------------------


def test_a1_first_append_envelope() -> None:
    s = Session("s1")
    data = ts_data(1)
    ev = TS(s, 1)
    assert ev.type == "turn/start"
    assert ev.seq == 0
    assert isinstance(ev.time, int | float)
    assert not isinstance(ev.time, bool)
    line = wire(ev)
    assert line["data"] == data
    assert "sourceEventSeqs" not in line
    assert "surfaceOp" not in line
    assert list(line) == ["type", "seq", "time", "data"]
    assert s.seq == 1
    assert s.events[0] is ev


def test_a1_time_comes_from_the_injected_clock() -> None:
    """Deviation 7: ``time`` is read from the injectable clock (epoch ms)."""
    s = Session("s1", clock=lambda: 1234)
    ev = TS(s, 1)
    assert ev.time == 1234
    assert wire(ev)["time"] == 1234


def test_a2_key_order_of_a_surface_event() -> None:
    s = Session("s")
    TS(s, 1)
    ev = s.append("user/message", u_data("hi"), surface_op="append", source_event_seqs=[0])
    line = msgspec.json.decode(encode_event(ev))
    assert list(line) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert line["sourceEventSeqs"] == [0]
    assert line["surfaceOp"] == "append"
    # The JSON text itself, not only the parsed dict, has that order.
    raw_text = encode_event(ev).decode()
    positions = [raw_text.index(f'"{k}"') for k in ("type", "seq", "time", "data")]
    assert positions == sorted(positions)
    assert raw_text.index('"sourceEventSeqs"') < raw_text.index('"surfaceOp"')
    assert raw_text.index('"data"') < raw_text.index('"sourceEventSeqs"')


def test_a3_source_event_seqs_are_not_checked() -> None:
    s = Session("s")
    ev = s.append(
        "assistant/message",
        a_data(1, 1, [text("h")]),
        surface_op="append",
        source_event_seqs=[3, 5, 7],
    )
    assert tuple(ev.source_event_seqs) == (3, 5, 7)  # type: ignore[attr-defined]
    assert ev.surface_op == "append"  # type: ignore[attr-defined]
    assert s.events[0].source_event_seqs == (3, 5, 7)  # type: ignore[attr-defined]
    assert s.events[0].surface_op == "append"  # type: ignore[attr-defined]
    assert wire(s.events[0])["sourceEventSeqs"] == [3, 5, 7]


def test_a4_source_event_seqs_are_copied() -> None:
    s = Session("s")
    sources = [10, 20]
    s.append("user/message", u_data("x"), surface_op="append", source_event_seqs=sources)
    sources.append(30)
    sources[0] = 99
    assert wire(s.events[0])["sourceEventSeqs"] == [10, 20]
    assert tuple(s.events[0].source_event_seqs) == (10, 20)  # type: ignore[attr-defined]


def test_a5_replace_op_is_copied() -> None:
    s = Session("s")
    U(s, "a")
    op = {"op": "replace", "start": 0, "end": 0}
    s.append("assistant/message", a_data(1, 1, [text("b")]), surface_op=op, source_event_seqs=[0])
    op["start"] = 99
    assert wire(s.events[1])["surfaceOp"] == {"op": "replace", "start": 0, "end": 0}
    assert s.events[1].surface_op == ReplaceOp(0, 0)  # type: ignore[attr-defined]
    assert node_seqs(s) == [1]


def test_a6_data_is_copied_and_the_logged_event_is_immutable() -> None:
    """Deviation 4: the returned event is the logged one and is immutable, so instead of
    checking that changing it changes the log, check that changing it raises."""
    s = Session("s")
    data: dict[str, Any] = {
        "content": [{"type": "text", "text": "original"}],
        "source": {"kind": "user"},
    }
    ev = s.append("user/message", data, surface_op="append")
    data["content"][0]["text"] = "HACKED"
    data["injected"] = True
    logged = s.events[0]
    assert logged is ev
    assert logged.data.content[0].text == "original"
    assert ev.data.content[0].text == "original"
    assert "injected" not in wire(logged)["data"]
    before = wires(s)
    with pytest.raises(AttributeError):
        ev.data.content[0].text = "HACKED"
    with pytest.raises(AttributeError):
        ev.data = {"content": []}  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ev.seq = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        ev.data.content[0] = {"type": "text", "text": "HACKED"}
    with pytest.raises(AttributeError):
        ev.data.injected = True
    assert wires(s) == before
    assert messages(s) == [{"role": "user", "content": [text("original")]}]


def test_a7_todo_write_is_copied_and_read_only() -> None:
    """``todo/write`` is a plugin type: opaque on a core-only session, still copied and
    read-only (deviation 4)."""
    s = Session("s", strict=False)
    todos: list[dict[str, Any]] = [
        {"content": "plan the work", "status": "in_progress"},
        {"content": "write the code", "status": "pending"},
    ]
    ev = s.append("todo/write", {"todos": todos})
    todos.append({"content": "third", "status": "pending"})
    todos[0]["status"] = "completed"
    assert wire(s.events[0])["data"]["todos"] == [
        {"content": "plan the work", "status": "in_progress"},
        {"content": "write the code", "status": "pending"},
    ]
    assert isinstance(ev, OpaqueEvent)
    with pytest.raises(TypeError):
        ev.data["todos"] = ()
    with pytest.raises(TypeError):
        ev.data["todos"][0]["status"] = "completed"
    with pytest.raises(TypeError):
        ev.data["todos"][0] = {}
    assert wire(s.events[0])["data"]["todos"][0]["status"] == "in_progress"


def test_a8_the_last_todo_write_wins() -> None:
    s = Session("s", strict=False)
    s.append("todo/write", {"todos": [{"content": "first", "status": "pending"}]})
    s.append(
        "todo/write",
        {
            "todos": [
                {"content": "first", "status": "completed"},
                {"content": "second", "status": "in_progress"},
            ]
        },
    )
    last = [e for e in s.events if e.type == "todo/write"][-1]
    assert wire(last)["data"]["todos"] == [
        {"content": "first", "status": "completed"},
        {"content": "second", "status": "in_progress"},
    ]


def test_a9_todo_write_does_not_reach_the_surface() -> None:
    s = Session("s", strict=False)
    U(s, "q")
    assert len(s.derive_messages()) == 1
    ev = s.append("todo/write", {"todos": [{"content": "a task", "status": "pending"}]})
    assert len(s.derive_messages()) == 1
    assert ev.seq not in node_seqs(s)
    assert node_seqs(s) == [0]


def test_a10_seq_equals_index_over_25_mixed_events() -> None:
    s = Session("s")
    for i in range(25):
        match i % 5:
            case 0:
                TS(s, i)
            case 1:
                U(s, f"u{i}")
            case 2:
                s.append("assistant/chunk", chunk_data(1, 1))
            case 3:
                s.append("assistant/message", a_data(1, 1, [text(f"a{i}")]), surface_op="append")
            case _:
                s.append("turn/end", te_data(i))
    assert len(s.events) == 25
    for i, ev in enumerate(s.events):
        assert ev.seq == i
    assert s.seq == 25


def test_a11_unknown_types_are_accepted() -> None:
    s = Session("s", strict=False)
    ev = s.append("compaction/marker", {"foo": "bar"})
    assert ev.seq == 0
    assert ev.type == "compaction/marker"
    assert ev.data == {"foo": "bar"}
    assert wire(ev) == {
        "type": "compaction/marker",
        "seq": 0,
        "time": ev.time,
        "data": {"foo": "bar"},
    }
    assert len(s.events) == 1
    strict = Session("s")  # the strict default refuses the type no plugin declares
    with pytest.raises(UnknownEventTypeError, match='unknown event type "compaction/marker"'):
        strict.append("compaction/marker", {"foo": "bar"})
    assert len(strict.events) == 0


def test_a12_surface_op_on_a_non_surface_event_is_rejected() -> None:
    """Deviation 1 (spec §12.2): the reference logs surface fields on a non-surface event;
    this port rejects them at append, leaving the log and its seq untouched."""
    s = Session("s")
    TS(s, 1)
    msgs_before = messages(s)
    with pytest.raises(
        SurfaceIntentError, match=exact("turn/end cannot carry surfaceOp (non-surface event)")
    ):
        s.append("turn/end", te_data(1), surface_op="append")
    assert len(s.events) == 1
    assert s.seq == 1
    assert node_seqs(s) == []
    assert messages(s) == msgs_before
    assert s.append("turn/end", te_data(1)).seq == 1


def test_a12_source_event_seqs_on_a_non_surface_event_is_rejected() -> None:
    """Deviation 1: provenance alone on a non-surface event is refused as well."""
    s = Session("s")
    with pytest.raises(SurfaceIntentError, match=exact("turn/start cannot carry sourceEventSeqs")):
        s.append("turn/start", ts_data(1), source_event_seqs=[0])
    assert len(s.events) == 0


def test_a12_surface_op_on_an_unknown_type_is_rejected() -> None:
    """Deviation 1 holds for types no plugin declares (opaque events) too."""
    s = Session("s", strict=False)
    with pytest.raises(SurfaceIntentError, match=exact("compaction/marker cannot carry surfaceOp")):
        s.append("compaction/marker", {"foo": "bar"}, surface_op="append")
    assert len(s.events) == 0


# --- B. JSON-value validation ------------------------------------------------------------


def _fn() -> int:
    return 1


def _cyclic_dict() -> dict[str, Any]:
    c: dict[str, Any] = {"a": 1}
    c["self"] = c
    return c


def _cyclic_list() -> list[Any]:
    c: list[Any] = [1]
    c.append(c)
    return c


class _IntSubclass(int):
    pass


# (scenario, builder of the bad ``extra`` value)
BAD_EXTRA: list[tuple[str, Callable[[], Any]]] = [
    ("b13-decimal", lambda: Decimal(1)),
    ("b13-fraction", lambda: fractions.Fraction(1)),
    ("b13-int-subclass", lambda: _IntSubclass(1)),
    ("b14-function", lambda: _fn),
    ("b14-lambda", lambda: lambda: 1),
    ("b15-symbol", lambda: object()),
    ("b15-undefined", lambda: msgspec.UNSET),
    ("b16-inf", lambda: float("inf")),
    ("b16-nan", lambda: float("nan")),
    ("b16-minus-inf", lambda: float("-inf")),
    ("b17-map", lambda: collections.OrderedDict()),
    ("b17-mappingproxy", lambda: types.MappingProxyType({})),
    ("b17-set", lambda: set()),
    ("b17-date", lambda: datetime.date(2024, 1, 1)),
    ("b19-bad-element", lambda: [1, Decimal(2), 3]),
    ("b20-nested-function", lambda: {"nested": {"deep": _fn}}),
    ("b21-cyclic-dict", _cyclic_dict),
    ("b21-cyclic-list", _cyclic_list),
    ("b26-tuple", lambda: (1, 2)),
    ("b26-int-key", lambda: {1: "a"}),
    ("b26-set", lambda: {1, 2}),
    ("b26-nan", lambda: float("nan")),
    ("b26-bytes", lambda: b"x"),
    ("b26-nested-tuple", lambda: {"a": [1, (2, 3)]}),
]


@pytest.mark.parametrize(("case", "make"), BAD_EXTRA, ids=[c for c, _ in BAD_EXTRA])
def test_b13_b21_b26_non_json_extra_is_rejected(case: str, make: Callable[[], Any]) -> None:
    """Python analogues of the reference's non-JSON values (spec §2.3 Py mapping): a
    number of another type (JS ``1n``), a function, a sentinel (JS symbol/undefined),
    non-finite floats, mappings and sets that are not plain dicts, dates, a bad array
    element, nested functions, cycles, and the Py-specific cases of B26."""
    s = Session("s")
    data = {**u_data("x"), "extra": make()}
    with pytest.raises(NotJsonError, match=exact(NOT_JSON)):
        s.append("user/message", data, surface_op="append")
    assert len(s.events) == 0
    assert s.seq == 0


def test_b13_error_names_the_path() -> None:
    """``NotJsonError`` appends where the bad value sits (this port's addition)."""
    s = Session("s")
    with pytest.raises(NotJsonError, match=exact(NOT_JSON)) as info:
        s.append("user/message", {**u_data("x"), "extra": Decimal(1)}, surface_op="append")
    assert info.value.path == "$.extra"
    assert info.value.event_type == "user/message"
    assert isinstance(info.value, AppendError)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(NOT_JSON + " (at ")


def test_b18_nested_arrays_and_objects_are_accepted() -> None:
    """JS sparse arrays have no Python counterpart (a list has no holes); the accepted
    half of B18 applies as is."""
    s = Session("s", strict=False)
    ev = s.append(
        "user/message",
        {**u_data("x"), "extra": [1, 2, [3, {"a": None, "b": True}]]},
        surface_op="append",
    )
    assert len(s.events) == 1
    assert wire(ev)["data"]["extra"] == [1, 2, [3, {"a": None, "b": True}]]
    strict = Session("s")  # the strict default refuses the extension key
    with pytest.raises(UnknownFieldError, match=exact('unknown key "extra" at $ of user/message')):
        strict.append("user/message", {**u_data("x"), "extra": [1]}, surface_op="append")
    assert len(strict.events) == 0


def test_b22_shared_acyclic_value_is_accepted() -> None:
    s = Session("s", strict=False)
    o = {"k": 1}
    ev = s.append("user/message", {**u_data("x"), "extra": {"x": o, "y": o}}, surface_op="append")
    assert len(s.events) == 1
    assert wire(ev)["data"]["extra"] == {"x": {"k": 1}, "y": {"k": 1}}


def test_b23_negative_zero_is_accepted() -> None:
    s = Session("s", strict=False)
    ev = s.append("user/message", {**u_data("x"), "extra": -0}, surface_op="append")
    assert b'"extra":0' in encode_event(ev)
    ev2 = s.append("user/message", {**u_data("x"), "extra": -0.0}, surface_op="append")
    assert wire(ev2)["data"]["extra"] == 0
    assert len(s.events) == 2


def test_b24_rejected_appends_leave_the_log_empty() -> None:
    s = Session("s")
    for _case, make in BAD_EXTRA:
        with pytest.raises(NotJsonError):
            s.append("user/message", {**u_data("x"), "extra": make()}, surface_op="append")
    assert list(s.events) == []
    assert s.seq == 0
    assert node_seqs(s) == []
    assert U(s, "ok").seq == 0


def test_b25_json_check_runs_before_the_marker_check() -> None:
    s = Session("s")
    with pytest.raises(NotJsonError, match=exact(NOT_JSON)):
        s.append("user/message", {**u_data("x"), "extra": _fn})
    assert len(s.events) == 0


def test_b26_true_is_accepted() -> None:
    s = Session("s", strict=False)
    ev = s.append("user/message", {**u_data("x"), "extra": True}, surface_op="append")
    assert wire(ev)["data"]["extra"] is True
    assert len(s.events) == 1


def test_b26_unknown_type_with_non_json_data_is_rejected() -> None:
    s = Session("s")
    with pytest.raises(
        NotJsonError, match=exact('session event "compaction/marker" carries non-JSON')
    ):
        s.append("compaction/marker", {"foo": {1, 2}})
    assert len(s.events) == 0


TYPED_BAD: list[tuple[str, str, Callable[[], dict[str, Any]], dict[str, Any]]] = [
    (
        "text-bytes",
        "user/message",
        lambda: {"content": [{"type": "text", "text": b"x"}], "source": {"kind": "user"}},
        {"surface_op": "append"},
    ),
    (
        "usage-nan",
        "assistant/message",
        lambda: {
            **a_data(1, 1, [text("h")]),
            "usage": {"inputTokens": float("nan"), "outputTokens": 0},
        },
        {"surface_op": "append"},
    ),
    (
        "temperature-inf",
        "request/header",
        lambda: {
            "header": {"config": {"model": "m", "temperature": float("inf")}},
            "reason": "initial",
        },
        {},
    ),
    (
        "turn-nan",
        "turn/start",
        lambda: {**ts_data(1), "turn": float("nan")},
        {},
    ),
    (
        "arguments-bytes",
        "tool/call",
        lambda: {**tc_data(1, 1, "c1"), "arguments": b"{}"},
        {},
    ),
    (
        "meta-set",
        "tool/result",
        lambda: {**tr_data(1, 1, "c1", "out"), "meta": {"files": {1, 2}}},
        {"surface_op": "append"},
    ),
    (
        "meta-tuple",
        "tool/result",
        lambda: {**tr_data(1, 1, "c1", "out"), "meta": (1, 2)},
        {"surface_op": "append"},
    ),
]


@pytest.mark.parametrize(
    ("case", "type_", "make", "intent"), TYPED_BAD, ids=[c[0] for c in TYPED_BAD]
)
def test_b26_typed_field_with_non_json_value_is_rejected(
    case: str, type_: str, make: Callable[[], dict[str, Any]], intent: dict[str, Any]
) -> None:
    """Deviation 6: a typed field fed a value JSON cannot carry is refused, and nothing
    is logged."""
    s = Session("s")
    with pytest.raises((NotJsonError, SchemaError)):
        s.append(type_, make(), **intent)
    assert len(s.events) == 0
    assert s.seq == 0


# --- C. Surface marker and type guards ---------------------------------------------------


def test_c27_missing_marker_is_rejected() -> None:
    s = Session("s")
    TS(s, 1)
    with pytest.raises(
        SurfaceIntentError,
        match=exact(
            'session event "user/message" is surface-eligible and requires a surfaceOp marker'
        ),
    ):
        s.append("user/message", {"content": [text("hi")], "source": {"kind": "user"}})
    assert len(s.events) == 1
    assert s.seq == 1


@pytest.mark.parametrize("type_", FIVE)
def test_c28_each_surface_type_requires_a_marker(type_: str) -> None:
    s = Session("s")
    msg = f'session event "{type_}" is surface-eligible and requires a surfaceOp marker'
    with pytest.raises(SurfaceIntentError, match=exact(msg)):
        s.append(type_, _surface_data(type_))
    with pytest.raises(SurfaceIntentError, match=exact(msg)):
        s.append(type_, _surface_data(type_), source_event_seqs=[0])
    assert len(s.events) == 0
    # With the marker, the same data is accepted.
    assert s.append(type_, _surface_data(type_), surface_op="append").seq == 0


NON_SURFACE: list[tuple[str, dict[str, Any]]] = [
    ("assistant/chunk", chunk_data(1, 1)),
    ("turn/start", ts_data(1)),
    ("step/start", step_data(1, 1)),
    ("tool/call", tc_data(1, 1, "c1")),
    ("todo/write", {"todos": [{"content": "t", "status": "pending"}]}),
    ("request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"}),
]


def test_c28_non_surface_types_need_no_marker() -> None:
    s = Session("s", strict=False)
    for i, (type_, data) in enumerate(NON_SURFACE):
        ev = s.append(type_, data)
        assert ev.seq == i
        assert ev.type == type_
        assert "surfaceOp" not in wire(ev)
    assert len(s.events) == len(NON_SURFACE)
    assert node_seqs(s) == []


def test_c29_surface_eligible_types() -> None:
    """The port has no ``isSurfaceEligibleType`` function: the five types are the
    ``SURFACE_TYPES`` set, and the registry's ``surface_types``."""
    assert frozenset(FIVE) == SURFACE_TYPES
    assert core_registry().surface_types == SURFACE_TYPES
    for t in ("turn/start", "assistant/chunk", "todo/write", "prompt/blocked"):
        assert t not in SURFACE_TYPES
        assert t not in core_registry().surface_types


def test_c30_surface_event_predicate() -> None:
    """The port has no ``isSurfaceEvent`` function; its rule (a surface type *with* a
    marker) is checked on decoded raw events and on what a seed puts on the surface."""
    decoder = core_registry().line_decoder
    user = raw("user/message", 0, u_data("hi"))
    bare = decoder.decode(msgspec.json.encode(user))
    assert bare.type == "user/message"
    assert bare.surface_op is msgspec.UNSET
    turn = decoder.decode(msgspec.json.encode(raw("turn/start", 0, ts_data(1))))
    assert not turn.surface
    marked = decoder.decode(msgspec.json.encode({**user, "surfaceOp": "append"}))
    assert marked.surface
    assert marked.surface_op == "append"
    # A seeded non-surface event carrying a marker never joins the surface (spec §3.2).
    s = Session(
        "s",
        seed=[
            raw("turn/start", 0, ts_data(1), surface_op="append"),
            raw("user/message", 1, u_data("hi"), surface_op="append"),
        ],
    )
    assert node_seqs(s) == [1]
    assert messages(s) == [{"role": "user", "content": [text("hi")]}]


def test_c30_replace_on_a_live_session_uses_the_append_form_too() -> None:
    """``REP`` as a wire dict and as a ``ReplaceOp`` are the same op."""
    s = Session("s")
    U(s, "a")
    U(s, "b")
    s.append("assistant/message", a_data(1, 1, [text("c")]), surface_op=REP(0, 0))
    s.append("assistant/message", a_data(1, 1, [CALL("x")]), surface_op=ReplaceOp(2, 2))
    assert node_seqs(s) == [3, 1]
