"""What the demo prints: the story for people, or a JSON summary for programs.

For people: the main session's timeline (with the crash and the repair noted where they
happened), the fork and its lineage, the derived messages, where the log is, and the
commands to try next. The JSON summary has the same facts, without the timeline.
"""

from __future__ import annotations

import os
import shlex
import signal
from typing import Any

from dsh_session_core import Session, to_wire

from ._run import DemoRun
from ._style import Style
from ._timeline import WIDTH, one_line, text_of, timeline

__all__ = ["next_commands", "render", "summary"]


def _turns(session: Session) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for event in session.events:
        w = to_wire(event)
        if w["type"] == "turn/start":
            trigger = w["data"]["trigger"]
            turns.append({"turn": w["data"]["turn"], "trigger": trigger["kind"],
                          "startSeq": w["seq"], "steps": 0, "usage": {}})
        elif turns and w["type"] == "step/start":
            turns[-1]["steps"] += 1
        elif turns and w["type"] == "assistant/message":
            usage = turns[-1]["usage"]
            for key, value in (w["data"].get("usage") or {}).items():
                usage[key] = usage.get(key, 0) + value
        elif turns and w["type"] == "turn/end":
            turns[-1]["end"] = w["data"]["reason"]["kind"]
            turns[-1]["endSeq"] = w["seq"]
    return turns


def next_commands(run: DemoRun, store: str | None) -> list[tuple[str, str]]:
    """The commands to try next, each with what it shows."""
    loc = run.location
    sid, fork = shlex.quote(run.session.id), shlex.quote(run.fork.id)
    # The embedded default needs no flag; any other store is named as it was given.
    flag = f" --store {shlex.quote(store)}" if store else ""
    commands = [
        (f"dsh-session view {sid}{flag}", "the session in your browser (local, read-only)"),
        (f"dsh-session show {sid}{flag}", "the session, turn by turn"),
        (f"dsh-session stats {sid}{flag}", "its numbers: events, turns, tokens"),
        (f"dsh-session show {fork}{flag}", "the fork, with its parent"),
    ]
    if loc.log is not None and loc.fork_log is not None:
        log, fork_log = shlex.quote(loc.log), shlex.quote(loc.fork_log)
        commands += [
            (f"dsh-session derive {log}", "the messages the model would see, as JSON"),
            (f"dsh-session validate --strict {log} {fork_log}", "check every event"),
            (f"dsh-session export {log}", "the log re-encoded (byte for byte the same)"),
        ]
    else:  # a database: every command reads the session by its id
        commands += [
            (f"dsh-session derive {sid}{flag}", "the messages the model would see, as JSON"),
            (f"dsh-session validate --strict {sid} {fork}{flag}", "check every event"),
            (f"dsh-session export {sid}{flag} > {sid}.jsonl", "the log as a JSONL file"),
        ]
    return commands


def _crash_notes(run: DemoRun) -> dict[int, list[str]]:
    crash = run.crash
    name = signal.Signals(crash.signal).name if crash.signal else "no signal"
    lost = crash.written - crash.durable
    notes = {
        crash.durable - 1: [
            f"crash: the child process writing this turn was killed with {name} here. It "
            f"had flushed the log up to this event, then appended {lost} more events that "
            f"were never flushed: they are lost.",
            f'reopen: store.open("{run.session.id}") repaired the log by closing the '
            f"interrupted turn: {', '.join(e.type for e in run.closers)}.",
        ],
    }
    notes.setdefault(run.fork_boundary, []).append(
        f"fork: {run.fork.id} was cut here (boundary seq {run.fork_boundary})")
    c = run.compaction
    notes.setdefault(c.result.end_seq, []).append(
        f"surface {c.nodes_before} → {c.nodes_after} messages, prompt ~{c.tokens_before:,} → "
        f"~{c.tokens_after:,} tokens (the shadowed events stay in the log)")
    return notes


def render(run: DemoRun, style: Style, *, store: str | None = None) -> str:
    """The demo's output for people."""
    s, session, fork, loc = style, run.session, run.fork, run.location
    out = [
        s("dsh-session demo", "bold") + ": a scripted agent session (offline, deterministic)",
        f"  store    {loc.store} ({loc.backend})",
        f"  session  {session.id}: {len(session.events)} events in "
        f"{len(_turns(session))} turns, cwd {session.header.cwd}",
        f"  fork     {fork.id}: {len(fork.events)} events, the first "
        f"{fork.header.seed_length} shared with {fork.header.parent_session}",
    ]
    out += timeline(session, style, notes=_crash_notes(run))

    h = fork.header
    out += ["", s(f"Fork {fork.id}", "bold", "blue")
            + s(f" · header: parentSession {h.parent_session}, seedLength {h.seed_length} "
                f"(its seqs 0…{run.fork_boundary} are turns 1-4 of {h.parent_session})", "dim")]
    seed = h.seed_length if isinstance(h.seed_length, int) else 0
    out += timeline(fork, style, since=seed)

    messages = session.derive_messages()
    out += ["", s(f"Derived messages of {session.id}", "bold")
            + s(f" · {len(messages)} messages from {len(session.events)} events: what the "
                f"model is sent next", "dim")]
    for i, m in enumerate(to_wire(messages), 1):
        text = text_of(m["content"])
        out.append(f"{s(f'{i:>5}', 'dim')}  {m['role']:<10} {one_line(text, WIDTH - 18)}")

    out += ["", s("The log", "bold")]
    if loc.log is not None:
        size = os.path.getsize(loc.log)
        out.append(f"  {loc.log}  ({len(session.events)} events, {size:,} bytes)")
        out.append(f"  {loc.fork_log}  (the fork)")
    else:
        kind = "PostgreSQL database" if loc.backend == "postgresql" else "SQLite database"
        out.append(f"  {kind} {loc.store}: sessions {session.id} "
                   f"({len(session.events)} events) and {fork.id} (the fork)")
    out += ["", s("Next commands to try", "bold")]
    commands = next_commands(run, store)
    # Comments line up, except after a command too long to wait for.
    width = max((len(c) for c, _ in commands if len(c) <= 56), default=0)
    out += [f"  {c:<{width}}  {s('# ' + why, 'dim')}" for c, why in commands]
    return "\n".join(out) + "\n"


def summary(run: DemoRun, *, store: str | None = None) -> dict[str, Any]:
    """The demo's facts as JSON-ready data (``--json``)."""
    c, loc, crash = run.compaction, run.location, run.crash
    return {
        "session": run.session.id,
        "backend": loc.backend,
        "store": loc.store,
        "log": loc.log,
        "events": len(run.session.events),
        "messages": len(run.session.derive_messages()),
        "turns": _turns(run.session),
        "fork": {"session": run.fork.id, "log": loc.fork_log,
                 "parentSession": run.fork.header.parent_session,
                 "seedLength": run.fork.header.seed_length,
                 "events": len(run.fork.events)},
        "crash": {"signal": signal.Signals(crash.signal).name if crash.signal else None,
                  "written": crash.written, "durable": crash.durable,
                  "lost": crash.written - crash.durable,
                  "repairedWith": [e.type for e in run.closers]},
        "compaction": {"startSeq": c.result.start_seq, "endSeq": c.result.end_seq,
                       "shadowedSeqs": list(c.result.shadowed_seqs),
                       "surfaceBefore": c.nodes_before, "surfaceAfter": c.nodes_after,
                       "tokensBefore": c.tokens_before, "tokensAfter": c.tokens_after},
        "next": [command for command, _ in next_commands(run, store)],
    }
