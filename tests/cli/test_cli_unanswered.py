"""``validate --strict`` and ``show`` flag a tool call no ``tool/result`` answers (issue
24, point 3), as a real ``dsh-session`` subprocess: for a log written here, for the
reference's crashed log (cut right after a ``tool/call``) and for the reference's random
logs that hold one; the calls are found here from the log lines, independently of the
code under test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dsh_session_core import Session
from dsh_session_core._logformat.logfile import dump_log

DSH = [sys.executable, "-m", "dsh_session_core"]
CRASH_CALL = "call_00_nleXELfnppSd9WhEQof34008"
_USER = {"kind": "user"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DSH, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def _log(tmp_path: Path) -> Path:
    """Turn 1 calls c1 (bash) and c2 (read, announced only by the message) and answers
    neither; turn 2 answers its call."""
    s = Session("lost")
    a = s.append
    a("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": _USER}})
    a("step/start", {"turn": 1, "step": 1})
    a("assistant/message", {"turn": 1, "step": 1, "content": [
        {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "tool-call", "id": "c2", "name": "read", "arguments": "{}"}]},
        surface_op="append")
    a("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{}"})
    a("step/end", {"turn": 1, "step": 1})
    a("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with s.turn() as turn, turn.step() as step:
        step.tool_result(step.tool_call("c3", "bash", "{}"), "ok")
    path = tmp_path / "lost.jsonl"
    path.write_bytes(dump_log(s.header, list(s.events)))
    return path


def test_validate_strict_fails_naming_each_unanswered_call(tmp_path: Path) -> None:
    log = _log(tmp_path)
    lenient = _cli("validate", str(log))
    assert lenient.returncode == 0, lenient.stdout  # the log loads
    proc = _cli("validate", "--strict", str(log))
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{log}: seq 3 tool/call: tool call 'c1' (bash) has no "
                               f"tool/result")
    assert lines[1].startswith(f"{log}: seq 2 assistant/message: tool call 'c2' (read) has "
                               f"no tool/result")
    assert lines[-1].startswith("0 of 1 logs valid")
    as_json = json.loads(_cli("validate", "--strict", "--json", str(log)).stdout)
    assert as_json["ok"] is False
    assert len(as_json["problems"]) == 2


def test_show_marks_each_unanswered_call(tmp_path: Path) -> None:
    log = _log(tmp_path)
    proc = _cli("show", str(log))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (call,) = [line for line in lines if line.lstrip().startswith("3 ")]
    assert "tool call" in call
    assert "no result (unanswered)" in call
    (message,) = [line for line in lines if line.lstrip().startswith("2 ")]
    assert message.endswith("→ unanswered call(s) c2")  # c1 is flagged at its tool/call
    assert "tool call 'c1' (bash, tool/call at seq 3) has no tool/result" in proc.stderr
    assert "tool call 'c2' (read, assistant/message at seq 2) has no tool/result" in proc.stderr
    doc = json.loads(_cli("show", "--json", str(log)).stdout)
    assert [(u["callId"], u["seq"], u["name"]) for u in doc["unanswered"]] == [
        ("c1", 3, "bash"), ("c2", 2, "read")]


def test_the_references_crashed_log_is_flagged(upstream: Path, tmp_path: Path) -> None:
    crash = upstream / "synthetic" / "crash-after-tool-call.jsonl"
    shown = _cli("show", str(crash))
    assert (f"tool call '{CRASH_CALL}' (bash, tool/call at seq 59) has no tool/result: its "
            f"turn is still open") in shown.stderr
    # validate reads the file as is, and its torn line is its first problem: the log as
    # it was committed (the torn line cut) fails on the call.
    committed = tmp_path / "crash.jsonl"
    committed.write_bytes(b"".join(crash.read_bytes().splitlines(keepends=True)[:-1]))
    proc = _cli("validate", "--strict", str(committed))
    assert proc.returncode == 1
    assert f"seq 59 tool/call: tool call '{CRASH_CALL}' (bash) has no tool/result" in proc.stdout
    # repaired, it is answered
    assert _cli("repair", str(committed)).returncode == 0
    assert _cli("validate", "--strict", str(committed)).returncode == 0


def _unanswered_by_hand(path: Path) -> set[str]:
    """The call ids of a log no later tool/result answers, read from its lines."""
    pending: dict[str, None] = {}
    # split on \n only: the logs hold U+2028, a line break to str.splitlines
    for line in path.read_text(encoding="utf-8").split("\n")[1:]:
        if not line:
            continue
        event = json.loads(line)
        data = event.get("data") or {}
        if event.get("type") == "tool/call":
            pending.setdefault(data["callId"], None)
        elif event.get("type") == "assistant/message":
            for block in data.get("content") or ():
                if isinstance(block, dict) and block.get("type") == "tool-call":
                    pending.setdefault(block["id"], None)
        elif event.get("type") == "tool/result":
            pending.pop(str(data.get("callId")), None)
    return set(pending)


def test_the_references_random_logs_name_exactly_their_unanswered_calls(
    upstream: Path,
) -> None:
    """Every random log of the reference that validates leniently: ``--strict`` names
    exactly the calls found by hand, and fails when there is one."""
    logs = sorted((upstream / "random").glob("rand-*.jsonl"))
    lenient = [json.loads(line) for line in
               _cli("validate", "--json", *map(str, logs)).stdout.splitlines()]
    loading = [Path(row["file"]) for row in lenient if row["ok"]]
    strict = {Path(row["file"]): row for row in (
        json.loads(line) for line in
        _cli("validate", "--strict", "--json", *map(str, loading)).stdout.splitlines())}
    with_calls = 0
    for log in loading:
        expected = _unanswered_by_hand(log)
        problems = strict[log]["problems"]
        named = {p.split("tool call '", 1)[1].split("'", 1)[0] for p in problems
                 if "has no tool/result" in p}
        assert named == expected, log
        if expected:
            with_calls += 1
            assert strict[log]["ok"] is False
    assert with_calls >= 50  # the reference's logs do hold such calls


def test_an_event_of_another_plugin_leaves_the_turn_open() -> None:
    # A foreign event (kept verbatim by a lenient session) inside the open turn is not
    # its end: the call is still the open turn's, which repair answers.
    from dsh_session_core import Session
    from dsh_session_core import testing as kit
    from dsh_session_core._model.unanswered import unanswered_calls

    s = Session("foreign", strict=False)
    kit.turn_start(s, 1)
    kit.step_start(s, 1, 1)
    kit.assistant(s, 1, 1, [kit.call_block("c")])
    s.append("myharness/note", {"x": 1})
    ((call),) = unanswered_calls(s.events)
    assert (call.call_id, call.seq, call.open_turn) == ("c", 2, True)
