"""Keys: where they come from, rotating them mid-session, deleting them
(crypto-shredding), and what a reader without them is told."""

from __future__ import annotations

import base64
import sys

import pytest
from crypt_support import KEY1, KEY2, KEYS, Records, open_sealed, say, write_session

from dsh_session_core import Keyring, open_store
from dsh_session_core.errors import (
    EncryptedSessionError,
    EncryptionError,
    KeyUnavailableError,
    MissingExtraError,
    SealedRecordError,
)

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def _texts(url: str, sid: str, keys: Keyring) -> list[str]:
    with open_sealed(url, keys) as store:
        return [e.data.content[0].text for e in store.open(sid).events]


def test_keys_rotated_mid_session_open_both_halves(store_url: str) -> None:
    write_session(store_url, "a", ["under k1", "also k1"], Keyring({"k1": KEY1}))
    rotated = Keyring({"k2": KEY2, "k1": KEY1})  # k2 seals from now on
    with open_sealed(store_url, rotated) as store:
        s = store.open("a")
        say(s, "under k2")
        store.flush(s)
    records = Records(store_url)
    assert [records.get("a", i)["data"]["sealed"]["kid"] for i in range(3)] == [
        "k1", "k1", "k2"]
    assert _texts(store_url, "a", rotated) == ["under k1", "also k1", "under k2"]
    # Without the old key, its records are refused by name; nothing is read as data.
    with open_sealed(store_url, Keyring({"k2": KEY2})) as store, \
            pytest.raises(KeyUnavailableError) as info:
        store.open("a")
    assert (info.value.key_id, info.value.seq, info.value.session_id) == ("k1", 0, "a")


def test_deleting_a_sessions_key_makes_it_unreadable(store_url: str) -> None:
    own = {"a": KEY1, "b": KEY2}  # one key per session, kept by the host

    def lookup(session_id: str, key_id: str) -> bytes | None:
        return own.get(session_id) if key_id == "session" else None

    keys = Keyring(lookup, current="session")
    write_session(store_url, "a", ["a's words"], keys)
    write_session(store_url, "b", ["b's words"], keys)
    del own["a"]  # crypto-shredding: the log of a stays, and says nothing
    with pytest.raises(KeyUnavailableError, match="cannot be read again"):
        _texts(store_url, "a", keys)
    assert _texts(store_url, "b", keys) == ["b's words"]
    assert b"a's words" not in Records(store_url).stored_bytes()


def test_a_reader_without_keys_refuses_an_encrypted_session(store_url: str) -> None:
    write_session(store_url, "a", ["secret"])
    with open_store(store_url) as store:
        for read in (store.open, store.read_session):
            with pytest.raises(EncryptedSessionError, match="DSH_SESSION_KEYS") as info:
                read("a")
            assert info.value.session_id == "a"
        assert [h.id for h in store.stored()] == ["a"]  # listed, never read


def test_an_encrypted_store_refuses_a_plaintext_session(store_url: str) -> None:
    write_session(store_url, "plain", ["in the clear"], None)  # type: ignore[arg-type]
    with open_sealed(store_url) as store:
        with pytest.raises(EncryptionError, match="not encrypted") as info:
            store.open("plain")
        assert info.value.session_id == "plain"


def test_keyring_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    b64 = base64.b64encode
    monkeypatch.setenv("DSH_SESSION_KEYS", f"new:{b64(KEY2).decode()}, old:{b64(KEY1).decode()}")
    keys = Keyring.from_env()
    assert keys.current == "new"
    assert (keys.key("any", "new"), keys.key("any", "old"), keys.key("any", "x")) == (
        KEY2, KEY1, None)
    for bad, why in [("k1", "kid:base64key"), ("k1:@@@", "not base64"),
                     (f"k1:{b64(b'short').decode()}", "32 bytes")]:
        monkeypatch.setenv("DSH_SESSION_KEYS", bad)
        with pytest.raises(ValueError, match=why) as info:
            Keyring.from_env()
        assert "DSH_SESSION_KEYS" in str(info.value)
    monkeypatch.delenv("DSH_SESSION_KEYS")
    with pytest.raises(ValueError, match="not set"):
        Keyring.from_env()


@pytest.mark.store_kinds("jsonl")
def test_a_key_callable_giving_a_bad_key_is_a_clear_error(store_url: str) -> None:
    with open_sealed(store_url, Keyring(lambda sid, kid: b"short", current="k")) as store:
        s = store.create("a")
        say(s, "x")
        with pytest.raises(EncryptionError, match="32 bytes"):
            store.flush(s)
        store.discard(s)  # nothing was written
    assert not Records(store_url).stored_bytes().count(b'"type":"user/message"')


def test_keyring_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Keyring({"k": b"x" * 16})
    with pytest.raises(ValueError, match="current"):
        Keyring(lambda sid, kid: None)
    with pytest.raises(ValueError, match="not among"):
        Keyring({"k": KEY1}, current="j")
    with pytest.raises(ValueError, match="unknown algorithm"):
        Keyring({"k": KEY1}, algorithm="rot13")


@pytest.mark.store_kinds("jsonl")
def test_without_cryptography_keys_are_a_missing_extra(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(MissingExtraError, match=r"dsh-session-core\[encryption\]"):
        open_store(store_url, keys=KEYS)


@pytest.mark.store_kinds("jsonl")
def test_chacha20_poly1305_seals_too(store_url: str) -> None:
    chacha = Keyring({"c": KEY1}, algorithm="chacha20-poly1305")
    write_session(store_url, "a", ["by chacha"], chacha)
    assert Records(store_url).get("a", 0)["data"]["sealed"]["alg"] == "chacha20-poly1305"
    assert _texts(store_url, "a", chacha) == ["by chacha"]


def test_a_key_id_given_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 37, point 5: the later key silently won; records sealed under the other
    # would then fail as if altered.
    b64 = base64.b64encode
    twice = f"k1:{b64(KEY1).decode()},k2:{b64(KEY2).decode()},k1:{b64(KEY2).decode()}"
    with pytest.raises(ValueError, match="the key id 'k1' is given twice"):
        Keyring.parse(twice)
    monkeypatch.setenv("DSH_SESSION_KEYS", twice)
    with pytest.raises(ValueError, match=r"^DSH_SESSION_KEYS: the key id 'k1' is given twice"):
        Keyring.from_env()
    assert Keyring.parse(f"k1:{b64(KEY1).decode()},k2:{b64(KEY2).decode()}").current == "k1"


def test_the_wrong_key_under_the_right_id_is_said_to_be_the_key_first(
    store_url: str,
) -> None:
    # Issue 37, point 5: a key of the right id but other bytes was reported as
    # tampering, with advice to restore a backup. An AEAD cannot tell the two apart;
    # the key is named first.
    write_session(store_url, "a", ["one", "two"], Keyring({"k1": KEY1}))
    with open_sealed(store_url, Keyring({"k1": KEY2})) as store:
        for read in (store.open, store.read_session):
            with pytest.raises(SealedRecordError) as info:
                read("a")
            error = info.value
            assert (error.session_id, error.seq, error.key_id) == ("a", 0, "k1")
            assert str(error) == (
                "refused record seq 0 ('user/message') of encrypted session \"a\": the key "
                "\"k1\" does not open it: a wrong key for this id, or the record was "
                "altered (its authentication fails either way, and cannot tell which); it "
                "is not read as data. Check the key first: give the key that sealed it as "
                "\"k1\" (DSH_SESSION_KEYS=...,k1:<base64 key>, or your key callable); if "
                "that is the key, the record was altered: restore the log from a backup, "
                "or cut the session back before it")


@pytest.mark.parametrize("seq", [0, 1, 2])
def test_an_altered_record_the_key_opens_the_others_of_is_said_altered(
    store_url: str, seq: int,
) -> None:
    write_session(store_url, "a", ["one", "two", "three"])
    records = Records(store_url)
    records.put("a", seq, {**records.get("a", seq), "time": 5})
    with open_sealed(store_url) as store, pytest.raises(SealedRecordError) as info:
        store.open("a")
    assert (info.value.seq, info.value.key_id) == (seq, "k1")
    assert 'though the key "k1" opens the session\'s other records' in str(info.value)
    assert str(info.value).endswith("Restore the log from a backup, or cut the session "
                                    "back before it (dsh-session repair does not change "
                                    "committed records)")
