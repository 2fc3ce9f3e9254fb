"""Two messages about bad logs say what is wrong (issue 24, point 9), through the real
command in a subprocess, and in every reader that prints them:

- a seq of another JSON type than the number expected (the string ``"5"`` where 5 is
  expected read ``has seq 5 (expected 5)``) is named with its JSON text and its type;
- a file that is no session log at all (``/etc/passwd``: no JSON on line 1), given as a
  SOURCE, is said to be one, without the hint to restore it from a copy, which stays for
  a log that is damaged (a header cut short, corruption before the last turn/end).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import open_store
from dsh_session_core._cli.support import registry
from dsh_session_core._logformat.logfile import scan_log
from dsh_session_core._model.session import Session
from dsh_session_core.errors import LogFormatError, SeedError

RESTORE = "restore the file"


def dsh(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_SESSION_DISABLE_PLUGINS": "example"}
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False, env=env)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A store holding ``good`` (two turns: the first turn/end is seq 5, line 7) and
    files: ``good.jsonl`` (its log), ``passwd`` (a file that is no log), and logs with
    line 7's seq replaced, ``seq-<json>.jsonl``."""
    root = tmp_path_factory.mktemp("messages")
    with open_store(str(root / "store")) as store:
        session = store.create("good", cwd="/w")
        for _ in range(2):
            with session.turn() as turn:
                turn.user("hi")
                with turn.step() as step:
                    step.assistant("hello")
        store.release(session)
        log = Path(store.location("good"))
    files = {"store": root / "store", "log": log, "good": root / "good.jsonl",
             "passwd": root / "passwd"}
    files["good"].write_bytes(log.read_bytes())
    files["passwd"].write_text("root:x:0:0:root:/root:/bin/bash\n"
                               "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    return files


def with_seq(good: Path, line: int, seq: Any, where: Path) -> Path:
    """``good`` with the seq of its line ``line`` (1-based) replaced by ``seq``."""
    lines = good.read_bytes().splitlines(keepends=True)
    event = json.loads(lines[line - 1])
    assert event["type"] == "turn/end"  # line 7: turn 1's end, seq 5
    event["seq"] = seq
    lines[line - 1] = json.dumps(event, separators=(",", ":")).encode() + b"\n"
    where.write_bytes(b"".join(lines))
    return where


# --- a seq of the wrong JSON type ------------------------------------------------------------


def test_a_string_seq_is_called_a_string_by_every_command(logs: dict[str, Path],
                                                          tmp_path: Path) -> None:
    bad = with_seq(logs["good"], 7, "5", tmp_path / "string-seq.jsonl")
    # show (the lenient reading: a warning, and the seeding's refusal to derive)
    out = dsh("show", str(bad))
    assert 'has seq "5" (a string; expected the number 5)' in out.stderr
    assert "has seq 5 (expected 5)" not in out.stderr
    assert "has seq '5'" not in out.stderr  # nor Python's repr
    # show --recover (the durable scan): before the last turn/end, committed corruption
    out = dsh("show", "--recover", str(bad))
    assert out.returncode == 1
    assert out.stderr.startswith(f"dsh-session: {bad}: LogFormatError: corrupt session log: "
                                 'seq gap in committed region at line 6 (expected 5, got '
                                 'the string "5")')
    # the same log in a store: the backend's load
    logs["log"].write_bytes(bad.read_bytes())
    try:
        out = dsh("show", "good", "--store", str(logs["store"]))
        assert out.returncode == 1
        assert '(expected 5, got the string "5")' in out.stderr
    finally:
        logs["log"].write_bytes(logs["good"].read_bytes())
    # validate
    out = dsh("validate", str(bad))
    assert out.returncode == 1
    assert 'seq is "5", not an integer (expected 5)' in out.stdout


@pytest.mark.parametrize(("seq", "said", "scanned"), [
    (True, "has seq true (a boolean; expected the number 5)", "got the boolean true"),
    (None, "has seq null (expected the number 5)", "got null"),
    (5.5, "has seq 5.5 (a number with a fraction; expected the integer 5)", "got 5.5"),
    # JSON.parse reads 5.0 as 5, so the scan keeps it; seeding takes integers only.
    (5.0, "has seq 5.0 (written as a float; expected the integer 5)", None),
    ([5], "has seq [5] (an array; expected the number 5)", "got the array [5]"),
    (7, "has seq 7 (expected 5)", "got 7"),
])
def test_other_wrong_seqs_are_named_with_their_type(logs: dict[str, Path], tmp_path: Path,
                                                    seq: Any, said: str,
                                                    scanned: str | None) -> None:
    bad = with_seq(logs["good"], 7, seq, tmp_path / "bad.jsonl")
    out = dsh("show", str(bad))
    assert said in out.stderr  # the seqs warning and the seeding's refusal
    out = dsh("show", "--recover", str(bad))
    if scanned is None:
        assert f"SeedError: seed event at index 5 {said}" in out.stderr
    else:
        assert f"(expected 5, {scanned})" in out.stderr


def test_a_line_without_seq_says_so(logs: dict[str, Path], tmp_path: Path) -> None:
    lines = logs["good"].read_bytes().splitlines(keepends=True)
    event = json.loads(lines[6])
    del event["seq"]
    lines[6] = json.dumps(event).encode() + b"\n"
    bad = tmp_path / "no-seq.jsonl"
    bad.write_bytes(b"".join(lines))
    out = dsh("show", "--recover", str(bad))
    assert "(expected 5, got no seq)" in out.stderr
    out = dsh("show", str(bad))
    assert "has seq none (the key is absent; expected 5)" in out.stderr


_WRONG = st.one_of(
    st.from_regex(r"[0-9]{1,3}", fullmatch=True),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 1),
    st.lists(st.integers(0, 9), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(seq=_WRONG)
def test_a_wrong_seq_is_shown_as_json_with_its_type(seq: Any) -> None:
    """In process, for speed: the durable scan and seeding name any wrong seq as its JSON
    text, and its type unless it is a number, never as a bare ``1`` for ``"1"``."""
    reg = registry()
    header = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
    start = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":' \
            b'"message","source":{"kind":"user"}}}}\n'
    bad = {"type": "x/y", "seq": seq, "time": 1, "data": {}}
    end = b'{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":' \
          b'"completed"}}}\n'
    text = json.dumps(seq, separators=(",", ":"))
    noun = {str: "string", bool: "boolean", list: "array"}.get(type(seq))
    with pytest.raises(LogFormatError) as scanned:
        scan_log(header + start + json.dumps(bad).encode() + b"\n" + end, reg)
    got = f"the {noun} {text}" if noun else text
    assert str(scanned.value).endswith(f"(expected 1, got {got})")
    with pytest.raises(SeedError) as seeded:
        Session("s", [json.loads(start), bad], registry=reg)
    if noun:
        article = "an" if noun == "array" else "a"
        assert f"has seq {text} ({article} {noun}; expected the number 1)" in str(seeded.value)
    elif seq is None:
        assert "has seq null (expected the number 1)" in str(seeded.value)
    else:
        assert f"has seq {text} (" in str(seeded.value)


# --- a file that is no log -------------------------------------------------------------------

#: Every command that reads a SOURCE file, and where it says so.
SOURCE_COMMANDS = [
    (["show"], "stderr"),
    (["show", "--recover"], "stderr"),
    (["show", "--json"], "stderr"),
    (["export"], "stderr"),
    (["export", "--json"], "stderr"),
    (["export", "--html"], "stderr"),
    (["derive"], "stderr"),
    (["repair", "--dry-run"], "stderr"),
    (["view", "--no-open"], "stderr"),
    (["validate"], "stdout"),
]


@pytest.mark.parametrize(("command", "stream"), SOURCE_COMMANDS)
def test_a_file_that_is_no_log_is_said_to_be_none(logs: dict[str, Path], command: list[str],
                                                  stream: str) -> None:
    passwd = logs["passwd"]
    out = dsh(*command, "--file", str(passwd))
    assert out.returncode == 1, out
    said = getattr(out, stream)
    if stream == "stderr":
        first, hint = said.splitlines()[:2]
        assert first == f"dsh-session: {passwd} is not a dsh-session log: its first line " \
                        f"is not JSON"
        assert hint.startswith('hint: a dsh-session log starts with its session header')
    else:
        assert said.splitlines()[0] == f"{passwd}: not a dsh-session log: its first line " \
                                       f"is not JSON"
    assert RESTORE not in said
    assert "Traceback" not in out.stderr


def test_etc_passwd_itself(logs: dict[str, Path]) -> None:
    if not Path("/etc/passwd").is_file():
        pytest.skip("no /etc/passwd here")
    out = dsh("show", "/etc/passwd")
    assert out.returncode == 1
    assert out.stderr.startswith("dsh-session: /etc/passwd is not a dsh-session log: its "
                                 "first line is not JSON\n")
    assert RESTORE not in out.stderr
    out = dsh("validate", "--json", "/etc/passwd")
    assert json.loads(out.stdout)["problems"] == [
        "not a dsh-session log: its first line is not JSON"]


@pytest.mark.parametrize(("first", "reason"), [
    (b'["a", "list"]', "its first line is JSON (an array), not a session header"),
    (b'"hello"', "its first line is JSON (a string), not a session header"),
    (b'{"name": "package", "version": "1.0"}',
     'its first line is a JSON object without "type": "session", not a session header'),
    (b'{"type":"turn/start","seq":0,"time":1,"data":{}}',
     'its first line is an event of type "turn/start", not a session header'),
    (b"\x89PNG\r\n\x1a", "its first line is not JSON"),
])
def test_other_files_that_are_no_log(logs: dict[str, Path], tmp_path: Path, first: bytes,
                                     reason: str) -> None:
    other = tmp_path / "other.jsonl"
    other.write_bytes(first + b"\n" + logs["good"].read_bytes().split(b"\n", 1)[1])
    out = dsh("show", str(other))
    assert out.returncode == 1
    assert out.stderr.splitlines()[0] == f"dsh-session: {other} is not a dsh-session log: " \
                                         f"{reason}"
    assert RESTORE not in out.stderr


def test_a_damaged_log_keeps_the_hint_to_restore_it(logs: dict[str, Path],
                                                    tmp_path: Path) -> None:
    good = logs["good"].read_bytes()
    header, rest = good.split(b"\n", 1)
    # A header cut short, or missing a field: a log's header, damaged.
    for damaged in (header[:40], header.replace(b'"createdAt"', b'"created"')):
        path = tmp_path / "damaged.jsonl"
        path.write_bytes(damaged + b"\n" + rest)
        out = dsh("show", str(path))
        assert out.returncode == 1
        assert out.stderr.startswith(f"dsh-session: {path}: LogFormatError: corrupt session "
                                     f"log: ")
        assert "hint: the header (line 1) is not a crash tail: restore the file from a copy" \
            in out.stderr
        assert "is not a dsh-session log" not in out.stderr
    # Valid first lines, then a line that is no JSON before the last turn/end.
    lines = good.splitlines(keepends=True)
    lines[3] = b"garbage{\n"
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(b"".join(lines))
    out = dsh("repair", str(path))
    assert out.returncode == 1
    assert "unparsable committed event" in out.stderr
    assert ("hint: corruption before the last turn/end is not a crash tail: restore the file"
            in out.stderr)
    assert "is not a dsh-session log" not in out.stderr
