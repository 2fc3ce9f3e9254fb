"""``resurface``: a session's derived conversation made a given one by a surface replace,
the events it shadows kept in the log (what the integrations do after a pop, a clear or
a branch)."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import Message, ReplaceOp, Session, TextBlock, resurface
from dsh_session_core.events import AssistantMessage
from dsh_session_core.testing import assistant, step_end, step_start, turn_start, user

_TEXTS = st.sampled_from(["a", "b", "c"])
_MESSAGES = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _TEXTS), max_size=6)


def _message(role: str, text: str) -> Message:
    return Message(role=role, content=(TextBlock(text=text),))  # type: ignore[arg-type]


def _session(history: list[tuple[str, str]]) -> Session:
    session = Session("s")
    turn_start(session, 1)
    step_start(session, 1, 1)
    step_end(session, 1, 1)
    for role, text in history:
        if role == "user":
            user(session, text)
        else:
            assistant(session, 1, 0, text)
    return session


@settings(max_examples=200, deadline=None)
@given(history=_MESSAGES, target=_MESSAGES)
def test_the_conversation_becomes_the_target_and_the_log_only_grows(
        history: list[tuple[str, str]], target: list[tuple[str, str]]) -> None:
    session = _session(history)
    before = [msgspec.json.encode(e) for e in session.events]
    wanted = [_message(role, text) for role, text in target]
    resurface(session, wanted, turn=1)
    assert session.derive_messages() == wanted
    assert [msgspec.json.encode(e) for e in session.events[:len(before)]] == before
    again = len(session.events)
    resurface(session, wanted, turn=1)  # already the target: nothing appended
    assert len(session.events) == again


def test_a_shared_beginning_is_kept_and_the_rest_replaced_once() -> None:
    session = _session([("user", "a"), ("assistant", "b"), ("user", "c")])
    resurface(session, [_message("user", "a"), _message("assistant", "c")], turn=1)
    replace = session.events[-1]
    assert isinstance(replace, AssistantMessage)
    # assistant "b" and user "c" (seqs 4 and 5) are shadowed by the new assistant "c"
    assert (replace.surface_op, replace.source_event_seqs) == (
        ReplaceOp(start=4, end=5), (4, 5))
