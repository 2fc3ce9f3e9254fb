"""Stores sealed by the release before issue 39 keep reading and going on.

``sealed_store/store`` is an encrypted JSONL store sealed by the code of commit efe64e2,
as it wrote it (``sealed_store/make_store.py`` says how); ``sealed_store/expected``
holds each of its sessions' plaintext log as that code read it with the keys:
AES-256-GCM records under a key and then under a rotated one, ChaCha20-Poly1305
records, and a record sealed whole (its line did not begin with its envelope).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from crypt_support import KEY1, open_sealed, say, tamper

from dsh_session_core import Keyring, copy_sessions
from dsh_session_core.errors import SealedRecordError

HERE = Path(__file__).resolve().parent / "sealed_store"
KEY2 = bytes(range(100, 132))
BOTH = Keyring({"k2": KEY2, "k1": KEY1})
SESSIONS = ("chat-aes", "chat-chacha", "chat-odd")


@pytest.fixture
def old_store(tmp_path: Path) -> str:
    """A copy of the store sealed by the earlier release (the fixture stays as made)."""
    root = tmp_path / "store"
    shutil.copytree(HERE / "store", root)
    return str(root)


def _expected(sid: str) -> bytes:
    return (HERE / "expected" / f"{sid}.jsonl").read_bytes()


@pytest.mark.parametrize("sid", SESSIONS)
def test_a_store_sealed_by_the_earlier_release_reads_as_it_did(old_store: str,
                                                                 sid: str) -> None:
    with open_sealed(old_store, BOTH) as store:
        assert store.open(sid).jsonl() == _expected(sid)
        assert store.read_session(sid).jsonl() == _expected(sid)
        tail = store.backend.tail_lines(sid, 4)  # a record at a time
        assert tail is not None
        assert tail.lines == _expected(sid).splitlines()[-4:]


def test_a_record_of_it_altered_is_refused(old_store: str) -> None:
    tamper(old_store, "chat-aes", 5)
    with open_sealed(old_store, BOTH) as store, pytest.raises(SealedRecordError) as info:
        store.open("chat-aes")
    assert (info.value.seq, info.value.key_id) == (5, "k1")


def test_its_session_goes_on_and_reads_whole(old_store: str) -> None:
    with open_sealed(old_store, BOTH) as store:
        s = store.open("chat-aes")
        say(s, "after the upgrade")
        say(s, "and again")
        store.flush(s)
        want = s.jsonl()
        store.release(s)
    assert want.startswith(_expected("chat-aes"))
    assert len(want.splitlines()) == len(_expected("chat-aes").splitlines()) + 2
    with open_sealed(old_store, BOTH) as store:
        assert store.open("chat-aes").jsonl() == want


def test_it_rekeyed_reads_the_same_under_the_new_key_alone(old_store: str) -> None:
    with open_sealed(old_store, BOTH) as store:
        store.rekey("chat-odd")
    with open_sealed(old_store, Keyring({"k2": KEY2})) as store:
        assert store.open("chat-odd").jsonl() == _expected("chat-odd")


@pytest.mark.store_kinds("sqlite")
def test_it_copied_into_sqlite_reads_there(old_store: str, store_url: str) -> None:
    with open_sealed(old_store, BOTH) as old, open_sealed(store_url, BOTH) as new:
        copy_sessions(old.backend, new.backend)
    with open_sealed(store_url, BOTH) as store:
        for sid in SESSIONS:
            assert store.open(sid).jsonl() == _expected(sid)


def test_the_fixture_is_sealed() -> None:
    # What the tests above read is sealed records, as that release wrote them.
    [log] = (HERE / "store").glob("*/chat-aes.jsonl")
    records = [json.loads(line) for line in log.read_bytes().splitlines()[1:]]
    assert {tuple(sorted(r["data"]["sealed"])) for r in records} == {
        ("alg", "ct", "kid", "nonce")}
