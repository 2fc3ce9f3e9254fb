"""One-line descriptions of events from their wire shape, for people.

Everything here reads the wire shape (``to_wire(event)``, or a parsed log line) and
nothing else, so it describes plugin events whether or not their plugin is installed,
and never fails on odd data: an opaque event may hold any JSON where a schema expects
an object, so every field is checked before use (a missing or odd field reads ``?``).

Plugin events are known by their type string only (core never imports a plugin):
``hook/*`` (decisions), ``mode/set``, ``todo/write``, ``compact/*``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .text import shorten

__all__ = [
    "LABELS",
    "blocks_text",
    "compact_head",
    "describe",
    "field",
    "hook_outcome",
    "obj",
    "reason_text",
    "trigger_text",
    "usage_sum",
    "usage_text",
    "when",
    "wire_events",
    "wire_of",
]

#: The short label of each known type in a timeline (others show their type).
LABELS = {
    "user/message": "user", "assistant/message": "assistant", "context/message": "context",
    "steering/message": "steering", "tool/call": "tool call", "tool/result": "result",
    "tool/code-dispatch": "dispatch", "prompt/blocked": "blocked",
    "request/header": "request", "request/header-delta": "request",
    "hook/invoked": "hook", "hook/result": "hook", "mode/set": "mode", "todo/write": "todo",
    "compact/start": "compact", "compact/summary": "compact", "compact/end": "compact",
    "turn/start": "turn", "turn/end": "turn end", "step/start": "step",
    "step/end": "step end", "assistant/chunk": "chunk",
}

#: Token usage keys, as the log writes them, and how people read them.
USAGE_KEYS = {
    "inputTokens": "in", "outputTokens": "out", "cacheReadTokens": "cache read",
    "cacheWriteTokens": "cache write", "reasoningTokens": "reasoning",
}


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def field(value: Any) -> str:
    """A scalar for display: strings as they are, numbers as JSON writes them, else ``?``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return "?"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return "?"


def when(ms: Any) -> str:
    """Epoch milliseconds as local ``YYYY-MM-DD HH:MM:SS`` (``?`` when not a time)."""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return "?"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return "?"


def wire_of(value: Any) -> Any:
    """An event, payload or header in its wire shape, as plain builtins. Unlike
    ``to_wire``, a lone surrogate (which a reference log may hold) is no error."""
    from .._schema.codec import encode_event, encode_line
    from ..events import Event
    from ..jscompat import json_parse

    line = encode_event(value) if isinstance(value, Event) else encode_line(value)
    return json_parse(line)  # msgspec first; lone surrogate escapes by the stdlib


def wire_events(
    events: Iterable[Any], *, bare: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Events in their wire shape, decoded in one call (one by one only when a line
    holds what msgspec cannot read back, such as a lone surrogate).

    :param bare: types for which only ``{"type", "seq"}`` is needed (stream chunks are
        most of a log and are only counted: skipping them halves the cost).
    """
    import msgspec

    from .._schema.codec import encode_events

    events = list(events)
    full = [e for e in events if e.type not in bare]
    body = encode_events(full)
    wires: list[Any] = []
    if body:
        try:
            wires = msgspec.json.decode(b"[" + body[:-1].replace(b"\n", b",") + b"]")
        except msgspec.DecodeError:
            wires = [wire_of(e) for e in full]
    if len(full) == len(events):
        return [obj(w) for w in wires]
    it = iter(wires)
    return [{"type": e.type, "seq": e.seq} if e.type in bare else obj(next(it))
            for e in events]


def _source(value: Any) -> str:
    src = obj(value)
    kind = field(src.get("kind"))
    return f"plugin {field(src.get('plugin'))}" if kind == "plugin" else kind


def trigger_text(data: dict[str, Any]) -> str:
    """What started a turn: ``message from user``, ``injection from plugin todo``."""
    trigger = obj(data.get("trigger"))
    if not trigger:
        return "no trigger"
    return f"{field(trigger.get('kind'))} from {_source(trigger.get('source'))}"


def reason_text(value: Any) -> str:
    """Why a turn ended: ``completed``, ``error at step 2: boom (E42)``..."""
    reason = obj(value)
    kind = field(reason.get("kind"))
    if kind == "error":
        code = reason.get("code")
        text = f"error at step {field(reason.get('step'))}: {field(reason.get('message'))}"
        return text + (f" ({field(code)})" if code is not None else "")
    if kind in ("aborted", "rejected") and reason.get("reason") is not None:
        return f"{kind}: {field(reason.get('reason'))}"
    return kind


def blocks_text(content: Any) -> str:
    """Content blocks as one text: text as is, other blocks in parentheses."""
    parts = []
    for block in content if isinstance(content, list) else ():
        b = obj(block)
        kind = b.get("type")
        if kind == "text":
            parts.append(field(b.get("text")))
        elif kind == "reasoning":
            parts.append(f"(reasoning: {field(b.get('text'))})")
        elif kind == "tool-call":
            parts.append(f"(calls {field(b.get('name'))} {field(b.get('arguments'))})")
        elif kind == "tool-result":
            parts.append(f"(result of {field(b.get('toolCallId'))}: "
                         f"{blocks_text(b.get('content'))})")
        else:
            parts.append(f"({field(kind)})")
    return " ".join(parts)


def _assistant_text(data: dict[str, Any]) -> str:
    content = [obj(b) for b in data.get("content") or () if isinstance(b, dict)]
    text = " ".join(field(b.get("text")) for b in content if b.get("type") == "text")
    calls = [field(b.get("name")) for b in content if b.get("type") == "tool-call"]
    if not text:
        thought = [field(b.get("text")) for b in content if b.get("type") == "reasoning"]
        text = f"(reasoning: {' '.join(thought)})" if thought else ""
    if calls:  # first: the line may be cut short, and the calls matter most
        text = f"[calls {', '.join(calls)}] {text}"
    return text.strip() or "(empty)"


def usage_text(usage: dict[str, Any]) -> str:
    """Token counts: ``in 2106 · out 83 · reasoning 17`` (zeros and absent keys left out)."""
    return " · ".join(
        f"{label} {usage[key]:,}" for key, label in USAGE_KEYS.items()
        if isinstance(usage.get(key), int | float) and usage[key]
    )


def usage_sum(total: dict[str, int | float], usage: Any) -> None:
    """Add one message's ``usage`` to ``total`` (numbers only)."""
    for key, value in obj(usage).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def hook_outcome(data: dict[str, Any]) -> str:
    """A hook's result: ``block: bash is disabled by policy (exit 2, 14 ms)``."""
    text = field(data.get("decision"))
    if data.get("stderrSummary") is not None:
        text += f": {field(data.get('stderrSummary'))}"
    facts = []
    if data.get("exitCode") is not None:
        facts.append(f"exit {field(data.get('exitCode'))}")
    duration = data.get("durationMs")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        facts.append(f"{duration:.0f} ms")
    return text + (f" ({', '.join(facts)})" if facts else "")


def _hook_invoked(data: dict[str, Any]) -> str:
    text = f"{field(data.get('point'))} [{field(data.get('dialect'))}"
    if data.get("matcher") is not None:
        text += f", matcher {field(data.get('matcher'))}"
    return text + "]"


def _todo(data: dict[str, Any]) -> str:
    todos = [obj(t) for t in data.get("todos") or () if isinstance(t, dict)]
    counts = Counter(field(t.get("status")) for t in todos)
    order = ["completed", "in_progress", "pending"]
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in order if counts[s]]
    parts += [f"{n} {s}" for s, n in counts.items() if s not in order]
    text = f"{len(todos)} todo(s)" + (f": {', '.join(parts)}" if parts else "")
    doing = [field(t.get("content")) for t in todos if t.get("status") == "in_progress"]
    return text + (f"; now: {doing[0]}" if doing else "")


def compact_head(data: dict[str, Any], shadowed: str = "") -> str:
    """What a ``compact/summary`` shadowed and how: ``shadowed 9 node(s) #3…#66 (4
    assistant, 2 result; ~519 tokens) by <model>``.

    :param shadowed: what the shadowed nodes were, when the caller knows the log.
    """
    seqs = data.get("shadowedSeqs")
    span = obj(data.get("shadowedRange"))
    count = len(seqs) if isinstance(seqs, list) else "?"
    facts = [shadowed] if shadowed else []
    if data.get("shadowedTokenCount") is not None:
        facts.append(f"~{field(data.get('shadowedTokenCount'))} tokens")
    return (f"shadowed {count} node(s) #{field(span.get('start'))}…#{field(span.get('end'))}"
            + (f" ({'; '.join(facts)})" if facts else "") + f" by {field(data.get('model'))}")


def _request(kind: str, data: dict[str, Any]) -> str:
    if kind == "request/header":
        header = obj(data.get("header"))
        tools = header.get("tools")
        text = (f"{field(data.get('reason'))} header · model "
                f"{field(obj(header.get('config')).get('model'))}")
        text += f" · {len(tools)} tool(s)" if isinstance(tools, list) else ""
        system = header.get("system")  # last: a long prompt is what a line cuts
        if isinstance(system, str) and system:
            text += f" · system: {' '.join(system.split())}"
        return text
    changed = [k for k in ("system", "tools", "config", "messagePrefix") if k in data]
    return f"header delta: {', '.join(changed) or 'nothing'}"


def _surface_op(wire: dict[str, Any]) -> str:
    op = obj(wire.get("surfaceOp"))
    if op.get("op") == "replace":
        return f"[replaces #{field(op.get('start'))}…#{field(op.get('end'))}] "
    return ""


def describe(wire: dict[str, Any], *, usage: bool = True) -> str:
    """One event as one line of text (not shortened), without context: a tool result
    does not know its call's name here; the timeline adds that.

    :param usage: end an assistant message with its token usage.
    """
    kind = wire.get("type")
    data = obj(wire.get("data"))
    if kind in ("user/message", "context/message", "steering/message"):
        source = _source(data.get("source"))
        origin = f"(from {source}) " if source not in ("user", "?") else ""
        return _surface_op(wire) + origin + blocks_text(data.get("content"))
    if kind == "assistant/message":
        tokens = usage_text(obj(data.get("usage"))) if usage else ""
        return _surface_op(wire) + _assistant_text(data) + (f" · {tokens}" if tokens else "")
    if kind == "tool/call":
        return f"{field(data.get('name'))} {field(data.get('arguments'))}"
    if kind == "tool/result":
        error = "error: " if data.get("isError") is True else ""
        return f"{_surface_op(wire)}{error}{blocks_text(data.get('content'))}"
    if kind == "tool/code-dispatch":
        error = "error: " if data.get("isError") is True else ""
        return (f"{field(data.get('name'))} → {error}{field(data.get('resultSummary'))}")
    if kind == "prompt/blocked":
        return f"{field(data.get('reason'))}: {blocks_text(data.get('content'))}"
    if kind in ("request/header", "request/header-delta"):
        return _request(kind, data)
    if kind == "turn/start":
        return f"turn {field(data.get('turn'))} · {trigger_text(data)}"
    if kind == "turn/end":
        return f"turn {field(data.get('turn'))} · {reason_text(data.get('reason'))}"
    if kind in ("step/start", "step/end"):
        return f"turn {field(data.get('turn'))} step {field(data.get('step'))}"
    if kind == "assistant/chunk":
        chunk = obj(data.get("chunk"))
        text = chunk.get("text", chunk.get("argumentsDelta"))
        return field(chunk.get("type")) + (f" {text!r}" if isinstance(text, str) else "")
    if kind == "hook/invoked":
        return _hook_invoked(data)
    if kind == "hook/result":
        return f"{field(data.get('point'))} {hook_outcome(data)}"
    if kind == "mode/set":
        return f"mode → {field(data.get('mode'))}"
    if kind == "todo/write":
        return _todo(data)
    if kind == "compact/start":
        return "compaction started"
    if kind == "compact/summary":
        return f"{compact_head(data)}: {blocks_text(data.get('summary'))}"
    if kind == "compact/end":
        failure = data.get("error")
        return f"compaction failed: {field(failure)}" if failure is not None else "compaction done"
    return _json(wire.get("data"))


def _json(value: Any) -> str:
    from .._schema.codec import encode_line

    return shorten(encode_line(value).decode("utf-8", "replace"), 500)
