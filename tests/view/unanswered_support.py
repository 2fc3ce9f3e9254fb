"""A log with a tool call that no ``tool/result`` answers, for the viewer's tests (issue
24, point 3): written by hand (the builders answer such a call as its step ends)."""

from __future__ import annotations

from pathlib import Path

from dsh_session_core import open_store
from dsh_session_core import testing as kit

__all__ = ["CALL_ID", "CALL_SEQ", "unanswered_log"]

#: The unanswered call, and the seq of its tool/call.
CALL_ID = "call-lost"
CALL_SEQ = 4


def unanswered_log(folder: Path) -> Path:
    """Session ``lost``: turn 1 calls ``call-lost`` (bash) and ends with no result; turn 2
    is a plain exchange. Returns the log file."""
    with open_store(str(folder)) as store:
        s = store.create("lost")
        kit.turn_start(s, 1)
        kit.user(s, "run it")
        kit.step_start(s, 1, 1)
        kit.assistant(s, 1, 1, [kit.call_block(CALL_ID)])
        assert kit.tool_call(s, 1, 1, CALL_ID).seq == CALL_SEQ
        kit.step_end(s, 1, 1)
        kit.turn_end(s, 1)
        with s.turn() as turn:
            turn.user("and now?")
            with turn.step() as step:
                step.assistant("done")
        store.flush(s)
        return Path(store.location("lost"))
