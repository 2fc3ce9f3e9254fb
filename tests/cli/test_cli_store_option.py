"""Issue 37, point 7, on the command line: ``--store`` names a store, or is refused up
front. A folder that holds something else and no store (a project, the user's own
``.jsonl`` files) is no store: ``ls`` and the other readers say so and write nothing
there (no header cache, no log taken for a corrupt session). ``--store ""`` names no
store: it is refused, not taken for the default store. A plain path naming a SQLite
database is refused with its URL, as the library refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core._persistence.backends.jsonl.buckets import mark_compact
from dsh_session_core.testing import run_cli


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _project(root: Path) -> Path:
    """A folder of the user's own: logs of their own, a subfolder, no store."""
    root.mkdir()
    (root / "notes.jsonl").write_text('{"mine": 1}\n')
    (root / "runs").mkdir()
    (root / "runs" / "run-1.jsonl").write_text('{"also": "mine"}\n')
    return root


@pytest.mark.parametrize("argv", [["ls"], ["ls", "-q"], ["ls", "--json"],
                                  ["show", "run-1"], ["search", "mine"],
                                  ["rm", "run-1", "--yes"],
                                  ["prune", "--older-than", "1d", "--dry-run"]])
def test_a_folder_holding_no_store_is_refused_and_left_as_it_was(
    tmp_path: Path, argv: list[str]
) -> None:
    project = _project(tmp_path / "project")
    before = _tree(project)
    code, out, err = run_cli(*argv, "--store", str(project))
    assert code == 1, err
    assert out == b""
    first, hint = err.splitlines()
    assert first == (f"dsh-session: no dsh-session store at {project}: the folder holds "
                     f"other things (notes.jsonl, runs), and none of a store's")
    assert hint.startswith("hint: name the store's own folder")
    assert "corrupt" not in err
    assert _tree(project) == before  # no header cache, nothing swept


def test_a_folder_of_other_things_is_no_store_but_an_empty_one_is(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    code, _, err = run_cli("ls", "--store", str(project))
    assert code == 1
    assert "no dsh-session store at" in err
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli("ls", "--store", "empty")
    assert (code, out, err) == (0, b"no sessions in empty\n", "")
    assert _tree(tmp_path / "empty") == {}
    with open_store("store") as store:
        s = store.create("s", cwd="/w")
        with s.turn() as turn:
            turn.user("hello")
    (tmp_path / "store" / "README").write_text("a note beside the buckets\n")
    code, out, err = run_cli("ls", "--store", "store", "-q")
    assert (code, out, err) == (0, b"s\n", "")
    # A compact store whose first write was cut short holds only its mark.
    mark_compact(str(tmp_path / "compact"))
    code, out, err = run_cli("ls", "--store", "jsonl+zstd:///compact")
    assert (code, out, err) == (0, b"no sessions in jsonl+zstd:///compact\n", "")


@pytest.mark.parametrize("argv", [["ls"], ["show", "x"], ["search", "x"],
                                  ["rm", "x", "--yes"],
                                  ["prune", "--older-than", "1d", "--dry-run"],
                                  ["retain", "x"], ["tail", "x"], ["rekey", "--all"]])
def test_an_empty_store_option_is_refused_not_the_default_store(
    tmp_path: Path, argv: list[str]
) -> None:
    with open_store() as default:  # the default store holds a session
        s = default.create("x", cwd="/w")
        with s.turn() as turn:
            turn.user("hello")
    before = _tree(tmp_path / "data")
    code, out, err = run_cli(*argv, "--store", "")
    assert code == 2, err
    assert out == b""
    assert err.startswith("dsh-session: --store '' names no store\nhint: give a folder "
                          "path or a store URL, or leave --store out for the default store")
    assert _tree(tmp_path / "data") == before


def test_a_database_named_by_its_path_is_refused_with_its_url(tmp_path: Path) -> None:
    code, _, err = run_cli("ls", "--store", "agent.db")
    assert code == 2
    assert "use its URL: sqlite:///agent.db" in err
    code, _, err = run_cli("ls", "--store", "sqlite+aiosqlite:///agent.db")
    assert code == 2
    assert err.rstrip().endswith("drop it: sqlite:///agent.db")
    assert not (tmp_path / "agent.db").exists()
