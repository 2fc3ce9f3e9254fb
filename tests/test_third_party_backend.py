"""A backend defined here, contributed for the ``dict:`` scheme by a plugin's
``store_backend`` hook, works with every command that reads a store: the commands use
backends through the ``Backend`` protocol only.

The backend implements only the methods a ``DurableStore`` needs; it subclasses
``Backend``, so the reading methods (``summaries``, ``tail_lines``, ``follow_lines``,
``exists``, ``store_identity``) are the protocol's defaults, tested here too. It also
passes the backend contract, run as a third party runs it: the testing kit's
``BackendContract``. Opened with keys, its store has no capability it lacks: the
store takes its ways without them, as in the clear.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import (
    Backend,
    Capabilities,
    Event,
    EventRegistry,
    Keyring,
    RetentionPolicy,
    SessionHeader,
    SessionLockedError,
    StoredLog,
    WriterLock,
    hookimpl,
    open_store,
)
from dsh_session_core.errors import EncryptionError, PersistenceError, StoreNotFoundError
from dsh_session_core.testing import BackendContract, BackendFactory, exchange, run_cli

#: The dict stores of this process, by name (``dict:NAME``): a backend object is a view.
STORES: dict[str, dict[str, StoredLog]] = {}


class _Lock:
    def __init__(self, held: set[str], session_id: str) -> None:
        self._held, self._id = held, session_id

    def release(self) -> None:
        self._held.discard(self._id)


class DictBackend(Backend):
    """Sessions in a dict of this process; events are immutable, so they are kept as
    they are, with their log lines."""

    name = "session-persistence-dict"

    def __init__(self, store: str) -> None:
        self.store = store
        self.logs = STORES.setdefault(store, {})
        self.held: set[str] = set()

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        return self.logs.get(session_id)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        return self.logs.get(session_id)

    def append_batch(
        self, header: SessionHeader, events: Sequence[Event], jsonl: bytes, materialized: bool
    ) -> None:
        old = self.logs[header.id] if materialized else StoredLog(header, [], None, b"")
        self.logs[header.id] = StoredLog(header, [*old.events, *events], None,
                                         (old.jsonl or b"") + jsonl)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        if closers:
            self.append_batch(header, closers, jsonl, True)

    def list(self) -> list[SessionHeader]:
        return [log.header for log in self.logs.values()]

    def acquire(self, header: SessionHeader) -> WriterLock:
        if header.id in self.held:
            raise SessionLockedError(header.id, "another writer of this backend")
        self.held.add(header.id)
        return _Lock(self.held, header.id)

    def location(self, header: SessionHeader) -> str:
        return f"dict:{self.store}"

    def close(self) -> None:
        self.held.clear()


class DictStores:
    """The plugin: ``dict:NAME`` URLs are its stores."""

    @hookimpl
    def store_backend(self, url: str, create: bool) -> Backend | None:
        if not url.startswith("dict:"):
            return None
        name = url.removeprefix("dict:")
        if not create and name not in STORES:
            raise StoreNotFoundError(url, "no such dict store")
        return DictBackend(name)


@pytest.fixture
def plugin() -> Iterator[DictStores]:
    """The plugin, registered on the plugin manager the CLI uses (and on no other)."""
    from dsh_session_core._cli.support import plugin_manager

    pm = plugin_manager()
    impl = DictStores()
    pm.register(impl, name="dict-stores")
    try:
        yield impl
    finally:
        pm.unregister(impl)
        STORES.clear()


def _cli(*argv: str) -> tuple[int, str, str]:
    code, out, err = run_cli(*argv)
    return code, out.decode(), err


@pytest.fixture
def jsonl_store(tmp_path: Path) -> str:
    """A JSONL store with one session of two turns, ``chat``."""
    url = str(tmp_path / "src")
    with open_store(url) as store:
        s = store.create("chat", cwd="/work")
        exchange(s, 1)
        exchange(s, 2)
        store.flush(s)
    return url


def test_every_store_reading_command_works_with_a_plugins_backend(
    plugin: DictStores, jsonl_store: str, tmp_path: Path
) -> None:
    # copy into it: the destination is made by the plugin (create=True)
    code, out, err = _cli("copy", jsonl_store, "dict:one")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "chat: copied 12 event(s)"
    assert list(STORES["one"]) == ["chat"]
    exported = _cli("export", "chat", "--store", jsonl_store)[1]
    assert _cli("export", "chat", "--store", "dict:one") == (0, exported, "")

    code, out, err = _cli("ls", "--json", "--store", "dict:one")
    assert (code, err) == (0, "")
    [row] = json.loads(out)
    events = [json.loads(line) for line in exported.splitlines()[1:]]
    assert (row["id"], row["cwd"], row["events"], row["turns"], row["torn"]) == (
        "chat", "/work", 12, 2, False)
    assert row["lastActivity"] == events[-1]["time"]
    assert _cli("ls", "--store", "dict:one")[1].endswith("1 session(s) in dict:one\n")

    code, out, err = _cli("show", "chat", "--store", "dict:one")
    assert (code, err) == (0, "")
    assert out == _cli("show", "chat", "--store", jsonl_store)[1]
    code, out, err = _cli("stats", "chat", "--store", "dict:one", "--json")
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats.pop("source") == 'session "chat" in dict:one'
    expected = json.loads(_cli("stats", "chat", "--store", jsonl_store, "--json")[1])
    assert stats == {k: v for k, v in expected.items() if k != "source"}

    code, out, err = _cli("tail", "-n", "2", "--json", "chat", "--store", "dict:one")
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == events[-2:]

    code, out, err = _cli("fork", "chat", "--at", "5", "--as", "kid", "--store", "dict:one",
                          "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["lineage"] == ["kid", "chat"]
    assert sorted(STORES["one"]) == ["chat", "kid"]

    # copy out of it, and into a second dict store: byte for byte
    back = str(tmp_path / "back")
    code, out, err = _cli("copy", "dict:one", back)
    assert (code, err) == (0, f"dsh-session: created the JSONL store {back} (a folder; a "
                              f"SQLite database is named sqlite:///PATH)\n")
    assert _cli("export", "chat", "--store", back)[1] == exported
    assert _cli("copy", "dict:one", "dict:two")[0] == 0
    assert _cli("export", "kid", "--store", "dict:two")[1] == _cli(
        "export", "kid", "--store", "dict:one")[1]


def test_a_plugins_store_is_refused_where_a_builtin_one_would_be(plugin: DictStores) -> None:
    # A reader never creates the store: the plugin says it does not exist.
    code, _, err = _cli("ls", "--store", "dict:nothing")
    assert code == 1
    assert "no dsh-session store at dict:nothing (no such dict store)" in err
    assert "nothing" not in STORES
    assert _cli("show", "x", "--store", "dict:nothing")[0] == 1
    # Copying a store into itself is refused (the default identity: class and location).
    STORES["one"] = {}
    code, _, err = _cli("copy", "dict:one", "dict:one")
    assert code == 2
    assert "SRC and DST are the same store" in err
    # A scheme no plugin opens is still a usage error.
    assert _cli("ls", "--store", "nodict:x")[0] == 2


def test_the_protocols_default_tail_and_follow(plugin: DictStores) -> None:
    backend = DictBackend("one")
    with open_store("dict:one", plugin_manager=_pm_with(plugin)) as store:
        s = store.create("live")
        exchange(s, 1)
        store.flush(s)
        tail = backend.tail_lines("live", 2)
        assert tail is not None
        assert [json.loads(line)["type"] for line in tail.lines] == ["step/end", "turn/end"]
        assert backend.tail_lines("nobody", 2) is None

        def later() -> None:
            exchange(s, 2)
            store.flush(s)

        writer = threading.Timer(0.2, later)
        writer.start()
        try:
            seen: list[str] = []
            for news in backend.follow_lines("live", tail.position, timeout=60):
                assert news.note is None
                seen += [json.loads(line)["type"] for line in news.lines]
                if len(seen) >= 6:
                    break
        finally:
            writer.join()
        assert seen == ["turn/start", "user/message", "step/start", "assistant/message",
                        "step/end", "turn/end"]
    # Nothing more within the timeout: the iterator ends.
    assert list(backend.follow_lines("live", 12, timeout=0.3)) == []
    [summary] = backend.summaries()
    assert (summary.events, summary.turns, summary.torn) == (12, 2, False)
    assert backend.exists()
    assert backend.store_identity() == DictBackend("one").store_identity() != (
        DictBackend("two").store_identity())


def _present(caps: Capabilities) -> set[str]:
    """The capabilities ``caps`` has, by field name."""
    return {f.name for f in dataclasses.fields(caps)
            if f.name != "backend" and getattr(caps, f.name) is not None}


def test_an_encrypted_store_on_a_plugins_backend_has_only_what_the_backend_has(
    plugin: DictStores,
) -> None:
    keys = Keyring({"k1": bytes(range(32))})
    with open_store("dict:sealed", plugin_manager=_pm_with(plugin), keys=keys) as store:
        # The sealing wrapper defines delete, rewrite, typed and selective reads; the
        # plugin's backend has none of them, so neither has the store: only what
        # Backend's defaults give it (a page of lines, a resume), each the wrapper.
        caps = store.capabilities
        assert _present(caps) == _present(Capabilities.of(DictBackend("sealed"))) == {
            "line_reads", "resumable"}
        assert caps.line_reads is store.backend
        assert caps.resumable is store.backend
        s = store.create("chat")
        exchange(s, 1, "where is paris", "in france")
        store.flush(s)
        store.release(s)
        s = store.create("open")
        exchange(s, 1, end=False)  # an interrupted turn: an open would close it
        store.flush(s)
        store.release(s)
        stored = dict(STORES["sealed"])
        assert b'"sealed"' in (stored["chat"].jsonl or b"")
        # Reads without the capabilities: every line read and opened, then kept.
        assert [e.type for e in store.read("chat", after=2)] == [
            "assistant/message", "step/end", "turn/end"]
        [line] = store.read_lines("chat", types={"user/message"})
        assert b"where is paris" in line
        assert [h.session_id for h in store.search("paris")] == ["chat"]
        # No delete: refused at once, as in the clear, and nothing is written (no
        # retention ledger); the sealing wrapper's delete is never asked.
        with pytest.raises(PersistenceError, match="cannot delete"):
            store.delete("chat")
        with pytest.raises(PersistenceError, match="cannot delete"):
            store.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                        now=datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC))
        # No rewrite: a rekey is refused before the open closes the interrupted turn.
        with pytest.raises(EncryptionError, match="cannot rewrite a session in place"):
            store.rekey("open")
        assert STORES["sealed"] == stored


def _pm_with(plugin: DictStores) -> Any:
    from dsh_session_core import create_plugin_manager

    pm = create_plugin_manager(autoload=False)
    pm.register(plugin, name="dict-stores")
    return pm


class TestDictBackend(BackendContract):
    """The backend contract: each case on a dict store of its own."""

    @pytest.fixture
    def make_backend(self, request: pytest.FixtureRequest) -> Iterator[BackendFactory]:
        name = f"contract-{request.node.name}"
        yield lambda: DictBackend(name)
        STORES.pop(name, None)
