"""A forget finishes what is left: after a forget killed midway, and after a delete.

A forget is announced in the ledger (``retention/forgetting``, a digest) before anything
is removed, so a run killed after its deletes (here by the keyring's ``drop`` hook, which
runs after them, killing its own process) leaves the ledger saying a forget of the
session was begun: the same forget again finishes it, though the session is stored
nowhere any more. A session an earlier delete removed is named by the ledger's removal
record: forgetting it takes that record out and scrubs what the delete left. An id that
no store holds and the ledger never named stays refused (``test_forget.py``).
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_session_core import Keyring, open_store
from dsh_session_core._persistence.retention.ledger import LEDGER_ID, digest_of
from dsh_session_core.errors import SessionNotStoredError
from erasing_support import files_holding, new_marker


def _key(session_id: str, _kid: str) -> bytes:
    return hashlib.sha256(b"test key of " + session_id.encode()).digest()


def _keyring(dropped: list[str] | None = None) -> Keyring:
    def drop(session_id: str) -> None:
        if dropped is not None:
            dropped.append(session_id)

    return Keyring(_key, current="k1", drop=drop)


def _url(kind: str, root: Path) -> str:
    return f"sqlite:///{root}/s.db" if kind == "sqlite" else str(root / "s")


#: The child: forgets the session with a keyring whose drop hook (run after the deletes,
#: before the ledger's ``retention/forgotten`` and the scrub) kills the process.
_CHILD = textwrap.dedent("""
    import hashlib, os, signal, sys
    from dsh_session_core import Keyring, open_store

    def key(session_id, _kid):
        return hashlib.sha256(b"test key of " + session_id.encode()).digest()

    def drop(session_id):
        os.kill(os.getpid(), signal.SIGKILL)

    with open_store(sys.argv[1], keys=Keyring(key, current="k1", drop=drop)) as store:
        store.forget(sys.argv[2])
    """)


def _write(url: str, sid: str, marker: str, *, sealed: bool = True) -> None:
    with open_store(url, keys=_keyring() if sealed else None) as store:
        for name, text in ((sid, f"I am {marker}"), ("other", "nothing to see")):
            s = store.create(name)
            with s.turn() as turn:
                turn.user(text)
            store.release(s)
        assert list(store.search(marker))


def _ledger_types(url: str) -> list[str]:
    with open_store(url) as store:
        return [e.type for e in store.read(LEDGER_ID)]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_forget_killed_after_its_deletes_is_finished_by_the_same_forget(
        kind: str, tmp_path: Path) -> None:
    marker = new_marker()
    sid = f"ada-{marker}"
    url = _url(kind, tmp_path)
    _write(url, sid, marker)
    child = subprocess.run([sys.executable, "-c", _CHILD, url, sid],
                           capture_output=True, text=True, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr
    with open_store(url, keys=_keyring()) as store:
        assert sid not in [h.id for h in store.stored()]  # the deletes were done
    # Killed before its record and its scrub: the ledger says a forget was begun.
    assert _ledger_types(url)[-1] == "retention/forgetting"
    dropped: list[str] = []
    with open_store(url, keys=_keyring(dropped)) as store:
        done = store.forget(sid)
        assert done.complete, done.left
        assert done.deleted is None  # stored nowhere any more
        assert done.key_dropped
        assert dropped == [sid]
        [record] = [e for e in store.read(LEDGER_ID) if e.type == "retention/forgotten"]
        assert (record.data.digest, record.data.stored) == (digest_of(sid), False)
        assert [h.id for h in store.stored() if h.id != LEDGER_ID] == ["other"]
        assert list(store.search("nothing to see"))  # the other session is whole
    assert files_holding(tmp_path, marker) == []
    assert files_holding(tmp_path, sid) == []
    # Settled: a third forget finds nothing to forget.
    with open_store(url, keys=_keyring()) as store, pytest.raises(SessionNotStoredError):
        store.forget(sid)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_deleted_session_is_forgotten_by_its_id(kind: str, tmp_path: Path) -> None:
    marker = new_marker()
    sid = f"ada-{marker}"
    url = _url(kind, tmp_path)
    _write(url, sid, marker, sealed=False)
    with open_store(url) as store:
        store.retain(sid, note=f"keep {marker}")
        store.retain(sid, retain=False)  # released: a delete may remove it
        store.delete(sid)  # the ledger names it: its marks, the note, the removal
    assert files_holding(tmp_path, sid)  # the ledger's records name it
    if kind == "sqlite":
        assert files_holding(tmp_path, marker)  # the delete left its bytes
    with open_store(url) as store:
        done = store.forget(sid)
        assert done.complete, done.left
        assert done.deleted is None
        assert done.ledger_records is not None
        assert done.ledger_records >= 3
        [record] = [e for e in store.read(LEDGER_ID) if e.type == "retention/forgotten"]
        assert record.data.stored is False
        assert [h.id for h in store.stored() if h.id != LEDGER_ID] == ["other"]
    assert files_holding(tmp_path, marker) == []
    assert files_holding(tmp_path, sid) == []


def test_a_reader_keeping_the_wal_makes_forget_say_so(tmp_path: Path) -> None:
    # A connection reading the database keeps SQLite's write-ahead log from being
    # truncated: its old frames may hold the session; forget is not complete, and says
    # why in its left.
    import sqlite3

    marker = new_marker()
    url = _url("sqlite", tmp_path)
    _write(url, "ada", marker, sealed=False)
    reader = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchone()  # a snapshot held
        with open_store(url) as store:
            done = store.forget("ada")
        assert not done.complete
        [line] = done.left
        assert "write-ahead log could not be truncated" in line
        assert done.scrubbed is None
        assert done.deleted is not None  # the rest was done
    finally:
        reader.close()
    with open_store(url) as store:
        assert "ada" not in [h.id for h in store.stored()]
