"""The timeline: a session's log told turn by turn, one line per thing that happened.

It reads the log only (every event in its wire shape), never the script that wrote it,
so what it shows is what a reader of the stored log would find: the turn and how it was
triggered, its steps and request headers, the messages shortened to one line, each tool
call with its result, hook decisions, mode changes, the todo list, compaction, usage,
and how the turn ended.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsh_session_core import Event, to_wire

from ._style import Style

__all__ = ["WIDTH", "Line", "one_line", "text_of", "timeline"]

#: The width lines are shortened to.
WIDTH = 100
_TEXT = WIDTH - 18  # after the seq and label columns

Line = str

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TOKEN = re.compile(r"(\x1b\[[0-9;]*m)|(.)", re.DOTALL)


def one_line(text: str, width: int = _TEXT) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``width`` with ``…``.

    Colour codes take no room and are never cut in half: the width counts what shows.
    """
    flat = " ".join(text.split())
    if len(_ANSI.sub("", flat)) <= width:
        return flat
    out: list[str] = []
    shown = 0
    for escape, char in _TOKEN.findall(flat):
        if escape:
            out.append(escape)
        elif shown < width - 1:
            out.append(char)
            shown += 1
    return "".join(out) + "…" + ("\x1b[0m" if "\x1b[" in flat else "")


def text_of(content: Iterable[Mapping[str, Any]]) -> str:
    """Content blocks (wire shape) as one text: tool calls and results named inline."""
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block["text"]))
        elif kind == "reasoning":
            parts.append(f"(thinking) {block['text']}")
        elif kind == "tool-call":
            parts.append(f"[calls {block['name']}]")
        elif kind == "tool-result":
            parts.append(f"[result of {block['toolCallId']}: {text_of(block['content'])}]")
    return " ".join(parts)


def _todo(item: Mapping[str, Any]) -> str:
    mark = {"completed": "[x]", "in_progress": "[>]"}.get(str(item["status"]), "[ ]")
    return f"{mark} {item['content']}"


def _header_change(data: Mapping[str, Any]) -> str:
    parts: list[str] = []
    if "system" in data:
        parts.append(f"system prompt edited (+{len(data['system']['insert'])} lines)")
    if "tools" in data:
        tools = data["tools"]
        names = [f"-{n}" for n in tools["removed"]] + [f"+{t['name']}" for t in tools["added"]]
        names += [f"~{t['name']}" for t in tools["changed"]]
        parts.append(f"tools {' '.join(names)}")
    if "config" in data:
        parts.append(f"config → {data['config'].get('model')}")
    return "delta: " + ", ".join(parts)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class _Turn:
    """What the printer remembers within one turn."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # call id -> tool, until its result
        self.chunks = 0
        self.steps = 0
        self.model_calls = 0
        self.usage = {"inputTokens": 0, "cacheReadTokens": 0, "outputTokens": 0}


class _Printer:
    def __init__(self, style: Style, notes: Mapping[int, Sequence[str]]) -> None:
        self.s = style
        self.notes = notes
        self.lines: list[Line] = []
        self.turn = _Turn()

    def row(self, seq: int | None, label: str, text: str, *styles: str) -> None:
        left = f"{seq:>5}" if seq is not None else " " * 5
        body = one_line(text)
        self.lines.append(f"{self.s(left, 'dim')}  {self.s(f'{label:<10}', *styles)} {body}")

    def note(self, text: str) -> None:
        """A remark the log cannot make by itself, wrapped rather than cut."""
        for i, part in enumerate(textwrap.wrap(text, _TEXT)):
            self.lines.append(" " * 7 + self.s(f"{'note' if i == 0 else '':<10}", "yellow")
                              + f" {part}")

    def event(self, w: Mapping[str, Any]) -> None:
        t, seq, d = w["type"], w["seq"], w["data"]
        handler = getattr(self, "on_" + t.replace("/", "_").replace("-", "_"), None)
        if handler is not None:
            handler(seq, d, w)
        for note in self.notes.get(seq, ()):
            self.note(note)

    # --- turns and steps -------------------------------------------------------------------

    def on_turn_start(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.turn = _Turn()
        trigger = d["trigger"]
        source = trigger["source"]
        who = "user" if source["kind"] == "user" else f"plugin {source.get('plugin')}"
        what = "message from" if trigger["kind"] == "message" else "injection by"
        self.lines.append("")
        self.lines.append(self.s(f"Turn {d['turn']}", "bold") + self.s(f" · {what} {who}", "dim")
                          + self.s(f" · from seq {seq}", "dim"))

    def on_step_start(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.turn.steps += 1
        self.turn.chunks = 0
        step = self.s(f"── step {d['step']}", "bold")
        self.lines.append(f"{self.s(f'{seq:>5}', 'dim')}  {step}")

    def on_turn_end(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        reason = d["reason"]
        kind = reason["kind"]
        colour = {"completed": "green", "interrupted": "yellow"}.get(kind, "red")
        detail = f": {reason['reason']}" if reason.get("reason") else ""
        u = self.turn.usage
        usage = ""
        if self.turn.model_calls:
            cached = f" (+{u['cacheReadTokens']:,} cached)" if u["cacheReadTokens"] else ""
            usage = (f" · {_count(self.turn.steps, 'step')}, "
                     f"{_count(self.turn.model_calls, 'model call')}, "
                     f"tokens in {u['inputTokens']:,}{cached} / out {u['outputTokens']:,}")
        self.row(seq, "end", self.s(kind + detail, colour) + usage)

    # --- headers ---------------------------------------------------------------------------

    def on_request_header(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        h = d["header"]
        tools = h.get("tools") or []
        self.row(seq, "header", f"snapshot ({d['reason']}): {h['config']['model']}, "
                                f"{len(tools)} tools: {', '.join(t['name'] for t in tools)}",
                 "dim")

    def on_request_header_delta(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.row(seq, "header", _header_change(d), "dim")

    # --- messages --------------------------------------------------------------------------

    def on_user_message(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        if w.get("surfaceOp", "append") != "append":
            op = w["surfaceOp"]
            self.row(seq, "checkpoint", f"user message replacing surface nodes {op['start']}"
                     f"…{op['end']}: {text_of(d['content'][1:2])}", "cyan")
            return
        self.row(seq, "user", text_of(d["content"]), "bold")

    def on_context_message(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.row(seq, "context", f"({d['source'].get('plugin', 'user')}) "
                 f"{text_of(d['content'])}", "cyan")

    def on_steering_message(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.row(seq, "steering", text_of(d["content"]), "cyan")

    def on_assistant_chunk(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.turn.chunks += 1

    def on_assistant_message(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        usage = d.get("usage")
        if usage:
            self.turn.model_calls += 1
            for key in self.turn.usage:
                self.turn.usage[key] += int(usage.get(key, 0))
        text = " ".join(
            f"(thinking) {b['text']}" if b["type"] == "reasoning" else str(b["text"])
            for b in d["content"] if b["type"] in ("text", "reasoning")
        )
        streamed = f" [{self.turn.chunks} chunks]" if self.turn.chunks else ""
        if text:
            self.row(seq, "assistant", one_line(text, _TEXT - len(streamed)) + streamed)

    # --- tools -----------------------------------------------------------------------------

    def on_tool_call(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.turn.calls[d["callId"]] = d["name"]
        self.row(seq, "tool call", f"{d['name']} {d['arguments']}")

    def on_tool_result(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        name = self.turn.calls.pop(d["callId"], d["callId"])
        text = text_of(d["content"])
        lines = text.count("\n") + 1
        if d["isError"]:
            code = (d.get("error") or {}).get("code", "")
            outcome = self.s(f"error {code}".strip(), "red")
        else:
            outcome = self.s("ok", "green")
        size = f" ({lines} lines)" if lines > 1 else ""
        self.row(seq, "→ result", f"{name}: {outcome}{size}: {text.split(chr(10), 1)[0]}")

    def on_todo_write(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        for i, item in enumerate(d["todos"]):
            self.row(seq if i == 0 else None, "todos" if i == 0 else "", _todo(item),
                     "magenta")

    # --- plugins' records ------------------------------------------------------------------

    def on_hook_result(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        decision = d["decision"]
        exit_code = f" (exit {d['exitCode']})" if "exitCode" in d else ""
        why = f": {d['stderrSummary']}" if "stderrSummary" in d else ""
        colour = "red" if decision in ("block", "deny") else "green"
        self.row(seq, "hook", f"{d['point']} → {self.s(decision, colour)}{exit_code}{why}")

    def on_prompt_blocked(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.row(seq, "blocked", f"{text_of(d['content'])} (not sent to the model)", "red")

    def on_mode_set(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        # Approval in exit_plan_mode switches in-turn, while its call awaits its result;
        # a user's switch is logged at a turn boundary.
        why = ("approved in exit_plan_mode" if "exit_plan_mode" in self.turn.calls.values()
               else "the user's switch, logged at the turn boundary")
        self.row(seq, "mode", f"→ {d['mode']} ({why})", "magenta")

    def on_compact_start(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        self.row(seq, "compact", f"start (turn {d['turn']} holds the compaction lock)", "cyan")

    def on_compact_summary(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        shadowed = d["shadowedSeqs"]
        lines = sum(str(b.get("text", "")).count("\n") + 1 for b in d["summary"])
        self.row(seq, "summary", f"{len(shadowed)} surface messages (seqs {shadowed[0]}…"
                 f"{shadowed[-1]}, ~{d['shadowedTokenCount']:,} tokens) → {lines}-line "
                 f"summary by {d['model']}", "cyan")

    def on_compact_end(self, seq: int, d: Mapping[str, Any], w: Any) -> None:
        error = f" with error: {d['error']}" if d.get("error") else ""
        self.row(seq, "compact", f"end{error}", "cyan")


def timeline(
    events: Iterable[Event], style: Style, *, notes: Mapping[int, Sequence[str]] | None = None
) -> list[Line]:
    """The timeline of ``events`` (a log or a part of one), grouped by turn.

    :param notes: extra lines to print after the event with that seq (what the log
        cannot say by itself, e.g. that a process was killed there).
    """
    printer = _Printer(style, notes or {})
    for event in events:
        printer.event(to_wire(event))
    return printer.lines
