"""dsh-session against the OpenAI Agents SDK's ``SQLiteSession`` on that SDK's own workload
(issue 17, point 6), with the physical limit of a durable append measured alongside.

The workload: 20,000 Responses-API items as the Agents SDK's ``Runner`` stores them, the
mix of :func:`openai_agents.conversation` (a user message, a ``function_call``, its
``function_call_output``, an assistant message, again and again; about 190 characters
of JSON an item). Each item is made durable on its own: one ``add_items([item])`` call
per item. Then a cold reload: a fresh session object over the same file (for
``DshSession``, a fresh store object too, opened from the URL) and ``get_items()`` of
the whole list, checked against the items given (or the figures mean nothing).

Timed, in one process, on the same items, the sides interleaved round by round so that
the disk's and the machine's drift falls on all of them alike:

- ``write_fsync``: the physical limit of a durable append, a plain loop of ``os.write``
  of the item's JSON line then ``os.fsync``, one item at a time, to a file opened once;
- ``SQLiteSession``: the peer (a database file in a temp folder; one transaction a call,
  WAL, SQLite's default ``synchronous``, FULL on the usual builds);
- ``dsh jsonl`` and ``dsh sqlite``: ``DshSession`` on a JSONL folder and on
  ``sqlite:///...``, kept open (``keep_open=True``) while appending (the default mode
  reloads the log at each call, quadratic over 20,000 calls); the reload is a
  ``DshSession`` in the default mode, what a fresh process does.

Appends are items a second (the time of the whole loop); a reload is milliseconds from
making the fresh object to having the list. Each figure is the best of its rounds (a
reload, the best of ``RELOADS`` in each round): other processes slow a run down, never
speed it up. The targets, each a ratio of figures of this run:

- ``jsonl_reload_vs_peer``, ``sqlite_reload_vs_peer``: the peer's reload time over ours
  (a speed ratio), at least 2;
- ``jsonl_append_vs_write_fsync``, ``sqlite_append_vs_write_fsync``: our append rate
  over the write + fsync loop's, at least 0.9.

::

    python bench/peers.py                   # the figures, ratios and target verdicts
    python bench/peers.py --json            # one JSON object, with a "targets" object
    python bench/peers.py --items 2000 --rounds 1    # a quick look

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from agents import SQLiteSession

from dsh_session_openai_agents import DshSession
from openai_agents import conversation, sqlite_session_pragmas

ITEMS = 20000
ROUNDS = 3
RELOADS = 3

#: Each target: the figure's name in the results, its comparison and limit.
TARGETS: dict[str, tuple[str, float]] = {
    "jsonl_reload_vs_peer": (">=", 2.0),
    "sqlite_reload_vs_peer": (">=", 2.0),
    "jsonl_append_vs_write_fsync": (">=", 0.9),
    "sqlite_append_vs_write_fsync": (">=", 0.9),
}

#: The sides that append through a session, and how each makes a fresh session over
#: ``folder`` (``keep_open``: the appending instance; the reload's is in default mode).
SESSIONS: dict[str, Callable[[Path, bool], Any]] = {
    "peer": lambda folder, _keep: SQLiteSession("peer", str(folder / "sdk.db")),
    "jsonl": lambda folder, keep: DshSession("dsh", store=str(folder / "logs"),
                                             keep_open=keep),
    "sqlite": lambda folder, keep: DshSession("dsh", store=f"sqlite:///{folder}/dsh.db",
                                              keep_open=keep),
}


async def _close(session: Any) -> None:
    if isinstance(session, DshSession):
        await session.aclose()
    else:
        session.close()


def write_fsync(folder: Path, lines: list[bytes]) -> float:
    """Seconds of the physical limit: each line written, then fsynced, one at a time."""
    fd = os.open(folder / "limit.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        gc.collect()
        t0 = time.perf_counter()
        for line in lines:
            os.write(fd, line)
            os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


async def append(side: str, folder: Path, items: list[Any]) -> float:
    """Seconds to append ``items``, one ``add_items`` call each, to a fresh session."""
    session = SESSIONS[side](folder, True)
    try:
        gc.collect()
        t0 = time.perf_counter()
        for item in items:
            await session.add_items([item])
        return time.perf_counter() - t0
    finally:
        await _close(session)


async def reload(side: str, folder: Path, expected: str) -> float:
    """Best milliseconds of a fresh session's ``get_items()``, checked against
    ``expected`` (the items' JSON)."""
    best = float("inf")
    for _ in range(RELOADS):
        gc.collect()
        t0 = time.perf_counter()
        session = SESSIONS[side](folder, False)
        got = await session.get_items()
        elapsed = time.perf_counter() - t0
        await _close(session)
        if json.dumps(got) != expected:
            msg = f"{side}: the reload did not give back the items appended"
            raise RuntimeError(msg)
        best = min(best, elapsed)
    return best * 1000


async def run(n: int, rounds: int) -> dict[str, float]:
    """The best of ``rounds`` interleaved rounds of every side: ``<side>_append_per_s``
    and ``<side>_reload_ms``, with ``write_fsync_per_s``."""
    items = conversation(n)
    expected = json.dumps(items)
    lines = [msgspec.json.encode(item) + b"\n" for item in items]
    appends: dict[str, list[float]] = {side: [] for side in ("write_fsync", *SESSIONS)}
    reloads: dict[str, list[float]] = {side: [] for side in SESSIONS}
    for r in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="bench-peers-"))
        try:
            # A different order each round: no side always runs right after another.
            order = ["write_fsync", *SESSIONS]
            order = order[r % len(order):] + order[:r % len(order)]
            for side in order:
                print(f"... round {r + 1}/{rounds}: {side} appends", file=sys.stderr,
                      flush=True)
                if side == "write_fsync":
                    appends[side].append(write_fsync(folder, lines))
                else:
                    appends[side].append(await append(side, folder, items))
            for side in order[1:] + order[:1]:
                if side != "write_fsync":
                    reloads[side].append(await reload(side, folder, expected))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    results = {f"{side}_append_per_s": n / min(runs) for side, runs in appends.items()}
    results.update({f"{side}_reload_ms": min(runs) for side, runs in reloads.items()})
    results["item_chars"] = len(expected) / n
    return results


def ratios(results: dict[str, float]) -> dict[str, float]:
    """The targets' figures, and the peer's append rate against the limit."""
    limit = results["write_fsync_append_per_s"]
    found = {}
    for side in ("jsonl", "sqlite"):
        found[f"{side}_reload_vs_peer"] = results["peer_reload_ms"] / results[f"{side}_reload_ms"]
        found[f"{side}_append_vs_write_fsync"] = results[f"{side}_append_per_s"] / limit
    found["peer_append_vs_write_fsync"] = results["peer_append_per_s"] / limit
    return found


def main() -> None:
    """Run once; print the figures and each target's verdict, or ``--json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"interleaved rounds, the best of each figure kept "
                             f"(default {ROUNDS})")
    args = parser.parse_args()
    results = asyncio.run(run(args.items, args.rounds))
    found = ratios(results)
    targets = {name: {"value": found[name], "limit": limit, "op": op}
               for name, (op, limit) in TARGETS.items()}
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(
            {"results": results, "ratios": found, "targets": targets,
             "sqlite_session": sqlite_session_pragmas()}) + b"\n")
        return
    pragmas = sqlite_session_pragmas()
    print(f"{args.items:,} items of {results['item_chars']:.0f} characters, one add_items "
          f"each; best of {args.rounds} rounds (reloads: best of {RELOADS} a round); "
          f"SQLiteSession: journal_mode={pragmas['journal_mode']}, "
          f"synchronous={pragmas['synchronous']}")
    print(f"{'':14} {'appends /s':>11} {'reload ms':>10}")
    print(f"{'write + fsync':14} {results['write_fsync_append_per_s']:11,.0f}")
    for side, label in (("peer", "SQLiteSession"), ("jsonl", "dsh jsonl"),
                        ("sqlite", "dsh sqlite")):
        print(f"{label:14} {results[f'{side}_append_per_s']:11,.0f} "
              f"{results[f'{side}_reload_ms']:10,.1f}")
    print()
    width = max(map(len, found))
    for name, value in found.items():
        line = f"{name:{width}} {value:6.2f}"
        if name in TARGETS:
            op, limit = TARGETS[name]
            ok = value >= limit if op == ">=" else value <= limit
            line += f"  target {op} {limit:<4} {'ok' if ok else 'MISS'}"
        print(line)


if __name__ == "__main__":
    main()
