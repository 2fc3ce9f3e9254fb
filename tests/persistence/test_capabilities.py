"""Issue 26, point 2: a backend's optional capabilities are declared protocols
(``_persistence/capabilities.py``), found once per backend in a ``Capabilities`` record
that the store and the readers use; and where a store keeps its sessions is said by the
URL rules (``store_place``), not by a backend's class.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import (
    AsyncAppend,
    Backend,
    Capabilities,
    Deletable,
    DurableStore,
    EventRegistry,
    MemoryBackend,
    Searchable,
    SessionHeader,
    StoredLog,
    store_place,
)
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core.errors import PersistenceError

PG_URL = os.environ.get("DSH_SESSION_TEST_POSTGRESQL")

#: Every capability field of the record, by the method it stands for.
FIELDS = {
    "searchable": "search",
    "selective_summaries": "summaries_of",
    "line_reads": "read_lines",
    "typed_line_reads": "lines_of_types",
    "resumable": "lines_since",
    "deletable": "delete",
    "async_append": "aappend_batch",
    "async_list": "alist",
    "async_tail": "atail_lines",
    "async_follow": "afollow_lines",
    "async_close": "aclose",
}
READING = {"searchable", "selective_summaries", "line_reads", "typed_line_reads",
           "resumable", "deletable"}
ASYNC = {"async_append", "async_list", "async_tail", "async_follow", "async_close"}


def _has(caps: Capabilities) -> set[str]:
    found = set()
    for field in FIELDS:
        value = getattr(caps, field)
        assert value is None or value is caps.backend, field  # the backend, typed
        if value is not None:
            found.add(field)
    return found


@pytest.mark.parametrize(("url", "expected"), [
    ("memory:", {"line_reads", "resumable", "deletable"}),
    ("jsonl:{tmp}/logs", READING),
    ("jsonl+zstd:{tmp}/compact", READING),
    ("sqlite:{tmp}/s.db", READING),
])
def test_what_each_built_in_backend_has(url: str, expected: set[str], tmp_path: Path) -> None:
    if "zstd" in url:
        pytest.importorskip("zstandard")
    backend = backend_for(url.format(tmp=tmp_path))
    try:
        assert _has(Capabilities.of(backend)) == expected
    finally:
        backend.close()


@pytest.mark.skipif(PG_URL is None, reason="DSH_SESSION_TEST_POSTGRESQL is not set")
def test_postgresql_has_every_capability() -> None:
    assert PG_URL is not None
    backend = backend_for(PG_URL)
    try:
        assert _has(Capabilities.of(backend)) == READING | ASYNC
    finally:
        backend.close()


def test_redis_has_every_capability_but_a_search_index(redis_url: str) -> None:
    """Its reads, its delete, and the asyncio twins (on redis-py's asyncio client); no
    index of its own: a search loads each session."""
    backend = backend_for(redis_url)
    try:
        assert _has(Capabilities.of(backend)) == (READING - {"searchable"}) | ASYNC
    finally:
        backend.close()


class _Minimal(Backend):
    """A backend written with the required methods only: every reading method is the
    protocol's default, ``delete`` too (it cannot delete)."""

    name = "session-persistence-minimal"

    def __init__(self) -> None:
        self.logs: dict[str, StoredLog] = {}

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        return self.logs.get(session_id)

    def load_live(self, session_id: str, cwd: str | None, registry: EventRegistry
                  ) -> StoredLog | None:
        return self.logs.get(session_id)

    def append_batch(self, header: SessionHeader, events: Sequence[Any], jsonl: bytes,
                     materialized: bool) -> None:
        old = self.logs.get(header.id, StoredLog(header, [], None, b""))
        self.logs[header.id] = StoredLog(header, [*old.events, *events], None,
                                         (old.jsonl or b"") + jsonl)

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Any], jsonl: bytes) -> None:
        if closers:
            self.append_batch(header, closers, jsonl, True)

    def list(self) -> list[SessionHeader]:
        return [log.header for log in self.logs.values()]

    def acquire(self, header: SessionHeader) -> Any:
        class Lock:
            def release(self) -> None:
                pass

        return Lock()

    def location(self, header: SessionHeader) -> str:
        return "minimal:"

    def close(self) -> None:
        pass


class _Deleting(_Minimal):
    def delete(self, session_id: str, *, dry_run: bool = False) -> Any:
        from dsh_session_core import Deleted

        if not dry_run:
            del self.logs[session_id]
        return Deleted(session_id, "would-delete" if dry_run else "deleted")


def test_an_inherited_default_is_no_capability() -> None:
    minimal = Capabilities.of(_Minimal())
    # read_lines and lines_since are the protocol's defaults: they work, by loading.
    assert _has(minimal) == {"line_reads", "resumable"}
    assert isinstance(_Minimal(), Deletable)  # the attribute is there...
    assert minimal.deletable is None  # ...but it only says it cannot delete
    deleting = _Deleting()
    assert Capabilities.of(deleting).deletable is deleting


class _Delegating:
    """A wrapper that passes every attribute to the backend it wraps (as a test's slow
    or counting backend does): what the inner backend has, the wrapper has."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_delegating_wrapper_has_what_it_passes_through() -> None:
    wrapper: Any = _Delegating(MemoryBackend())
    assert _has(Capabilities.of(wrapper)) == {"line_reads", "resumable", "deletable"}


def _stored(store: DurableStore, session_id: str) -> None:
    s = store.create(session_id)
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                   "source": {"kind": "user"}}})
    s.append("user/message", {"content": [{"type": "text", "text": "hello paris"}],
                              "source": {"kind": "user"}}, surface_op="append")
    store.flush(s)
    store.release(s)


def test_a_store_finds_capabilities_once_when_it_is_made() -> None:
    backend = _Minimal()
    with DurableStore(backend) as store:
        _stored(store, "s")
        # A search method that appears later is not looked for: the record was made with
        # the store, and the store scans the sessions through the protocol.
        calls: list[object] = []

        def search(query: object) -> list[object]:
            calls.append(query)
            return []

        backend.search = search  # type: ignore[attr-defined]
        assert isinstance(backend, Searchable)
        assert store.capabilities.searchable is None
        assert [h.session_id for h in store.search("paris")] == ["s"]
        assert calls == []
        # Deleting is refused before anything changes: the backend has no delete.
        with pytest.raises(PersistenceError, match="cannot delete"):
            store.delete("s")
        assert [h.id for h in store.stored()] == ["s"]


def test_a_store_on_a_backend_that_deletes_uses_its_delete() -> None:
    with DurableStore(_Deleting()) as store:
        _stored(store, "s")
        assert store.delete("s").deleted
        # Gone, and recorded in the store's retention ledger (a session of its own).
        assert [h.id for h in store.stored()] == ["dsh-session.retention"]
        assert [r.data.session_id for r in store.removals()] == ["s"]


def test_a_synchronous_backend_has_no_async_twin() -> None:
    with DurableStore(MemoryBackend()) as store:
        assert not isinstance(store.backend, AsyncAppend)
        assert store.capabilities.async_append is None
        assert store.capabilities.backend is store.backend


@pytest.mark.parametrize(("url", "kind", "where", "log_files"), [
    ("memory:", "memory", "memory:", False),
    ("sqlite::memory:", "sqlite", ":memory:", False),
    ("sqlite://", "sqlite", ":memory:", False),
    ("sqlite:///rel/s.db", "sqlite", "{cwd}/rel/s.db", False),
    ("sqlite:////abs/s.db", "sqlite", "/abs/s.db", False),
    ("jsonl:logs", "jsonl", "{cwd}/logs", True),
    ("/abs/logs", "jsonl", "/abs/logs", True),
    ("file:///abs/logs", "jsonl", "/abs/logs", True),
    ("jsonl+zstd:////abs/compact", "jsonl+zstd", "/abs/compact", True),
    ("postgresql://ada:secret@db.example/agents", "postgresql", "postgresql://ada@db.example/agents",
     False),
    ("redis://agent:s3cret@cache.example:6380/2?prefix=a:", "redis",
     "redis://agent@cache.example:6380/2?prefix=a:", False),
    ("rediss://:s3cret@cache.example", "redis", "rediss://cache.example", False),
    ("dict:demo", "dict", "dict:demo", False),  # a plugin's scheme: only its URL is known
])
def test_where_a_url_keeps_its_sessions(url: str, kind: str, where: str, log_files: bool,
                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                        ) -> None:
    monkeypatch.chdir(tmp_path)
    place = store_place(url)
    assert (place.kind, place.where, place.log_files) == (
        kind, where.format(cwd=os.getcwd()), log_files)


def test_the_default_store_is_placed_as_open_store_opens_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DSH_SESSION_STORE", f"sqlite:///{tmp_path}/d.db")
    assert store_place() == store_place(f"sqlite:///{tmp_path}/d.db")
    assert store_place().where == f"{tmp_path}/d.db"
