"""The PostgreSQL test infrastructure: the server fixtures and ``tests/pgserver.py``."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

import pgserver
from dsh_session_core.testing.postgresql import ENV, MISSING, Databases, server_url, with_database

SCRIPT = Path(__file__).resolve().parent / "pgserver.py"


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables"
            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')").fetchall()
    return [row[0] for row in rows]


def _database_exists(admin_url: str, url: str) -> bool:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s",
                           (name,)).fetchone()
    assert row is not None
    return bool(row[0])


def _pgserver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, check=False, timeout=300)


# -- the fixtures ---------------------------------------------------------------------


def test_server_url_connects_as_a_role_that_creates_databases(postgresql_server: str) -> None:
    with psycopg.connect(postgresql_server) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version_num')::int, rolsuper OR rolcreatedb"
            " FROM pg_roles WHERE rolname = current_user").fetchone()
    assert row is not None
    version, creates_databases = row
    assert version >= 130000  # DROP DATABASE ... WITH (FORCE)
    assert creates_databases


def test_database_is_new_empty_and_usable(postgresql_url: str, postgresql_server: str) -> None:
    assert postgresql_url != postgresql_server
    assert _tables(postgresql_url) == []
    with psycopg.connect(postgresql_url) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, body text NOT NULL)")
        conn.execute("INSERT INTO t VALUES (1, 'é')")
        db = conn.execute("SELECT current_database(), pg_encoding_to_char(encoding)"
                          " FROM pg_database WHERE datname = current_database()").fetchone()
        assert conn.execute("SELECT body FROM t").fetchall() == [("é",)]
    assert db == (urlsplit(postgresql_url).path.lstrip("/"), "UTF8")
    assert _tables(postgresql_url) == ["public.t"]


def test_databases_are_distinct_and_dropped(postgresql_server: str,
                                            postgresql_databases: Databases) -> None:
    with postgresql_databases.database("a") as a, postgresql_databases.database("b") as b:
        assert a != b
        with psycopg.connect(a) as conn:
            conn.execute("CREATE TABLE only_in_a (x int)")
        assert _tables(a) == ["public.only_in_a"]
        assert _tables(b) == []
    assert not _database_exists(postgresql_server, a)
    assert not _database_exists(postgresql_server, b)


def test_drop_does_not_wait_for_connections_left_open(postgresql_server: str,
                                                      postgresql_databases: Databases) -> None:
    url = postgresql_databases.create("leftover")
    leftover = psycopg.connect(url)
    try:
        leftover.execute("CREATE TABLE t (x int)")  # an open transaction, too
        postgresql_databases.drop(url)
        assert not _database_exists(postgresql_server, url)
        with pytest.raises(psycopg.OperationalError):
            leftover.execute("SELECT 1")
    finally:
        leftover.close()


def test_with_database_keeps_the_rest_of_the_url() -> None:
    url = "postgresql://dsh:pw@127.0.0.1:5433/postgres?sslmode=disable"
    assert with_database(url, "dsh_x") == (
        "postgresql://dsh:pw@127.0.0.1:5433/dsh_x?sslmode=disable")


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_no_server_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=re.escape("run `python3 dev.py test`")):
        server_url()


def test_no_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as info:
        server_url()
    assert MISSING in str(info.value)
    assert "CI is set" in str(info.value)


# -- tests/pgserver.py ----------------------------------------------------------------


def test_missing_binaries_say_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(pgserver.PgServerError, match=r"apt-get install postgresql"):
        pgserver.find_bindir([tmp_path])


def test_usage() -> None:
    proc = _pgserver("start")
    assert proc.returncode == 2
    assert "pgserver.py start DIR" in proc.stderr


def test_stop_removes_only_its_own_directories(tmp_path: Path) -> None:
    (tmp_path / "precious").write_text("keep me")
    proc = _pgserver("stop", str(tmp_path))
    assert proc.returncode == 1
    assert "not made by `pgserver.py start`" in proc.stderr
    assert (tmp_path / "precious").read_text() == "keep me"
    assert _pgserver("stop", str(tmp_path / "absent")).returncode == 0


@pytest.fixture
def bindir() -> Path:
    """The server binaries, or skip (fail under CI) without them."""
    from dsh_session_core.testing.postgresql import unavailable

    try:
        return pgserver.find_bindir()
    except pgserver.PgServerError as exc:
        unavailable(str(exc))
        raise  # unreachable: unavailable raises


def test_check_finds_the_binaries(bindir: Path) -> None:
    proc = _pgserver("check")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"PostgreSQL server binaries: {bindir}"


def test_start_and_stop_a_server(bindir: Path) -> None:
    # Not pytest's tmp_path: as root the server runs as another user, who must be able
    # to traverse the directory's parents.
    directory = Path(tempfile.mkdtemp(prefix="dsh-pgserver-test-"))
    try:
        proc = _pgserver("start", str(directory))
        assert proc.returncode == 0, proc.stderr
        url = proc.stdout.strip()
        parts = urlsplit(url)
        assert (parts.scheme, parts.username, parts.hostname, parts.path) == (
            "postgresql", "dsh", "127.0.0.1", "/postgres")
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT current_user, current_setting('fsync'),"
                               " current_setting('max_connections')::int").fetchone()
        assert row == ("dsh", "on", 200)
        # The unix socket in DIR works too.
        with psycopg.connect(host=str(directory), port=parts.port, user="dsh",
                             dbname="postgres") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert _pgserver("start", str(directory)).returncode == 1  # one server per DIR
    finally:
        proc = _pgserver("stop", str(directory))
    assert proc.returncode == 0, proc.stderr
    assert not directory.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)
