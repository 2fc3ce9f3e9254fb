"""Backends mounted on a store whose sessions are already live (scenarios 31, 33-35; the
reference calls it HMR), and the id-scope rules of adoption (scenarios 11, 62, 63)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from persist_support import ONE_TURN, Factory, meta

from dsh_session_core import (
    PersistencePlugin,
    Session,
    SessionStore,
    core_registry,
    create_plugin_manager,
)
from dsh_session_core.errors import PersistenceError

USER = {"kind": "user"}


def _mount(store: SessionStore, storage: Factory) -> PersistencePlugin:
    plugin = PersistencePlugin(storage(), store.registry)
    store.plugin_manager.register(plugin)
    return plugin


def _unmount(store: SessionStore, plugin: PersistencePlugin) -> None:
    plugin.close()
    store.plugin_manager.unregister(plugin)


def _turn(s: Session, turn: int) -> None:
    s.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _types(storage: Factory, sid: str) -> list[str]:
    return [e.type for e in PersistencePlugin(storage(), core_registry()).load(sid).events]


def test_s33_a_new_backend_adopts_a_live_session(storage: Factory) -> None:
    store = SessionStore(create_plugin_manager(autoload=False))
    first = _mount(store, storage)
    s = store.create("hmr-adopt", cwd="/w")
    _turn(s, 1)
    store.flush(s)
    _unmount(store, first)
    _mount(store, storage)
    _turn(s, 2)
    store.flush(s)
    assert _types(storage, "hmr-adopt").count("turn/start") == 2


def test_s34_events_appended_with_no_backend_are_written_later(storage: Factory) -> None:
    store = SessionStore(create_plugin_manager(autoload=False))
    first = _mount(store, storage)
    s = store.create("hmr-suffix", cwd="/w")
    _turn(s, 1)
    store.flush(s)
    _unmount(store, first)
    _turn(s, 2)  # no backend mounted
    _mount(store, storage)
    store.flush(s)
    stored = PersistencePlugin(storage(), core_registry()).load("hmr-suffix").events
    assert [e.seq for e in stored] == [0, 1, 2, 3]


def _tear(storage: Factory, tmp_path: Path, sid: str) -> None:
    backend: Any = storage()
    if backend.name.endswith("jsonl"):
        bucket = "cwd-" + hashlib.sha256(b"/w").hexdigest()[:12]
        with (tmp_path / "root" / bucket / f"{sid}.jsonl").open("ab") as f:
            f.write(b'{"type":"assistant/chunk","seq":2,"ti')
    elif backend.name.endswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(tmp_path / "sessions.db")
        db.execute("INSERT INTO events (session_id, seq, type, time, data) VALUES "
                   "(?, 2, 'assistant/chunk', 99, '{not valid json')", (sid,))
        db.commit()
        db.close()
    backend.close()


def test_s35_remounting_does_not_close_a_live_open_turn(
    storage: Factory, tmp_path: Path
) -> None:
    store = SessionStore(create_plugin_manager(autoload=False))
    first = _mount(store, storage)
    s = store.create("hmr-open", cwd="/w")
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
    s.append("step/start", {"turn": 1, "step": 1})
    store.flush(s)
    _unmount(store, first)
    _tear(storage, tmp_path, "hmr-open")
    _mount(store, storage)
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.flush(s)
    stored = PersistencePlugin(storage(), core_registry()).load("hmr-open").events
    assert [e.type for e in stored] == ["turn/start", "step/start", "step/end", "turn/end"]
    assert stored[-1].data.reason.kind == "completed"


def test_s11_the_header_is_taken_as_given(storage: Factory) -> None:
    header = meta("create-snap", "/orig")
    p = PersistencePlugin(storage(), core_registry())
    p.create(header)
    with pytest.raises(AttributeError):
        header.cwd = "/mutated"  # type: ignore[misc]  # headers are immutable
    p.append("create-snap", ONE_TURN)
    assert p.load("create-snap").header.cwd == "/orig"


def test_s62_an_id_stored_under_another_cwd_cannot_be_created(storage: Factory) -> None:
    a = PersistencePlugin(storage(), core_registry())
    a.create(meta("dup-id", "/projA"))
    a.append("dup-id", ONE_TURN)
    a.close()
    b = PersistencePlugin(storage(), core_registry())
    with pytest.raises(PersistenceError, match="already has a persisted log on disk"):
        b.create(meta("dup-id", "/projB"))


def test_s63_live_adoption_is_scoped_to_the_exact_cwd(storage: Factory, tmp_path: Path) -> None:
    a = PersistencePlugin(storage(), core_registry())
    a.create(meta("x", "/w"))
    a.append("x", ONE_TURN)
    a.close()
    store = SessionStore(create_plugin_manager(autoload=False))
    _mount(store, storage)
    with pytest.raises(PersistenceError):
        store.create("x")  # no cwd: not the /w log, which stays as it was
    assert len(PersistencePlugin(storage(), core_registry()).load("x").events) == 6
    if (tmp_path / "root").is_dir():  # JSONL: nothing was written outside the /w bucket
        assert not (tmp_path / "root" / "_no-cwd" / "x.jsonl").exists()
