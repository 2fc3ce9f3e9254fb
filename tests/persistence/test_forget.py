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
Redis's are searched on servers of the tests' own, which keep an append-only file and a
snapshot: after a forget neither holds it (a delete leaves it in both); a server that
refuses the scrub's commands, and its replicas, keep it, and the forget says so.
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


# --- Redis ---------------------------------------------------------------------------------

#: A server of the test's own keeps both files a deleted key lingers in: its append-only
#: file (every write fsynced) and a snapshot (a ``save`` rule).
_REDIS_FILES = ("--save", "3600 1")


def _redis_server(folder: Path, *args: str, durable: bool = True) -> Any:
    """A server of the test's own (not started); without ``redis-server`` the test
    skips, or fails under CI (the testing kit's rule)."""
    from dsh_session_core.testing.redis import RedisServer

    return RedisServer(folder, durable=durable, args=args)


def _redis_written(url: str, marker: str) -> str:
    """A session holding ``marker``, marked with a note, beside another one kept, and
    the server's snapshot saved: both its files hold the marker. Its id."""
    import redis

    sid = f"ada-{marker}"
    with open_store(url, plugin_manager=_plugins()) as store:
        _write(store, sid, marker, cwd=f"/home/{marker}")
        _write(store, "other", "nothing-here")
        store.retain(sid, note=f"keep {marker} for the audit")
    with redis.Redis.from_url(url.partition("?")[0]) as client:
        client.save()
    return sid


def _redis_info(url: str, section: str) -> dict[str, Any]:
    import redis

    with redis.Redis.from_url(url) as client:
        found: dict[str, Any] = client.info(section)
        return found


def test_redis_forget_rewrites_its_append_only_file_and_snapshot(tmp_path: Path) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    server = _redis_server(tmp_path / "redis", *_REDIS_FILES).start()
    try:
        sid = _redis_written(server.url, marker)
        assert sorted(files_holding(server.folder, marker)) == [
            "appendonlydir/appendonly.aof.1.incr.aof", "dump.rdb"]
        with open_store(server.url, plugin_manager=_plugins()) as store:
            done = store.forget(sid)
            assert done.complete, done.left
            assert done.deleted is not None
            assert done.deleted.events == 11
            assert done.scrubbed is not None
            assert "append-only file rewritten (BGREWRITEAOF)" in done.scrubbed
            assert "snapshot saved anew (BGSAVE)" in done.scrubbed
            assert "replicas keep their own files" in done.scrubbed
            _check_gone(store, sid, marker)
            # Checked while the server runs: the old AOF files are deleted already.
            assert files_holding(server.folder, marker) == []
            assert files_holding(server.folder, sid) == []
        server.stop()  # started again from the rewritten files: the rest is whole
        server.start()
        with open_store(server.url, plugin_manager=_plugins()) as store:
            assert [h.id for h in store.stored() if h.id != LEDGER_ID] == ["other"]
            assert len(store.read("other")) == 11
            [record] = [e for e in store.read(LEDGER_ID) if e.type == "retention/forgotten"]
            assert record.data.digest == digest_of(sid)
    finally:
        server.stop()
    assert files_holding(server.folder, marker) == []


def test_a_redis_delete_alone_leaves_it_in_the_server_files(tmp_path: Path) -> None:
    # What the scrub is for: the commands that wrote it stay in the append-only file,
    # its value in the snapshot.
    marker = f"zq{secrets.token_hex(6)}"
    with _redis_server(tmp_path / "redis", *_REDIS_FILES) as server:
        sid = _redis_written(server.url, marker)
        with open_store(server.url) as store:
            store.delete(sid, rule=None)
            assert [h.id for h in store.stored() if h.id != LEDGER_ID] == ["other"]
        assert sorted(files_holding(server.folder, marker)) == [
            "appendonlydir/appendonly.aof.1.incr.aof", "dump.rdb"]


def test_a_redis_rewrite_running_before_the_forget_is_followed_by_its_own(
        tmp_path: Path) -> None:
    import redis

    marker = f"zq{secrets.token_hex(6)}"
    with _redis_server(tmp_path / "redis", *_REDIS_FILES) as server:
        sid = _redis_written(server.url, marker)
        with redis.Redis.from_url(server.url) as client:
            # A rewrite forked before the delete, slowed down (the delay is read by its
            # child at the fork: the scrub's own rewrite runs at full speed).
            client.config_set("rdb-key-save-delay", 100_000)
            client.bgrewriteaof()
            client.config_set("rdb-key-save-delay", 0)
            before = client.info("persistence")
            assert before["aof_rewrite_in_progress"] == 1
            with open_store(server.url, plugin_manager=_plugins()) as store:
                done = store.forget(sid)
            assert done.complete, done.left
            assert files_holding(server.folder, marker) == []
            # The one running, then the scrub's.
            assert client.info("persistence")["aof_rewrites"] == before["aof_rewrites"] + 1


@pytest.mark.parametrize(("refusing", "said"), [
    # An ACL user without the commands: NOPERM.
    (("--user", "default", "off", "--user", "agent", "on", ">pw", "~*", "&*", "+@all",
      "-config", "-bgrewriteaof"),
     ["BGREWRITEAOF refused (this user has no permissions to run the 'bgrewriteaof'"]),
    # A managed server's way: the commands renamed away (unknown commands).
    (("--rename-command", "CONFIG", "", "--rename-command", "BGREWRITEAOF", "",
      "--rename-command", "BGSAVE", ""),
     ["BGREWRITEAOF refused (unknown command 'BGREWRITEAOF'",
      "BGSAVE refused (unknown command 'BGSAVE'"]),
], ids=["acl", "renamed"])
def test_a_redis_server_refusing_the_scrub_leaves_it_said(
        refusing: tuple[str, ...], said: list[str], tmp_path: Path) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    with _redis_server(tmp_path / "redis", *_REDIS_FILES, *refusing) as server:
        url = server.url.replace("redis://", "redis://agent:pw@") if (
            "--user" in refusing) else server.url
        sid = _redis_written(url, marker)
        with open_store(url, plugin_manager=_plugins()) as store:
            done = store.forget(sid)
            assert done.deleted is not None  # the delete was done all the same
            _check_gone(store, sid, marker)
        [line] = done.left
        shown = url.replace(":pw@", "@")  # (never the password)
        assert line.startswith(f"what its delete left could not be scrubbed: {shown}: "
                               f"keys deleted; ")
        for text in said:
            assert text in line
        assert "its append-only file keeps the deleted keys until its next rewrite" in line
        assert "replicas keep their own files" in line  # what the server keeps, said
        # What it says is so: the append-only file still holds it.
        assert "appendonlydir/appendonly.aof.1.incr.aof" in files_holding(
            server.folder, marker)
        assert ("dump.rdb" in files_holding(server.folder, marker)) == (
            "BGSAVE" in refusing)


def test_redis_snapshots_it_cannot_see_are_said(tmp_path: Path) -> None:
    # Without CONFIG, the server's save rules are unknown; it saved nothing since it
    # started: the scrub makes no snapshot, and says one may keep the keys.
    marker = f"zq{secrets.token_hex(6)}"
    with _redis_server(tmp_path / "redis", *_REDIS_FILES, "--user", "default", "off",
                       "--user", "agent", "on", ">pw", "~*", "&*", "+@all",
                       "-config") as server:
        url = server.url.replace("redis://", "redis://agent:pw@")
        with open_store(url, plugin_manager=_plugins()) as store:
            _write(store, f"ada-{marker}", marker)
            done = store.forget(f"ada-{marker}")
        [line] = done.left
        assert "its append-only file rewritten (BGREWRITEAOF)" in line
        assert ("whether it makes snapshots could not be read (CONFIG GET refused: this "
                "user has no permissions to run the 'config|get' command): if it does, its "
                "last snapshot keeps the deleted keys until its next save") in line
        assert files_holding(server.folder, marker) == []  # (it made none yet)


def test_a_redis_server_keeping_no_file_has_nothing_to_scrub(tmp_path: Path) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    with _redis_server(tmp_path / "redis", durable=False) as server:
        with open_store(server.url, plugin_manager=_plugins()) as store:
            _write(store, f"ada-{marker}", marker)
            done = store.forget(f"ada-{marker}")
        assert done.complete, done.left
        assert done.scrubbed is not None
        assert "it keeps no append-only file" in done.scrubbed
        assert "it makes no snapshots" in done.scrubbed
        assert _redis_info(server.url, "persistence")["aof_rewrites"] == 0
        assert files_holding(server.folder, marker) == []


def test_redis_replicas_keep_their_files_and_are_scrubbed_on_each(tmp_path: Path) -> None:
    import redis

    marker = f"zq{secrets.token_hex(6)}"
    # (A replica's first sync at once, not after the default 5 s.)
    with _redis_server(tmp_path / "primary", *_REDIS_FILES,
                       "--repl-diskless-sync-delay", "0") as primary, \
            redis.Redis.from_url(primary.url) as client:
        sid = _redis_written(primary.url, marker)
        # The replica copies what was written (its first sync comes after the SAVE,
        # which is refused while the sync's child runs), then what is done.
        with _redis_server(tmp_path / "replica", "--replicaof", "127.0.0.1",
                           str(primary.port)) as replica, \
                redis.Redis.from_url(replica.url) as copy:
            _caught_up(client, copy)
            _check_replica(primary, replica, client, copy, sid, marker)


def _check_replica(primary: Any, replica: Any, client: Any, copy: Any, sid: str,
                   marker: str) -> None:
    """Forget on the primary: its files hold none of it, its replica's still do, as the
    scrub says, until the replica is rewritten and saved."""
    with open_store(primary.url, plugin_manager=_plugins()) as store:
        done = store.forget(sid)
    assert done.complete, done.left
    assert done.scrubbed is not None
    assert "its 1 replica(s) keep their own files until each is rewritten and saved " \
           "(BGREWRITEAOF, BGSAVE on each)" in done.scrubbed
    _caught_up(client, copy)
    assert files_holding(primary.folder, marker) == []
    assert files_holding(replica.folder, marker) != []  # as it says
    # What the docs say to do on each replica: its files then hold none of it.
    for command, count in ((copy.bgrewriteaof, "aof_rewrites"),
                           (copy.bgsave, "rdb_saves")):
        _replica_settled(copy)
        before = copy.info("persistence")[count]
        command()
        _replica_settled(copy, lambda i, c=count, b=before: i[c] > b)
    assert files_holding(replica.folder, marker) == []


def _replica_settled(client: Any, also: Any = None) -> None:
    """Wait until the server runs no rewrite nor save (and ``also`` holds of its INFO)."""
    _polled(lambda: client.info("persistence"), lambda info: not (
        info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]
        or info["rdb_bgsave_in_progress"]) and (also is None or also(info)))


def _caught_up(client: Any, copy: Any) -> None:
    """Wait until the replica ``copy`` applied everything its primary ``client`` did
    (``WAIT`` would wait only for the writes of its own connection)."""
    top = client.info("replication")["master_repl_offset"]
    _polled(lambda: copy.info("replication"), lambda info: info.get(
        "master_link_status") == "up" and info["slave_repl_offset"] >= top)


def _polled(look: Any, condition: Any) -> None:
    import time

    deadline = time.monotonic() + 60
    while not condition(seen := look()):
        assert time.monotonic() < deadline, seen
        time.sleep(0.01)  # polling the server's state, not a race
