"""Reading and writing the reference's JSONL log format."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_session_core import OpaqueEvent, Session, core_registry
from dsh_session_core._logformat.logfile import dump_log, open_session, parse_log
from dsh_session_core.errors import LogFormatError
from spec_logs import ONE_TURN_LOG, S1_HEADER


def test_the_spec_example_is_671_bytes_and_round_trips() -> None:
    assert len(ONE_TURN_LOG) == 671
    log = parse_log(ONE_TURN_LOG, core_registry())
    assert [e.type for e in log.events][:2] == ["turn/start", "user/message"]
    assert dump_log(log.header, log.events) == ONE_TURN_LOG


def test_appending_the_same_events_writes_the_same_bytes() -> None:
    times = iter(range(1, 7))
    header = parse_log(S1_HEADER, core_registry()).header
    s = Session("s1", header=header, clock=lambda: next(times))
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    s.append("user/message", {"content": [{"type": "text", "text": "hi"}],
                              "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("assistant/message", {"turn": 1, "step": 1,
                                   "content": [{"type": "text", "text": "hello"}]},
             surface_op="append")
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert s.to_jsonl() == ONE_TURN_LOG
    assert s.jsonl(4) == ONE_TURN_LOG.split(b"\n", 5)[-1]


def test_surface_op_first_lines_are_kept_in_their_order() -> None:
    # The reference's crash repair writes surfaceOp before sourceEventSeqs.
    line = (
        b'{"type":"tool/result","seq":0,"time":9,"data":{"turn":1,"step":1,"callId":"c",'
        b'"content":[{"type":"text","text":"x"}],"isError":true,"error":{"name":'
        b'"InterruptedError","code":"interrupted"}},"surfaceOp":"append","sourceEventSeqs":[3]}\n'
    )
    log = parse_log(S1_HEADER + line, core_registry())
    assert type(log.events[0]) is OpaqueEvent
    assert dump_log(log.header, log.events) == S1_HEADER + line
    session = open_session(log, core_registry())
    assert session.to_jsonl() == S1_HEADER + line
    assert session.derive_messages()[0].role == "user"


def test_a_seeded_session_reencodes_only_when_not_given_its_bytes() -> None:
    log = parse_log(ONE_TURN_LOG, core_registry())
    fresh = Session("s1", log.events, log.header)
    assert fresh.to_jsonl() == ONE_TURN_LOG


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"", None),
        (b"not json\n", 1),
        (b'{"type":"other"}\n', 1),
        (S1_HEADER + b'{"type":"turn/start","seq":0\n', 2),
        (S1_HEADER + b"\n", 2),
    ],
)
def test_bad_logs_fail_with_the_line(data: bytes, line: int | None) -> None:
    with pytest.raises(LogFormatError) as info:
        parse_log(data, core_registry(), path="x.jsonl")
    assert info.value.line == line
    assert info.value.path == "x.jsonl"


def test_a_lone_surrogate_survives_derive_as_js_writes_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    s = Session("sur")
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    s.append("user/message", {"content": [{"type": "text", "text": "a\ud800b"}],
                              "source": {"kind": "user"}}, surface_op="append")
    log = tmp_path / "sur.jsonl"
    log.write_bytes(s.to_jsonl())
    assert b'"a\\ud800b"' in log.read_bytes()  # escaped, as JSON.stringify writes it
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", "derive", str(log)],
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b'[{"role":"user","content":[{"type":"text","text":"a\\ud800b"}]}]\n'
