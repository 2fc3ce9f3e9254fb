"""``dsh-session copy SRC DST``: issue acceptance on the demo's sessions and the reference
logs, resuming, refusals, the report and the progress bar.

The kinds of store are in ``STORE_URLS`` (a new backend is tested by adding one entry):
a factory making the URL of store ``name`` in a test's :class:`Places`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from conftest import upstream_dir
from dsh_session_core import JsonlBackend, SessionHeader, SqliteBackend
from dsh_session_core.testing import run_cli

if TYPE_CHECKING:
    from dsh_session_core.testing.postgresql import Databases


class Places:
    """Where one test's stores live: files under ``tmp``, and one PostgreSQL database
    per name, made on first use (by ``make_database``), the same one after that."""

    def __init__(self, tmp: Path, make_database: Callable[[str], str],
                 redis_server: Callable[[], str]) -> None:
        self.tmp = tmp
        self._make_database = make_database
        self._redis_server = redis_server
        self._databases: dict[str, str] = {}
        self.prefixes: dict[str, str] = {}

    def database(self, name: str) -> str:
        if name not in self._databases:
            self._databases[name] = self._make_database(name)
        return self._databases[name]

    def redis(self, name: str) -> str:
        """Store ``name`` on the run's Redis server: a key prefix of its own."""
        prefix = self.prefixes.setdefault(name, f"cli{uuid.uuid4().hex[:10]}:")
        return f"{self._redis_server()}?prefix={prefix}"


#: The kinds of store a copy goes between: the URL of store ``name`` of a test.
STORE_URLS: dict[str, Callable[[Places, str], str]] = {
    "jsonl": lambda at, name: str(at.tmp / name),
    "jsonl+zstd": lambda at, name: f"jsonl+zstd:///{at.tmp / name}",
    "sqlite": lambda at, name: f"sqlite:///{at.tmp / name}.db",
    "postgresql": lambda at, name: at.database(name),
    "redis": lambda at, name: at.redis(name),
}


def _said(dst: str) -> str:
    """What a copy into ``dst`` says on stderr when all goes well: that a path that does
    not exist yet is made a JSONL store (issue 24, point 6), else nothing. Call it before
    the copy."""
    if ":" in dst or os.path.exists(dst):
        return ""
    return (f"dsh-session: created the JSONL store {dst} (a folder; a SQLite database is "
            f"named sqlite:///PATH)\n")


@pytest.fixture
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Places]:
    """The test's :class:`Places` (under ``tmp_path``). The test server is asked for only
    when a test makes a PostgreSQL store; its databases are dropped after the test."""
    made: list[str] = []

    def make_database(name: str) -> str:
        databases: Databases = request.getfixturevalue("postgresql_databases")
        made.append(databases.create(f"cli copy {name}"))
        return made[-1]

    at = Places(tmp_path, make_database,
                lambda: str(request.getfixturevalue("redis_server")))
    yield at
    if at.prefixes:
        import redis

        client = redis.Redis.from_url(request.getfixturevalue("redis_server"))
        try:
            for prefix in at.prefixes.values():
                keys = list(client.scan_iter(match=prefix + "*", count=1000))
                if keys:
                    client.delete(*keys)
        finally:
            client.close()
    if made:
        databases: Databases = request.getfixturevalue("postgresql_databases")
        for url in made:
            databases.drop(url)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "DSH_SESSION_STORE")}
    env["DSH_SESSION_DISABLE_PLUGINS"] = "example"
    return env


def _dsh(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *args], cwd=cwd,
                          capture_output=True, check=False, env=_env())


def _run(*argv: str) -> tuple[int, str, str]:
    """A command in this process: exit status, stdout, stderr."""
    code, out, err = _run_raw(*argv)
    return code, out.decode(), err


def _run_raw(*argv: str) -> tuple[int, bytes, str]:
    """A command in this process: exit status, stdout (bytes), stderr."""
    return run_cli(*argv)


def _export(session_id: str, store: str) -> bytes:
    proc = _dsh("export", session_id, "--store", store)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _ids(store: str) -> list[str]:
    proc = _dsh("ls", "--store", store, "--json", "--reverse")  # the oldest first
    assert proc.returncode == 0, proc.stderr
    return [row["id"] for row in json.loads(proc.stdout)]


def _value(line: bytes) -> Any:
    return msgspec.json.decode(line)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A JSONL store holding what ``dsh-session demo`` writes."""
    store = str(tmp_path_factory.mktemp("demo") / "store")
    proc = _dsh("demo", "--store", store)
    assert proc.returncode == 0, proc.stderr
    return store


# --- acceptance -------------------------------------------------------------------------


def test_the_demo_goes_jsonl_to_sqlite_to_jsonl(demo: str, places: Places) -> None:
    db, back = STORE_URLS["sqlite"](places, "copy"), STORE_URLS["jsonl"](places, "back")
    ids = _ids(demo)
    assert ids == ["demo", "demo-fork"]
    there = _dsh("copy", demo, db)
    assert there.returncode == 0, there.stderr
    lines = there.stdout.decode().splitlines()
    assert lines[0].startswith("demo: copied ")
    assert lines[1].startswith("demo-fork: copied ")
    assert lines[2].startswith("copied 2 session(s) (")
    assert lines[2].endswith(" event(s)), 0 up to date; verified")
    assert there.stderr == b""  # not a terminal: no progress bar
    assert _dsh("copy", db, back).returncode == 0
    closers = 0
    for sid in ids:
        source = _export(sid, demo)
        # JSONL -> SQLite -> JSONL: the same log, byte for byte, and SQLite's export is
        # it too: the crash-repair closer, which the reference writes with surfaceOp
        # before sourceEventSeqs, comes back as it was written (SQLite keeps the line
        # its columns would rebuild in another key order).
        assert _export(sid, back) == source
        assert _export(sid, STORE_URLS["sqlite"](places, "copy")) == source
        closers += source.count(b'"surfaceOp":"append","sourceEventSeqs"')
    assert closers == 1
    # JSONL -> JSONL keeps every byte of every file.
    direct = STORE_URLS["jsonl"](places, "direct")
    assert _dsh("copy", demo, direct).returncode == 0
    for sid in ids:
        assert _export(sid, direct) == _export(sid, demo)
    for path in Path(demo).rglob("*.jsonl"):
        assert (Path(direct) / path.relative_to(demo)).read_bytes() == path.read_bytes()


def _lines_of(log: bytes) -> list[Any]:
    return [_value(line) for line in log.splitlines()]


def test_the_demo_goes_jsonl_to_postgresql_to_jsonl_and_derives_the_same_messages(
    demo: str, places: Places
) -> None:
    pg, back = STORE_URLS["postgresql"](places, "copy"), STORE_URLS["jsonl"](places, "back")
    there = _dsh("copy", demo, pg)
    assert (there.returncode, there.stderr) == (0, b"")
    assert there.stdout.decode().splitlines() == [
        "demo: copied 270 event(s)",
        "demo-fork: copied 174 event(s)",
        "copied 2 session(s) (444 event(s)), 0 up to date; verified",
    ]
    assert _ids(pg) == _ids(demo) == ["demo", "demo-fork"]
    said = _said(back)
    home = _dsh("copy", pg, back)
    assert (home.returncode, home.stderr.decode()) == (0, said)
    assert home.stdout.decode().splitlines()[-1] == (
        "copied 2 session(s) (444 event(s)), 0 up to date; verified")
    logs: list[Path] = []
    for sid in ("demo", "demo-fork"):
        source, in_pg, returned = (_export(sid, store) for store in (demo, pg, back))
        # Byte for byte, the demo's crash-repair closer (written with surfaceOp before
        # sourceEventSeqs) too: PostgreSQL keeps the line its columns would rebuild in
        # another key order.
        assert in_pg == returned == source
        assert source.count(b'"surfaceOp":"append","sourceEventSeqs"') == (
            1 if sid == "demo" else 0)
        for name, log in (("source", source), ("pg", in_pg), ("back", returned)):
            logs.append(places.tmp / f"{sid}.{name}.jsonl")
            logs[-1].write_bytes(log)
        # The files themselves, as the stores hold them, too.
        logs += [next(Path(demo).rglob(f"{sid}.jsonl")), next(Path(back).rglob(f"{sid}.jsonl"))]
    derived = _dsh("derive", "--jsonl", *map(str, logs))
    assert derived.returncode == 0, derived.stderr
    rows = [json.loads(line) for line in derived.stdout.splitlines()]
    assert [row["file"] for row in rows] == [str(log) for log in logs]
    assert all("messages" in row and row["messages"] for row in rows), rows
    for sid in ("demo", "demo-fork"):
        messages = [row["messages"] for row in rows if Path(row["file"]).name.startswith(
            f"{sid}.")]
        assert len(messages) == 5
        assert all(m == messages[0] for m in messages), sid
    assert messages[0] != rows[0]["messages"]  # the fork derives messages of its own


def test_a_copy_into_postgresql_interrupted_is_completed_by_running_it_again(
    demo: str, places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_core import PostgresBackend

    pg = STORE_URLS["postgresql"](places, "copy")
    append = PostgresBackend.append_batch
    batches = iter(range(100))

    def crash_at_the_fourth(self: PostgresBackend, *args: Any) -> None:
        if next(batches) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the copy
        append(self, *args)

    monkeypatch.setattr(PostgresBackend, "append_batch", crash_at_the_fourth)
    code, out, err = _run("copy", demo, pg, "--batch-size", "10")
    assert (code, out) == (130, "")  # interrupted, as every command
    assert err.splitlines() == [
        "dsh-session: interrupted: the sessions and batches already copied are kept",
        "hint: run the same command again to resume"]
    monkeypatch.setattr(PostgresBackend, "append_batch", append)
    assert _ids(pg) == ["demo"]
    code, out, err = _run("copy", demo, pg, "--batch-size", "10")
    assert (code, err) == (0, "")  # the lease of the interrupted copy was released
    assert out.splitlines() == [
        "demo: appended 240 event(s) to the 30 already in DST",
        "demo-fork: copied 174 event(s)",
        "copied 2 session(s) (414 event(s)), 0 up to date; verified",
    ]
    for sid in ("demo", "demo-fork"):
        assert _lines_of(_export(sid, pg)) == _lines_of(_export(sid, demo))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "redis"])
def test_a_second_copy_finds_everything_up_to_date(demo: str, places: Places,
                                                   kind: str) -> None:
    db = STORE_URLS[kind](places, "copy")
    assert _run("copy", demo, db)[0] == 0
    code, out, err = _run("copy", demo, db)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "demo: up to date (270 event(s))",
        "demo-fork: up to date (174 event(s))",
        "copied 0 session(s) (0 event(s)), 2 up to date; verified",
    ]


@pytest.mark.parametrize("kind", list(STORE_URLS))
def test_reference_logs_go_through_every_kind_of_store_and_back(places: Places,
                                                                 kind: str) -> None:
    from dsh_session_core._logformat.logfile import parse_header
    from dsh_session_core._persistence.backends.jsonl.paths import log_path

    src = places.tmp / "src"
    logs = sorted((upstream_dir() / "fixtures").rglob("*.jsonl"))
    placed: dict[str, bytes] = {}
    for log in logs:
        data = log.read_bytes()
        header = parse_header(data[: data.index(b"\n")])
        if header.id in placed or not isinstance(header.version, int):
            continue  # one log per id; a version-less header is no store's session
        path = Path(log_path(str(src), header.cwd if isinstance(header.cwd, str) else None,
                             header.id))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        placed[header.id] = data
    assert len(placed) >= 20
    previous = str(src)
    for i, hop in enumerate([kind, "jsonl"]):
        url = STORE_URLS[hop](places, f"hop-{i}")
        said = _said(url)
        code, out, err = _run("copy", previous, url, "--json")
        doc = json.loads(out)
        assert (code, err, doc["ok"]) == (0, said, True), doc
        assert "copied" in doc["byStatus"]
        assert set(doc["byStatus"]) <= {"copied", "empty"}
        previous = url
    for sid, data in placed.items():
        if data.count(b"\n") > 1:  # a session with an event (the others are not stored)
            # In this process: a subprocess per export would cost ~0.2 s each.
            there, here = _run_raw("export", sid, "--store", previous), _run_raw(
                "export", sid, "--store", str(src))
            assert there[0] == here[0] == 0, (sid, there[2], here[2])
            assert there[1] == here[1], sid
            assert there[1].count(b"\n") == data.count(b"\n"), sid


# --- resuming ---------------------------------------------------------------------------


def test_a_partial_copy_is_completed_and_a_torn_tail_in_dst_cut(
    demo: str, tmp_path: Path
) -> None:
    dst = tmp_path / "dst"
    assert _run("copy", demo, str(dst), "--session", "demo")[0] == 0
    (log,) = [p for p in dst.rglob("demo.jsonl")]
    full = log.read_bytes()
    cut = full.index(b"\n", len(full) // 2) + 1
    log.write_bytes(full[:cut] + b'{"type":"assistant/chunk","se')  # a crash mid-batch
    kept = full[:cut].count(b"\n") - 1
    code, out, err = _run("copy", demo, str(dst), "--batch-size", "10")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"demo: appended {270 - kept} event(s) to the {kept} already in DST · cut a torn tail "
        "in DST",
        "demo-fork: copied 174 event(s)",
        f"copied 2 session(s) ({270 - kept + 174} event(s)), 0 up to date; verified",
    ]
    assert log.read_bytes() == full


# --- refusals ---------------------------------------------------------------------------


def test_a_diverged_session_is_refused_and_left_as_it_is(demo: str, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    assert _run("copy", demo, str(dst))[0] == 0
    (log,) = dst.rglob("demo.jsonl")
    changed = log.read_bytes().replace(b'"text":"', b'"text":"EDITED ', 1)
    log.write_bytes(changed)
    code, out, err = _run("copy", demo, str(dst))
    assert code == 1
    assert out.splitlines() == ["demo-fork: up to date (174 event(s))",
                                "copied 0 session(s) (0 event(s)), 1 up to date, 1 diverged; "
                                "verified"]
    assert err.splitlines()[0].startswith(
        'dsh-session: error: session "demo" diverged: the destination\'s event seq ')
    assert err.splitlines()[1:] == [
        "hint: a diverged session is never overwritten: remove it from DST, or copy into "
        "another store"]
    assert log.read_bytes() == changed
    code, out, _ = _run("copy", demo, str(dst), "--json")
    doc = json.loads(out)
    assert (code, doc["ok"], doc["byStatus"]) == (1, False, {"diverged": 1, "up-to-date": 1})
    assert doc["sessions"][0]["status"] == "diverged"


@pytest.mark.parametrize("kind", list(STORE_URLS))
def test_a_session_a_writer_holds_in_dst_is_skipped(demo: str, places: Places,
                                                    kind: str) -> None:
    from dsh_session_core._persistence.opening import backend_for

    dst = STORE_URLS[kind](places, "dst")
    writer = backend_for(dst)
    header = SessionHeader(version=0, id="demo-fork", created_at=0, cwd="/demo/workspace")
    held = writer.acquire(header)
    try:
        proc = _dsh("copy", demo, dst)  # another process
    finally:
        held.release()
        writer.close()
    assert proc.returncode == 1
    err = proc.stderr.decode().splitlines()
    assert err[0].startswith('dsh-session: error: session "demo-fork" locked: another writer '
                             "holds its lock in the destination")
    assert err[1] == "hint: a writer holds the session in DST: stop it, then run the copy again"
    assert proc.stdout.decode().splitlines()[-1] == (
        "copied 1 session(s) (270 event(s)), 0 up to date, 1 locked; verified")


def test_usage_errors_exit_2_with_a_hint(demo: str, tmp_path: Path) -> None:
    cases = {
        (demo, demo): "dsh-session: SRC and DST are the same store",
        (demo, demo + "/"): "dsh-session: SRC and DST are the same store",
        (demo, "memory:"): "dsh-session: a memory: store lives and dies with its process",
        (demo, "nope://x"): "dsh-session: unknown store URL scheme 'nope' in 'nope://x'",
        ("nope://x", demo): "dsh-session: unknown store URL scheme 'nope' in 'nope://x'",
    }
    for (src, dst), error in cases.items():
        code, out, err = _run("copy", src, dst)
        lines = err.splitlines()
        assert (code, out, len(lines)) == (2, "", 2), (src, dst, err)
        assert lines[0].startswith(error), err
        assert lines[1].startswith("hint: "), err
    code, _, err = _run("copy", demo, str(tmp_path / "x"), "--batch-size", "0")
    assert (code, err) == (2, "dsh-session: --batch-size must be at least 1, got 0\n")


def test_a_missing_source_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    for src in (str(tmp_path / "none"), f"sqlite:///{tmp_path}/none.db"):
        code, out, err = _run("copy", src, str(tmp_path / "dst"))
        assert (code, out) == (1, "")
        assert err.startswith("dsh-session: no ")
        assert "\nhint: " in err
    assert sorted(os.listdir(tmp_path)) == []
    (tmp_path / "empty").mkdir()
    assert _run("copy", str(tmp_path / "empty"), str(tmp_path / "dst"))[:2] == (
        0, f"no sessions in {tmp_path / 'empty'}: nothing to copy\n")
    code, out, err = _run("copy", str(tmp_path / "empty"), str(tmp_path / "d2"),
                          "--session", "ghost")
    assert code == 1
    assert err.splitlines() == [
        'dsh-session: error: session "ghost" missing: no such session in the source',
        "hint: `dsh-session ls --store SRC` lists the sessions of SRC"]


def _has_tables(url: str) -> bool:
    """Whether the database holds dsh-session's tables (opening a backend makes them)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT to_regclass('dsh_session_schema') IS NOT NULL").fetchone()
    return bool(row and row[0])


def test_a_postgresql_database_without_a_store_is_no_source_and_stays_so(
    places: Places,
) -> None:
    empty = STORE_URLS["postgresql"](places, "empty")
    code, out, err = _run("copy", empty, str(places.tmp / "dst"))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"dsh-session: no dsh-session store at {empty} (the database has no tables)",
        "hint: check the URL: the database the sessions were written to"]
    assert not _has_tables(empty)
    assert os.listdir(places.tmp) == []


def test_two_urls_of_one_postgresql_database_are_the_same_store_and_no_password_shows(
    demo: str, places: Places
) -> None:
    from urllib.parse import urlsplit

    url = STORE_URLS["postgresql"](places, "one")
    assert _run("copy", demo, url)[0] == 0
    parts = urlsplit(url)
    secret = f"postgres://{parts.username}:s3cret@{parts.hostname}:{parts.port}{parts.path}"
    code, out, err = _run("copy", url, secret)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"dsh-session: SRC and DST are the same store ({url} and "
        f"postgres://{parts.username}@{parts.hostname}:{parts.port}{parts.path})",
        "hint: copy into another folder or database"]
    said = _said(str(places.tmp / "dst"))
    code, out, err = _run("copy", secret, str(places.tmp / "dst"), "--json", "--no-verify")
    assert (code, err) == (0, said)
    assert "s3cret" not in out
    assert json.loads(out)["source"] == secret.replace(":s3cret", "")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_dry_run_says_what_it_would_do_and_creates_nothing(
    demo: str, places: Places, kind: str
) -> None:
    db = STORE_URLS[kind](places, "copy")
    code, out, err = _run("copy", demo, db, "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "demo: would copy 270 event(s)",
        "demo-fork: would copy 174 event(s)",
        "would copy 2 session(s) (444 event(s)), 0 up to date (dry run: nothing was written)",
    ]
    assert os.listdir(places.tmp) == []
    if kind == "postgresql":
        assert not _has_tables(db)


def test_json_reports_every_session(demo: str, tmp_path: Path) -> None:
    dst = str(tmp_path / "dst")
    said = _said(dst)
    code, out, err = _run("copy", demo, dst, "--json", "--no-verify")
    assert (code, err) == (0, said)
    doc = json.loads(out)
    assert doc == {
        "source": demo, "destination": dst, "ok": True, "dryRun": False, "verify": False,
        "copiedEvents": 444, "byStatus": {"copied": 2},
        "sessions": [
            {"id": "demo", "status": "copied", "events": 270, "existing": 0, "copied": 270,
             "sourceTorn": False, "cutDestinationTail": False, "verified": False,
             "error": None},
            {"id": "demo-fork", "status": "copied", "events": 174, "existing": 0,
             "copied": 174, "sourceTorn": False, "cutDestinationTail": False,
             "verified": False, "error": None},
        ],
    }


def test_a_torn_source_is_copied_up_to_its_tear_and_said_so(tmp_path: Path) -> None:
    src = JsonlBackend(tmp_path / "src")
    torn = upstream_dir() / "synthetic" / "crash-after-tool-call.jsonl"
    data = torn.read_bytes()
    from dsh_session_core._logformat.logfile import parse_header

    header = parse_header(data[: data.index(b"\n")])
    path = Path(src.location(header))
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    said = _said(str(tmp_path / "dst"))
    code, out, err = _run("copy", str(tmp_path / "src"), str(tmp_path / "dst"))
    assert (code, err) == (0, said)
    assert out.splitlines()[0] == (
        f"{header.id}: copied 60 event(s) · a torn tail in SRC is not copied (SRC is left as "
        "it is)")
    assert path.read_bytes() == data


# --- the progress bar -------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("kind", ["jsonl", "postgresql"])
def test_a_terminal_shows_a_progress_bar_and_it_is_erased(
    demo: str, places: Places, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    from dsh_session_core._cli.main import main

    terminal = _Terminal()
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "stderr", terminal)
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    dst = STORE_URLS[kind](places, "dst")
    said = _said(dst)
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(["copy", demo, dst, "--batch-size", "100"])
    assert exit_.value.code == 0
    drawn = terminal.getvalue()
    assert drawn.endswith(said)
    drawn = drawn.removesuffix(said)
    assert "\rcopying 1/2 demo [" in drawn
    assert " 0/270 events" in drawn  # the first state is drawn at once
    assert drawn.endswith("\r" + " " * 99 + "\r")  # erased at the end


# --- SRC as a log file (the SOURCE rule) ------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql"])
def test_a_log_file_is_copied_into_a_store_and_comes_back_byte_for_byte(
        demo: str, places: Places, kind: str, tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    log.write_bytes(_export("demo", demo))
    dst = STORE_URLS[kind](places, "dst")
    said = _said(dst)
    code, out, err = _run("copy", str(log), dst)
    assert (code, err) == (0, said), err
    assert out.splitlines()[-1].startswith("copied 1 session(s)")
    # As a copy of the store holding it gives it (a database rebuilds each line in the
    # reference's key order, JSONL keeps the bytes).
    twin = STORE_URLS[kind](places, "twin")
    assert _run("copy", demo, twin, "--session", "demo")[0] == 0
    assert _export("demo", dst) == _export("demo", twin)
    if kind.startswith("jsonl"):
        assert _export("demo", dst) == log.read_bytes()
    code, out, _ = _run("copy", str(log), dst)  # again: nothing left to do
    assert code == 0
    assert "1 up to date" in out


def test_a_torn_log_file_is_copied_up_to_its_tear(tmp_path: Path) -> None:
    torn = upstream_dir() / "synthetic" / "crash-after-tool-call.jsonl"
    code, out, err = _run("copy", str(torn), str(tmp_path / "dst"))
    assert code == 0, err
    assert "torn tail" in err  # said, on stderr
    assert "copied 60 event(s)" in out
    assert torn.read_bytes().startswith(
        _export(_ids(str(tmp_path / "dst"))[0], str(tmp_path / "dst")))


def test_a_file_that_is_no_log_or_a_database_by_path_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.jsonl"
    garbage.write_bytes(b"not a log\n")
    code, _, err = _run("copy", str(garbage), str(tmp_path / "dst"))
    assert code == 1
    assert f"{garbage} is not a dsh-session log: its first line is not JSON" in err
    assert "hint: SRC is a store, or a log file" in err
    db = tmp_path / "x.db"  # a store, named by its path instead of its URL
    SqliteBackend(db).close()
    code, _, err = _run("copy", str(db), str(tmp_path / "dst"))
    assert code == 2
    assert "is a SQLite database: name it by its URL" in err
    assert not (tmp_path / "dst").exists()


# --- issue 24, point 6: a DST named by its path -------------------------------------------


def test_a_sqlite_database_named_by_its_path_as_dst_is_refused_with_its_url(
    demo: str, tmp_path: Path
) -> None:
    SqliteBackend(tmp_path / "backup.db").close()  # an existing database
    before = (tmp_path / "backup.db").read_bytes()
    for dst in ("backup.db", "new.db", "new.sqlite3"):  # existing, or missing by its name
        proc = _dsh("copy", demo, dst, cwd=tmp_path)
        err = proc.stderr.decode()
        assert (proc.returncode, proc.stdout) == (2, b""), err
        lines = err.splitlines()
        assert len(lines) == 2, err
        assert lines[0].startswith(f"dsh-session: DST {dst} ")
        assert f"by its URL (sqlite:///{dst})" in lines[0]
        assert lines[1].startswith(f"hint: dsh-session copy SRC sqlite:///{dst}")
    assert sorted(os.listdir(tmp_path)) == ["backup.db"]  # nothing made, nothing read
    assert (tmp_path / "backup.db").read_bytes() == before
    # The URL the hint names is the database, relative to the working folder.
    proc = _dsh("copy", demo, "sqlite:///backup.db", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _ids(f"sqlite:///{tmp_path}/backup.db") == _ids(demo)
    # Any other file is no store either.
    (tmp_path / "notes.txt").write_text("notes\n")
    proc = _dsh("copy", demo, "notes.txt", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("dsh-session: DST notes.txt is a file, not a store")
    assert (tmp_path / "notes.txt").read_text() == "notes\n"


def test_a_missing_dst_path_is_made_a_jsonl_store_and_said_so(
    demo: str, tmp_path: Path
) -> None:
    proc = _dsh("copy", demo, "backup", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode() == ("dsh-session: would create the JSONL store backup (a "
                                    "folder; a SQLite database is named sqlite:///PATH)\n")
    assert os.listdir(tmp_path) == []
    proc = _dsh("copy", demo, "backup", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode() == ("dsh-session: created the JSONL store backup (a folder; "
                                    "a SQLite database is named sqlite:///PATH)\n")
    assert _ids(str(tmp_path / "backup")) == _ids(demo)
    # Into a store that exists: nothing to say.
    proc = _dsh("copy", demo, "backup", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, b"")
    # A JSONL URL says what it is: no note either.
    proc = _dsh("copy", demo, "jsonl:///by-url", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert _ids(str(tmp_path / "by-url")) == _ids(demo)


def test_a_dst_in_a_missing_folder_is_refused_and_nothing_is_made(
    demo: str, tmp_path: Path
) -> None:
    for dst in ("missing/backup", "sqlite:///missing/x.db", "jsonl+zstd:///missing/x"):
        for dry in ([], ["--dry-run"]):
            proc = _dsh("copy", demo, dst, *dry, cwd=tmp_path)
            err = proc.stderr.decode()
            assert (proc.returncode, proc.stdout) == (1, b""), (dst, dry, err)
            base = "x.db" if dst.endswith(".db") else dst.rsplit("/", 1)[1]
            assert err.splitlines() == [
                f"dsh-session: cannot create the store {tmp_path}/missing/{base}: the folder "
                f"{tmp_path}/missing does not exist",
                "hint: create the folder first, or fix the path: sqlite:///name.db and "
                "jsonl:///name are relative to the working folder, sqlite:////abs/name.db "
                "(four slashes) absolute"], (dst, dry)
    assert os.listdir(tmp_path) == []
