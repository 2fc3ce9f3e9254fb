"""``dsh-session ls`` filters, sorts and pages (issue 15, point 3), on JSONL, SQLite and
PostgreSQL: every option against a plain-Python model of the same rows (a property test
and worked examples), ``-q`` printing ids only, and bad values refused as usage errors.
The commands run in-process through the CLI's ``main``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import open_store
from dsh_session_core.testing import run_cli

USER = {"kind": "user"}
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000

#: id, created (minutes after BASE), cwd, parent, turns, last activity (minutes).
SESSIONS: list[tuple[str, int, str | None, str | None, int, int]] = [
    ("m-07", 0, "/a", None, 1, 30),
    ("b-03", 5, "/b", None, 3, 10),
    ("z-11", 10, None, None, 2, 300),
    ("a-01", 15, "/a", "m-07", 1, 20),
    ("k-05", 20, "/a", "m-07", 2, 200),
    ("c-02", 25, "/b", "b-03", 1, 90),
    ("x-09", 30, None, "z-11", 3, 45),
    ("d-04", 35, "/a/sub", None, 1, 120),
    ("y-10", 40, "/b", "m-07", 2, 60),
    ("e-06", 45, "/a", None, 1, 500),
    ("f-08", 50, None, None, 2, 75),
]


def _fill(url: str) -> None:
    now = [0]
    with open_store(url, clock=lambda: now[0]) as store:
        for sid, created, cwd, parent, turns, last in SESSIONS:
            session = store.create(sid, cwd=cwd, parent_session=parent,
                                   created_at=BASE + created * MINUTE)
            for turn in range(1, turns + 1):
                # Every event at the last activity, but the very last one's time rules.
                now[0] = BASE + last * MINUTE - (turns - turn)
                session.append("turn/start", {"turn": turn, "trigger": {
                    "kind": "message", "source": USER}})
                session.append("user/message", {"content": [{"type": "text", "text": "q"}],
                                                "source": USER}, surface_op="append")
                session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            store.flush(session)


@pytest.fixture(scope="module", params=["jsonl", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[str]:
    """A store holding :data:`SESSIONS`, shared by this module's tests."""
    if request.param == "postgresql":
        databases = request.getfixturevalue("postgresql_databases")
        with databases.database("ls") as pg:
            _fill(pg)
            yield pg
        return
    tmp = tmp_path_factory.mktemp("ls")
    found = str(tmp / "sessions") if request.param == "jsonl" else f"sqlite:///{tmp}/s.db"
    _fill(found)
    yield found


# --- the model ---------------------------------------------------------------------------


def _model(*, cwd: str | None = None, parent: str | None = None,
           since: int | None = None, until: int | None = None, sort: str = "created",
           reverse: bool = False, offset: int = 0, limit: int | None = None) -> list[str]:
    """The ids ``ls`` must print, computed from :data:`SESSIONS` (times in minutes):
    newest (most events) first, ids from A to Z, ``reverse`` the other way round."""
    rows = [r for r in SESSIONS
            if (cwd is None or r[2] == cwd) and (parent is None or r[3] == parent)
            and (since is None or r[5] * MINUTE >= since * MINUTE)
            and (until is None or r[5] * MINUTE < until * MINUTE)]
    keys = {"created": lambda r: (r[1], r[0]), "activity": lambda r: (r[5], r[0]),
            "events": lambda r: (r[4] * 3, r[0]), "id": lambda r: r[0]}
    rows.sort(key=keys[sort], reverse=(sort != "id") != reverse)
    end = None if limit is None else offset + limit
    return [r[0] for r in rows[offset:end]]


def _iso(minutes: int) -> str:
    moment = datetime.datetime.fromtimestamp((BASE + minutes * MINUTE) / 1000, datetime.UTC)
    return moment.isoformat()


def _argv(options: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name
        if value is True:
            argv.append(flag)
        elif name in ("since", "until"):
            argv += [flag, _iso(value)]
        else:
            argv += [flag, str(value)]
    return argv


def _ids(url: str, *argv: str) -> list[str]:
    code, out, err = run_cli("ls", "--store", url, "-q", *argv)
    assert (code, err) == (0, "")
    return out.decode().splitlines()


def _json(url: str, *argv: str) -> list[dict[str, Any]]:
    code, out, err = run_cli("ls", "--store", url, "--json", *argv)
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert isinstance(rows, list)
    return rows


# --- worked examples ----------------------------------------------------------------------


EXAMPLES: list[dict[str, Any]] = [
    {},
    {"cwd": "/a"},
    {"cwd": "/nowhere"},
    {"parent": "m-07"},
    {"parent": "m-07", "cwd": "/a"},
    {"since": 60},
    {"until": 60},
    {"since": 30, "until": 120},
    {"sort": "activity"},
    {"sort": "activity", "reverse": True, "limit": 3},
    {"sort": "events", "reverse": True},
    {"sort": "id"},
    {"sort": "id", "offset": 3, "limit": 4},
    {"limit": 0},
    {"offset": 100},
    {"cwd": "/b", "sort": "events", "limit": 2, "offset": 1},
]


@pytest.mark.parametrize("options", EXAMPLES, ids=lambda o: " ".join(_argv(o)) or "all")
def test_ls_selects_what_the_model_selects(url: str, options: dict[str, Any]) -> None:
    expected = _model(**options)
    assert _ids(url, *_argv(options)) == expected
    assert [r["id"] for r in _json(url, *_argv(options))] == expected


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cwd=st.sampled_from([None, "/a", "/b", "/a/sub"]),
       parent=st.sampled_from([None, "m-07", "z-11", "a-01"]),
       since=st.none() | st.integers(0, 520), until=st.none() | st.integers(0, 520),
       sort=st.sampled_from(["created", "activity", "events", "id"]), reverse=st.booleans(),
       offset=st.sampled_from([None, 0, 1, 3, 20]),
       limit=st.sampled_from([None, 0, 1, 2, 5, 50]))
def test_ls_property(url: str, cwd: str | None, parent: str | None, since: int | None,
                     until: int | None, sort: str, reverse: bool, offset: int | None,
                     limit: int | None) -> None:
    if since is not None and until is not None and since > until:
        since, until = until, since
    options: dict[str, Any] = {"cwd": cwd, "parent": parent, "since": since, "until": until,
                               "sort": sort, "reverse": reverse, "offset": offset,
                               "limit": limit}
    assert _ids(url, *_argv(options)) == _model(**{**options, "offset": offset or 0})


def test_json_rows_keep_their_shape(url: str) -> None:
    everything = {r["id"]: r for r in _json(url)}
    page = _json(url, "--sort", "id", "--limit", "2")
    assert page == [everything["a-01"], everything["b-03"]]
    assert _json(url, "--limit", "2") == [everything["f-08"], everything["e-06"]]
    row = everything["k-05"]
    assert row == {"version": 0, "id": "k-05", "createdAt": BASE + 20 * MINUTE,
                   "cwd": "/a", "parentSession": "m-07", "events": 6, "turns": 2,
                   "lastActivity": BASE + 200 * MINUTE, "torn": False}


def test_quiet_prints_ids_only(url: str) -> None:
    code, out, err = run_cli("ls", "--store", url, "-q", "--cwd", "/b")
    assert (code, out, err) == (0, b"y-10\nc-02\nb-03\n", "")  # the newest first
    code, out, err = run_cli("ls", "--store", url, "-q", "--cwd", "/b", "--reverse")
    assert (code, out, err) == (0, b"b-03\nc-02\ny-10\n", "")
    code, out, _ = run_cli("ls", "--store", url, "--quiet", "--cwd", "/none")
    assert (code, out) == (0, b"")


def test_table_counts_the_rows_shown(url: str) -> None:
    code, out, _ = run_cli("ls", "--store", url, "--parent", "m-07", "--sort", "id")
    lines = out.decode().splitlines()
    assert code == 0
    assert [line.split()[0] for line in lines[1:-1]] == ["a-01", "k-05", "y-10"]
    assert lines[-1] == f"3 session(s) in {url}"
    code, out, _ = run_cli("ls", "--store", url, "--cwd", "/none")
    assert out.decode() == f"no sessions match in {url}\n"


@pytest.mark.parametrize("sort", ["created", "activity"])
def test_a_page_says_which_rows_of_how_many(url: str, sort: str) -> None:
    """With ``--limit``/``--offset`` the last line gives the total, as ``search`` does."""
    def table(*argv: str) -> list[str]:
        code, out, err = run_cli("ls", "--store", url, "--sort", sort, *argv)
        assert (code, err) == (0, "")
        return out.decode().splitlines()

    lines = table("--limit", "3")
    assert [line.split()[0] for line in lines[1:-1]] == _model(sort=sort, limit=3)
    assert lines[-1] == f"sessions 1-3 of 11 in {url} (--offset 3 for more)"
    lines = table("--offset", "3", "--limit", "3")
    assert [line.split()[0] for line in lines[1:-1]] == _model(sort=sort, offset=3, limit=3)
    assert lines[-1] == f"sessions 4-6 of 11 in {url} (--offset 6 for more)"
    assert table("--offset", "9")[-1] == f"sessions 10-11 of 11 in {url}"
    assert table("--offset", "9", "--cwd", "/a")[-1] == (
        f"no sessions past the first 9 of 4 in {url}")
    assert table("--offset", "2", "--cwd", "/a")[-1] == f"sessions 3-4 of 4 in {url}"
    assert table("--limit", "20")[-1] == f"11 session(s) in {url}"


def test_cwd_is_made_absolute(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    assert _ids(url, "--cwd", "a") == _model(cwd="/a")


def test_a_duration_reaches_back_from_now(url: str) -> None:
    # Every session was last active in 2026-01-01; now is later than that.
    assert _ids(url, "--since", "1s") == []
    assert _ids(url, "--until", "1s") == _model()
    assert _ids(url, "--since", "2025-12-31", "--until", "2030-01-01") == _model()


# --- bad values ---------------------------------------------------------------------------


BAD = [
    (["--limit", "x"], "--limit takes a count (0 or more), got 'x'"),
    (["--limit", "-1"], "--limit takes a count (0 or more), got '-1'"),
    (["--offset", "1.5"], "--offset takes a count (0 or more), got '1.5'"),
    (["--since", "yesterday"], "--since takes a date, a time or a duration, got 'yesterday'"),
    (["--until", "7x"], "--until takes a date, a time or a duration, got '7x'"),
    (["--since", "2026-13-01"], "--since takes a date, a time or a duration"),
    (["--since", "99999999999d"], "got '99999999999d'"),
    (["--since", "999999d"], "--since 999999d reaches back before any date"),
    (["--since", "2026-02-01", "--until", "2026-01-01"],
     "--since 2026-02-01 is after --until 2026-01-01: nothing can match"),
    (["--cwd", ""], "--cwd takes a path, got ''"),
    (["--parent", ""], "--parent takes a session id, got ''"),
    (["--sort", "size"], "argument --sort: invalid choice: 'size'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_bad_values_are_usage_errors(tmp_path: Path, argv: list[str], message: str) -> None:
    code, out, err = run_cli("ls", "--store", str(tmp_path), *argv)
    assert (code, out) == (2, b"")
    assert message in err
    assert "Traceback" not in err
