"""``read_session``: one call reads a JSONL log file into a Session, in a fresh process
too; a torn or interrupted log is refused, or read as a store loads it with
``recover=True``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_core import OpaqueEvent, Session, read_session, to_wire
from dsh_session_core.errors import LogFormatError

HEADER = b'{"type":"session","version":0,"id":"s1","createdAt":1000,"cwd":"/work"}\n'
# A turn that called a tool and got its result, written as the reference writes it.
ONE_TURN = HEADER + (
    b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message",'
    b'"source":{"kind":"user"}}}}\n'
    b'{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"ls"}],'
    b'"source":{"kind":"user"}},"surfaceOp":"append"}\n'
    b'{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}\n'
    b'{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":'
    b'[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}]},"surfaceOp":"append"}\n'
    b'{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"c1",'
    b'"name":"bash","arguments":"{}"}}\n'
    b'{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"c1",'
    b'"content":[{"type":"text","text":"a.txt"}],"isError":false},"sourceEventSeqs":[4],'
    b'"surfaceOp":"append"}\n'
    b'{"type":"step/end","seq":6,"time":7,"data":{"turn":1,"step":1}}\n'
    b'{"type":"turn/end","seq":7,"time":8,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
)
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "ls"}]},
    {"role": "assistant",
     "content": [{"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}]},
    {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1",
                                  "content": [{"type": "text", "text": "a.txt"}],
                                  "isError": False}]},
]


def test_a_log_file_reads_into_a_session_in_one_call(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(ONE_TURN)
    session = read_session(path)
    assert isinstance(session, Session)
    assert (session.id, session.seq, session.header.cwd) == ("s1", 8, "/work")
    assert to_wire(session.derive_messages()) == MESSAGES
    assert session.to_jsonl() == ONE_TURN


def test_a_log_written_with_the_builders_reads_back_in_a_fresh_process(tmp_path: Path) -> None:
    ticks = iter(range(1_000, 2_000))
    s = Session("agent", clock=lambda: next(ticks))
    with s.turn() as turn:
        turn.user("ls")
        with turn.step() as step:
            call = step.tool_call("c1", "bash", "{}")
            step.tool_result(call, "a.txt")
    path = tmp_path / "agent.jsonl"
    path.write_bytes(s.to_jsonl())
    code = (
        "import json, sys\n"
        "from dsh_session_core import read_session, to_wire\n"
        "s = read_session(sys.argv[1])\n"
        "print(json.dumps({'id': s.id, 'types': [e.type for e in s.events],\n"
        "                  'messages': to_wire(s.derive_messages())}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == {
        "id": "agent",
        "types": ["turn/start", "user/message", "step/start", "tool/call", "tool/result",
                  "step/end", "turn/end"],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "ls"}]},
            {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1",
                                          "content": [{"type": "text", "text": "a.txt"}],
                                          "isError": False}]},
        ],
    }


def test_the_read_session_continues_with_the_builders(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(ONE_TURN)
    session = read_session(path, clock=lambda: 9)
    with session.turn() as turn:
        assert turn.number == 2
        turn.user("more")
    assert session.jsonl(8) == (
        b'{"type":"turn/start","seq":8,"time":9,"data":{"turn":2,"trigger":{"kind":"message",'
        b'"source":{"kind":"user"}}}}\n'
        b'{"type":"user/message","seq":9,"time":9,"data":{"content":[{"type":"text",'
        b'"text":"more"}],"source":{"kind":"user"}},"surfaceOp":"append"}\n'
        b'{"type":"turn/end","seq":10,"time":9,"data":{"turn":2,"reason":{"kind":"completed"}}}\n'
    )
    assert path.read_bytes() == ONE_TURN  # a read session writes nothing back


def test_unknown_types_are_kept_verbatim(tmp_path: Path) -> None:
    line = b'{"type":"acme/probe","seq":0,"time":1,"data":{"x":[1,{"y":null}]}}\n'
    path = tmp_path / "s1.jsonl"
    path.write_bytes(HEADER + line)
    session = read_session(path)
    assert type(session.events[0]) is OpaqueEvent
    assert session.to_jsonl() == HEADER + line


def test_a_torn_log_is_refused_unless_recovered(tmp_path: Path) -> None:
    lines = ONE_TURN.splitlines(keepends=True)
    # Cut mid-turn: the call was logged, its result's line is torn.
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(lines[:6]) + lines[6][:40])
    with pytest.raises(LogFormatError, match=r"recover=True") as info:
        read_session(path)
    assert info.value.line == 7
    session = read_session(path, recover=True)
    assert [e.type for e in session.events][5:] == ["tool/result", "step/end", "turn/end"]
    assert to_wire(session.events[-1].data) == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert to_wire(session.events[5].data)["isError"] is True
    assert session.jsonl(5).count(b"\n") == 3
    assert path.read_bytes().endswith(lines[6][:40])  # the file is left as it was


def test_a_file_that_is_no_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"hello": "world"}\n')
    with pytest.raises(LogFormatError,
                       match="corrupt session log: first line is not a session header") as info:
        read_session(path)
    assert info.value.line == 1
    with pytest.raises(FileNotFoundError):
        read_session(tmp_path / "absent.jsonl")
