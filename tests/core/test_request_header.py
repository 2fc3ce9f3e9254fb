"""The request header (spec §8): canonical form, system and tool deltas, header diff and
apply, the fold (scenarios K 116-131), the session's incremental fold, and the writer's
round-trip guard. Expected values come from the spec text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import CORE_EVENT, accepted_reference_logs
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core._base.json_values import JsonObject, enc_hook, find_non_json, freeze, thaw
from dsh_session_core._model.request_header import (
    RequestHeaderFold,
    RequestHeaderWriter,
    apply_header_delta,
    apply_system,
    apply_tools,
    call_config_equals,
    canonical_header,
    diff_header,
    diff_system,
    diff_tools,
    fold_request_header,
    header_equals,
    record_request_header,
)
from dsh_session_core.errors import RequestHeaderError
from dsh_session_core.events import (
    Event,
    OpaqueEvent,
)
from dsh_session_core.vocabulary import EpochHeader

# --- builders ----------------------------------------------------------------------------



def ev(type: str, seq: int, data: Any, **surface: Any) -> Event:
    """A typed event from its wire shape (``time`` = ``seq``; surface keys camelCase)."""
    wire = {"type": type, "seq": seq, "time": seq, "data": data, **surface}
    event: Event = msgspec.convert(wire, type=CORE_EVENT)
    return event


def opaque(type: str, seq: int, data: Any) -> OpaqueEvent:
    """An event kept verbatim, as the log holds one no schema fits."""
    wire = freeze({"type": type, "seq": seq, "time": seq, "data": data})
    assert isinstance(wire, JsonObject)
    return OpaqueEvent(seq, seq, wire["data"], wire=wire)


def TS(n: int, seq: int = 0) -> Event:
    trigger = {"kind": "message", "source": {"kind": "user"}}
    return ev("turn/start", seq, {"turn": n, "trigger": trigger})


def U(text: str, seq: int) -> Event:
    data = {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
    return ev("user/message", seq, data, surfaceOp="append")


def snapshot(header: Any, seq: int, reason: str = "initial") -> Event:
    return ev("request/header", seq, {"header": header, "reason": reason})


def delta_event(delta: Any, seq: int) -> Event:
    return ev("request/header-delta", seq, delta)


def plain(value: Any) -> Any:
    """A value in plain JSON shape (dicts and lists), whatever containers it came in."""
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=enc_hook))


def tool(name: str, description: str = "d") -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": {"type": "object"}}


def msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


CONFIG = {"model": "m"}
T = tool("t")


def roundtrip(prev: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    d = diff_header(prev, new)
    assert d is not None
    return apply_header_delta(prev, d)


# --- K. scenarios 116-131 ----------------------------------------------------------------


def test_k116_canonical_header_drops_empty_parts() -> None:
    h = {"config": CONFIG, "system": "", "tools": []}
    assert canonical_header(h) == {"config": {"model": "m"}}
    assert canonical_header(h)["config"] is CONFIG  # same reference, not copied
    assert canonical_header({"config": CONFIG, "messagePrefix": []}) == {"config": CONFIG}
    kept = {"config": CONFIG, "system": "s", "tools": [T]}
    assert canonical_header(kept) == {"config": {"model": "m"}, "system": "s", "tools": [T]}


def test_k117_diff_of_equal_headers_is_none() -> None:
    h = {"config": {"model": "m"}, "system": "a\nb", "tools": [T]}
    assert diff_header(h, h) is None


def test_k118_system_line_delta() -> None:
    prev = {"config": CONFIG, "system": "keep1\nold\nkeep2\nkeep3"}
    new = {"config": CONFIG, "system": "keep1\nnew A\nnew B\nkeep2\nkeep3"}
    d = diff_header(prev, new)
    assert d == {"system": {"keepStart": 1, "keepEnd": 2, "insert": ["new A", "new B"]}}
    assert apply_header_delta(prev, d) == new


def test_k119_system_from_and_to_absent() -> None:
    none = {"config": CONFIG}
    xy = {"config": CONFIG, "system": "x\ny"}
    assert diff_system(None, "x\ny") == {"keepStart": 0, "keepEnd": 0, "insert": ["x", "y"]}
    assert diff_system("x\ny", None) == {"keepStart": 0, "keepEnd": 0, "insert": []}
    assert roundtrip(none, xy) == xy
    assert roundtrip(xy, none) == none


def test_k120_repeated_lines_do_not_overlap() -> None:
    d = diff_system("a\na", "a\na\na")
    assert d == {"keepStart": 2, "keepEnd": 0, "insert": ["a"]}
    assert apply_system("a\na", d) == "a\na\na"


def test_k121_tools_delta_keyed_by_name() -> None:
    keep, drop = tool("keep"), tool("drop")
    before, after, new = tool("edit", "before"), tool("edit", "after"), tool("new")
    d = diff_tools([keep, drop, before], [keep, after, new])
    assert [t["name"] for t in d["added"]] == ["new"]
    assert d["removed"] == ["drop"]
    assert [t["name"] for t in d["changed"]] == ["edit"]
    assert apply_tools([keep, drop, before], d) == [keep, after, new]


def test_k122_tools_from_and_to_none() -> None:
    none = {"config": CONFIG}
    one = {"config": CONFIG, "tools": [T]}
    there = diff_header(none, one)
    back = diff_header(one, none)
    assert there is not None
    assert there["tools"]["added"] == [T]
    assert back is not None
    assert back["tools"]["removed"] == ["t"]
    assert apply_header_delta(none, there) == one
    assert apply_header_delta(one, back) == none  # canonical: no empty "tools"


def test_k123_pure_reorder_cannot_be_expressed() -> None:
    a, b = tool("a"), tool("b")
    prev, new = {"config": CONFIG, "tools": [a, b]}, {"config": CONFIG, "tools": [b, a]}
    d = diff_header(prev, new)
    assert d == {"tools": {"added": [], "removed": [], "changed": []}}
    applied = apply_header_delta(prev, d)
    assert applied != new
    assert not header_equals(applied, new)


def test_k124_insertion_only_appends_at_the_end() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    d = diff_tools([a, c], [a, b, c])
    assert apply_tools([a, c], d) == [a, c, b]
    # ...so the writer logs a "fallback" snapshot instead of the delta.
    log = FakeSession()
    record_request_header(log, {"config": CONFIG, "tools": [a, c]}, first=True)
    event = record_request_header(log, {"config": CONFIG, "tools": [a, b, c]}, first=False)
    assert event is not None
    assert event.type == "request/header"
    assert thaw(event.data)["reason"] == "fallback"


def test_k125_config_delta_is_the_whole_new_config() -> None:
    prev = {"config": {"model": "m"}, "system": "s", "tools": [T]}
    new = {"config": {"model": "m2", "temperature": 0.1}, "system": "s", "tools": [T]}
    assert diff_header(prev, new) == {"config": {"model": "m2", "temperature": 0.1}}


def test_k126_message_prefix_delta() -> None:
    prev = {"config": CONFIG, "system": "s", "messagePrefix": [msg("old")]}
    new = {"config": CONFIG, "system": "s", "messagePrefix": [msg("new"), msg("more")]}
    assert diff_header(prev, new) == {"messagePrefix": [msg("new"), msg("more")]}
    none, some = {"config": CONFIG}, {"config": CONFIG, "messagePrefix": [msg("p")]}
    assert diff_header(none, some) == {"messagePrefix": [msg("p")]}
    assert diff_header(some, none) == {"messagePrefix": []}
    assert roundtrip(some, none) == none
    assert roundtrip(none, some) == some


def test_k127_header_equals() -> None:
    assert header_equals({"config": CONFIG}, {"config": CONFIG, "messagePrefix": []})
    a = {"config": CONFIG, "messagePrefix": [msg("a")]}
    assert not header_equals(a, {"config": CONFIG, "messagePrefix": [msg("b")]})
    assert not header_equals(a, {"config": CONFIG})
    assert not header_equals({"config": {"model": "m", "stop": []}}, {"config": CONFIG})


def test_k128_fold() -> None:
    first = {"config": {"model": "m"}, "system": "a\nb", "tools": [T]}
    second = {"config": {"model": "m"}, "system": "a\nc", "tools": [T, tool("u")]}
    d = diff_header(first, second)
    assert d is not None
    assert fold_request_header([TS(1)]) is None
    events = [TS(1), snapshot(first, 1), U("hi", 2), delta_event(d, 3)]
    assert plain(fold_request_header(events)) == second
    events.append(snapshot({"config": {"model": "other"}}, 4, "resume"))
    assert plain(fold_request_header(events)) == {"config": {"model": "other"}}


def test_k129_corrupt_delta_raises_on_every_read_session() -> None:
    from dsh_session_core._model.session import Session

    session = Session("s1")
    session.append(
        "turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    )
    session.append("request/header-delta", {"config": {"model": "x"}})
    expected = "request/header-delta at seq 1 before any request/header snapshot: corrupt log"
    with pytest.raises(RequestHeaderError) as fold_error:
        fold_request_header(session.events)
    assert str(fold_error.value) == expected
    for _ in range(2):
        with pytest.raises(RequestHeaderError) as read_error:
            session.request_header()
        assert str(read_error.value) == expected
        assert read_error.value.seq == 1


def test_k130_request_header_is_shared_and_frozen_session() -> None:
    from dsh_session_core._model.session import Session

    session = Session("s1")
    assert session.request_header() is None
    session.append(
        "request/header", {"header": {"config": {"model": "m"}, "system": "s"}, "reason": "initial"}
    )
    one, two = session.request_header(), session.request_header()
    assert one is not None
    assert one is two
    with pytest.raises(TypeError):
        one["system"] = "changed"  # type: ignore[index]
    assert plain(one) == plain(fold_request_header(session.events))


def test_k131_writer_guard_session() -> None:
    from dsh_session_core._model.session import Session

    session = Session("s1")
    writer = RequestHeaderWriter()
    a, b = tool("a"), tool("b")
    header = {"config": CONFIG, "system": "one", "tools": [a, b]}

    first = writer.record(session, header)
    assert first is not None
    assert first.type == "request/header"
    assert thaw(first.data)["reason"] == "initial"

    resumed = RequestHeaderWriter().record(session, header)  # a new loop instance
    assert resumed is not None
    assert thaw(resumed.data)["reason"] == "resume"

    count = len(session.events)
    assert writer.record(session, header) is None
    assert len(session.events) == count

    edited = {**header, "system": "one\ntwo"}
    event = writer.record(session, edited)
    assert event is not None
    assert event.type == "request/header-delta"

    reordered = {**edited, "tools": [b, a]}
    event = writer.record(session, reordered)
    assert event is not None
    assert event.type == "request/header"
    assert thaw(event.data)["reason"] == "fallback"
    folded = session.request_header()
    assert folded is not None
    assert header_equals(folded, reordered)


# --- the writer, against a stand-in session ----------------------------------------------


class FakeSession:
    """Just enough of a session for the writer: a typed log and its header fold."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._fold = RequestHeaderFold()

    def request_header(self) -> JsonObject | None:
        self._fold.advance(self.events)
        return self._fold.current()

    def append(self, type: str, data: Any, /) -> Event:
        assert find_non_json(data) is None  # plain dicts and lists only, as Session requires
        event = ev(type, len(self.events), data)
        self.events.append(event)
        return event


def test_writer_follows_the_four_cases() -> None:
    log, writer = FakeSession(), RequestHeaderWriter()
    a, b = tool("a"), tool("b")
    h1 = {"config": CONFIG, "system": "x", "tools": [a, b]}
    reasons = []
    for header in (
        h1,  # initial
        h1,  # unchanged: nothing
        {**h1, "system": "x\ny"},  # delta
        {**h1, "system": "x\ny", "tools": [b, a]},  # reorder: fallback
        {**h1, "system": "x\ny", "tools": [b, a], "config": {"model": "m2"}},  # delta
    ):
        event = writer.record(log, header)
        reasons.append(None if event is None else thaw(event.data).get("reason", "delta"))
        folded = log.request_header()
        assert folded is not None
        assert header_equals(folded, canonical_header(header))
    assert reasons == ["initial", None, "delta", "fallback", "delta"]
    resumed = RequestHeaderWriter().record(log, h1)  # a new loop instance
    assert resumed is not None
    assert thaw(resumed.data)["reason"] == "resume"


def test_writer_takes_a_typed_header() -> None:
    log = FakeSession()
    typed = msgspec.convert({"config": CONFIG, "system": "s", "tools": [T]}, EpochHeader)
    event = record_request_header(log, typed, first=True)
    assert event is not None
    assert plain(thaw(event.data)["header"]) == {"config": CONFIG, "system": "s", "tools": [T]}
    assert record_request_header(log, typed, first=False) is None


def test_writer_canonicalizes_before_logging() -> None:
    log = FakeSession()
    event = record_request_header(log, {"config": CONFIG, "system": "", "tools": []}, first=True)
    assert event is not None
    assert plain(thaw(event.data)["header"]) == {"config": CONFIG}
    assert record_request_header(log, {"config": CONFIG, "system": ""}, first=False) is None


def test_writer_never_logs_a_tools_delta_onto_the_placeholder() -> None:
    log = FakeSession()
    record_request_header(log, {"config": CONFIG, "tools": "{{tools}}"}, first=True)
    event = record_request_header(log, {"config": CONFIG, "tools": [T]}, first=False)
    assert event is not None
    assert thaw(event.data)["reason"] == "fallback"


# --- the incremental fold ----------------------------------------------------------------


def test_fold_returns_the_same_frozen_object_until_a_header_event() -> None:
    fold = RequestHeaderFold()
    events = [TS(1)]
    fold.advance(events)
    assert fold.current() is None
    events.append(snapshot({"config": CONFIG, "system": "s"}, 1))
    fold.advance(events)
    first = fold.current()
    assert isinstance(first, JsonObject)
    assert fold.current() is first
    events.append(U("hi", 2))  # not a header event: same object
    fold.advance(events)
    assert fold.current() is first
    events.append(delta_event({"system": {"keepStart": 0, "keepEnd": 0, "insert": ["t"]}}, 3))
    fold.advance(events)
    second = fold.current()
    assert second is not first
    assert plain(second) == {"config": CONFIG, "system": "t"}
    assert plain(first) == {"config": CONFIG, "system": "s"}  # the old one is untouched


def test_fold_does_not_advance_past_a_corrupt_delta() -> None:
    fold = RequestHeaderFold()
    events = [TS(1), delta_event({"config": {"model": "x"}}, 1)]
    for _ in range(2):
        with pytest.raises(RequestHeaderError, match="at seq 1 before any"):
            fold.advance(events)
    events.append(snapshot({"config": CONFIG}, 2))
    with pytest.raises(RequestHeaderError):  # the bad delta is still ahead of the fold
        fold.advance(events)


def test_fold_freezes_a_copy_and_leaves_the_log_alone() -> None:
    header = {"config": {"model": "m", "stop": ["x"]}, "tools": [T]}
    events = [snapshot(header, 0)]
    fold = RequestHeaderFold()
    fold.advance(events)
    current = fold.current()
    assert current is not None
    with pytest.raises(TypeError):
        current["tools"][0]["name"] = "changed"  # type: ignore[index]
    assert plain(thaw(events[0].data)["header"]) == header


def test_fold_continues_from_a_start_header() -> None:
    start = {"config": CONFIG, "system": "a"}
    d = {"system": {"keepStart": 1, "keepEnd": 0, "insert": ["b"]}}
    assert plain(fold_request_header([delta_event(d, 5)], start)) == {
        "config": CONFIG,
        "system": "a\nb",
    }


def test_fold_reads_opaque_header_events() -> None:
    header = {"config": CONFIG, "system": "s", "extra": 1}  # an unknown key: opaque
    d = {"system": {"keepStart": 1, "keepEnd": 0, "insert": ["t"]}}
    events = [
        opaque("request/header", 0, {"header": header, "reason": "initial"}),
        opaque("request/header-delta", 1, d),
    ]
    assert plain(fold_request_header(events)) == {"config": CONFIG, "system": "s\nt"}


def test_tools_placeholder_is_kept_and_compared_without_crashing() -> None:
    # The reference's snapshot recorder writes "tools": "{{tools}}" (spec §8.1).
    h = {"config": {"model": "deepseek-v4-flash"}, "system": "{{system}}", "tools": "{{tools}}"}
    assert canonical_header(h) == h
    assert plain(fold_request_header([snapshot(h, 3)])) == h
    assert header_equals(h, dict(h))
    assert not header_equals(h, {**h, "tools": [T]})
    assert diff_header(h, dict(h)) is None


# --- config equality ---------------------------------------------------------------------


def test_call_config_equals_is_strict() -> None:
    assert call_config_equals({"model": "m", "temperature": 1}, {"model": "m", "temperature": 1.0})
    assert not call_config_equals({"model": "m", "maxTokens": 1}, {"model": "m", "maxTokens": True})
    assert not call_config_equals({"model": "m", "temperature": None}, {"model": "m"})
    assert call_config_equals({"model": "m", "stop": ["a"]}, {"model": "m", "stop": ("a",)})
    assert not call_config_equals({"model": "m", "stop": ["a"]}, {"model": "m", "stop": ["b"]})
    assert not call_config_equals({"model": "m", "stop": []}, {"model": "m"})
    assert call_config_equals({"model": "m", "other": 1}, {"model": "m"})  # not compared


def test_apply_system_keep_end_zero_is_not_the_whole_list() -> None:
    # The Py trap of spec §8.2: a[-0:] would keep every line.
    assert apply_system("a\nb", {"keepStart": 1, "keepEnd": 0, "insert": []}) == "a"


def test_tool_equality_is_by_json_text_so_key_order_counts() -> None:
    prev = [{"name": "t", "description": "d", "parameters": {"a": 1, "b": 2}}]
    new = [{"name": "t", "description": "d", "parameters": {"b": 2, "a": 1}}]
    assert [t["name"] for t in diff_tools(prev, new)["changed"]] == ["t"]


# --- properties --------------------------------------------------------------------------

_systems = st.none() | st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=6).map("\n".join)


@given(_systems, _systems)
def test_system_delta_round_trips(a: str | None, b: str | None) -> None:
    assert apply_system(a, diff_system(a, b)) == b


@st.composite
def _tool_edits(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two tool lists with unique names where ``new`` keeps ``prev``'s survivors in
    order and adds new names only at the end: exactly what a delta can express."""
    names = draw(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8))
    split = draw(st.integers(0, len(names)))
    prev = [tool(n, draw(st.sampled_from(["x", "y"]))) for n in names[:split]]
    kept = [t if draw(st.booleans()) else tool(t["name"], "z") for t in prev if draw(st.booleans())]
    return prev, kept + [tool(n) for n in names[split:]]


@given(_tool_edits())
def test_tools_delta_round_trips_without_reorders(edit: tuple[list[Any], list[Any]]) -> None:
    prev, new = edit
    assert apply_tools(prev, diff_tools(prev, new)) == new


@given(
    st.lists(st.sampled_from("abcde"), unique=True), st.lists(st.sampled_from("abcde"), unique=True)
)
def test_tools_delta_keeps_every_schema_even_when_it_loses_order(
    p: list[str], n: list[str]
) -> None:
    prev, new = [tool(x) for x in p], [tool(x, "new") for x in n]
    applied = apply_tools(prev, diff_tools(prev, new))
    assert sorted(t["name"] for t in applied) == sorted(n)
    assert all(t["description"] == "new" for t in applied)


_optional_parts: dict[str, st.SearchStrategy[Any]] = {
    "system": _systems.filter(lambda s: s is not None),
    "tools": st.lists(st.sampled_from("abc"), unique=True).map(lambda ns: [tool(n) for n in ns]),
    "messagePrefix": st.lists(st.sampled_from(["p", "q"]), max_size=2).map(
        lambda ts: [msg(t) for t in ts]
    ),
}
_configs = st.sampled_from([{"model": "m"}, {"model": "m", "stop": []}, {"model": "n"}])
_headers: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"config": _configs}, optional=_optional_parts
).map(canonical_header)


@given(_headers, _headers)
def test_delta_the_writer_would_log_folds_back_to_the_header(
    prev: dict[str, Any], new: dict[str, Any]
) -> None:
    d = diff_header(prev, new)
    if header_equals(prev, new):
        assert d is None
        return
    assert d is not None
    if header_equals(apply_header_delta(prev, d), new):
        # A delta the writer logs folds back to exactly the header.
        events = [snapshot(prev, 0), delta_event(d, 1)]
        folded = fold_request_header(events)
        assert folded is not None
        assert header_equals(folded, new)


@given(_headers)
def test_diff_of_a_header_with_itself_is_none(h: dict[str, Any]) -> None:
    assert diff_header(h, h) is None
    assert header_equals(h, plain(h))


# --- the reference's own folds -----------------------------------------------------------


def test_fold_matches_every_reference_golden(upstream: Path) -> None:
    checked, mismatched = 0, []
    for log, expected, events in accepted_reference_logs(upstream, "requestHeader"):
        if plain(fold_request_header(events)) != expected["requestHeader"]:
            mismatched.append(str(log))
        checked += 1
    assert checked > 300
    assert mismatched == []
