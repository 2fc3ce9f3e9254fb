"""``dsh-session ls``, ``show``, ``stats``, ``tail`` and ``fork``: living with sessions.

This module holds the argument parsers (only argparse: ``--help`` stays fast), ``stats``
and ``fork``; ``ls``, ``show`` and ``tail`` live in ``ls``, ``show`` and
``tail``, what they read in ``source``.

Every command but ``ls`` takes a SOURCE: a ``.jsonl`` log file (an existing path), or
else the id of a session in ``--store URL`` (default ``$DSH_SESSION_STORE``, else the
user's data folder; see :mod:`.source`). Reading never writes and never takes a
session's writer lock, so a live session can be inspected while its writer runs. Output
is for people (colour only on a terminal, and never with ``NO_COLOR``); ``--json`` is for
scripts. Reading a big file shows a progress bar on stderr when it is a terminal.

Exit codes (stable):

====  ===================================================================================
0     success
1     the input was rejected: no such session, an unreadable or corrupt log (``show`` and
      ``stats`` only reject what has no readable header; odd lines are warnings), a fork
      boundary that is not a ``turn/end`` (or a ``--turn`` that did not end, a log with
      no ``turn/end``), a child id already stored
2     bad usage: unknown option or missing argument, a bad or ``memory:`` store URL,
      a negative ``tail -n``, a ``fork --turn`` below 1
130   interrupted: Ctrl-C (``tail -f`` too: it is how following stops)
====  ===================================================================================

Errors are one line on stderr (``dsh-session: <what>``), often followed by a
``hint: <what to try>`` line, with a traceback only under ``--debug``. Warnings
(``dsh-session: warning: ...``) go to stderr; with ``--json`` they are in the document
instead.
"""

from __future__ import annotations

import argparse
import sys

from .commands import HELP
from .support import (
    EXIT_OK,
    Failure,
    one_line,
    registry,
)

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from .._inspect.sources import Source
    from .._schema.header import SessionHeader

# What the commands run is imported in the functions that run it: `dsh-session ls --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands"]

# --- stats ------------------------------------------------------------------------------


def compute_stats(source: Source) -> dict[str, Any]:
    """Counts and sizes of a session's events, as a JSON-ready document."""
    from collections import Counter

    from .._inspect.describe import obj, usage_sum, wire_of
    from .._schema.codec import encode_events
    from .source import payload

    events = source.events
    lines = encode_events(events).split(b"\n")
    by_type: dict[str, dict[str, int]] = {}
    for event, line in zip(events, lines, strict=False):
        row = by_type.setdefault(event.type or "(no type)", {"events": 0, "bytes": 0})
        row["events"] += 1
        row["bytes"] += len(line) + 1  # the log line and its newline
    tokens: dict[str, int | float] = {}
    ends: Counter[str] = Counter()
    tool_errors = failed_compactions = 0
    for event in events:
        kind = event.type
        if kind == "assistant/message":
            usage_sum(tokens, payload(event).get("usage"))
        elif kind == "tool/result":
            tool_errors += payload(event).get("isError") is True
        elif kind == "turn/end":
            reason = obj(payload(event).get("reason")).get("kind")
            ends[reason if isinstance(reason, str) else "?"] += 1
        elif kind == "compact/end":
            failed_compactions += payload(event).get("error") is not None

    def count(kind: str) -> int:
        return by_type.get(kind, {}).get("events", 0)

    return {
        "source": source.origin,
        "header": wire_of(source.header),
        "events": len(events),
        "bytes": sum(r["bytes"] for r in by_type.values()),
        "byType": dict(sorted(by_type.items(), key=lambda kv: -kv[1]["bytes"])),
        "tokens": tokens,
        "turns": count("turn/start"),
        "turnEnds": dict(ends),
        "errorTurnEnds": ends["error"],
        "steps": count("step/start"),
        "toolCalls": count("tool/call"),
        "toolResults": count("tool/result"),
        "toolErrors": tool_errors,
        "compactions": count("compact/summary"),
        "failedCompactions": failed_compactions,
        "warnings": source.warnings,
    }


def render_stats(doc: dict[str, Any], style: Any) -> str:
    from .._inspect.describe import USAGE_KEYS, field
    from .term import printable, text_table

    name = printable(field(doc["header"].get("id")))
    lines = [f"{style('session', 'bold')} {style(name, 'bold')}  ({printable(doc['source'])})",
             f"{doc['events']:,} event(s), {doc['bytes']:,} bytes", ""]
    table = [["TYPE", "EVENTS", "BYTES"]]
    table += [[printable(t), f"{r['events']:,}", f"{r['bytes']:,}"]
              for t, r in doc["byType"].items()]
    rendered = text_table(table, right={1, 2})
    lines += [style(rendered[0], "bold"), *rendered[1:], ""]
    ends = ", ".join(f"{n} {k}" for k, n in sorted(doc["turnEnds"].items()))
    lines.append(f"turns {doc['turns']}" + (f" (ended: {ends})" if ends else "")
                 + f" · steps {doc['steps']} · tool calls {doc['toolCalls']}"
                 + f" · tool results {doc['toolResults']} ({doc['toolErrors']} error(s))")
    lines.append(f"error turn ends {doc['errorTurnEnds']} · compactions "
                 f"{doc['compactions']} ({doc['failedCompactions']} failed)")
    tokens = doc["tokens"]
    lines.append("tokens " + " · ".join(
        f"{label} {tokens.get(key, 0):,}" for key, label in USAGE_KEYS.items()))
    return "\n".join(lines) + "\n"


def _stats(args: argparse.Namespace) -> int:
    from .source import load_source, out_json, out_text, warn
    from .term import Style

    doc = compute_stats(load_source(args, registry()))
    if args.json:
        out_json(doc)
        return EXIT_OK
    for warning in doc["warnings"]:
        warn(warning)
    out_text(render_stats(doc, Style.for_stream(sys.stdout)))
    return EXIT_OK


# --- fork -------------------------------------------------------------------------------


def _lineage(headers: list[SessionHeader], start: str) -> list[str]:
    """``start``, its parent, the parent's parent... as far as the store knows them."""
    parents = {h.id: h.parent_session for h in headers}
    chain = [start]
    while len(chain) < 100:
        parent = parents.get(chain[-1])
        if not isinstance(parent, str) or parent in chain:
            break
        chain.append(parent)
    return chain


def fork_boundary(args: argparse.Namespace, source: Source) -> int | None:
    """The seq ``fork`` cuts after: ``--at SEQ`` as given (the library checks it), the
    ``turn/end`` of ``--turn N`` (numbered from 1, as ``show`` numbers turns: the
    ``turn`` of its events), else the last ``turn/end`` of the log, whatever the turn's
    end reason. ``None`` for an empty log (an empty child).

    :raises Failure: ``--turn`` below 1 (a usage error), or no such ended turn; no
        ``turn/end`` at all.
    """
    from .source import payload
    from .support import EXIT_USAGE

    if args.at is not None:
        at: int = args.at
        return at
    ends = [(payload(e).get("turn"), e.seq) for e in source.events if e.type == "turn/end"]
    if args.turn is not None:
        wanted: int = args.turn
        if wanted < 1:
            msg = f"--turn counts turns from 1, as `dsh-session show` numbers them, got {wanted}"
            raise Failure(msg, EXIT_USAGE)
        found = [seq for turn, seq in ends if turn == wanted and type(turn) is int]
        if found:
            return found[-1]
        ended = sorted({t for t, _ in ends if type(t) is int})
        started = {payload(e).get("turn") for e in source.events if e.type == "turn/start"}
        if wanted in started:
            msg = (f"cannot fork {source.origin} after turn {wanted}: it has not ended "
                   f"(no turn/end)")
        else:
            msg = f"cannot fork {source.origin} after turn {wanted}: it has no turn {wanted}"
        held = (f"its ended turns: {_ranges(ended)}" if ended else "none of its turns ended")
        msg = f"{msg}; {held}"
        raise Failure(msg,
                      hint="pick an ended turn (`dsh-session show` lists them), or --at SEQ")
    if not source.events:
        return None
    if not ends:
        msg = f"cannot fork {source.origin}: no turn of it has ended (no turn/end to cut after)"
        raise Failure(msg, hint="a fork cuts after a turn/end: let a turn end, then fork")
    return ends[-1][1]


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5``."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _fork(args: argparse.Namespace) -> int:
    from .._inspect.describe import wire_of
    from .._model.session import Session
    from .._persistence.store.durable import DurableStore
    from .._persistence.urls import printable_url
    from ..errors import DshSessionError, SessionForkError
    from .source import (
        check_session_id,
        load_source,
        open_backend,
        out_json,
        out_text,
        store_url,
        warn,
    )

    url = store_url(args)
    shown = printable_url(url)  # in what it prints: never its password
    # The store is opened as every command opens it (a bad URL or database is one
    # line), except that a SQLite file is created when missing: the fork goes there.
    with DurableStore(open_backend(url, must_exist=False)) as store:
        source = load_source(args, store.registry)
        for warning in source.warnings:
            warn(warning)
        boundary = fork_boundary(args, source)
        if args.child_id is not None:
            check_session_id(store.backend, args.child_id)
            if any(h.id == args.child_id for h in store.stored()):
                msg = f'a session "{args.child_id}" is already stored in {shown}'
                raise Failure(msg, hint="pick another --as, or leave it out for a new UUID")
        try:
            # The parent is made live in this store only, never announced: the
            # persistence plugin does not bind it, so its log is neither locked,
            # repaired nor written. Only the child is persisted.
            parent = Session(source.header.id, source.events, source.header,
                             registry=store.registry)
            store.enter(parent)
            child = store.fork(parent, boundary, args.child_id)
            store.flush(child)
        except SessionForkError as exc:
            hint = ("pick the seq of a turn/end (`dsh-session show` lists them)"
                    if exc.code in ("OPEN_TURN", "INVALID_BOUNDARY") else "pick another --as")
            msg = f"cannot fork {source.origin}: {exc}"
            raise Failure(msg, hint=hint) from exc
        except DshSessionError as exc:
            msg = f"cannot fork {source.origin}: {one_line(exc)}"
            raise Failure(msg) from exc
        except OSError as exc:
            msg = f"cannot write the fork to {shown}: {exc.strerror or exc}"
            raise Failure(msg) from exc
        lineage = _lineage([*store.stored(), source.header], child.id)
    header = wire_of(child.header)
    if args.json:
        out_json({"id": child.id, "store": shown, "header": header, "lineage": lineage})
        return EXIT_OK
    out_text(f"{child.id}\n")
    at = f"seq {boundary}" if boundary is not None else "its start (it is empty)"
    sys.stderr.write(f"forked {source.origin} at {at} into {child.id} "
                     f"({len(child.events)} events) in {shown}\nlineage: {' ← '.join(lineage)}\n")
    return EXIT_OK


# --- wiring -----------------------------------------------------------------------------


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .source import add_key_argument, add_source_arguments

    # Only argparse here: `dsh-session --help` must not import what the commands use.
    ls = sub.add_parser("ls", help=HELP["ls"])
    ls.add_argument("--store", metavar="URL",
                    help="a folder, jsonl:///path, jsonl+zstd:///path (compact), "
                         "sqlite:///path.db or postgresql://host/dbname (default: "
                         "$DSH_SESSION_STORE, else the user's data folder)")
    add_key_argument(ls)
    ls.add_argument("--cwd", metavar="PATH", help="only the sessions of this working directory")
    ls.add_argument("--parent", metavar="ID", help="only the forks of this session")
    ls.add_argument("--since", metavar="WHEN",
                    help="only sessions active at or after WHEN: an ISO date or time "
                         "(2026-01-01, 2026-01-01T09:00; local unless zoned) or a duration "
                         "back from now (7d, 12h)")
    ls.add_argument("--until", metavar="WHEN",
                    help="only sessions last active before WHEN (as --since)")
    ls.add_argument("--sort", choices=("created", "activity", "events", "id"),
                    default="created",
                    help="the order of the rows (default: created): newest or most events "
                         "first, ids from A to Z")
    ls.add_argument("--reverse", action="store_true",
                    help="the other way round: oldest (or fewest events) first")
    ls.add_argument("--limit", metavar="N", help="show at most N rows")
    ls.add_argument("--offset", metavar="N", help="skip the first N rows")
    ls.add_argument("-a", "--all", action="store_true",
                    help="list the sessions plugins hide too (the ADK adapter's app and "
                         "user state, say), and those deleted (marked so)")
    ls.add_argument("-q", "--quiet", action="store_true", help="print the ids only, one a line")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(run=_run_ls)

    show = sub.add_parser("show", help=HELP["show"])
    add_source_arguments(show, prefixes=True)
    show.add_argument("--json", action="store_true", help="print the timeline as JSON")
    show.add_argument("--raw", action="store_true",
                      help="show the raw adapter events too (agents/item, adk/event...), "
                           "which their typed twins tell already")
    show.set_defaults(run=_run_show)

    stats = sub.add_parser("stats", help=HELP["stats"])
    add_source_arguments(stats)
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(run=_stats)

    tail = sub.add_parser(
        "tail", help=HELP["tail"]
    )
    add_source_arguments(tail, recover=False, prefixes=True)
    tail.add_argument("-f", "--follow", action="store_true",
                      help="keep printing events as they are appended (Ctrl-C stops)")
    tail.add_argument("-F", dest="retry", action="store_true",
                      help="as -f, but wait for a session (or --file) that does not exist "
                           "yet, then print it from its start (GNU tail's -F)")
    tail.add_argument("-n", "--lines", type=int, default=10, metavar="N",
                      help="how many of the last events to print first (default 10)")
    tail.add_argument("--json", action="store_true",
                      help="print each event's log line (JSONL) instead of a summary")
    tail.set_defaults(run=_run_tail)

    fork = sub.add_parser(
        "fork", help=HELP["fork"]
    )
    add_source_arguments(fork, recover=False)
    where = fork.add_mutually_exclusive_group()
    where.add_argument("--at", type=int, metavar="SEQ",
                       help="the seq of the turn/end to cut after (default: the last "
                            "turn/end, the end of the last turn that ended)")
    where.add_argument("--turn", type=int, metavar="N",
                       help="cut after turn N's turn/end (turns count from 1, as show "
                            "numbers them)")
    fork.add_argument("--as", dest="child_id", metavar="NEW",
                      help="the child's id (default: a new UUID)")
    fork.add_argument("--json", action="store_true", help="print the child's header as JSON")
    fork.set_defaults(run=_fork)


def _run_ls(args: argparse.Namespace) -> int:
    from .ls import run_ls

    return run_ls(args)


def _run_tail(args: argparse.Namespace) -> int:
    from .tail import run_tail

    return run_tail(args)


def _run_show(args: argparse.Namespace) -> int:
    from .show import run_show

    return run_show(args)
