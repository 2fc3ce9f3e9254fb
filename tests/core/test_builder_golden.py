"""The builders' output pinned byte for byte: a fixed script (a counting clock, fixed ids) run
through every builder path, its log and the errors of its refused calls held against
goldens recorded from the builders before their per-event work was cut (issue 39).

The other builder tests compare a builder turn with its hand-written appends; this one
also pins what has no hand-written twin in them: the answers to unanswered calls, the
end reasons of failed and cancelled turns, injections, steering, sources, triggers,
finish chunks, explicit provenance, events appended by hand inside a step, and the
errors of refused calls (each leaving the log untouched).

To re-record after an intended change of the builders' output:
``DSH_SESSION_RECORD_GOLDEN=1 pytest tests/core/test_builder_golden.py``, and say why in
the commit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from dsh_session_core import Session
from dsh_session_core.errors import DshSessionError
from dsh_session_core.vocabulary import (
    AbortedFinish,
    ErrorFinish,
    FinishChunk,
    InjectionTrigger,
    MaxTokensFinish,
    PluginSource,
    ReasoningBlock,
    ReasoningDeltaChunk,
    RejectedReason,
    StopFinish,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    UserSource,
)

GOLDENS = Path(__file__).parent / "goldens"
LOG = GOLDENS / "builders.jsonl"
REFUSALS = GOLDENS / "builders-refusals.txt"


class _ToolFailed(Exception):
    code = "tool-crashed"


def _counting_clock() -> Callable[[], int]:
    """A clock one millisecond later at each call: an event's time says how many times
    the clock was read before it."""
    ticks = iter(range(1_783_000_000_000, 1_784_000_000_000))
    return lambda: next(ticks)


def _script(s: Session) -> list[str]:
    """Every builder path, in a fixed order; returns one line per refused call."""
    refusals: list[str] = []

    def refused(call: Callable[[], object]) -> None:
        before = s.seq
        try:
            call()
        except DshSessionError as exc:
            assert s.seq == before, "a refused builder call appended"
            refusals.append(f"{type(exc).__name__} {getattr(exc, 'path', None)}: {exc}")
        else:
            raise AssertionError("not refused")

    # A turn of every message type, chunk kind, content shape and tool-call spelling.
    with s.turn() as turn:
        turn.user("hello")
        turn.user(["a", TextBlock(text="b"), {"type": "text", "text": "c"}],
                  source=PluginSource(plugin="p"))
        turn.context(TextBlock(text="ctx"),  # type: ignore[arg-type]  # one block is taken
                     source={"kind": "plugin", "plugin": "q"})
        with turn.step() as step:
            step.chunk(TextDeltaChunk(index=0, text="to"))
            step.chunk({"type": "text-delta", "index": 0, "text": "ken"})
            step.chunk(ReasoningDeltaChunk(index=1, text="think \ud800"))  # a lone surrogate
            step.chunk(FinishChunk(reason=StopFinish()))
            step.assistant("reply", usage={"inputTokens": 1, "outputTokens": 2})
            step.chunk(TextDeltaChunk(index=0, text="more"))
            call = ToolCallBlock(id="c1", name="bash", arguments='{"command":"ls"}')
            step.assistant(
                [TextBlock(text="x"), call, ReasoningBlock(text="why"),
                 {"type": "tool-call", "id": "c2", "name": "n", "arguments": "{}"},
                 ToolCallBlock(id="c3", name="n", arguments="{}")],
                usage=TokenUsage(input_tokens=10, output_tokens=5, reasoning_tokens=2,
                                 cache_read_tokens=3),
                source_event_seqs=[0, 1])
            step.tool_result(step.tool_call(call), "ok", meta={"k": [1, 2.5, None]})
            step.tool_call({"type": "tool-call", "id": "c2", "name": "n", "arguments": "{}"})
            step.tool_result("c2", [TextBlock(text="bad")], is_error=True,
                             error={"name": "E", "code": "x"})
            step.tool_call("c4", "n", "{}")  # unanswered: answered at step/end, as c3
            refused(lambda: step.tool_call("c4", "n", "{}"))
            refused(lambda: step.tool_result("c9", "x"))
            refused(lambda: step.tool_result("c2", "again"))
            refused(lambda: step.chunk("token"))  # type: ignore[arg-type]
            refused(lambda: step.chunk(TextDeltaChunk(index=0.5, text="x")))  # type: ignore[arg-type]
            refused(lambda: step.chunk({"type": "text-delta", "index": "0", "text": "x"}))
            refused(lambda: step.assistant([TextBlock(text=1)]))  # type: ignore[arg-type]
            refused(lambda: step.assistant("x", usage=TokenUsage(
                input_tokens="9", output_tokens=1)))  # type: ignore[arg-type]
            refused(lambda: step.assistant("x", finish="stop"))  # type: ignore[arg-type]
            refused(lambda: step.assistant(["ok", 7]))  # type: ignore[list-item]
            refused(lambda: step.tool_call({"type": "tool-call", "toolCallId": "c"}))
            refused(lambda: turn.step())
            refused(lambda: s.turn())
        turn.steer("steer", source=UserSource())
        refused(lambda: turn.user(123))  # type: ignore[arg-type]
        refused(lambda: turn.user("x", source="user"))  # type: ignore[arg-type]
        with turn.step() as step:
            step.assistant("cut", finish=MaxTokensFinish())
        with turn.step() as step:
            step.chunk(FinishChunk(reason=MaxTokensFinish()))
            step.assistant("cut again")
        refused(lambda: turn.end("completed"))  # type: ignore[arg-type]
    refused(lambda: turn.user("late"))
    refused(lambda: step.chunk(TextDeltaChunk(index=0, text="late")))

    # A numbered turn started by an injection; a model error wins over max-tokens.
    with s.turn(InjectionTrigger(source=PluginSource(plugin="cron")), number=7) as turn:
        with turn.step() as step:
            step.assistant("half", finish={"kind": "max-tokens"})
        with turn.step() as step:
            step.chunk({"type": "finish", "reason": {"kind": "error", "message": "boom",
                                                     "code": "e1"}})
            step.assistant([ToolCallBlock(id="m1", name="n", arguments="{}")])
    # A block that raises in a step with a call left open: error, its code, the answer.
    try:
        with s.turn({"kind": "message", "source": {"kind": "user"}}) as turn:
            turn.user("go")
            with turn.step() as step:
                step.tool_call(ToolCallBlock(id="f1", name="n", arguments="{}"))
                raise _ToolFailed("tool crashed")
    except _ToolFailed:
        pass
    # A cancelled turn, between steps.
    try:
        with s.turn() as turn, turn.step() as step:
            step.assistant("partial", finish=AbortedFinish())
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    # A model-reported error, and an error between steps.
    with s.turn() as turn, turn.step() as step:
        step.assistant("x", finish=ErrorFinish(message="overloaded"))
    try:
        with s.turn() as turn:
            with turn.step() as step:
                step.chunk(TextDeltaChunk(index=0, text="t"))
            raise ValueError("")
    except ValueError:
        pass
    # Injections; events appended by hand inside a step count for its answers.
    s.inject("note")
    s.inject(["a", "b"], source=PluginSource(plugin="watch"))
    with s.turn() as turn:
        step = turn.step()
        step.chunk(TextDeltaChunk(index=0, text="t"))
        step.assistant([ToolCallBlock(id="h1", name="n", arguments="{}"),
                        ToolCallBlock(id="h2", name="n", arguments="{}")])
        s.append("tool/result", {"turn": turn.number, "step": step.number, "callId": "h1",
                                 "content": [{"type": "text", "text": "by hand"}],
                                 "isError": False}, surface_op="append")
        s.append("tool/call", {"turn": turn.number, "step": step.number, "callId": "h3",
                               "name": "n", "arguments": "{}"})
        step.end()
        step = turn.step()
        step.tool_call("l1", "n", "{}")
        step.end(answer=False)
        turn.end(RejectedReason(reason="policy"))
    with s.turn() as turn:
        step = turn.step()
        step.tool_call("e1", "n", "{}")
        turn.end({"kind": "completed"})  # ends the open step, answering e1
    return refusals


def _run() -> tuple[bytes, str]:
    s = Session("golden", clock=_counting_clock())
    refusals = _script(s)
    return s.to_jsonl(), "".join(f"{line}\n" for line in refusals)


def test_the_builders_write_the_golden_log_and_refuse_with_the_golden_errors() -> None:
    log, refusals = _run()
    if os.environ.get("DSH_SESSION_RECORD_GOLDEN"):
        GOLDENS.mkdir(exist_ok=True)
        LOG.write_bytes(log)
        REFUSALS.write_text(refusals, encoding="utf-8")
    assert log.decode().splitlines() == LOG.read_bytes().decode().splitlines()
    assert log == LOG.read_bytes()
    assert refusals.splitlines() == REFUSALS.read_text(encoding="utf-8").splitlines()
