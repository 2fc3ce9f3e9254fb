"""Issue 12: the agent loop of docs/getting-started.md runs as a newcomer would run it.

Its first block (the loop: appends, a tool call and its result, a flush) runs in a fresh
interpreter; its second (reopen and derive) in another one, as the page says: the
history derived there comes from the store on disk, not from the first process.

Issue 24: a newcomer runs an example twice. The README's quick start and the page's loop
run twice in a row in one folder, each run in a fresh ``python`` process, and the second
run goes on with the session the first stored.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def _loop_blocks() -> list[str]:
    section = PAGE.read_text(encoding="utf-8").split("## A first agent loop", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def _fresh(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_SESSION")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, check=False, env=env)


def test_the_loop_runs_and_its_session_reopens_in_a_new_process(tmp_path: Path) -> None:
    loop, reopen = _loop_blocks()
    first = _fresh(loop, tmp_path)
    assert first.returncode == 0, first.stderr
    logs = list((tmp_path / "sessions").rglob("first.jsonl"))
    assert len(logs) == 1
    lines = logs[0].read_bytes().splitlines()
    types = [msgspec.json.decode(line)["type"] for line in lines[1:]]
    assert types == ["turn/start", "user/message", "step/start", "assistant/message",
                     "tool/call", "tool/result", "step/end", "step/start",
                     "assistant/message", "step/end", "turn/end"]
    result = msgspec.json.decode(lines[6])["data"]
    assert result["callId"] == "call-1"
    assert result["content"] == [{"type": "text", "text": "a.txt b.txt\n"}]
    second = _fresh(reopen, tmp_path)
    assert second.returncode == 0, second.stderr
    assert logs[0].read_bytes().splitlines() == lines  # reading wrote nothing


def test_the_reopening_block_fails_without_the_first(tmp_path: Path) -> None:
    # The second block really reads the store: alone, it has nothing to open.
    _, reopen = _loop_blocks()
    alone = _fresh(reopen, tmp_path)
    assert alone.returncode != 0
    assert "not found" in alone.stderr


def _quick_start() -> str:
    readme = PAGE.parent.parent / "README.md"
    blocks: list[str] = re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"),
                                   re.S)
    (code,) = blocks
    return code


def _event_types(log: Path) -> list[str]:
    return [msgspec.json.decode(line)["type"] for line in log.read_bytes().splitlines()[1:]]


def test_the_readme_quick_start_runs_in_a_fresh_process(tmp_path: Path) -> None:
    proc = _fresh(_quick_start(), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "[Message(role='user', content=(TextBlock(text='What is 2 + 2?'),)), "
        "Message(role='assistant', content=(TextBlock(text='4'),))]\n")
    assert len(list((tmp_path / "sessions").rglob("hello.jsonl"))) == 1


def test_the_readme_quick_start_runs_twice_in_one_folder(tmp_path: Path) -> None:
    code = _quick_start()
    first = _fresh(code, tmp_path)
    assert first.returncode == 0, first.stderr
    second = _fresh(code, tmp_path)
    assert second.returncode == 0, second.stderr
    exchange = ("Message(role='user', content=(TextBlock(text='What is 2 + 2?'),)), "
                "Message(role='assistant', content=(TextBlock(text='4'),))")
    assert first.stdout == f"[{exchange}]\n"
    assert second.stdout == f"[{exchange}, {exchange}]\n"  # one turn more
    (log,) = (tmp_path / "sessions").rglob("hello.jsonl")
    turn = ["turn/start", "user/message", "step/start", "assistant/message", "step/end",
            "turn/end"]
    assert _event_types(log) == turn * 2


def test_the_loop_runs_twice_in_one_folder(tmp_path: Path) -> None:
    loop, reopen = _loop_blocks()
    for _ in range(2):
        ran = _fresh(loop, tmp_path)
        assert ran.returncode == 0, ran.stderr
        read = _fresh(reopen, tmp_path)
        assert read.returncode == 0, read.stderr
    (log,) = (tmp_path / "sessions").rglob("first.jsonl")
    # The second run asks the model with the first turn in its history: it answers.
    assert _event_types(log) == [
        "turn/start", "user/message", "step/start", "assistant/message", "tool/call",
        "tool/result", "step/end", "step/start", "assistant/message", "step/end",
        "turn/end",
        "turn/start", "user/message", "step/start", "assistant/message", "step/end",
        "turn/end"]


def test_the_readme_sqlite_url_lands_in_the_working_folder(tmp_path: Path) -> None:
    # Issue 24, point 1: the quick start's other store, "sqlite:///agent.db", is agent.db
    # in the working folder (SQLAlchemy's rule), not /agent.db at the file system's root.
    readme = PAGE.parent.parent / "README.md"
    (code,) = re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    match = re.search(r'# [^\n]*or "(sqlite:///[^"]+)"', code)
    assert match is not None, "the quick start names a SQLite URL as its other store"
    url = match[1]
    name = url.removeprefix("sqlite:///")
    at_root = Path("/") / name
    was_at_root = at_root.exists()
    try:
        proc = _fresh(code.replace('"sessions"', f'"{url}"', 1), tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name).is_file()
        assert not (tmp_path / "sessions").exists()  # the URL was the store used
        assert at_root.exists() == was_at_root
    finally:
        if not was_at_root:  # what the old reading of three slashes wrote
            for leftover in Path("/").glob(f"{name}*"):
                if leftover.is_file():
                    leftover.unlink()
                elif leftover.is_dir():
                    shutil.rmtree(leftover)
