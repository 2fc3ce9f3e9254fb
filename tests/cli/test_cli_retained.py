"""``ls`` and ``show`` say which sessions the store marks never to be pruned as the read
model says it (issue 38): neither reads the retention ledger itself, ``show`` opens the
store once for the session and its mark, and a ledger that does not read stops neither
(the marks are then unknown: ``ls`` shows none, ``show`` warns)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core._persistence import opening
from dsh_session_core.testing import run_cli

CLI = Path(__file__).resolve().parents[2] / (
    "packages/dsh-session-core/src/dsh_session_core/_cli")


def _fill(url: str) -> None:
    with open_store(url) as store:
        for sid in ("kept", "other"):
            session = store.create(sid, cwd="/work")
            with session.turn() as turn:
                turn.user(f"hello from {sid}")
            store.release(session)
        store.retain("kept", note="the incident")


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "example")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")
def test_show_reads_the_session_and_its_mark_from_one_opening_of_the_store(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store_url)
    opened: list[str] = []
    real = opening.backend_for

    def counted(url: str, *args: object, **kwargs: object) -> object:
        opened.append(url)
        return real(url, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(opening, "backend_for", counted)
    code, out, err = run_cli("show", "kept", "--store", store_url)
    assert (code, err) == (0, "")
    assert "retained: never pruned" in out.decode()
    assert "note: the incident" in out.decode()
    assert opened == [store_url]
    opened.clear()
    code, out, err = run_cli("show", "kept", "--store", store_url, "--json")
    doc = json.loads(out)
    assert (doc["retained"], doc["retainedNote"]) == (True, "the incident")
    assert opened == [store_url]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as written (relative ones with their dots)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("command", ["ls.py", "show.py"])
def test_ls_and_show_leave_the_ledger_to_the_read_model(command: str) -> None:
    assert [m for m in _imports(CLI / command) if "retention" in m] == []


@pytest.mark.store_kinds("jsonl")
def test_a_ledger_that_does_not_read_stops_neither_ls_nor_show(store_url: str) -> None:
    _fill(store_url)
    [ledger] = Path(store_url).rglob("dsh-session.retention.jsonl")
    with ledger.open("ab") as f:  # a damaged record, then a good one
        f.write(b'not json\n{"type":"retention/mark","seq":2,"time":1,"data":'
                b'{"sessionId":"other","retain":true}}\n')
    code, out, err = run_cli("ls", "--store", store_url, "--json")
    assert (code, err) == (0, "")
    assert sorted((r["id"], r.get("retained", False)) for r in json.loads(out)) == [
        ("kept", False), ("other", False)]  # unknown: none shown
    code, out, err = run_cli("ls", "--store", store_url)
    assert (code, err) == (0, "")
    assert "RETAINED" not in out.decode()
    code, out, err = run_cli("show", "kept", "--store", store_url)
    assert code == 0
    assert "hello from kept" in out.decode()
    assert "retained" not in out.decode()
    assert err.startswith("dsh-session: warning: the store's retention ledger does not "
                          "read (LogFormatError: ")
    assert "whether the session is marked never to be pruned is not known" in err
