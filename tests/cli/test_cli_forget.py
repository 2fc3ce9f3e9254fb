"""``dsh-session forget``: its refusals, in one line with a hint and no traceback, and
what it prints (the marker searches are tests/persistence/test_forget.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core.testing import run_cli


def _store(tmp_path: Path, *ids: str) -> str:
    url = str(tmp_path / "s")
    with open_store(url) as store:
        for sid in ids:
            s = store.create(sid)
            with s.turn() as turn:
                turn.user(f"hello from {sid}")
            store.release(s)
    return url


@pytest.mark.parametrize(("argv", "message"), [
    ((), "forget needs session ids, or --label NAME=VALUE"),
    (("a", "--label", "user=ada"), "forget takes session ids, or --label NAME=VALUE (not both)"),
    (("--label", "ada"), "--label takes NAME=VALUE (app=weather, user=ada), got 'ada'"),
])
def test_usage_errors_exit_2_in_one_line(tmp_path: Path, argv: tuple[str, ...],
                                         message: str) -> None:
    url = _store(tmp_path, "a")
    code, out, err = run_cli("forget", *argv, "--store", url, "--yes")
    assert (code, out) == (2, b"")
    assert err.splitlines()[0] == f"dsh-session: {message}"
    assert "Traceback" not in err


def test_without_a_terminal_it_asks_for_yes(tmp_path: Path) -> None:
    url = _store(tmp_path, "a")
    code, _, err = run_cli("forget", "a", "--store", url)
    assert code == 2
    assert err.splitlines() == [
        "dsh-session: refusing to forget sessions without asking: stdin is not a terminal",
        "hint: pass --yes to forget them without being asked"]
    with open_store(url) as store:
        assert store.read("a")  # untouched


def test_a_held_session_is_refused_and_the_others_forgotten(tmp_path: Path) -> None:
    url = _store(tmp_path, "a", "b")
    with open_store(url) as store:
        held = store.open("a")
        code, out, err = run_cli("forget", "a", "b", "--store", url, "--yes", "--json")
        store.release(held)
    report = json.loads(out)
    assert code == 1
    assert [f["id"] for f in report["forgotten"]] == ["b"]
    assert report["forgotten"][0]["digest"].startswith("sha256:")
    assert report["errors"][0]["id"] == "a"
    assert "held by a writer" in report["errors"][0]["error"]
    assert err == ""


def test_an_archive_it_cannot_open_is_named_and_exits_1(tmp_path: Path) -> None:
    url = _store(tmp_path, "a")
    missing = f"sqlite:///{tmp_path}/nowhere/archive.db"
    code, out, err = run_cli("forget", "a", "--archive", missing, "--store", url, "--yes")
    assert code == 1
    assert out.decode().startswith("forgot a: 3 event(s)")
    assert f"the archive {missing} could not be opened" in err
    assert "Traceback" not in err


def test_a_session_removed_by_rm_is_forgotten_by_its_id(tmp_path: Path) -> None:
    url = _store(tmp_path, "a", "b")
    assert run_cli("rm", "a", "--store", url, "--yes")[0] == 0
    code, out, err = run_cli("forget", "a", "--store", url, "--yes")
    assert (code, err) == (0, "")
    assert out.decode().splitlines() == [
        "forgot a: what an earlier delete or forget left",
        f"forgot 1 session(s) in {url}; the ledger records each by a digest"]
    # Forgotten, the ledger no longer names it: a second forget finds nothing.
    code, _, err = run_cli("forget", "a", "--store", url, "--yes")
    assert code == 1
    assert err.splitlines()[0] == f'dsh-session: no session "a" in {url}'
