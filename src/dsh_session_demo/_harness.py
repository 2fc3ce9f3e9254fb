"""A tiny, scripted stand-in for an agent loop: it appends what a real harness appends,
in the order it appends it, with a fake model that streams fixed replies.

The log is the only output that matters, so the harness does what the reference loop
does to it: ``turn/start``, the ``UserPromptSubmit`` hooks and the prompt (or its
block), per step a ``request/header`` (snapshot or delta) before the model call, the
stream chunks, the assembled ``assistant/message`` with its usage, each ``tool/call`` and
its ``tool/result``, the mode boundary flushes, and ``turn/end`` followed by the durable
flush. Nothing here waits on anything: time is an injected clock.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dsh_session_core import DurableStore, Session, ToolOutcome
from dsh_session_hooks import (
    DEFAULT_STDERR_SUMMARY_MAX_CHARS,
    append_hook_invoked,
    append_hook_result,
    merge_hook_outputs,
    parse_hook_output,
)
from dsh_session_mode import Modes, Question, QuestionAnswer, exit_plan_mode
from dsh_session_todo import todo_write

from ._model import Clock, HeaderWriter, Usage, stream_chunks
from ._texts import BASE_SYSTEM, MODEL, TOOL_NAMES, TOOL_SCHEMAS

__all__ = ["Ask", "Call", "Harness", "PromptHook", "Text", "Thinking", "Tool"]

USER: Mapping[str, str] = {"kind": "user"}

#: A ``UserPromptSubmit`` hook command, simulated: the prompt in, (exit code, stdout,
#: stderr) out, as the process would have produced them.
PromptHook = Callable[[str], tuple[int, str, str]]
#: A live tool: the parsed arguments in, the model-facing outcome out.
Tool = Callable[[Mapping[str, Any]], ToolOutcome]
#: The user answering a question (``exit_plan_mode``'s plan review).
Ask = Callable[[Question], Iterable[QuestionAnswer]]


@dataclasses.dataclass(frozen=True, slots=True)
class Text:
    """A text block the model writes."""

    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Thinking:
    """A reasoning block the model writes."""

    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """A tool call the model makes, and how it goes.

    :param name: the tool.
    :param args: its arguments (sent as the JSON text the model would produce).
    :param result: the scripted outcome; ``None`` runs the harness's live tool.
    :param error_code: the ``tool/result.error.code`` of a failed call.
    :param runtime_ms: how long the tool runs.
    """

    name: str
    args: Mapping[str, Any]
    result: ToolOutcome | None = None
    error_code: str | None = None
    runtime_ms: int = 40


Block = Text | Thinking | Call


class Harness:
    """Drives one session through turns and steps.

    :param store: the durable store the session lives in (flushed at every turn end).
    :param session: the session to write to.
    :param clock: the store's clock, to let time pass.
    :param modes: the mode service (its policy shapes each request's header).
    :param review: the user's side of ``exit_plan_mode``: answers the plan review.
    :param prompt_hooks: the ``UserPromptSubmit`` hook commands, in order.
    """

    def __init__(
        self,
        store: DurableStore,
        session: Session,
        *,
        clock: Clock,
        modes: Modes,
        review: Ask,
        prompt_hooks: Sequence[PromptHook] = (),
    ) -> None:
        self.store = store
        self.session = session
        self.clock = clock
        self.modes = modes
        # The two tools the plugins ship run for real; the others are scripted per call.
        self.tools: dict[str, Tool] = {
            "todo_write": lambda args: todo_write(session, args.get("todos")),
            "exit_plan_mode": lambda args: exit_plan_mode(modes, session, args["plan"], review),
        }
        self.prompt_hooks = prompt_hooks
        self.turn = sum(1 for e in session.events if e.type == "turn/start")
        self.step_no = 0
        self._headers = HeaderWriter()  # one per loop instance: a new process resumes
        self._usage = Usage()

    # --- turns ----------------------------------------------------------------------------

    def begin_turn(self, *, injected_by: str | None = None) -> None:
        """Open the next turn: a user's message batch, or an idle-time injection."""
        self.turn += 1
        self.step_no = 0
        source = USER if injected_by is None else {"kind": "plugin", "plugin": injected_by}
        kind = "message" if injected_by is None else "injection"
        self.session.append(
            "turn/start", {"turn": self.turn, "trigger": {"kind": kind, "source": source}}
        )
        self.modes.flush(self.session, turn_start=True)  # a pending mode switch lands here

    def submit(self, prompt: str) -> bool:
        """Run the prompt hooks, then log the prompt; a blocked prompt ends the turn
        ``rejected``. Returns whether the prompt went through."""
        outputs = []
        for hook in self.prompt_hooks:
            handler = f"claude:UserPromptSubmit:{self._hook_count() + 1}"
            append_hook_invoked(self.session, turn=self.turn, point="UserPromptSubmit",
                                dialect="claude", handler_id=handler)
            self.clock.wait(12)
            code, stdout, stderr = hook(prompt)
            output = parse_hook_output(code, stdout, stderr, "UserPromptSubmit")
            append_hook_result(self.session, turn=self.turn, point="UserPromptSubmit",
                               handler_id=handler, output=output,
                               stderr_summary_max_chars=DEFAULT_STDERR_SUMMARY_MAX_CHARS,
                               duration_ms=12.5)
            outputs.append(output)
        merged = merge_hook_outputs(outputs)
        content = [{"type": "text", "text": prompt}]
        if merged.decision == "deny":
            reason = merged.reason or "blocked by a UserPromptSubmit hook"
            self.session.append("prompt/blocked",
                                {"content": content, "source": dict(USER), "reason": reason})
            self.end_turn({"kind": "rejected", "reason": reason})
            return False
        self.session.append("user/message", {"content": content, "source": dict(USER)},
                            surface_op="append")
        return True

    def _hook_count(self) -> int:
        # Handler ids count the invocations of the whole log, so a resumed process
        # continues the numbering instead of reusing ids.
        return sum(1 for e in self.session.events if e.type == "hook/invoked")

    def inject_context(self, text: str, plugin: str) -> None:
        """A context injection (file-change notice, AGENTS.md...) from ``plugin``."""
        self.session.append(
            "context/message",
            {"content": [{"type": "text", "text": text}],
             "source": {"kind": "plugin", "plugin": plugin}},
            surface_op="append",
        )

    def steer(self, text: str) -> None:
        """A message the user sent while the turn ran, delivered between steps."""
        self.session.append(
            "steering/message",
            {"turn": self.turn, "content": [{"type": "text", "text": text}],
             "source": dict(USER)},
            surface_op="append",
        )

    def end_turn(self, reason: Mapping[str, Any] | None = None) -> None:
        """Close the turn and make it durable (the flush every harness owes a turn end)."""
        self.session.append("turn/end", {"turn": self.turn,
                                         "reason": dict(reason or {"kind": "completed"})})
        self.store.flush(self.session)

    # --- steps ----------------------------------------------------------------------------

    def step(self, *blocks: Block, before_tools: Callable[[], None] | None = None) -> None:
        """One whole step: the request header, the streamed reply, its tool calls.

        :param before_tools: called once the calls are logged and before they run.
        """
        self.start_step()
        calls = self.respond(blocks)
        if before_tools is not None:
            before_tools()
        for call_id, call, call_seq in calls:
            self.run_tool(call_id, call, call_seq)
        self.end_step()

    def start_step(self) -> None:
        """``step/start``, then the header the request is built under."""
        self.step_no += 1
        self.session.append("step/start", {"turn": self.turn, "step": self.step_no})
        self._headers.record(self.session, self._header())

    def _header(self) -> dict[str, Any]:
        # The mode's policy is the soft layer: its prompt section and the tools offered.
        section = self.modes.policy_section(self.session)
        system = f"{BASE_SYSTEM}\n\n{section}" if section else BASE_SYSTEM
        tools = [TOOL_SCHEMAS[n] for n in self.modes.visible_tools(self.session, TOOL_NAMES)]
        return {"config": {"model": MODEL}, "system": system, "tools": tools}

    def respond(
        self, blocks: Sequence[Block], *, cut_after: int | None = None
    ) -> list[tuple[str, Call, int]]:
        """Stream the model's reply, then log the assembled message and its calls.

        :param cut_after: stop after this many chunks (the process is about to die).
        :returns: each call's id, spec and ``tool/call`` seq.
        """
        content: list[dict[str, Any]] = []
        calls: list[tuple[str, str, Call]] = []  # id, arguments as sent, spec
        for block in blocks:
            if isinstance(block, Call):
                call_id = f"call_{self.turn}_{self.step_no}_{len(calls) + 1}"
                arguments = json.dumps(dict(block.args), separators=(", ", ": "))
                content.append({"type": "tool-call", "id": call_id, "name": block.name,
                                "arguments": arguments})
                calls.append((call_id, arguments, block))
            else:
                kind = "text" if isinstance(block, Text) else "reasoning"
                content.append({"type": kind, "text": block.text})
        usage = self._usage.count(self.session.derive_messages(), self._header(), content)
        finish = "tool-calls" if calls else "stop"
        chunks = stream_chunks(content, usage, finish)
        if cut_after is not None:
            chunks = chunks[:cut_after]
        chunk_seqs = [
            self.session.append("assistant/chunk",
                                {"turn": self.turn, "step": self.step_no, "chunk": c}).seq
            for c in chunks
        ]
        if cut_after is not None:
            return []
        self.session.append(
            "assistant/message",
            {"turn": self.turn, "step": self.step_no, "content": content, "usage": usage},
            surface_op="append", source_event_seqs=chunk_seqs,
        )
        logged = []
        for call_id, arguments, call in calls:
            event = self.session.append("tool/call", {
                "turn": self.turn, "step": self.step_no, "callId": call_id,
                "name": call.name, "arguments": arguments,
            })
            logged.append((call_id, call, event.seq))
        return logged

    def run_tool(self, call_id: str, call: Call, call_seq: int) -> None:
        """Run one call (after the mode gate) and log its result."""
        self.clock.wait(call.runtime_ms)
        denied = self.modes.gate(self.session, call.name)
        if denied is not None:
            outcome = ToolOutcome(denied, is_error=True)
        elif call.result is not None:
            outcome = call.result
        else:
            outcome = self.tools[call.name](call.args)
        data: dict[str, Any] = {
            "turn": self.turn, "step": self.step_no, "callId": call_id,
            "content": [{"type": "text", "text": outcome.text}], "isError": outcome.is_error,
        }
        if outcome.is_error:
            data["error"] = {"name": "ToolError", "code": call.error_code or "TOOL_ERROR"}
        self.session.append("tool/result", data, surface_op="append",
                            source_event_seqs=[call_seq])

    def end_step(self) -> None:
        """``step/end``, a mode boundary."""
        self.session.append("step/end", {"turn": self.turn, "step": self.step_no})
        self.modes.flush(self.session)
