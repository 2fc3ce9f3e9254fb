"""Issue 15, point 1: one SOURCE rule. Every command that reads a session gives the same
output for a session read by its id (``--id``, in a JSONL, SQLite or PostgreSQL store) as
for the same log read as a file (``--file``, the log ``export`` writes), apart from the
one phrase that names where it was read from.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from dsh_session_core import ToolCallBlock, open_store
from dsh_session_core.testing import run_cli

SID = "chat-1"

#: The read commands, each with its arguments after SOURCE.
COMMANDS: list[list[str]] = [
    ["show"], ["show", "--json"], ["stats"], ["stats", "--json"], ["derive"],
    ["derive", "--to", "anthropic"], ["derive", "--to", "openai-chat"],
    ["derive", "--jsonl"], ["validate", "--strict"], ["validate", "--json"], ["export"],
    ["export", "--json"], ["tail", "-n", "3"], ["tail", "-n", "3", "--json"],
    ["repair", "--dry-run"],
]


def _fill(url: str) -> None:
    with open_store(url) as store:
        session = store.create(SID, cwd="/work")
        for question in ("list the files", "and now?"):
            with session.turn() as turn:
                turn.user(question)
                with turn.step() as step:
                    call = ToolCallBlock(id=f"c-{question[:3]}", name="bash",
                                         arguments='{"command":"ls"}')
                    step.assistant(["Looking.", call])
                    step.tool_result(step.tool_call(call), "a.txt\n")
                with turn.step() as step:
                    step.assistant("One file.")
        store.release(session)


pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql")


@pytest.fixture
def store_url(store_url: str) -> str:
    """The testing kit's fresh store of each kind, holding ``SID``."""
    _fill(store_url)
    return store_url


@pytest.fixture(autouse=True)
def _plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "example")
    monkeypatch.setenv("NO_COLOR", "1")


def test_every_command_reads_an_id_as_it_reads_its_file(store_url: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    code, log, err = run_cli("export", SID, "--store", store_url)
    assert code == 0, err
    path = tmp_path / "chat-1.jsonl"
    path.write_bytes(log)
    stored_label = f'session "{SID}" in {store_url}'
    for args in COMMANDS:
        by_id = run_cli(args[0], "--id", SID, "--store", store_url, *args[1:])
        by_file = run_cli(args[0], "--file", str(path), *args[1:])
        assert by_id[0] == by_file[0] == 0, (args, by_id, by_file)
        # The one difference: where the session was read from.
        same = by_id[1].replace(stored_label.encode(), str(path).encode()).replace(
            msgspec.json.encode(stored_label), msgspec.json.encode(str(path))).replace(
            f'"session":"{SID}"'.encode(), f'"file":"{path}"'.encode())
        assert same == by_file[1], args
        assert by_id[2] == by_file[2] == "", (args, by_id[2], by_file[2])
    # Without --id or --file, each reads as its name says (no file is named chat-1).
    assert run_cli("derive", SID, "--store", store_url)[1] == run_cli(
        "derive", str(path))[1]


def test_several_sources_at_once(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "copy.jsonl"
    path.write_bytes(run_cli("export", SID, "--store", store_url)[1])
    code, out, err = run_cli("validate", SID, str(path), "--store", store_url)
    assert (code, err) == (0, ""), err
    assert out.decode() == "2 of 2 logs valid\n"
    code, out, err = run_cli("derive", "--jsonl", SID, str(path), "--store", store_url)
    assert code == 0, err
    first, second = out.decode().splitlines()
    assert first.replace(f'"session":"{SID}"', f'"file":"{path}"') == second


def test_a_file_named_like_a_session_is_not_guessed(store_url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / SID).write_bytes(run_cli("export", SID, "--store", store_url)[1])
    code, out, err = run_cli("show", SID, "--store", store_url)
    assert (code, out) == (2, b"")
    assert err.splitlines() == [
        f'dsh-session: "{SID}" is both a log file here and a session in {store_url}',
        f"hint: say which: --file {SID} reads the file, --id {SID} the stored session"]
    assert run_cli("show", "--id", SID, "--store", store_url)[0] == 0
    assert run_cli("show", "--file", SID, "--store", store_url)[0] == 0


def test_repair_of_a_stored_session_closes_its_interrupted_turn(store_url: str) -> None:
    with open_store(store_url) as store:
        session = store.open(SID)
        turn = session.turn()
        turn.__enter__()  # a turn left open: the writer "died" here
        turn.user("are you there?")
        store.flush(session)
        store.backend.close()  # the writer lock goes with the backend, as at a crash
    label = f'session "{SID}" in {store_url}'
    code, out, err = run_cli("repair", "--dry-run", SID, "--store", store_url)
    assert (code, err) == (0, ""), err
    assert out.decode().startswith(f"{label}: would close the interrupted turn with turn/end")
    code, out, err = run_cli("repair", SID, "--store", store_url)
    assert (code, err) == (0, ""), err
    assert out.decode().endswith(f"{label}: repaired\n")
    code, out, _ = run_cli("repair", SID, "--store", store_url)
    assert out.decode().startswith(f"{label}: nothing to repair")
