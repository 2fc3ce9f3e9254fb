"""An encrypted store tried as a team uses it (issue 37): some members hold the keys, a
cleanup job does not. One store, on JSONL, SQLite and PostgreSQL, is touched by each of
the things that broke each other before: a prune without keys, a never-prune mark made
with keys (with a note), ``rm`` of a marked session without keys, and one damaged
record. Then every command of the CLI and every store API runs against it, with keys
and without: each answers or refuses in one line, nothing that was readable becomes
unreadable, nothing kept is lost, and no traceback reaches the user."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from crypt_support import KEY1, KEYS, Records, tamper, write_session

from dsh_session_core import RetentionPolicy, open_store
from dsh_session_core.testing import run_cli

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

KEYS_TEXT = f"k1:{base64.b64encode(KEY1).decode()}"
NOTE = "kept-for-the-audit-41f9"
KEPT = ("s2", "s4", "s5")  # s1 pruned, s3 removed; s4 holds the damaged record


def _texts(sid: str) -> list[str]:
    return [f"first secret of {sid}", f"second secret of {sid}"]


def _cli(keys: bool, *argv: str) -> tuple[int, str, str]:
    """Run the command line with the store's keys in the environment, or none."""
    saved = os.environ.pop("DSH_SESSION_KEYS", None)
    if keys:
        os.environ["DSH_SESSION_KEYS"] = KEYS_TEXT
    try:
        code, out, err = run_cli(*argv)
    finally:
        os.environ.pop("DSH_SESSION_KEYS", None)
        if saved is not None:
            os.environ["DSH_SESSION_KEYS"] = saved
    assert "Traceback" not in err, (argv, err)
    assert "internal error" not in err, (argv, err)
    return code, out.decode(), err


def _ok(keys: bool, *argv: str) -> str:
    code, out, err = _cli(keys, *argv)
    assert code == 0, (argv, err)
    return out


@pytest.fixture
def team_store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store after the four touches, in the order a team's week brings them."""
    monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    if "://" not in store_url:
        Path(store_url).mkdir(exist_ok=True)
    for sid in ("s1", "s2", "s3", "s4", "s5"):  # s1 the oldest
        write_session(store_url, sid, _texts(sid))
    _ok(False, "prune", "--keep-latest", "4", "--yes", "--store", store_url)  # s1
    _ok(True, "retain", "s2", "--note", NOTE, "--store", store_url)
    _ok(True, "retain", "s3", "--store", store_url)
    removed = _ok(False, "rm", "s3", "--yes", "--store", store_url)
    assert "mark" in removed  # rm names the mark that goes with the session
    tamper(store_url, "s4", 1)
    return store_url


@pytest.mark.parametrize("keys", [True, False], ids=["keys", "no-keys"])
def test_the_listing_the_ledger_and_the_marks_read_the_same_with_keys_or_without(
    team_store: str, keys: bool
) -> None:
    url = team_store
    rows = json.loads(_ok(keys, "ls", "--json", "--store", url))
    assert sorted(r["id"] for r in rows) == list(KEPT)
    assert [r["id"] for r in rows if r.get("retained")] == ["s2"]  # s3's mark went with it
    log = json.loads(_ok(keys, "prune", "--log", "--json", "--store", url))
    assert [(r["sessionId"], r["rule"]) for r in log["removals"]] == [
        ("s1", "keep-latest"), ("s3", "rm")]
    plan = _ok(keys, "prune", "--dry-run", "--keep-latest", "1", "--store", url)
    assert "s2" in plan  # kept by its mark, said so
    assert _ok(keys, "retain", "s5", "--store", url)
    assert _ok(keys, "retain", "--release", "s5", "--store", url)
    code, _, err = _cli(keys, "show", "dsh-session.retention", "--store", url)
    assert code == 0, err  # the ledger is a known system session, never "tampered"
    assert NOTE.encode() not in Records(url).stored_bytes()  # the note stays sealed


def test_with_keys_every_intact_session_reads_whole_and_the_damaged_one_is_named(
    team_store: str, tmp_path: Path
) -> None:
    url = team_store
    for sid in ("s2", "s5"):
        for argv in (["show", sid], ["stats", sid], ["tail", sid], ["derive", sid],
                     ["validate", sid], ["export", sid, "--html"]):
            _ok(True, *argv, "--store", url)
        exported = _ok(True, "export", sid, "--store", url)
        for text in _texts(sid):
            assert text in exported  # nothing kept is lost
    assert NOTE in _ok(True, "show", "s2", "--store", url)
    for argv in (["show", "s4"], ["export", "s4"], ["validate", "s4"], ["stats", "s4"]):
        code, out, err = _cli(True, *argv, "--store", url)
        assert code == 1, (argv, err)
        assert '"s4"' in err, err  # names the session and the record, in one message
        assert "seq 1" in err, err
        assert err.count("\n") <= 2, err
    code, out, err = _cli(True, "search", "secret", "--store", url)
    assert code == 3, err  # some sessions could not be read
    for sid in ("s2", "s5"):
        assert f"first **secret** of {sid}" in out  # the matched word marked
    assert '"s4"' in err
    code, out, err = _cli(True, "search", "secret", "--store", url, "--json")
    assert code == 3
    assert {h["session"] for h in json.loads(out)} == {"s2", "s5"}
    (tmp_path / "copies").mkdir()
    copy = str(tmp_path / "copies" / "with-keys")
    code, _, err = _cli(True, "copy", url, copy)
    assert code == 1, err
    assert '"s4"' in err, err  # the damaged one is named, the rest copied
    assert sorted(r["id"] for r in json.loads(_ok(True, "ls", "--json", "--store", copy))
                  ) == ["s2", "s5"]
    assert "s5: 2 record(s) sealed under k1" in _ok(True, "rekey", "s5", "--store", url)
    assert "first secret of s5" in _ok(True, "export", "s5", "--store", url)


def test_without_keys_every_reading_command_refuses_in_one_line_and_loses_nothing(
    team_store: str, tmp_path: Path
) -> None:
    url = team_store
    for sid in KEPT:
        for argv in (["show", sid], ["stats", sid], ["tail", sid], ["derive", sid],
                     ["validate", sid], ["export", sid], ["export", sid, "--html"],
                     ["fork", sid]):
            code, out, err = _cli(False, *argv, "--store", url)
            assert code == 1, (argv, err)
            assert "encrypted at rest" in err, err
            assert "secret" not in out
    code, out, err = _cli(False, "search", "secret", "--store", url)
    assert code == 3
    assert "secret of" not in out
    assert all(f'"{sid}"' in err for sid in KEPT), err
    code, _, err = _cli(False, "retain", "s5", "--note", "why", "--store", url)
    assert code != 0, err  # a note is content: keys needed
    assert "key" in err.lower(), err
    code, _, err = _cli(False, "rekey", "s5", "--store", url)
    assert code == 2, err
    assert "keys" in err, err
    (tmp_path / "copies").mkdir()
    copy = str(tmp_path / "copies" / "without-keys")
    _ok(False, "copy", url, copy)  # sealed records copied as they are
    for sid in ("s2", "s5"):  # and they read with keys from the copy
        exported = _ok(True, "export", sid, "--store", copy)
        assert all(text in exported for text in _texts(sid))


@pytest.mark.parametrize("keys", [True, False], ids=["keys", "no-keys"])
def test_every_store_api_answers_with_keys_or_without(team_store: str, keys: bool) -> None:
    url = team_store
    with open_store(url, keys=KEYS if keys else None) as store:
        assert sorted(h.id for h in store.stored() if h.id in KEPT) == list(KEPT)
        assert store.retained() == ["s2"]
        assert [(r.data.session_id, r.data.rule) for r in store.removals()] == [
            ("s1", "keep-latest"), ("s3", "rm")]
        found = store.search("secret")
        unreadable = {u.session_id for u in found.unreadable}
        if keys:
            assert {h.session_id for h in found} == {"s2", "s5"}
            assert unreadable == {"s4"}
            assert [e.data.content[0].text for e in store.read_session("s5").events] == \
                _texts("s5")
        else:
            assert list(found) == []
            assert unreadable == set(KEPT)
        report = store.prune(RetentionPolicy(keep_latest=1), dry_run=True)
        assert "s2" not in {d.session_id for d in report.removed}  # marked
    with open_store(url, keys=KEYS) as store:  # and nothing above wrote anything wrong
        assert [e.data.content[0].text for e in store.read_session("s2").events] == \
            _texts("s2")
