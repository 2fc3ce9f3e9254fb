"""``store.forget``: no file of any backend holds a forgotten session's marker.

On every kind of store (memory, JSONL, compact JSONL, SQLite, PostgreSQL), a session is
written with a unique marker in its id, its working folder, its messages, a tool call
and its result, a projection's rows and summary, and a never-prune mark's note; then it
is forgotten, and every file under the store (and under its archive) is searched for
the marker's bytes: none holds it. ``ls``, ``search`` and the read model the viewer
reads no longer show it; the ledger holds a digest of the id, never the id. A delete,
by contrast, leaves the marker in a SQLite store's files (what forget is for).
PostgreSQL's files are the server's: its tables are searched through SQL, and the
operator's ``VACUUM FULL`` the docs name is checked to leave no table file with it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import (
    DurableStore,
    Keyring,
    SealedBackend,
    TextBlock,
    ToolCallBlock,
    create_plugin_manager,
    open_store,
)
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core._persistence.retention.ledger import LEDGER_ID, digest_of
from dsh_session_core.errors import SessionLockedError, SessionNotStoredError
from dsh_session_core.inspect import SearchQuery, SessionQuery, search_store, select_sessions
from dsh_session_core.testing import make_backend_factory, run_cli
from dsh_session_core.testing.projection_contract import ContractPlugin, contract_projection
from erasing_support import files_holding, pg_tables_holding

NAME = contract_projection.name

FILE_KINDS = ("jsonl", "jsonl+zstd", "sqlite")


def _plugins() -> Any:
    pm = create_plugin_manager(autoload=False)
    pm.register(ContractPlugin(), "contract")
    return pm


def _write(store: DurableStore, sid: str, marker: str, cwd: str | None = None) -> None:
    """A session holding ``marker`` everywhere a session holds text."""
    s = store.create(sid, cwd=cwd)
    with s.turn() as turn:
        turn.user(f"my name is {marker}")
        with turn.step() as step:
            call = ToolCallBlock(id="call-1", name="lookup",
                                 arguments=f'{{"who": "{marker}"}}')
            step.assistant([TextBlock(text=f"looking {marker} up"), call])
            ref = step.tool_call(call)
            step.tool_result(ref, f"found {marker} in the records")
        with turn.step() as step:
            step.assistant(f"hello {marker}")
    store.release(s)


def _check_gone(store: DurableStore, sid: str, marker: str) -> None:
    """Neither ``ls`` nor ``search`` nor the read model (the viewer's) shows it."""
    backend = store.backend
    rows = select_sessions(backend, SessionQuery(all=True), plugins=store.plugin_manager)
    assert sid not in [s.header.id for s in rows.summaries]
    assert [h.session_id for h in search_store(backend, SearchQuery.parse(marker))] == []
    assert list(store.search(marker)) == []
    assert sid not in [h.id for h in store.stored()]
    assert sid not in store.projection_summaries(NAME)
    with pytest.raises(SessionNotStoredError):
        store.read(sid)
    with pytest.raises(SessionNotStoredError):
        store.projection(sid, NAME)


@pytest.fixture(params=FILE_KINDS)
def file_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_forgotten_session_leaves_no_byte_of_it_in_any_file(
        file_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    sid = f"ada-{marker}"
    make = make_backend_factory(file_kind, request, tmp_path)
    with DurableStore(make(), _plugins()) as store:
        _write(store, sid, marker, cwd=f"/home/{marker}")
        _write(store, "other", "nothing-here")
        store.retain(sid, note=f"keep {marker} for the audit")
        assert [h.session_id for h in store.search(marker)] != []
        assert marker in store.projection_summaries(NAME)[sid].text  # rows were kept
        assert files_holding(tmp_path, marker)  # it was there
        done = store.forget(sid)
        assert done.complete, done.left
        assert done.deleted is not None
        assert done.deleted.events == 11
        assert done.ledger_records == 1  # its mark, with the note
        _check_gone(store, sid, marker)
        assert store.retained() == []
        assert [h.id for h in store.stored()] == ["other"] or set(
            h.id for h in store.stored()) == {"other", LEDGER_ID}
    assert files_holding(tmp_path, marker) == []
    assert files_holding(tmp_path, sid) == []
    # The ledger says a forget happened, by a digest of the id.
    with DurableStore(make(), _plugins()) as store:
        [record] = [e for e in store.read(LEDGER_ID) if e.type == "retention/forgotten"]
        assert record.data.digest == digest_of(sid)
        assert (record.data.rule, record.data.stored) == ("forget", True)
        assert [h.id for h in store.stored() if h.id != LEDGER_ID] == ["other"]
        assert store.read("other")  # the other session is whole


def test_a_delete_leaves_the_marker_in_sqlite_files(tmp_path: Path) -> None:
    # What forget is for: SQLite's delete unlinks rows, their bytes stay (the search
    # index's segments, freed pages).
    marker = f"zq{secrets.token_hex(6)}"
    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        _write(store, "chat", marker)
        assert list(store.search(marker))  # indexed
        store.delete("chat", rule=None)
    assert files_holding(tmp_path, marker) != []


def test_memory_forgets_and_reports_nothing_left() -> None:
    marker = f"zq{secrets.token_hex(6)}"
    with open_store("memory:", plugin_manager=_plugins()) as store:
        _write(store, f"ada-{marker}", marker)
        done = store.forget(f"ada-{marker}")
        assert done.complete
        assert done.scrubbed is not None
        _check_gone(store, f"ada-{marker}", marker)
        ledger = b"".join(store.backend.read_lines(LEDGER_ID, -1, None) or [])
        assert marker.encode() not in ledger
        assert digest_of(f"ada-{marker}").encode() in ledger


def test_the_archive_loses_it_too(tmp_path: Path) -> None:
    import datetime

    from dsh_session_core import RetentionPolicy

    marker = f"zq{secrets.token_hex(6)}"
    sid = f"ada-{marker}"
    archive = f"jsonl+zstd:///{tmp_path}/archive"
    clock = {"now": 1_700_000_000_000}
    with open_store(str(tmp_path / "live"), plugin_manager=_plugins(),
                    clock=lambda: clock["now"]) as store:
        _write(store, sid, marker)
        clock["now"] += 90 * 86_400_000
        _write(store, "recent", "nothing")
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(days=30),
                                             archive_to=archive),
                             now=datetime.datetime.fromtimestamp(clock["now"] / 1000,
                                                                 datetime.UTC))
        assert [d.session_id for d in report.removed] == [sid]
        assert files_holding(tmp_path / "archive", marker)  # archived
        done = store.forget(sid)  # not in the store any more: in its archive
        assert done.deleted is None
        assert done.archives == (archive,)
        assert done.complete, done.left
    assert files_holding(tmp_path, marker) == []
    assert files_holding(tmp_path, sid) == []  # its removal record went too
    with open_store(archive) as kept:
        assert [h.id for h in kept.stored() if h.id != LEDGER_ID] == []


def test_an_archive_that_cannot_be_opened_is_reported(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "live")) as store:
        _write(store, "chat", "m")
        done = store.forget("chat", archives=[f"sqlite:///{tmp_path}/gone/a.db"])
        assert not done.complete
        assert "could not be opened" in done.left[0]


def test_refusals_leave_the_store_as_it_was(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s")) as store:
        _write(store, "chat", "m")
        before = sorted(p.name for p in (tmp_path / "s").rglob("*"))
        with pytest.raises(SessionNotStoredError):
            store.forget("nobody")
        with pytest.raises(ValueError, match="retention ledger"):
            store.forget(LEDGER_ID)
        live = store.open("chat")
        with pytest.raises(SessionLockedError):
            store.forget("chat")
        store.release(live)
        assert sorted(p.name for p in (tmp_path / "s").rglob("*")) == before
        with pytest.raises(ValueError, match="at least one"):
            store.forget_all({})


def test_a_writer_elsewhere_is_refused(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s")) as one, open_store(str(tmp_path / "s")) as two:
        _write(one, "chat", "m")
        held = one.open("chat")
        with pytest.raises(SessionLockedError):
            two.forget("chat")
        one.release(held)
        assert two.forget("chat").complete


# --- crypto-shredding -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "memory"])
def test_per_session_keys_are_dropped(kind: str, request: pytest.FixtureRequest,
                                      tmp_path: Path) -> None:
    keys = {"ada": os.urandom(32), "bob": os.urandom(32)}
    dropped: list[str] = []

    def drop(session_id: str) -> None:
        dropped.append(session_id)
        del keys[session_id]

    keyring = Keyring(lambda sid, _kid: keys.get(sid), current="k", drop=drop)
    make = make_backend_factory(kind, request, tmp_path)
    with DurableStore(SealedBackend(make(), Sealer(keyring)), _plugins()) as store:
        _write(store, "ada", "secretmarker")
        _write(store, "bob", "other")
        done = store.forget("ada")
        assert done.key_dropped
        assert done.complete
        assert dropped == ["ada"]
        assert list(keys) == ["bob"]
        [record] = [e for e in store.read(LEDGER_ID) if e.type == "retention/forgotten"]
        assert record.data.key_dropped
        assert store.read("bob")
    if kind != "memory":
        assert files_holding(tmp_path, "ada") == []


def test_a_failing_drop_hook_is_reported(tmp_path: Path) -> None:
    keys = {"ada": os.urandom(32)}

    def drop(session_id: str) -> None:
        msg = "the vault is down"
        raise RuntimeError(msg)

    keyring = Keyring(lambda sid, _kid: keys.get(sid), current="k", drop=drop)
    with open_store(str(tmp_path / "s"), keys=keyring) as store:
        _write(store, "ada", "m")
        done = store.forget("ada")
        assert not done.key_dropped
        assert any("the vault is down" in line for line in done.left)
        assert "ada" not in [h.id for h in store.stored()]


def test_shared_keys_cannot_be_dropped_for_one_session() -> None:
    with pytest.raises(ValueError, match="shared"):
        Keyring({"k": b"k" * 32}, drop=lambda sid: None)
    assert not Keyring({"k": b"k" * 32}).drop("ada")


# --- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    make_backend_factory("postgresql", request, Path("."))  # skips without a server
    return str(request.getfixturevalue("postgresql_url"))


def test_postgresql_rows_are_gone_and_vacuum_full_reaches_the_files(pg_url: str) -> None:
    import psycopg

    marker = f"zq{secrets.token_hex(6)}"
    sid = f"ada-{marker}"
    with open_store(pg_url, plugin_manager=_plugins()) as store:
        _write(store, sid, marker)
        store.retain(sid, note=f"keep {marker}")
        assert pg_tables_holding(pg_url, marker) != []
        done = store.forget(sid)
        assert done.complete, done.left
        assert done.scrubbed is not None
        assert "VACUUM of" in done.scrubbed
        _check_gone(store, sid, marker)
    assert pg_tables_holding(pg_url, marker) == []
    # The data directory is the server's; where this test can read it, the operator's
    # VACUUM FULL (docs/erasing.md) leaves no table file with the marker.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        [data] = conn.execute("SHOW data_directory").fetchall()[0]
        [oid] = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()"
                             ).fetchall()[0]
        for table in ("events", "sessions", "search_docs", "search_state",
                      "dsh_projection_rows", "dsh_projection_marks"):
            conn.execute(f"VACUUM FULL {table}")
        conn.execute("CHECKPOINT")
    base = Path(data) / "base" / str(oid)
    if not os.access(base, os.R_OK | os.X_OK):
        pytest.skip(f"the server's data directory {data} is not readable here")
    assert files_holding(base, marker) == []


# --- the command line ------------------------------------------------------------------------


def test_the_command_forgets_and_ls_and_search_do_not_show_it(tmp_path: Path) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    url = f"sqlite:///{tmp_path}/s.db"
    with open_store(url) as store:
        _write(store, f"ada-{marker}", marker)
        assert list(store.search(marker))  # indexed
    code, out, err = run_cli("forget", f"ada-{marker}", "--store", url, "--yes")
    assert (code, err) == (0, "")
    assert out.decode().startswith(f"forgot ada-{marker}: 11 event(s)")
    code, out, _ = run_cli("ls", "--all", "--store", url, "-q")
    assert (code, out.decode()) == (0, f"{LEDGER_ID}\n")
    code, out, _ = run_cli("search", marker, "--store", url)
    assert out.decode().startswith(f"no hits for '{marker}'")
    assert files_holding(tmp_path, marker) == []


@pytest.mark.parametrize("mode", ["wal", "delete", "truncate", "persist"])
def test_every_sqlite_journal_mode_is_scrubbed(mode: Any, tmp_path: Path) -> None:
    from dsh_session_core import SqliteBackend

    marker = f"zq{secrets.token_hex(6)}"
    with DurableStore(SqliteBackend(tmp_path / "s.db", journal_mode=mode)) as store:
        _write(store, "chat", marker)
        _write(store, "other", "nothing")
        assert list(store.search(marker))  # indexed
        assert store.forget("chat").complete
        # Checked while the store is open: a WAL, a persisted journal, are still there.
        assert files_holding(tmp_path, marker) == []
