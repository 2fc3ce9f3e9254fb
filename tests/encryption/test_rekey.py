"""Rotating keys out: ``DurableStore.rekey`` and ``dsh-session rekey`` reseal a
session's records under the current key, every seq, type and time kept, atomically
under its writer lock: a crash (a SIGKILL at any point) leaves the old records or the
new ones, both loadable."""

from __future__ import annotations

import base64
import json
import os
import signal
from pathlib import Path

import pytest
from crypt_support import KEY1, KEY2, Records, end_turn, open_sealed, start_turn

from dsh_session_core import Keyring, open_store
from dsh_session_core._persistence.encryption.sealed import SealedBackend
from dsh_session_core.errors import (
    EncryptedSessionError,
    EncryptionError,
    KeyUnavailableError,
    SessionLockedError,
)
from dsh_session_core.testing import run_cli

OLD = Keyring({"k1": KEY1})
ROTATED = Keyring({"k2": KEY2, "k1": KEY1})
NEW = Keyring({"k2": KEY2})
BACK = Keyring({"k1": KEY1, "k2": KEY2})


def _write(url: str, sid: str = "a", turns: int = 3) -> bytes:
    with open_sealed(url, OLD) as store:
        s = store.create(sid, cwd="/crypt")
        for turn in range(1, turns + 1):
            start_turn(s, turn, f"question {turn}")
            end_turn(s, turn, f"answer {turn}")
        store.flush(s)
        return s.jsonl()


def _kids(url: str, sid: str, count: int) -> set[str]:
    records = Records(url)
    return {records.get(sid, i)["data"]["sealed"]["kid"] for i in range(count)}


@pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")
def test_rekey_reseals_every_record_under_the_current_key(store_url: str) -> None:
    written = _write(store_url)
    n = written.count(b"\n")
    envelope_before = None
    if not store_url.startswith("jsonl+zstd:"):
        records = Records(store_url)
        envelope_before = [{k: records.get("a", i)[k] for k in ("type", "seq", "time")}
                           for i in range(n)]
    with open_sealed(store_url, ROTATED) as store:
        done = store.rekey("a")
    assert (done.session_id, done.records, done.key_id, done.old_key_ids) == (
        "a", n, "k2", ("k1",))
    with open_sealed(store_url, NEW) as store:  # the old key is no longer needed
        assert store.open("a").jsonl() == written
    if envelope_before is not None:
        records = Records(store_url)
        assert _kids(store_url, "a", n) == {"k2"}
        assert [{k: records.get("a", i)[k] for k in ("type", "seq", "time")}
                for i in range(n)] == envelope_before
    with open_sealed(store_url, OLD) as store, pytest.raises(KeyUnavailableError):
        store.open("a")


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_rekey_refuses_a_session_a_writer_holds(store_url: str) -> None:
    _write(store_url)
    with open_sealed(store_url, OLD) as writer:
        writer.open("a")
        with open_sealed(store_url, ROTATED) as other, pytest.raises(SessionLockedError):
            other.rekey("a")
    assert _kids(store_url, "a", 3) == {"k1"}


@pytest.mark.store_kinds("jsonl")
def test_rekey_needs_keys(store_url: str) -> None:
    _write(store_url)
    with open_store(store_url) as store, pytest.raises(EncryptionError, match="with keys"):
        store.rekey("a")


@pytest.mark.store_kinds("jsonl")
def test_rekey_closes_an_interrupted_turn(store_url: str) -> None:
    with open_sealed(store_url, OLD) as store:
        s = store.create("a", cwd="/crypt")
        start_turn(s, 1, "left open")
        store.flush(s)
        store.release(s)
    with open_sealed(store_url, ROTATED) as store:
        assert store.rekey("a").records == 3  # turn/start, the message, its closer
    with open_sealed(store_url, NEW) as store:
        assert store.open("a").events[-1].type == "turn/end"


@pytest.mark.store_kinds("jsonl", "jsonl+zstd")
def test_a_rekey_failing_to_publish_leaves_the_old_log(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _write(store_url)
    [log] = Path(Records(store_url).path).glob("*/a.jsonl*")
    before = log.read_bytes()

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", fail)
    with open_sealed(store_url, ROTATED) as store, pytest.raises(OSError, match="space"):
        store.rekey("a")
    monkeypatch.undo()
    assert log.read_bytes() == before
    assert sorted(p.name for p in log.parent.iterdir()) == sorted(
        [log.name, "a.lock"])  # no temp file left
    with open_sealed(store_url, OLD) as store:
        assert store.open("a").jsonl() == written


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_a_rekey_killed_at_any_point_leaves_the_old_or_the_new(store_url: str) -> None:
    written = _write(store_url, turns=20)
    n = written.count(b"\n")
    for kill in range(12):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child rekeys back and forth until it is killed
            code = 0
            try:
                os.close(read)
                while True:
                    for keys in (ROTATED, BACK):
                        with open_sealed(store_url, keys) as store:
                            store.rekey("a")
                        os.write(write, b".")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        done = b""
        while len(done) <= kill:  # kill + 1 rekeys done: the kill lands in the next one
            done += os.read(read, kill + 1 - len(done)) or b"!"
        assert set(done) == {ord(".")}, "the child failed"
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        assert len(_kids(store_url, "a", n)) == 1, f"kill {kill}: a mix of keys"
        with open_sealed(store_url, BACK) as store:
            assert store.open("a").jsonl() == written, f"kill {kill}"


def test_cli_rekey(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "store")
    (tmp_path / "store").mkdir()
    _write(url)
    _write(url, "b")
    b64 = base64.b64encode
    monkeypatch.setenv("ROTATED_KEYS", f"k2:{b64(KEY2).decode()},k1:{b64(KEY1).decode()}")
    code, out, err = run_cli("rekey", "--all", "--store", url, "--key-env", "ROTATED_KEYS")
    assert (code, err) == (0, "")
    assert sorted(out.decode().splitlines()) == [  # 3 turns of 6 events each
        "a: 18 record(s) sealed under k2 (were: k1)",
        "b: 18 record(s) sealed under k2 (were: k1)"]
    code, out, err = run_cli("rekey", "--all", "--store", url)
    assert code == 2
    assert err.startswith("dsh-session: rekey needs the store's keys")
    assert "Traceback" not in err
    code, out, err = run_cli("rekey", "--store", url, "--key-env", "ROTATED_KEYS")
    assert code == 2  # neither ids nor --all
    code, out, err = run_cli("rekey", "nope", "--store", url, "--key-env", "ROTATED_KEYS")
    assert code == 1
    assert out.decode().startswith("nope: not rekeyed: ")


# --- issue 37, point 5: a plaintext session sealed in place ------------------------------


def _write_plain(url: str, sid: str = "p", *, open_turn: bool = False) -> bytes:
    """A plaintext session (the reference format), in a store opened without keys."""
    with open_sealed(url, None) as store:
        s = store.create(sid, cwd="/crypt")
        start_turn(s, 1, "the plaintext secret")
        end_turn(s, 1, "noted")
        if open_turn:
            start_turn(s, 2, "cut off")
        store.flush(s)
        return s.jsonl()


@pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")
def test_rekey_seals_a_plaintext_session_in_place(store_url: str) -> None:
    written = _write_plain(store_url)
    n = written.count(b"\n")
    with open_sealed(store_url, OLD) as store:
        with pytest.raises(EncryptionError, match=r"seal it in place with this store's "
                                                  r"keys: store\.rekey\('p'\)"):
            store.open("p")
        done = store.rekey("p")  # what the refusal says to do
    assert (done.session_id, done.records, done.key_id, done.old_key_ids,
            done.plaintext) == ("p", n, "k1", (), True)
    with open_sealed(store_url, OLD) as store:  # now read with keys, as it was written
        session = store.open("p")
        assert session.jsonl() == written
        store.release(session)
        backend = store.backend
        assert isinstance(backend, SealedBackend)
        assert [(h.id, h.version) for h in backend.inner.list()] == [("p", -1)]
    with open_sealed(store_url, None) as store, pytest.raises(EncryptedSessionError):
        store.open("p")  # without keys, it is an encrypted session now
    if not store_url.startswith("jsonl+zstd:"):
        records = Records(store_url)
        assert _kids(store_url, "p", n) == {"k1"}
        assert not any(b"plaintext secret" in json.dumps(records.get("p", i)).encode()
                       for i in range(n))
    with open_sealed(store_url, ROTATED) as store:  # and it is rekeyed as any other
        assert store.rekey("p").old_key_ids == ("k1",)


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_sealing_in_place_closes_an_interrupted_turn_as_an_open_would(
    store_url: str,
) -> None:
    n = _write_plain(store_url, open_turn=True).count(b"\n")
    with open_sealed(store_url, OLD) as store:
        assert store.rekey("p").records == n + 1  # the open turn's closer
        events = store.open("p").events
    assert (events[-1].type, events[-1].data.reason.kind) == ("turn/end", "interrupted")


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_sealing_in_place_refuses_a_session_a_writer_holds(store_url: str) -> None:
    written = _write_plain(store_url)
    with open_sealed(store_url, None) as writer:
        writer.open("p")  # a live writer of the plaintext session
        with open_sealed(store_url, OLD) as store, pytest.raises(SessionLockedError):
            store.rekey("p")
    with open_sealed(store_url, None) as store:  # left as it was: plaintext
        assert store.read_session("p").jsonl() == written


def test_cli_rekey_all_seals_the_plaintext_sessions_too(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    url = str(tmp_path / "store")
    (tmp_path / "store").mkdir()
    _write(url, "sealed")
    _write_plain(url, "plain")
    monkeypatch.setenv("DSH_SESSION_KEYS", f"k1:{base64.b64encode(KEY1).decode()}")
    code, out, err = run_cli("rekey", "--all", "--store", url, "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["failed"] == []
    assert sorted((r["id"], r["plaintext"], r["oldKeyIds"]) for r in doc["rekeyed"]) == [
        ("plain", True, []), ("sealed", False, ["k1"])]
