"""Issue 26, point 1: the read model's own door, ``dsh_session_core.inspect``: a typed
listing query, SOURCE resolution into a :class:`Source`, the timeline, and refusals as
core errors carrying their message and hint (never a CLI failure, never an exit code).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

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
    resolve_source,
    select_sessions,
    session_row,
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
