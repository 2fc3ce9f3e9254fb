"""Issue 15, point 6: every bad input to a command gives one line naming the problem (and
a hint line where one helps), exit 1 (2 for usage errors), and never a traceback.

One table, one row per input: the command line, the exit status, and words the first
line must contain. The commands run in this process, through the real ``main``, against a
small JSONL store and a few files written by the fixture (a working directory of its
own, so that relative names resolve there).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core.testing import run_cli


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``store/`` (sessions ``alpha``, whose turn 1 ends at seq 4, and
    ``beta``), a log file ``alpha`` (named like the session), ``empty.jsonl``,
    ``garbage.jsonl``, ``log.jsonl`` (a good log) and a directory ``adir``; the tests run
    with it as their working directory."""
    root = tmp_path_factory.mktemp("bad-input")
    with open_store(str(root / "store")) as store:
        for sid in ("alpha", "beta"):
            session = store.create(sid, cwd="/w")
            with session.turn() as turn:
                turn.user("hi")
                with turn.step() as step:
                    step.assistant("hello")
            store.release(session)
        (root / "log.jsonl").write_bytes(
            Path(store.location("alpha")).read_bytes())
    (root / "alpha").write_bytes((root / "log.jsonl").read_bytes())
    (root / "empty.jsonl").write_bytes(b"")
    (root / "garbage.jsonl").write_bytes(b"not json at all\n")
    (root / "adir").mkdir()
    return root


@pytest.fixture(autouse=True)
def _inside(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(place)
    monkeypatch.setenv("DSH_SESSION_STORE", str(place / "store"))
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "example")


USAGE, FAILED = 2, 1
INSTALLED = ", ".join(sorted(ep.name for ep in entry_points(group="dsh_session.plugins")))
LONE = "x\udc80"  # an id with a lone surrogate: no UTF-8 form

#: (command line, exit status, words of the message's first line)
TABLE: list[tuple[list[str], int, str]] = [
    # The one session-id rule, wherever an id is given.
    (["show", ""], USAGE, "invalid session id '': it is empty"),
    (["stats", ""], USAGE, "invalid session id '': it is empty"),
    (["tail", ""], USAGE, "invalid session id '': it is empty"),
    (["derive", ""], USAGE, "invalid session id '': it is empty"),
    (["validate", ""], USAGE, "invalid session id '': it is empty"),
    (["repair", ""], USAGE, "invalid session id '': it is empty"),
    (["export", ""], USAGE, "invalid session id '': it is empty"),
    (["fork", "", "--at", "4"], USAGE, "invalid session id '': it is empty"),
    (["show", LONE], USAGE, "lone surrogate"),
    (["show", "--id", "alpha\udcff"], USAGE, "lone surrogate"),
    (["fork", "beta", "--at", "4", "--as", ""], USAGE, "invalid session id '': it is empty"),
    (["fork", "beta", "--at", "4", "--as", LONE], USAGE, "lone surrogate"),
    (["demo", "--session-id", ""], USAGE, "invalid --session-id '': it is empty"),
    # A session that is not there.
    (["show", "nosuch"], FAILED, 'no session "nosuch"'),
    (["stats", "nosuch"], FAILED, 'no session "nosuch"'),
    (["tail", "nosuch"], FAILED, 'no session "nosuch"'),
    (["tail", "-f", "nosuch"], FAILED, 'no session "nosuch"'),
    (["derive", "nosuch"], FAILED, 'no session "nosuch"'),
    (["validate", "nosuch"], FAILED, 'no session "nosuch"'),
    (["repair", "nosuch"], FAILED, 'no session "nosuch"'),
    (["repair", "--dry-run", "nosuch"], FAILED, 'no session "nosuch"'),
    (["export", "nosuch"], FAILED, 'no session "nosuch"'),
    (["export", "--json", "nosuch"], FAILED, 'no session "nosuch"'),
    (["fork", "nosuch", "--at", "4"], FAILED, 'no session "nosuch"'),
    (["show", "adir"], FAILED, "adir is a directory, not a log file"),
    # --file and --id.
    (["show", "--file", "nosuch.jsonl"], FAILED, "no log file nosuch.jsonl (not found)"),
    (["show", "--file", "adir"], FAILED, "no log file adir (a directory)"),
    (["derive", "--file", "nosuch.jsonl"], FAILED, "no log file nosuch.jsonl"),
    (["show", "--file", "--id", "alpha"], USAGE, "not allowed with argument"),
    (["show", "alpha"], USAGE, '"alpha" is both a log file here and a session in'),
    (["derive", "alpha"], USAGE, '"alpha" is both a log file here and a session in'),
    (["show", "--id", "log.jsonl"], FAILED, 'no session "log.jsonl"'),
    # Files that are not logs.
    (["show", "empty.jsonl"], FAILED, "empty or header-less session log"),
    (["stats", "empty.jsonl"], FAILED, "empty or header-less session log"),
    (["derive", "empty.jsonl"], FAILED, "empty.jsonl"),
    (["derive", "garbage.jsonl"], FAILED, "garbage.jsonl"),
    (["export", "garbage.jsonl"], FAILED, "garbage.jsonl"),
    (["repair", "garbage.jsonl"], FAILED, "garbage.jsonl"),
    # Arguments.
    (["tail", "-n", "-1", "beta"], USAGE, "-n takes a count of events, got -1"),
    (["fork", "beta", "--at", "999"], FAILED, "cannot fork"),
    (["fork", "beta", "--at", "4", "--as", "alpha"], FAILED, 'a session "alpha" is already'),
    (["derive", "beta", "log.jsonl"], USAGE, "derive takes one SOURCE"),
    (["derive", "--to", "nosuch", "beta"], USAGE, "invalid choice: 'nosuch'"),
    (["fork", "beta", "--turn", "0"], USAGE, "--turn counts turns from 1"),
    (["fork", "beta", "--at", "4", "--turn", "1"], USAGE, "not allowed with argument"),
    (["nosuchcommand"], USAGE, "nosuchcommand"),
    # Stores.
    (["ls", "--store", "/nonexistent/place"], FAILED, "no store at /nonexistent/place"),
    (["ls", "--store", "sessions.db"], USAGE, "use its URL: sqlite:///sessions.db"),
    (["ls", "--store", "ftp://host/x"], USAGE, "unknown store URL scheme 'ftp'"),
    (["show", "beta", "--store", "memory:"], USAGE, "lives and dies with its process"),
    (["show", "beta", "--store", "sqlite:////nonexistent/x.db"], FAILED,
     "no dsh-session store at /nonexistent/x.db"),
    (["demo", "--store", "memory:"], USAGE, "the demo cannot use an in-memory store"),
    # Search.
    (["search", ""], USAGE, "holds no word to search for"),
    (["search", "--", "--- ..."], USAGE, "holds no word to search for"),
    (["search", '"open'], USAGE, "has a quote that is not closed"),
    (["search", "x", "--type", "assistant/chunk"], USAGE,
     "never returns events of type assistant/chunk"),
    (["search", "x", "--role", "system"], USAGE, "invalid choice: 'system'"),
    (["search", "x", "--limit", "-1"], USAGE, "--limit takes a count (0 or more), got '-1'"),
    (["search", "x", "--since", "yesterday"], USAGE, "--since takes a date, a time or a"),
    (["search", "x", "--since", "1d", "--until", "2d"], USAGE, "is after --until 2d"),
    (["search", "x", "--session", ""], USAGE, "--session takes a session id, got ''"),
    (["search", "x", "--store", "/nonexistent/place"], FAILED,
     "no store at /nonexistent/place"),
    # The viewer (refused before it listens).
    (["view", "--store", "ftp://host/x", "--no-open"], USAGE, "unknown store URL scheme 'ftp'"),
    (["view", "--store", "/nonexistent/place", "--no-open"], FAILED,
     "no store at /nonexistent/place"),
    (["view", "--host", "0.0.0.0", "--no-open"], USAGE,
     "--host 0.0.0.0 would make the viewer reachable from the network"),
    (["view", "--port", "70000", "--no-open"], USAGE, "--port takes 0 (a free port) to 65535"),
    (["export", "--html", "nosuch"], FAILED, 'no session "nosuch"'),
]


@pytest.mark.parametrize(("argv", "status", "words"), TABLE,
                         ids=[" ".join(a).encode("ascii", "backslashreplace").decode()
                              for a, _, _ in TABLE])
def test_a_bad_input_is_one_line_naming_it(argv: list[str], status: int, words: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == status, (code, out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    # argparse prints its usage first; our own failures are the message and a hint.
    message = [line for line in lines if not line.startswith(("usage:", " "))]
    assert message, err
    first = message[0]
    assert words in first or (words in err and code == USAGE), err
    assert len(message) <= 2, err  # the problem, and at most one hint
    if len(message) == 2 and not message[1].startswith("dsh-session"):
        assert message[1].startswith("hint: "), err


def test_the_table_has_forty_rows_across_the_commands() -> None:
    assert len(TABLE) >= 40
    assert len({argv[0] for argv, _, _ in TABLE}) >= 10


def test_a_misspelt_plugin_name_is_warned_about() -> None:
    env = {**os.environ, "DSH_SESSION_DISABLE_PLUGINS": "example, compcat"}  # comma, space
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", "plugins"],
                          capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "dsh-session: warning: DSH_SESSION_DISABLE_PLUGINS names 'compcat', which no "
        f"installed plugin is (installed: {INSTALLED}): check the spelling "
        "(`dsh-session plugins` lists them)"]
    listed = [line.split()[0] for line in proc.stdout.splitlines()
              if line and not line.startswith(" ")]
    assert "example" not in listed  # blocked as asked
    assert "compact" in listed  # the misspelt one stays loaded: hence the warning


def test_names_are_split_on_commas_and_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_session_core._plugins.manager import _blocked_from_env

    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", " a,b  c,\td ,")
    assert _blocked_from_env() == ["a", "b", "c", "d"]


def test_an_unexpected_error_is_still_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_session_core._cli import ls

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(ls, "run_ls", broken)
    code, _, err = run_cli("ls")
    assert code == FAILED
    assert err.splitlines() == ["dsh-session: internal error: RuntimeError: a bug",
                                "hint: run again with --debug for the traceback, and "
                                "report it"]
    with pytest.raises(RuntimeError):
        run_cli("--debug", "ls")


def test_the_default_store_lists_nothing_until_written(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_SESSION_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = run_cli("ls")
    assert (code, err) == (0, ""), err
    assert out.decode().startswith("no sessions in ")
    assert not os.path.exists(tmp_path / "data" / "dsh-session")
