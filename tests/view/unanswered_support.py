"""A log with a tool call that no ``tool/result`` answers, for the viewer's tests (issue
24, point 3): written by hand (the builders answer such a call as its step ends)."""

from __future__ import annotations

from pathlib import Path

from dsh_session_core import open_store

__all__ = ["CALL_ID", "CALL_SEQ", "unanswered_log"]

_USER = {"kind": "user"}
#: The unanswered call, and the seq of its tool/call.
CALL_ID = "call-lost"
CALL_SEQ = 4


def unanswered_log(folder: Path) -> Path:
    """Session ``lost``: turn 1 calls ``call-lost`` (bash) and ends with no result; turn 2
    is a plain exchange. Returns the log file."""
    with open_store(str(folder)) as store:
        s = store.create("lost")
        a = s.append
        a("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": _USER}})
        a("user/message", {"content": [{"type": "text", "text": "run it"}],
                           "source": _USER}, surface_op="append")
        a("step/start", {"turn": 1, "step": 1})
        a("assistant/message", {"turn": 1, "step": 1, "content": [
            {"type": "tool-call", "id": CALL_ID, "name": "bash", "arguments": "{}"}]},
            surface_op="append")
        call = a("tool/call", {"turn": 1, "step": 1, "callId": CALL_ID, "name": "bash",
                               "arguments": "{}"})
        assert call.seq == CALL_SEQ
        a("step/end", {"turn": 1, "step": 1})
        a("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        with s.turn() as turn:
            turn.user("and now?")
            with turn.step() as step:
                step.assistant("done")
        store.flush(s)
        return Path(store.location("lost"))
