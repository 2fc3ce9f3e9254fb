"""The retention ledger of an encrypted store, on JSONL, SQLite and PostgreSQL: it holds
no content, so a cleanup job without keys writes it (``prune`` in each form, ``rm``,
``retain``) and every reader, with keys or without, reads it afterwards; a mark's note
is content: sealed with the keys, shown with them, refused without them; a ledger an
earlier release sealed whole still reads with keys, is refused (not guessed) without
them, and is rewritten in the clear by the first writer with keys or by ``rekey``."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from crypt_support import KEY1, KEY2, KEYS, Records, open_sealed, write_session

from dsh_session_core import Keyring, SessionHeader, open_store
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.retention.ledger import note_of
from dsh_session_core._schema.codec import encode_events
from dsh_session_core._schema.retention_events import RetentionMark, RetentionMarkData
from dsh_session_core.testing import run_cli

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

LEDGER = "dsh-session.retention"
KEYS_TEXT = f"k1:{base64.b64encode(KEY1).decode()}"
NOTE = "why-we-keep-it-7c1e"


@pytest.fixture
def store(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An encrypted store of three sessions, s1 the oldest; no keys in the environment."""
    monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    if "://" not in store_url:
        Path(store_url).mkdir(exist_ok=True)
    for sid in ("s1", "s2", "s3"):
        write_session(store_url, sid, [f"secret of {sid}"])
    return store_url


def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_KEYS", KEYS_TEXT)


def _ok(*argv: str) -> str:
    code, out, err = run_cli(*argv)
    assert (code, err) == (0, ""), (argv, err)
    return out.decode()


def _at_rest(url: str) -> bytes:
    """What the store holds: its logs, or its tables' rows (not a listing's cache)."""
    records = Records(url)
    if records.kind == "jsonl":
        return b"".join(p.read_bytes() for p in sorted(Path(records.path).rglob("*.jsonl")))
    return records.stored_bytes()


def _ids(store: str) -> list[str]:
    return sorted(r["id"] for r in json.loads(_ok("ls", "--store", store, "--json")))


def _log(store: str) -> list[tuple[str, str]]:
    doc = json.loads(_ok("prune", "--log", "--store", store, "--json"))
    return [(r["sessionId"], r["rule"]) for r in doc["removals"]]


KEYLESS = {
    "prune-policy": (["prune", "--keep-latest", "1", "--yes"],
                     [("s1", "keep-latest"), ("s2", "keep-latest")]),
    "prune-older-than": (["prune", "--older-than", "0s", "--keep", "1", "--yes"],
                         [("s1", "older-than"), ("s2", "older-than")]),
    "prune-archive": (["prune", "--keep-latest", "1", "--archive", "ARCHIVE", "--yes"],
                      [("s1", "keep-latest"), ("s2", "keep-latest")]),
    "rm": (["rm", "s1", "s2", "--yes"], [("s1", "rm"), ("s2", "rm")]),
    "retain": (["retain", "s2"], []),
}


@pytest.mark.parametrize("door", list(KEYLESS))
def test_a_cleanup_without_keys_leaves_the_store_whole_for_those_with_keys(
        store: str, door: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, removed = KEYLESS[door]
    archive = str(tmp_path / "archive")
    argv = [archive if a == "ARCHIVE" else a for a in argv]
    _ok(*argv, "--store", store)  # no keys
    gone = {sid for sid, _ in removed}
    left = sorted({"s1", "s2", "s3"} - gone)
    # Read without keys: the ledger is the known system session it is.
    assert _log(store) == removed
    _keys(monkeypatch)
    assert _ids(store) == left
    assert "secret of s3" in _ok("show", "s3", "--store", store)
    assert "1 hit(s)" in _ok("search", "secret of s3", "--store", store)
    assert _log(store) == removed
    _ok("retain", "s3", "--note", NOTE, "--store", store)
    _ok("prune", "--keep-latest", "0", "--yes", "--store", store)  # s3 is marked: kept
    assert _ids(store) == (["s2", "s3"] if door == "retain" else ["s3"])
    other = str(tmp_path / "copy")
    Path(other).mkdir()
    _ok("copy", store, other)
    assert NOTE in _ok("show", "s3", "--store", other)  # its note, opened in the copy
    with open_store(store, keys=KEYS) as opened:
        assert [(r.data.session_id, r.data.rule) for r in opened.removals()][:len(removed)] \
            == removed
        assert opened.retained() == (["s2", "s3"] if door == "retain" else ["s3"])
    if door == "prune-archive":
        assert _ids(archive) == ["s1", "s2"]  # sealed as they were, read with the keys


def test_a_note_without_keys_is_refused_and_nothing_is_written(store: str) -> None:
    before = _at_rest(store)
    code, _, err = run_cli("retain", "s1", "--note", NOTE, "--store", store)
    assert code == 1
    assert "note" in err
    assert "DSH_SESSION_KEYS" in err  # the hint: pass the keys
    assert "Traceback" not in err
    assert _at_rest(store) == before  # nothing marked, nothing leaked
    assert NOTE.encode() not in _at_rest(store)
    _ok("retain", "s1", "--store", store)  # a mark without a note needs no keys


def test_a_mark_made_with_keys_reads_without_them_and_its_note_stays_sealed(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _keys(monkeypatch)
    _ok("retain", "s1", "--note", NOTE, "--store", store)
    assert NOTE.encode() not in _at_rest(store)
    shown = _ok("show", "s1", "--store", store)
    assert f"note: {NOTE}" in shown
    monkeypatch.delenv("DSH_SESSION_KEYS")
    rows = json.loads(_ok("ls", "--store", store, "--json"))
    assert sorted((r["id"], r.get("retained", False)) for r in rows) == [
        ("s1", True), ("s2", False), ("s3", False)]
    out = _ok("prune", "--keep-latest", "0", "--yes", "--store", store)
    assert [line.split()[:3] for line in out.splitlines()[1:2]] == [
        ["keep", "s1", "retained"]]
    assert _log(store) == [("s2", "keep-latest"), ("s3", "keep-latest")]


def test_a_note_moved_to_another_mark_is_not_opened(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _keys(monkeypatch)
    _ok("retain", "s1", "--note", NOTE, "--store", store)
    _ok("retain", "s2", "--note", "another", "--store", store)
    records = Records(store)
    first, second = records.get(LEDGER, 0), records.get(LEDGER, 1)
    second["data"]["sealedNote"] = first["data"]["sealedNote"]  # s1's note, on s2's mark
    records.put(LEDGER, 1, second)
    shown = _ok("show", "s2", "--store", store)
    assert NOTE not in shown
    assert "cannot be opened" in shown


def _sealed_ledger(url: str) -> None:
    """The ledger as the release before this one wrote it on an encrypted store: its
    header marked sealed, each record sealed whole (here: a mark of s1 with a note)."""
    mark = RetentionMark(seq=0, time=1_700_000_000_000, data=RetentionMarkData(
        session_id="s1", retain=True, note=NOTE))
    jsonl = b'{"type":"retention/mark","seq":0,"time":1700000000000,"data":{"sessionId":' \
            b'"s1","retain":true,"note":"' + NOTE.encode() + b'"}}\n'
    sealed, lines = Sealer(KEYS).seal(LEDGER, [mark], jsonl)
    assert encode_events([mark]) != jsonl  # (the old line: no field of this release)
    inner = backend_for(url)
    try:
        inner.append_batch(SessionHeader(version=-1, id=LEDGER, created_at=1_700_000_000_000,
                                         cwd="/"), sealed, lines, False)
    finally:
        inner.close()


@pytest.mark.parametrize("how", ["a write with keys", "rekey"])
def test_a_ledger_an_earlier_release_sealed_reads_with_keys_and_is_unsealed_once(
        store: str, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _sealed_ledger(store)
    # Without keys: listed, but its marks cannot be told, so nothing is pruned or removed.
    assert _ids(store) == ["s1", "s2", "s3"]
    before = _at_rest(store)
    for argv in (["prune", "--keep-latest", "0", "--yes"], ["rm", "s2", "--yes"],
                 ["retain", "s2"]):
        code, _, err = run_cli(*argv, "--store", store)
        assert code == 1, argv
        assert f"dsh-session rekey {LEDGER}" in err
        assert "Traceback" not in err
    assert _at_rest(store) == before
    # With keys: read as it is, its note too.
    _keys(monkeypatch)
    with open_sealed(store) as opened:
        assert opened.retained() == ["s1"]
    assert f"note: {NOTE}" in _ok("show", "s1", "--store", store)
    if how == "rekey":
        _ok("rekey", LEDGER, "--store", store)
    else:
        _ok("retain", "s2", "--store", store)
    with open_store(store) as plain:  # its header no longer says sealed
        [header] = [h for h in plain.stored() if h.id == LEDGER]
        assert header.version == 0
    record = Records(store).get(LEDGER, 0)
    assert record["data"]["sessionId"] == "s1"  # in the clear
    assert record["data"]["sealedNote"]["kid"] == "k1"
    assert NOTE.encode() not in _at_rest(store)
    assert f"note: {NOTE}" in _ok("show", "s1", "--store", store)
    monkeypatch.delenv("DSH_SESSION_KEYS")
    _ok("prune", "--keep-latest", "0", "--yes", "--store", store)
    assert _ids(store) == (["s1", "s2"] if how != "rekey" else ["s1"])


def test_a_ledger_the_keys_cannot_open_stops_no_listing_and_no_display(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger an earlier release sealed under k1, read with a keyring of k2 alone:
    its marks cannot be told, so none is shown, but every session is still listed, and a
    session k2 opens is shown, with a warning that whether it is marked is not known."""
    _sealed_ledger(store)
    k2 = Keyring({"k2": KEY2})
    write_session(store, "s4", ["sealed under k2"], k2)
    monkeypatch.setenv("DSH_SESSION_KEYS", f"k2:{base64.b64encode(KEY2).decode()}")
    rows = json.loads(_ok("ls", "--store", store, "--json"))
    assert sorted((r["id"], r.get("retained", False)) for r in rows) == [
        ("s1", False), ("s2", False), ("s3", False), ("s4", False)]
    assert "RETAINED" not in _ok("ls", "--store", store)
    code, out, err = run_cli("show", "s4", "--store", store)
    assert code == 0, err
    assert "sealed under k2" in out.decode()
    assert "retained" not in out.decode()
    assert "the store's retention ledger does not read" in err
    assert "whether the session is marked never to be pruned is not known" in err
    assert "Traceback" not in err


def test_rekey_reseals_the_notes_under_the_new_key(store: str) -> None:
    with open_sealed(store) as opened:
        opened.retain("s1", note=NOTE)
    rotated = Keyring({"k2": KEY2, "k1": KEY1})
    with open_sealed(store, rotated) as opened:
        done = opened.rekey(LEDGER)
        assert (done.records, done.key_id, done.old_key_ids) == (1, "k2", ("k1",))
    record = Records(store).get(LEDGER, 0)
    assert (record["data"]["sessionId"], record["data"]["sealedNote"]["kid"]) == ("s1", "k2")
    with open_sealed(store, Keyring({"k2": KEY2})) as opened:  # the old key dropped
        [mark] = [e for e in opened.read(LEDGER) if e.type == "retention/mark"]
        assert note_of(opened.backend, mark.data) == NOTE
