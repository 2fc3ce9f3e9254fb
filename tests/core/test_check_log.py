"""``check_log`` and ``dsh-session validate`` check what every loader checks (issue 11,
defect 10): a log they call valid seeds a session and derives; a log ``derive`` refuses
is reported, each problem with the actual value and where it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_core import core_registry
from dsh_session_core._logformat.check import check_log
from dsh_session_core._logformat.logfile import open_session, parse_log
from dsh_session_core.errors import DshSessionError

H = b'{"type":"session","version":0,"id":"s","createdAt":1}'
TS = b'{"type":"turn/start","seq":%s,"time":1,"data":{"turn":1,"trigger":{"kind":"message",' \
     b'"source":{"kind":"user"}}}}'
U = b'{"type":"user/message","seq":%s,"time":1,"data":{"content":[{"type":"text","text":' \
    b'"hi"}],"source":{"kind":"user"}}%s}'
OP = b',"surfaceOp":"append"'

# name: (event lines, the problem's seq, path, words of its message)
BROKEN: dict[str, tuple[list[bytes], object, str, str]] = {
    "gap": ([TS % b"0", U % (b"2", OP)], 2, "$.seq", "has seq 2 (expected 1)"),
    "duplicate": ([TS % b"0", U % (b"0", OP)], 0, "$.seq", "has seq 0 (expected 1)"),
    "negative": ([TS % b"-1"], -1, "$.seq", "has seq -1 (expected 0)"),
    "huge": ([TS % str(2**70).encode()], 2**70, "$.seq", f"has seq {2**70} (expected 0)"),
    "string seq": ([TS % b'"0"'], 0, "$.seq", 'seq is "0", not an integer (expected 0)'),
    "float seq": ([TS % b"0", U % (b"1.5", OP)], 1, "$.seq", "seq is 1.5, not an integer"),
    "bad op": ([TS % b"0", U % (b"1", b',"surfaceOp":5')], 1, "$.surfaceOp",
               'surfaceOp is 5, not "append"'),
    "op of strings": ([TS % b"0", U % (b"1", b',"surfaceOp":{"op":"replace","start":"0",'
                                              b'"end":0}')], 1, "$.surfaceOp",
                      'surfaceOp is {"op":"replace","start":"0","end":0}'),
    "no op": ([TS % b"0", U % (b"1", b"")], 1, "$.surfaceOp", "carries no surfaceOp marker"),
    "replace to nowhere": ([TS % b"0", U % (b"1", b',"surfaceOp":{"op":"replace","start":7,'
                                                   b'"end":9}')], 1, "$.surfaceOp",
                           "start seq 7 not found in surface"),
    "array line": ([TS % b"0", b"[1,2]"], 1, "$", "the line is a JSON array ([1,2])"),
    "number line": ([TS % b"0", b"5"], 1, "$", "the line is a JSON value (5)"),
}


def _log(lines: list[bytes]) -> bytes:
    return b"\n".join([H, *lines]) + b"\n"


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_log_derive_refuses_is_reported(name: str) -> None:
    lines, seq, path, words = BROKEN[name]
    registry = core_registry()
    log = parse_log(_log(lines), registry)
    with pytest.raises(DshSessionError):  # what derive does with it
        open_session(log, registry).derive_messages()
    problems = check_log(log.events, registry)
    assert len(problems) == 1, problems
    [problem] = problems
    assert (problem.seq, problem.path) == (seq, path)
    assert words in problem.message
    assert "undefined" not in str(problem)


def test_a_valid_log_has_no_problem() -> None:
    registry = core_registry()
    log = parse_log(_log([TS % b"0", U % (b"1", OP),
                          U % (b"2", b',"surfaceOp":{"op":"replace","start":1,"end":1}')]),
                    registry)
    assert check_log(log.events, registry) == []
    open_session(log, registry).derive_messages()


def test_validate_reports_what_derive_refuses(tmp_path: Path) -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "dsh-session")
    for name, (lines, _, _, words) in BROKEN.items():
        path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        path.write_bytes(_log(lines))
        derive = subprocess.run([exe, "derive", str(path)], capture_output=True, text=True,
                                check=False)
        assert derive.returncode == 1, name
        out = subprocess.run([exe, "validate", str(path)], capture_output=True, text=True,
                             check=False)
        assert out.returncode == 1, (name, out.stdout)
        assert words in out.stdout, (name, out.stdout)
        assert "0 of 1 logs valid" in out.stdout
