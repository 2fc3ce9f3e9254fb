"""The builders (``session.turn()``, ``turn.step()``, ``session.inject()``): the events
they write are the hand-written appends' byte for byte, and a turn stays balanced when
its block raises, is cancelled, or the builders are misused."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import (
    Message,
    PluginSource,
    Session,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    TurnStateError,
    to_wire,
)
from dsh_session_core.errors import SchemaError
from dsh_session_core.vocabulary import (
    FinishChunk,
    MaxTokensFinish,
    ReasoningBlock,
    RejectedReason,
    StopFinish,
    TextDeltaChunk,
)

ROOT = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def _clock() -> int:
    return 1_783_000_000_000


def _session() -> Session:
    return Session("b", clock=_clock)


def _wire_lines(session: Session, start: int = 0) -> list[Any]:
    return [msgspec.json.decode(line) for line in session.jsonl(start).splitlines()]


# --- byte for byte the hand-written appends -------------------------------------------------


def test_the_standard_workload_written_with_the_builders_is_byte_identical() -> None:
    turns = 60
    by_hand = _session()
    bench.fill(by_hand, bench.workload(turns))
    built = _session()
    for t in range(1, turns + 1):
        with built.turn() as turn:
            turn.user(f"question {t}")
            with turn.step() as step:
                for i in range(40):
                    step.chunk({"type": "text-delta", "index": 0, "text": f"tok{i} "})
                call = ToolCallBlock(id=f"call-{t}", name="bash", arguments='{"command":"ls"}')
                step.assistant(
                    [TextBlock(text=f"turn {t}: the quick brown fox jumps over the lazy dog"),
                     call],
                    usage={"inputTokens": 1200, "outputTokens": 80, "cacheReadTokens": 1000},
                )
                step.tool_result(step.tool_call(call.id, call.name, call.arguments),
                                 [{"type": "text", "text": "a.txt\nb.txt\n"}])
    assert len(built.events) == turns * 48
    assert built.to_jsonl() == by_hand.to_jsonl()


def test_the_bench_builder_path_writes_the_bench_workload() -> None:
    by_hand = _session()
    bench.fill(by_hand, bench.workload(25))
    built = _session()
    bench.builder_fill(built, bench.builder_inputs(25))
    assert built.to_jsonl() == by_hand.to_jsonl()


texts = st.text(max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    prompt=texts,
    deltas=st.lists(texts, max_size=5),
    reply=texts,
    calls=st.lists(st.tuples(texts, texts), max_size=3, unique_by=lambda c: c[0]),
    usage=st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 10**6),
                                st.none() | st.integers(0, 10**6)),
    failed=st.booleans(),
)
def test_any_turn_matches_its_hand_written_appends(
    prompt: str,
    deltas: list[str],
    reply: str,
    calls: list[tuple[str, str]],
    usage: tuple[int, int, int | None] | None,
    failed: bool,
) -> None:
    built, by_hand = _session(), _session()
    # Written by hand, as a harness would without the builders.
    a = by_hand.append
    a("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    a("user/message", {"content": [{"type": "text", "text": prompt}],
                       "source": {"kind": "user"}}, surface_op="append")
    a("step/start", {"turn": 1, "step": 1})
    for d in deltas:
        a("assistant/chunk", {"turn": 1, "step": 1,
                              "chunk": {"type": "reasoning-delta", "index": 0, "text": d}})
    message: dict[str, Any] = {
        "turn": 1, "step": 1,
        "content": [{"type": "text", "text": reply}]
        + [{"type": "tool-call", "id": cid, "name": "run", "arguments": args}
           for cid, args in calls],
    }
    if usage is not None:
        message["usage"] = {"inputTokens": usage[0], "outputTokens": usage[1]}
        if usage[2] is not None:
            message["usage"]["cacheWriteTokens"] = usage[2]
    chunk_seqs = list(range(3, 3 + len(deltas)))
    a("assistant/message", message, surface_op="append",
      source_event_seqs=chunk_seqs or None)
    for cid, args in calls:
        call = a("tool/call", {"turn": 1, "step": 1, "callId": cid, "name": "run",
                               "arguments": args})
        a("tool/result", {"turn": 1, "step": 1, "callId": cid,
                          "content": [{"type": "text", "text": f"ran {args}"}],
                          "isError": failed}, surface_op="append", source_event_seqs=[call.seq])
    a("step/end", {"turn": 1, "step": 1})
    a("turn/end", {"turn": 1, "reason": {"kind": "completed"}})

    # The same with the builders, from typed structs.
    with built.turn() as turn:
        turn.user(prompt)
        with turn.step() as step:
            for d in deltas:
                step.chunk({"type": "reasoning-delta", "index": 0, "text": d})
            blocks = [ToolCallBlock(id=cid, name="run", arguments=args) for cid, args in calls]
            token_usage = None
            if usage is not None:
                token_usage = TokenUsage(
                    input_tokens=usage[0], output_tokens=usage[1],
                    **({} if usage[2] is None else {"cache_write_tokens": usage[2]}))
            step.assistant([TextBlock(text=reply), *blocks], usage=token_usage)
            for block in blocks:
                ref = step.tool_call(block)
                step.tool_result(ref, f"ran {block.arguments}", is_error=failed)
    assert built.to_jsonl() == by_hand.to_jsonl()


# --- numbering --------------------------------------------------------------------------------


def test_turns_continue_from_the_last_turn_start_and_steps_count_from_one() -> None:
    s = _session()
    s.append("turn/start", {"turn": 7, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    s.append("turn/end", {"turn": 7, "reason": {"kind": "completed"}})
    with s.turn() as turn:
        assert turn.number == 8
        turn.step().end()
        with turn.step() as step:
            assert step.number == 2
    with s.turn(number=20) as turn:
        pass
    with s.turn() as turn:
        assert turn.number == 21
    numbers = [(w["type"], w["data"].get("turn"), w["data"].get("step"))
               for w in _wire_lines(s, 2)]
    assert numbers == [
        ("turn/start", 8, None), ("step/start", 8, 1), ("step/end", 8, 1),
        ("step/start", 8, 2), ("step/end", 8, 2), ("turn/end", 8, None),
        ("turn/start", 20, None), ("turn/end", 20, None),
        ("turn/start", 21, None), ("turn/end", 21, None),
    ]


def test_a_turn_start_without_an_integer_number_asks_for_one() -> None:
    # A reference log may hold anything: this one loads opaquely, verbatim.
    s = Session("b", seed=[
        {"type": "turn/start", "seq": 0, "time": 1,
         "data": {"turn": "one", "trigger": {"kind": "message", "source": {"kind": "user"}}}},
        {"type": "turn/end", "seq": 1, "time": 2,
         "data": {"turn": "one", "reason": {"kind": "completed"}}},
    ], clock=_clock)
    with pytest.raises(TurnStateError, match=r"seq 0\) has no integer turn number.*number="):
        s.turn()
    assert s.seq == 2
    with s.turn(number=2) as turn:
        assert turn.number == 2
    assert s.seq == 4


def test_a_fresh_session_starts_at_turn_one_with_the_given_trigger() -> None:
    s = _session()
    with s.turn({"kind": "message", "source": {"kind": "plugin", "plugin": "cron"}}) as turn:
        assert turn.number == 1
    assert _wire_lines(s)[0]["data"] == {
        "turn": 1, "trigger": {"kind": "message", "source": {"kind": "plugin", "plugin": "cron"}}}


# --- ending: error, aborted, max-tokens, by hand -----------------------------------------------


def test_a_block_raising_in_a_step_ends_the_step_then_the_turn_with_error() -> None:
    s = _session()

    def failing() -> None:
        with s.turn() as turn:
            turn.step().end()
            with turn.step() as step:
                step.chunk(TextDeltaChunk(index=0, text="par"))
                raise ValueError("model failed")

    with pytest.raises(ValueError, match="model failed"):
        failing()
    assert [(w["type"], w["data"]) for w in _wire_lines(s, 3)] == [
        ("step/start", {"turn": 1, "step": 2}),
        ("assistant/chunk", {"turn": 1, "step": 2,
                             "chunk": {"type": "text-delta", "index": 0, "text": "par"}}),
        ("step/end", {"turn": 1, "step": 2}),
        ("turn/end", {"turn": 1, "reason": {"kind": "error", "step": 2,
                                            "message": "model failed"}}),
    ]


class _CodedError(Exception):
    code = "RATE_LIMIT"


def test_an_error_between_steps_names_the_last_step_and_its_code() -> None:
    s = _session()

    def failing() -> None:
        with s.turn() as turn:
            turn.step().end()
            raise _CodedError

    with pytest.raises(_CodedError):
        failing()
    assert _wire_lines(s)[-1]["data"]["reason"] == {
        "kind": "error", "step": 1, "message": "_CodedError", "code": "RATE_LIMIT"}


def test_an_error_before_any_step_is_step_zero() -> None:
    s = _session()

    def failing() -> None:
        with s.turn() as turn:
            turn.user("hi")
            raise KeyError("missing")

    with pytest.raises(KeyError):
        failing()
    assert _wire_lines(s)[-1]["data"]["reason"] == {
        "kind": "error", "step": 0, "message": "'missing'"}


def test_a_keyboard_interrupt_ends_the_turn_aborted() -> None:
    s = _session()
    with pytest.raises(KeyboardInterrupt), s.turn() as turn, turn.step():
        raise KeyboardInterrupt
    assert [w["type"] for w in _wire_lines(s)] == [
        "turn/start", "step/start", "step/end", "turn/end"]
    assert _wire_lines(s)[-1]["data"]["reason"] == {"kind": "aborted"}


def test_a_cancelled_task_ends_its_turn_aborted() -> None:
    s = _session()
    started = asyncio.Event()

    async def agent() -> None:
        with s.turn() as turn, turn.step() as step:
            step.chunk({"type": "text-delta", "index": 0, "text": "thinking"})
            started.set()
            await asyncio.sleep(60)

    async def main() -> None:
        task = asyncio.create_task(agent())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert [w["type"] for w in _wire_lines(s)][-2:] == ["step/end", "turn/end"]
    assert _wire_lines(s)[-1]["data"] == {"turn": 1, "reason": {"kind": "aborted"}}


def test_a_max_tokens_step_makes_the_turn_end_max_tokens() -> None:
    s = _session()
    with s.turn() as turn:
        with turn.step() as step:
            step.chunk(FinishChunk(reason=MaxTokensFinish()))
            step.assistant("cut sh")
        with turn.step() as step:
            step.assistant("ort", finish=StopFinish())
    assert _wire_lines(s)[-1]["data"]["reason"] == {"kind": "max-tokens"}
    assert turn.reason().kind == "max-tokens"


def test_a_model_error_wins_over_max_tokens() -> None:
    s = _session()
    with s.turn() as turn:
        with turn.step() as step:
            step.assistant("a", finish={"kind": "max-tokens"})
        with turn.step() as step:
            step.chunk({"type": "finish", "reason": {"kind": "error", "message": "overloaded",
                                                     "code": "529"}})
    assert _wire_lines(s)[-1]["data"]["reason"] == {
        "kind": "error", "step": 2, "message": "overloaded", "code": "529"}


def test_an_aborted_model_call_ends_the_turn_aborted() -> None:
    s = _session()
    with s.turn() as turn, turn.step() as step:
        step.chunk({"type": "finish", "reason": {"kind": "aborted"}})
    assert _wire_lines(s)[-1]["data"]["reason"] == {"kind": "aborted"}


def test_context_and_steering_are_the_hand_written_appends() -> None:
    built, by_hand = _session(), _session()
    with built.turn() as turn:
        turn.context([TextBlock(text="AGENTS.md says: be brief")],
                     source=PluginSource(plugin="agents-md"))
        turn.step().end()
        turn.steer("use the other file")
    a = by_hand.append
    a("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    a("context/message", {"content": [{"type": "text", "text": "AGENTS.md says: be brief"}],
                          "source": {"kind": "plugin", "plugin": "agents-md"}},
      surface_op="append")
    a("step/start", {"turn": 1, "step": 1})
    a("step/end", {"turn": 1, "step": 1})
    a("steering/message", {"turn": 1, "content": [{"type": "text", "text": "use the other file"}],
                           "source": {"kind": "user"}}, surface_op="append")
    a("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert built.to_jsonl() == by_hand.to_jsonl()


def test_a_rejected_turn_is_ended_by_hand() -> None:
    s = _session()
    with s.turn() as turn:
        s.append("prompt/blocked", {"content": [{"type": "text", "text": "rm -rf tests"}],
                                    "source": {"kind": "user"}, "reason": "not here"})
        turn.end(RejectedReason(reason="not here"))
    assert turn.ended
    assert [w["type"] for w in _wire_lines(s)] == ["turn/start", "prompt/blocked", "turn/end"]
    assert _wire_lines(s)[-1]["data"]["reason"] == {"kind": "rejected", "reason": "not here"}


# --- injection ----------------------------------------------------------------------------------


def test_inject_is_the_one_shot_injection_turn_of_the_seeds() -> None:
    s = _session()
    with s.turn():
        pass
    message = s.inject("config changed", source=PluginSource(plugin="file-watch"))
    source = {"kind": "plugin", "plugin": "file-watch"}
    assert _wire_lines(s, 2) == [
        {"type": "turn/start", "seq": 2, "time": _clock(),
         "data": {"turn": 2, "trigger": {"kind": "injection", "source": source}}},
        {"type": "context/message", "seq": 3, "time": _clock(),
         "data": {"content": [{"type": "text", "text": "config changed"}], "source": source},
         "surfaceOp": "append"},
        {"type": "turn/end", "seq": 4, "time": _clock(),
         "data": {"turn": 2, "reason": {"kind": "completed"}}},
    ]
    assert message.seq == 3


def test_inject_inside_an_open_turn_is_refused() -> None:
    s = _session()
    with s.turn() as turn:
        with pytest.raises(TurnStateError, match=r"turn\.context\(\)|still open"):
            s.inject("late")
        turn.context("in the turn instead")
    assert [w["type"] for w in _wire_lines(s)] == ["turn/start", "context/message", "turn/end"]


# --- misuse ---------------------------------------------------------------------------------------


def test_misuse_is_refused_with_what_to_do_and_the_log_untouched() -> None:
    s = _session()
    with s.turn() as turn:
        step = turn.step()
        with pytest.raises(TurnStateError, match="still open"):
            turn.step()
        with pytest.raises(TurnStateError, match="still open"):
            s.turn()
        with pytest.raises(TurnStateError, match=r"no tool/call 'c9'.*step\.tool_call"):
            step.tool_result("c9", "x")
        ref = step.tool_call("c1", "read", "{}")
        with pytest.raises(TurnStateError, match="already logged"):
            step.tool_call("c1", "read", "{}")
        with pytest.raises(TurnStateError, match="needs its name and arguments"):
            step.tool_call("c2")
        step.tool_result(ref, "ok")
        with pytest.raises(TurnStateError, match="has a result already"):
            step.tool_result("c1", "again")
        step.end()
        with pytest.raises(TurnStateError, match=r"step 1 of turn 1 has ended.*turn\.step\(\)"):
            step.chunk({"type": "text-delta", "index": 0, "text": "late"})
        with turn.step() as second, pytest.raises(TurnStateError, match="no tool/call 'c1'"):
            second.tool_result(ref, "from another step")
    seq = s.seq
    with pytest.raises(TurnStateError, match=r"turn 1 has ended.*session\.turn\(\)"):
        turn.user("late")
    with pytest.raises(TurnStateError, match="has ended"):
        turn.end()
    assert s.seq == seq
    assert [w["type"] for w in _wire_lines(s)] == [
        "turn/start", "step/start", "tool/call", "tool/result", "step/end",
        "step/start", "step/end", "turn/end"]


def test_a_log_left_open_is_named_when_a_turn_starts() -> None:
    s = _session()
    s.append("turn/start", {"turn": 3, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    with pytest.raises(TurnStateError, match=r"turn 3 \(turn/start at seq 0\) is still open"):
        s.turn()
    assert s.seq == 1


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda st: st.assistant([TextBlock(text=1)]), "$.content[0].text"),  # type: ignore[arg-type]
        (lambda st: st.assistant("x", usage=TokenUsage(input_tokens="9", output_tokens=1)),  # type: ignore[arg-type]
         "$.usage.inputTokens"),
        (lambda st: st.chunk(TextDeltaChunk(index=0.5, text="x")), "$.chunk.index"),  # type: ignore[arg-type]
        (lambda st: st.chunk(TextBlock(text="a block is no chunk")), "$.chunk.type"),
        (lambda st: st.assistant([ToolCallBlock(id="c", name=None, arguments="{}")]),  # type: ignore[arg-type]
         "$.content[0].name"),
    ],
)
def test_a_struct_holding_a_wrong_value_is_refused_like_a_dict(call: Any, path: str) -> None:
    s = _session()
    with s.turn() as turn, turn.step() as step:
        before = s.seq
        with pytest.raises(SchemaError) as info:
            call(step)
        assert info.value.path == path
        assert s.seq == before


# --- derived messages are the typed structs --------------------------------------------------


def test_derived_messages_are_the_same_typed_structs() -> None:
    s = _session()
    with s.turn() as turn:
        turn.user([TextBlock(text="list files")])
        with turn.step() as step:
            call = ToolCallBlock(id="c1", name="bash", arguments='{"command":"ls"}')
            step.assistant([ReasoningBlock(text="use ls"), call])
            step.tool_result(step.tool_call(call), "a.txt", is_error=True)
    messages = s.derive_messages()
    assert messages == [
        Message(role="user", content=(TextBlock(text="list files"),)),
        Message(role="assistant", content=(ReasoningBlock(text="use ls"), call)),
        Message(role="user", content=(ToolResultBlock(
            tool_call_id="c1", content=(TextBlock(text="a.txt"),), is_error=True),)),
    ]
    assert type(messages[1].content[1]) is ToolCallBlock
    assert to_wire(messages[2])["content"][0]["toolCallId"] == "c1"


# --- on a durable store that checks turn enclosure and tool pairing --------------------------


def test_builder_turns_pass_a_checking_store_and_reopen(tmp_path: Path) -> None:
    from dsh_session_core import open_store

    with open_store(tmp_path, checks=True) as store:
        s = store.create("agent", cwd="/work")
        with s.turn() as turn:
            turn.user("hi")
            with turn.step() as step:
                call = ToolCallBlock(id="c1", name="bash", arguments="{}")
                step.assistant(["ok", call])
                step.tool_result(step.tool_call(call), "done")
        with pytest.raises(RuntimeError), s.turn() as turn, turn.step():
            raise RuntimeError("tool crashed")
        s.inject("notice")
        store.flush(s)
    with open_store(tmp_path, checks=True) as store:
        again = store.open("agent")
        assert [e.type for e in again.events] == [
            "turn/start", "user/message", "step/start", "assistant/message", "tool/call",
            "tool/result", "step/end", "turn/end",
            "turn/start", "step/start", "step/end", "turn/end",
            "turn/start", "context/message", "turn/end"]
        assert to_wire(again.events[11].data)["reason"] == {
            "kind": "error", "step": 1, "message": "tool crashed"}


def test_a_raising_block_answers_its_unanswered_tool_calls_before_ending_the_turn() -> None:
    from dsh_session_core import ToolCallBlock, to_wire

    s = Session("pending")

    def failing() -> None:
        with s.turn() as turn, turn.step() as step:
            call = ToolCallBlock(id="c1", name="ls", arguments="{}")
            step.assistant([call])
            step.tool_call(call)
            raise TimeoutError("tool timed out")

    with pytest.raises(TimeoutError):
        failing()
    assert [e.type for e in s.events] == ["turn/start", "step/start", "assistant/message",
                                          "tool/call", "tool/result", "step/end", "turn/end"]
    result = to_wire(s.events[4].data)
    assert result["callId"] == "c1"
    assert result["isError"] is True
    assert "TimeoutError: tool timed out" in result["content"][0]["text"]
    assert to_wire(s.events[4])["sourceEventSeqs"] == [3]
    assert to_wire(s.events[6].data)["reason"] == {"kind": "error", "step": 1,
                                                   "message": "tool timed out"}


# --- a step never ends on an unanswered call (issue 24, point 3) ----------------------------


def _answers(s: Session) -> list[dict[str, Any]]:
    return [to_wire(e) for e in s.events if e.type == "tool/result"]


def test_a_step_that_ends_normally_answers_each_unanswered_call(tmp_path: Path) -> None:
    """c1 is only announced by the message, c2 is logged and left, c3 is answered by the
    builder and c4 by a hand-written append: c1 and c2 get crash repair's shape of error
    result, in the order they were announced, before step/end; the log passes the
    reference's invariants (a checking store), validates strictly, and reopens."""
    from dsh_session_core import open_store
    from dsh_session_core._logformat.check import check_log

    with open_store(tmp_path, checks=True) as store:
        s = store.create("agent", cwd="/work")
        with s.turn() as turn, turn.step() as step:
            calls = [ToolCallBlock(id=f"c{n}", name="bash", arguments="{}") for n in (1, 2, 3, 4)]
            step.assistant(["four calls", *calls])
            two = step.tool_call(calls[1])
            step.tool_result(step.tool_call(calls[2]), "three")
            four = step.tool_call(calls[3])
            s.append("tool/result", {"turn": 1, "step": 1, "callId": "c4",
                                     "content": [{"type": "text", "text": "four"}],
                                     "isError": False},
                     surface_op="append", source_event_seqs=[four.seq])
        store.flush(s)
        types = [e.type for e in s.events]
        assert types[-4:] == ["tool/result", "tool/result", "step/end", "turn/end"]
        c1, c2 = _answers(s)[-2:]
        for answer, call_id in ((c1, "c1"), (c2, "c2")):
            assert answer["data"]["callId"] == call_id
            assert answer["data"]["isError"] is True
            assert answer["data"]["error"] == {"name": "UnansweredError", "code": "interrupted"}
            assert "no result was recorded" in answer["data"]["content"][0]["text"]
        assert "sourceEventSeqs" not in c1  # no tool/call: nothing to point at
        assert two.seq == 3
        assert c2["sourceEventSeqs"] == [3]  # its tool/call
        assert to_wire(s.events[-1].data)["reason"] == {"kind": "completed"}
        assert len(_answers(s)) == 4  # c3 and c4 were not answered twice
        assert check_log(s.events, store.registry, strict=True) == []
    with open_store(tmp_path, checks=True) as store:
        assert [e.type for e in store.open("agent").events] == types


def test_step_end_and_turn_end_by_hand_answer_too() -> None:
    s = _session()
    turn = s.turn()
    step = turn.step()
    step.tool_call("c1", "read", "{}")
    step.end()
    step = turn.step()
    step.tool_call("c2", "read", "{}")
    turn.end()  # ends the open step first
    assert [e.type for e in s.events] == [
        "turn/start", "step/start", "tool/call", "tool/result", "step/end",
        "step/start", "tool/call", "tool/result", "step/end", "turn/end"]
    assert [a["data"]["callId"] for a in _answers(s)] == ["c1", "c2"]


def test_a_derived_history_of_builder_turns_holds_every_result() -> None:
    """What a provider gets from a builder-written log needs no synthesis."""
    s = _session()
    with s.turn() as turn:
        turn.user("go")
        with turn.step() as step:
            step.assistant([ToolCallBlock(id="c1", name="bash", arguments="{}")])
    messages = s.derive_messages()
    results = [b.tool_call_id for m in messages for b in m.content
               if isinstance(b, ToolResultBlock)]
    assert results == ["c1"]


# --- builders take what the other builders take (issue 24, point 4) -------------------------


def test_tool_call_takes_a_tool_call_blocks_wire_dict() -> None:
    by_struct, by_dict = _session(), _session()
    wire = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"cmd":"ls"}'}
    for s, call in ((by_struct, ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}')),
                    (by_dict, wire)):
        with s.turn() as turn, turn.step() as step:
            step.assistant([call])  # the dict is what step.assistant already takes
            ref = step.tool_call(call)
            step.tool_result(ref, "a.txt")
    assert _wire_lines(by_dict) == _wire_lines(by_struct)
    assert "type" not in wire or wire["type"] == "tool-call"  # the caller's dict untouched
    assert wire == {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"cmd":"ls"}'}


@pytest.mark.parametrize(
    ("call", "path", "says"),
    [
        (lambda t, st: st.tool_call({"type": "tool-call", "toolCallId": "c", "toolName": "n",
                                     "input": {}}),
         "$.toolCallId", 'unknown key \'toolCallId\' in the tool-call block (the vocabulary '
                         'spells it "id")'),
        (lambda t, st: st.tool_call({"type": "tool-call", "id": "c", "name": "n",
                                     "arguments": {}}),
         "$.arguments", "'arguments' must be a string (the raw JSON text of the arguments), "
                        "got dict"),
        (lambda t, st: st.tool_call({"type": "text", "text": "x"}), "$.type",
         'a block of type "tool-call", not \'text\''),
        (lambda t, st: st.tool_call(5), "$", "takes a ToolCallBlock, its wire dict"),
        (lambda t, st: t.user(123), "$.content", "turn.user() takes a str (one text block) or "
                                                 "a list of blocks"),
        (lambda t, st: t.context(None), "$.content", "got NoneType"),
        (lambda t, st: t.steer(b"bytes"), "$.content", "got bytes"),
        (lambda t, st: t.user({"type": "text", "text": "a dict is one block"}), "$.content",
         "got dict"),
        (lambda t, st: t.user(["ok", 7]), "$.content[1]", "block 1 of the content is int (7)"),
        (lambda t, st: t.user("x", source="user"), "$.source", "takes a source: UserSource()"),
        (lambda t, st: st.assistant(123), "$.content", "got int (123)"),
        (lambda t, st: st.assistant("x", usage=5), "$.usage", "usage= as a TokenUsage"),
        (lambda t, st: st.assistant("x", finish="stop"), "finish",
         "finish= as a FinishReason"),
        (lambda t, st: st.chunk("token"), "$.chunk", "takes a StreamChunk"),
        (lambda t, st: st.tool_result(5, "x"), "$.callId", "takes the call as the ToolCallRef"),
        (lambda t, st: st.tool_result("c", 5), "$.content", "step.tool_result() takes a str"),
        (lambda t, st: t.end("completed"), "$.reason", "takes a TurnEndReason"),
    ],
)
def test_a_wrong_argument_type_says_what_is_taken_and_not_strict_false(
    call: Any, path: str, says: str,
) -> None:
    s = _session()
    with s.turn() as turn, turn.step() as step:
        before = s.seq
        with pytest.raises(SchemaError) as info:
            call(turn, step)
        assert says in str(info.value)
        assert "strict=False" not in str(info.value)
        assert info.value.path == path
        assert s.seq == before  # nothing appended
    assert s.events[-1].type == "turn/end"


def test_a_wrong_trigger_type_says_what_is_taken() -> None:
    s = _session()
    with pytest.raises(SchemaError, match=r"session\.turn\(\) takes a trigger.*got int \(5\)"):
        s.turn(5)  # type: ignore[arg-type]
    assert s.seq == 0


def test_end_answer_false_leaves_a_call_whose_result_comes_later() -> None:
    """A harness recording items as they arrive (the OpenAI Agents SDK's session) ends a
    step while its tool runs, and logs the result itself later."""
    s = _session()
    with s.turn() as turn:
        step = turn.step()
        ref = step.tool_call("c1", "bash", "{}")
        step.end(answer=False)
    assert "tool/result" not in [e.type for e in s.events]
    with s.turn() as turn, turn.step() as later:
        s.append("tool/result", {"turn": turn.number, "step": later.number, "callId": "c1",
                                 "content": [{"type": "text", "text": "done"}],
                                 "isError": False},
                 surface_op="append", source_event_seqs=[ref.seq])
    assert [a["data"]["content"][0]["text"] for a in _answers(s)] == ["done"]
