"""``dsh-session rm`` and ``prune``: what they remove and say, on JSONL, SQLite and
PostgreSQL; the question on a terminal; a session a second process holds is refused or
skipped and left intact; every bad input is one line naming the problem."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from dsh_session_core.testing import run_cli
from lifecycle_support import (
    Clock,
    held_by_another_process,
    opened,
    snapshot,
    write,
)

OLD = 1_700_000_000_000  # 2023: older than any --older-than below
DAY = 86_400_000


class _Terminal(io.StringIO):
    """stdin as a person at a terminal: it answers with ``text``."""

    def isatty(self) -> bool:
        return True


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _fill(store_url: str) -> dict[str, bytes]:
    """Sessions "a", "ab" (old, /p), "b" (old, /q), "new" (just now, /p)."""
    clock = Clock(OLD)
    with opened(store_url, clock) as store:
        write(store, clock, "a", cwd="/p", at=OLD)
        write(store, clock, "ab", cwd="/p", at=OLD + DAY, turns=2)
        write(store, clock, "b", cwd="/q", at=OLD + 2 * DAY)
        write(store, clock, "new", cwd="/p", at=int(time.time() * 1000))
        return snapshot(store)


def _left(store_url: str) -> dict[str, bytes]:
    with opened(store_url) as store:
        return snapshot(store)


# --- rm -------------------------------------------------------------------------------


def test_rm_removes_what_it_is_given_and_says_so(store_url: str) -> None:
    before = _fill(store_url)
    code, out, err = run_cli("rm", "ab", "a", "--store", store_url, "--yes")
    assert (code, err) == (0, "")
    assert out.decode().splitlines() == [
        f"removed ab: 6 event(s), {len(before['ab']):,} bytes",
        f"removed a: 3 event(s), {len(before['a']):,} bytes",
        f"removed 2 session(s), {len(before['a']) + len(before['ab']):,} bytes freed",
    ]
    assert _left(store_url) == {k: v for k, v in before.items() if k not in ("a", "ab")}


def test_rm_of_several_removes_the_ones_it_can_and_names_the_others(store_url: str) -> None:
    before = _fill(store_url)
    code, out, err = run_cli("rm", "a", "nope", "a", "--store", store_url, "--yes")
    assert code == 1
    assert out.decode().splitlines()[0].startswith("removed a: 3 event(s)")
    assert err.splitlines()[0] == f'dsh-session: error: no session "nope" in {_shown(store_url)}'
    assert err.splitlines()[1].startswith("hint: `dsh-session ls --store")
    assert _left(store_url) == {k: v for k, v in before.items() if k != "a"}


def test_rm_json(store_url: str) -> None:
    before = _fill(store_url)
    code, out, _ = run_cli("rm", "b", "--store", store_url, "--yes", "--json")
    assert code == 0
    doc = json.loads(out)
    [row] = doc["removed"]
    assert (row["id"], row["status"], row["events"], row["bytes"], row["cwd"]) == (
        "b", "deleted", 3, len(before["b"]), "/q")
    assert row["removed"]
    assert (doc["bytes"], doc["errors"]) == (len(before["b"]), [])


@pytest.mark.parametrize(("answer", "removed"), [
    ("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False), ("", False)])
def test_rm_asks_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, removed: bool
) -> None:
    store_url = str(tmp_path / "store")
    before = _fill(store_url)
    monkeypatch.setattr("sys.stdin", _Terminal(answer))
    code, out, err = run_cli("rm", "a", "--store", store_url)
    assert err.startswith(f"remove 1 session(s) from {store_url} (a: {len(before['a']):,} bytes)? "
                          "[y/N] ")
    if removed:
        assert code == 0
        assert "a" not in _left(store_url)
    else:
        assert code == 1
        assert err.rstrip("\n").endswith("dsh-session: not confirmed: nothing was removed")
        assert out == b""
        assert _left(store_url) == before


def test_rm_names_at_most_five_sessions_in_its_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_url = str(tmp_path / "store")
    clock = Clock(OLD)
    ids = [f"s{i}" for i in range(7)]
    with opened(store_url, clock) as store:
        for sid in ids:
            write(store, clock, sid)
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    code, _, err = run_cli("rm", *ids, "--store", store_url)
    assert code == 1
    assert err.startswith(f"remove 7 session(s) from {store_url} (s0, s1, s2, s3, s4 and 2 more: ")
    assert sorted(_left(store_url)) == ids


def test_rm_and_prune_refuse_what_a_second_process_holds(store_url: str) -> None:
    before = _fill(store_url)
    with held_by_another_process(store_url, "a"):
        code, out, err = run_cli("rm", "a", "--store", store_url, "--yes")
        assert (code, out) == (1, b"")
        assert err.startswith('dsh-session: session "a" is held by a writer (')
        assert err.splitlines()[0].endswith("): left as it is")
        assert err.splitlines()[1].startswith("hint: stop its writer")
        code, out, err = run_cli("prune", "--older-than", "30d", "--store", store_url, "--yes",
                                 "--cwd", "/p")
        assert (code, err) == (0, "")
        lines = out.decode().splitlines()
        assert lines[0].startswith("skipped a (a writer holds it; last activity ")
        assert lines[1].startswith("removed ab  (6 event(s), ")
        assert lines[2] == (f"removed 1 session(s), {len(before['ab']):,} bytes freed; "
                            "1 skipped (a writer holds them)")
        assert _left(store_url) == {k: v for k, v in before.items() if k != "ab"}  # "a" intact
    assert run_cli("rm", "a", "--store", store_url, "--yes")[0] == 0  # let go: it goes


# --- prune ----------------------------------------------------------------------------


def test_prune_dry_run_keep_and_cwd(store_url: str) -> None:
    before = _fill(store_url)
    code, out, err = run_cli("prune", "--older-than", "30d", "--dry-run", "--store", store_url)
    assert (code, err) == (0, "")  # a dry run needs no --yes, nor a terminal
    lines = out.decode().splitlines()
    assert [line.split("  ")[0] for line in lines[:-1]] == [
        "would remove a", "would remove ab", "would remove b"]
    total = len(before["a"]) + len(before["ab"]) + len(before["b"])
    assert lines[-1] == (f"would remove 3 session(s), {total:,} bytes "
                         "(dry run: nothing was removed)")
    assert _left(store_url) == before
    code, out, _ = run_cli("prune", "--older-than", "2w", "--keep", "1", "--cwd", "/p",
                           "--store", store_url, "--yes")
    assert code == 0
    assert [line.split("  ")[0] for line in out.decode().splitlines()] == [
        "removed a", f"removed 1 session(s), {len(before['a']):,} bytes freed"]
    assert sorted(_left(store_url)) == ["ab", "b", "new"]
    code, out, _ = run_cli("prune", "--older-than", "1d", "--store", store_url, "--yes", "--json")
    doc = json.loads(out)
    assert [(s["id"], s["status"]) for s in doc["sessions"]] == [
        ("ab", "deleted"), ("b", "deleted")]
    assert (doc["keep"], doc["dryRun"], doc["cwd"]) == (0, False, None)
    assert doc["bytes"] == len(before["ab"]) + len(before["b"])
    assert sorted(_left(store_url)) == ["new"]


def test_prune_asks_on_a_terminal_after_showing_what_would_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_url = str(tmp_path / "store")
    before = _fill(store_url)
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    code, out, err = run_cli("prune", "--older-than", "30d", "--cwd", "/q", "--store", store_url)
    assert (code, out) == (1, b"")
    assert err.splitlines()[0].startswith("would remove b  (3 event(s), ")
    assert err.splitlines()[1].startswith(f"remove 1 session(s) from {store_url} (")
    assert _left(store_url) == before
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    code, out, _ = run_cli("prune", "--older-than", "30d", "--cwd", "/q", "--store", store_url)
    assert code == 0
    assert out.decode().splitlines()[0].startswith("removed b  (3 event(s), ")
    assert "b" not in _left(store_url)


def test_prune_of_a_relative_cwd_means_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_url = str(tmp_path / "store")
    clock = Clock(OLD)
    (tmp_path / "proj").mkdir()
    with opened(store_url, clock) as store:
        write(store, clock, "here", cwd=str(tmp_path / "proj"))
        write(store, clock, "there", cwd="/elsewhere")
    monkeypatch.chdir(tmp_path / "proj")
    code, out, _ = run_cli("prune", "--older-than", "1d", "--cwd", ".", "--store", store_url,
                           "--yes")
    assert code == 0
    assert out.decode().startswith("removed here  ")
    assert sorted(_left(store_url)) == ["there"]


def test_prune_with_nothing_to_remove(tmp_path: Path) -> None:
    store_url = str(tmp_path / "store")
    _fill(store_url)
    code, out, err = run_cli("prune", "--older-than", "5000w", "--store", store_url, "--yes")
    assert (code, out.decode(), err) == (0, "removed 0 session(s), 0 bytes freed\n", "")


# --- help and bad input ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["rm", "prune"])
def test_every_help_has_an_example(command: str) -> None:
    code, out, _ = run_cli(command, "--help")
    assert code == 0
    text = out.decode()
    assert "\nexample:\n  dsh-session " + command + " " in text
    code, out, _ = run_cli("--help")
    assert f"\n    {command} " in out.decode()


def _shown(store_url: str) -> str:
    from dsh_session_core._persistence.urls import printable_url

    return printable_url(store_url)


#: (argv, what stdin is, exit status, what the first error line must contain). ``S`` is
#: a JSONL store holding session "a".
BAD_INPUT: list[tuple[list[str], str, int, str]] = [
    (["rm"], "pipe", 2, "the following arguments are required: ID"),
    (["rm", "--store", "S", "--yes"], "pipe", 2, "the following arguments are required: ID"),
    (["rm", "nope", "--store", "S", "--yes"], "pipe", 1, 'no session "nope" in S'),
    (["rm", "", "--store", "S", "--yes"], "pipe", 1, 'no session "" in S'),
    (["rm", "a", "--store", "S"], "pipe", 2,
     "refusing to remove sessions without asking: stdin is not a terminal"),
    (["rm", "a", "--store", "memory:", "--yes"], "pipe", 2,
     "a memory: store lives and dies with its process"),
    (["rm", "a", "--store", "bogus://x", "--yes"], "pipe", 2, "unknown store URL scheme"),
    (["rm", "a", "--store", "sqlite:////nowhere/x.db", "--yes"], "pipe", 1,
     "no dsh-session store at /nowhere/x.db"),
    (["rm", "a", "--bogus", "--store", "S", "--yes"], "pipe", 2,
     "unrecognized arguments: --bogus"),
    (["prune", "--store", "S", "--yes"], "pipe", 2,
     "prune needs a rule: --older-than DURATION, --keep-latest N"),
    (["prune", "--older-than", "30", "--store", "S", "--yes"], "pipe", 2,
     "--older-than takes a duration such as 30d, 12h, 90m or 2w, got '30'"),
    (["prune", "--older-than", "30x", "--store", "S", "--yes"], "pipe", 2,
     "--older-than takes a duration such as 30d, 12h, 90m or 2w, got '30x'"),
    (["prune", "--older-than", "d", "--store", "S", "--yes"], "pipe", 2, "got 'd'"),
    (["prune", "--older-than", "1.5d", "--store", "S", "--yes"], "pipe", 2, "got '1.5d'"),
    (["prune", "--older-than", "", "--store", "S", "--yes"], "pipe", 2, "got ''"),
    (["prune", "--older-than", "30 d", "--store", "S", "--yes"], "pipe", 2, "got '30 d'"),
    (["prune", "--older-than=-1d", "--store", "S", "--yes"], "pipe", 2, "got '-1d'"),
    (["prune", "--older-than", "99999999999w", "--store", "S", "--yes"], "pipe", 2,
     "--older-than 99999999999w is longer than any date can be"),
    (["prune", "--older-than", "1d", "--keep", "-1", "--store", "S", "--yes"], "pipe", 2,
     "--keep takes a count of sessions (0 or more), got -1"),
    (["prune", "--older-than", "1d", "--keep", "two", "--store", "S", "--yes"], "pipe", 2,
     "argument --keep: invalid int value: 'two'"),
    (["prune", "--older-than", "1d", "--store", "S"], "pipe", 2,
     "refusing to prune sessions without asking: stdin is not a terminal"),
    (["prune", "--older-than", "1d", "--store", "memory:", "--yes"], "pipe", 2,
     "a memory: store lives and dies with its process"),
    (["prune", "--older-than", "1d", "--store", "sqlite:////nowhere/x.db", "--dry-run"],
     "pipe", 1, "no dsh-session store at /nowhere/x.db"),
]


@pytest.mark.parametrize(("argv", "stdin", "status", "message"), BAD_INPUT,
                         ids=[" ".join(row[0]) or "(none)" for row in BAD_INPUT])
def test_bad_input_is_one_line_naming_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    argv: list[str], stdin: str, status: int, message: str,
) -> None:
    store = tmp_path / "S"
    clock = Clock(OLD)
    with opened(str(store), clock) as s:
        write(s, clock, "a")
    before = _left(str(store))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # a pipe: no terminal
    code, out, err = run_cli(*argv)
    assert code == status, err
    assert out == b""
    lines = err.splitlines()
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith(("dsh-session", "usage:"))]
    first = next(line for line in lines if line.startswith("dsh-session"))
    assert message in first, err
    assert len(lines) <= 2 or lines[0].startswith("usage:"), err
    assert len(errors) <= 2
    assert _left(str(store)) == before  # nothing was removed
