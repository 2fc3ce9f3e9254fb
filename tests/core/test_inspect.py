"""Issue 26, point 1: the read model's own door, ``dsh_session_core.inspect``: a typed
listing query, SOURCE resolution into a :class:`Source`, the timeline, and refusals as
core errors carrying their message and hint (never a CLI failure, never an exit code).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import EventRegistry, ToolCallBlock, open_store
from dsh_session_core.errors import (
    DshSessionError,
    InspectError,
    InspectUsageError,
    SessionNotFoundError,
    SourceReadError,
)
from dsh_session_core.inspect import (
    SessionQuery,
    Source,
    SourceSpec,
    build_timeline,
    check_session_id,
    load_source,
    open_listed_store,
    render_timeline,
    resolve_source,
    select_sessions,
    session_row,
    timeline_blocks,
    unanswered_calls,
)
from dsh_session_core.inspect import (
    open_store as open_for_reading,
)

REG = EventRegistry([])


def _fill(url: str, sid: str, *, cwd: str = "/work") -> None:
    with open_store(url) as store:
        session = store.create(sid, cwd=cwd)
        with session.turn() as turn:
            turn.user(f"hello from {sid}")
            with turn.step() as step:
                call = ToolCallBlock(id=f"call-{sid}", name="bash", arguments="{}")
                step.assistant(["Looking.", call])
                step.tool_result(step.tool_call(call), "done\n")


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = str(tmp_path / "store")
    _fill(url, "a", cwd="/work/one")
    _fill(url, "b", cwd="/work/two")
    _fill(url, "c", cwd="/work/one")
    return url


# --- the listing query ------------------------------------------------------------------


def test_a_query_is_a_frozen_value_that_refuses_what_cannot_match() -> None:
    query = SessionQuery(sort="events", limit=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.limit = 3  # type: ignore[misc]
    with pytest.raises(InspectUsageError):
        SessionQuery(sort="size")
    with pytest.raises(InspectUsageError):
        SessionQuery(offset=-1)
    with pytest.raises(InspectUsageError):
        SessionQuery(since=2.0, until=1.0)


def test_parse_reads_what_a_person_typed() -> None:
    query = SessionQuery.parse(cwd="rel", limit="5", offset="1", since="2026-01-01",
                               until="2026-02-01")
    assert query.cwd == os.path.abspath("rel")
    assert (query.limit, query.offset) == (5, 1)
    assert query.since is not None
    assert query.until is not None
    assert query.until - query.since == 31 * 86_400_000  # January, in milliseconds
    assert not query.descending
    assert SessionQuery.parse(newest_first=True).descending
    assert not SessionQuery.parse(newest_first=True, reverse=True).descending
    assert not SessionQuery.parse(sort="id", newest_first=True).descending  # A to Z


@pytest.mark.parametrize(("options", "wanted"), [
    ({"limit": "many"}, "--limit takes a count (0 or more), got 'many'"),
    ({"since": "yesterday"}, "--since takes a date, a time or a duration"),
    ({"cwd": ""}, "--cwd takes a path, got ''"),
    ({"since": "2026-02-01", "until": "2026-01-01"}, "nothing can match"),
])
def test_a_query_that_does_not_read_is_a_usage_error_with_its_message(
        options: dict[str, str], wanted: str) -> None:
    with pytest.raises(InspectUsageError) as caught:
        SessionQuery.parse(**options)  # type: ignore[arg-type]
    assert wanted in caught.value.message
    assert isinstance(caught.value, ValueError)  # asked wrongly
    assert isinstance(caught.value, DshSessionError)


def test_select_filters_sorts_and_pages_into_typed_rows(store: str) -> None:
    backend = open_listed_store(store, named=True)
    try:
        page = select_sessions(backend, SessionQuery(cwd="/work/one", sort="id"))
        assert [s.header.id for s in page.summaries] == ["a", "c"]
        assert page.total == 2
        first = page.summaries[0]
        assert first.events > 0
        assert first.turns == 1
        row = session_row(first)
        assert row["id"] == "a"
        assert row["cwd"] == "/work/one"
        assert row["events"] == first.events
        assert "type" not in row
        paged = select_sessions(backend, SessionQuery(sort="id", descending=True, limit=1,
                                                      offset=1))
        assert [s.header.id for s in paged.summaries] == ["b"]
        assert paged.total == 3
    finally:
        backend.close()


def test_a_named_store_that_is_not_there_does_not_read(tmp_path: Path) -> None:
    with pytest.raises(SourceReadError) as caught:
        open_listed_store(str(tmp_path / "nothing"), named=True)
    assert caught.value.message == f"no store at {tmp_path / 'nothing'}"
    assert caught.value.hint is not None


# --- SOURCE resolution ------------------------------------------------------------------


def test_a_session_id_is_read_from_the_store(store: str) -> None:
    source = load_source(SourceSpec("a", store=store), REG)
    assert source.header.id == "a"
    assert [e.type for e in source.events][:2] == ["turn/start", "user/message"]
    assert source.origin == f'session "a" in {store}'
    assert source.warnings == []


def test_a_log_file_is_read_as_a_file_with_its_warnings(tmp_path: Path, store: str) -> None:
    stored = load_source(SourceSpec("c", store=store), REG)
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in _lines(stored)) + b'{"type":"us')
    spec = SourceSpec(str(path), store=store)
    assert resolve_source(spec) == "file"
    source = load_source(spec, REG)
    assert source.origin == str(path)
    assert [e.type for e in source.events] == [e.type for e in stored.events]
    assert any("the last line is incomplete" in w for w in source.warnings)
    reported: list[str] = []
    load_source(spec, REG, report=reported.append)
    assert reported == []  # only odd bytes of the file itself are reported at once


def _lines(source: Source) -> list[bytes]:
    from dsh_session_core.inspect import encode_json, event_line

    return [encode_json(source.header), *(event_line(e) for e in source.events)]


def test_a_missing_session_is_not_found_with_the_id_and_the_store(store: str) -> None:
    with pytest.raises(SessionNotFoundError) as caught:
        load_source(SourceSpec("nobody", store=store), REG)
    exc = caught.value
    assert (exc.session_id, exc.location) == ("nobody", store)
    assert exc.message == f'no session "nobody" in {store} (and no such file)'
    assert isinstance(exc, LookupError)
    assert not isinstance(exc, InspectUsageError)


def test_a_file_that_is_also_a_stored_session_must_be_named_one_or_the_other(
        tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").write_text("not a log\n")
    with pytest.raises(InspectUsageError, match="is both a log file here and a session"):
        resolve_source(SourceSpec("a", store=store))
    assert resolve_source(SourceSpec("a", store=store, as_id=True)) == "id"
    assert resolve_source(SourceSpec("a", store=store, as_file=True)) == "file"
    with pytest.raises(SourceReadError) as caught:
        load_source(SourceSpec("a", store=store, as_file=True), REG)
    assert "is not a dsh-session log" in caught.value.message
    assert caught.value.path == "a"


def test_an_id_the_store_cannot_hold_is_refused_before_anything_is_read(store: str) -> None:
    with pytest.raises(InspectUsageError, match="invalid session id ''"):
        load_source(SourceSpec("", store=store, as_id=True), REG)
    with pytest.raises(InspectUsageError) as caught:
        check_session_id(None, "\udc80")  # a log file's id: the rule every backend keeps
    assert caught.value.hint is not None
    assert caught.value.hint.startswith("session ids are")


def test_a_memory_store_is_refused_as_asked_wrongly() -> None:
    with pytest.raises(InspectUsageError, match="lives and dies with its process"):
        open_for_reading("memory:")


def test_every_refusal_is_an_inspect_error_not_a_cli_failure(tmp_path: Path) -> None:
    with pytest.raises(InspectError) as caught:
        load_source(SourceSpec(str(tmp_path / "gone.jsonl"), as_file=True), REG)
    assert type(caught.value).__module__ == "dsh_session_core.errors"


# --- the timeline -----------------------------------------------------------------------


def _unanswered_log(tmp_path: Path) -> Path:
    """A log whose one turn calls ``c1`` and never answers it (written event by event:
    the builders answer every call they make)."""
    from dsh_session_core import Session
    from dsh_session_core import testing as kit
    from dsh_session_core.inspect import encode_json, event_line

    s = Session("lost")
    kit.turn_start(s, 1)
    kit.step_start(s, 1, 1)
    kit.assistant(s, 1, 1, [kit.call_block("c1")])
    kit.tool_call(s, 1, 1, "c1")
    kit.step_end(s, 1, 1)
    kit.turn_end(s, 1)
    path = tmp_path / "lost.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in
                              [encode_json(s.header), *map(event_line, s.events)]))
    return path


def test_the_timeline_groups_turns_and_flags_unanswered_calls(tmp_path: Path) -> None:
    source = load_source(SourceSpec(str(_unanswered_log(tmp_path)), as_file=True), REG)
    doc = build_timeline(source, REG)
    assert doc["header"]["id"] == "lost"
    assert doc["turns"] == 1
    assert [b["turn"] for b in doc["timeline"]] == [1]  # as turn/start numbers it
    calls = unanswered_calls(source.events)
    assert [(c.call_id, c.seq) for c in calls] == [("c1", 3)]  # the tool/call's seq
    assert [u["callId"] for u in doc["unanswered"]] == ["c1"]
    flagged = [i for b in doc["timeline"] for i in b["items"] if "unanswered" in i]
    assert [(i["seq"], i["unanswered"]) for i in flagged] == [(3, ["c1"])]
    assert any("c1" in w for w in doc["warnings"])


def test_a_session_whose_calls_are_answered_has_none_unanswered(store: str) -> None:
    answered = build_timeline(load_source(SourceSpec("a", store=store), REG), REG)
    assert answered["unanswered"] == []
    assert answered["turns"] == 1


# --- retained: the store's never-prune mark, the read model's -----------------------------


@pytest.mark.parametrize("sort", ["id", "activity"])  # rows from headers, from summaries
def test_rows_say_which_sessions_the_store_retains(store: str, sort: str) -> None:
    with open_store(store) as s:
        s.retain("b", note="the incident")

    def listed(ids_only: bool = False) -> list[tuple[str, bool, object]]:
        backend = open_listed_store(store, named=True)
        try:
            page = select_sessions(backend, SessionQuery(sort=sort), ids_only=ids_only)
        finally:
            backend.close()
        return sorted((s.header.id, s.retained, session_row(s).get("retained"))
                      for s in page.summaries)

    assert listed() == [("a", False, None), ("b", True, True), ("c", False, None)]
    if sort == "id":  # ids only: the marks are not read (ls -q)
        assert [r[1] for r in listed(ids_only=True)] == [False, False, False]
    with open_store(store) as s:
        s.retain("b", False)
    assert listed() == [("a", False, None), ("b", False, None), ("c", False, None)]


def test_the_timeline_of_a_retained_session_says_so_with_its_note(store: str) -> None:
    with open_store(store) as s:
        s.retain("b", note="the incident")
        s.retain("c")
    # REG knows none of the ledger's types: the marks are read with core's own.
    marked = load_source(SourceSpec("b", store=store), REG)
    assert marked.retained is True
    doc = build_timeline(marked, REG)
    assert (doc["retained"], doc["retainedNote"]) == (True, "the incident")
    assert list(doc)[-2:] == ["retained", "retainedNote"]  # show --json's order, as before
    bare = build_timeline(load_source(SourceSpec("c", store=store), REG), REG)
    assert bare["retained"] is True
    assert "retainedNote" not in bare
    plain = load_source(SourceSpec("a", store=store), REG)
    assert plain.retained is False
    assert "retained" not in build_timeline(plain, REG)
    # A log file is no store's: never marked, though its session is marked in one.
    [log] = Path(store).rglob("b.jsonl")
    assert load_source(SourceSpec(str(log), as_file=True), REG).retained is False


def test_a_ledger_that_does_not_read_marks_none_and_stops_nothing(store: str) -> None:
    with open_store(store) as s:
        s.retain("b")
    [ledger] = Path(store).rglob("dsh-session.retention.jsonl")
    with ledger.open("ab") as f:  # a damaged record, then a good one
        f.write(b'not json\n{"type":"retention/mark","seq":2,"time":1,"data":'
                b'{"sessionId":"c","retain":true}}\n')
    backend = open_listed_store(store, named=True)
    try:
        page = select_sessions(backend, SessionQuery(sort="id"))
    finally:
        backend.close()
    assert [(s.header.id, s.retained) for s in page.summaries] == [
        ("a", False), ("b", False), ("c", False)]
    source = load_source(SourceSpec("b", store=store), REG)
    assert source.retained is False
    [warning] = source.warnings
    assert warning.startswith("the store's retention ledger does not read (LogFormatError: ")
    assert warning.endswith("whether the session is marked never to be pruned is not known")
    assert build_timeline(source, REG)["warnings"] == [warning]


# --- the blocks of a timeline: one rule ----------------------------------------------------

_TRIGGER = {"kind": "message", "source": {"kind": "user"}}
#: Each kind of event a log of the property below holds, as its ``data``.
_KINDS = {
    "start": ("turn/start", {"turn": 1, "trigger": _TRIGGER}),
    "start-no-turn": ("turn/start", {"trigger": _TRIGGER}),  # shown outside a turn
    "end": ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    "user": ("user/message", {"content": [{"type": "text", "text": "hi"}],
                              "source": {"kind": "user"}}),
    "other": ("mode/set", {"mode": "plan"}),  # a plugin's, not installed here
}


def _rule(kinds: list[str]) -> list[tuple[int, int]]:
    """The documented rule, written out again: a turn/start opens a block (a turn block
    when it names its turn), any event with no block open opens one outside a turn, and
    a turn/end closes the turn block it is in."""
    spans: list[list[int]] = []
    open_ = turn = False
    for i, kind in enumerate(kinds):
        if kind.startswith("start"):
            spans.append([i, i + 1])
            open_, turn = True, kind == "start"
            continue
        if not open_:
            spans.append([i, i])
            open_, turn = True, False
        spans[-1][1] = i + 1
        if kind == "end" and turn:
            open_ = False
    return [(a, b) for a, b in spans]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(_KINDS)), max_size=25))
def test_the_timeline_is_grouped_by_timeline_blocks_rule(tmp_path: Path,
                                                         kinds: list[str]) -> None:
    from dsh_session_core import SessionHeader
    from dsh_session_core.inspect import encode_json

    lines = [encode_json(SessionHeader(version=0, id="p", created_at=0, cwd="/"))]
    for seq, kind in enumerate(kinds):
        event_type, data = _KINDS[kind]
        wire: dict[str, object] = {"type": event_type, "seq": seq, "time": seq, "data": data}
        if event_type == "user/message":
            wire["surfaceOp"] = "append"
        lines.append(encode_json(wire))
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    source = load_source(SourceSpec(str(path), as_file=True), REG)
    blocks = timeline_blocks(source.events)
    assert [(r.start, r.stop) for r in blocks] == _rule(kinds)
    doc = build_timeline(source, REG)
    assert [(b["startSeq"], b["endSeq"] + 1) for b in doc["timeline"]] == _rule(kinds)
    assert [b["turn"] for b in doc["timeline"]] == [
        1 if kinds[r.start] == "start" else None for r in blocks]
    text = render_timeline(doc)  # plain text, every block shown
    assert text.count("\nturn 1 · ") + text.count("\noutside a turn · ") == len(blocks)
