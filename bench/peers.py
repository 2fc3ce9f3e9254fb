"""dsh-session against the OpenAI Agents SDK's ``SQLiteSession`` on that SDK's own workload
(issue 25, point 4).

The workload: ``--items`` Responses-API items as the Agents SDK's ``Runner`` stores them
(:func:`openai_agents.conversation`: a user message, a ``function_call``, its output, an
assistant message, again and again), added in two ways:

- ``run``: as a run adds them, several a call (``add_items`` of 4 items: one turn);
- ``one``: one item a call.

Then a cold reload: a fresh session object over the same file (for ``DshSession``, a
fresh store too, opened from the URL, as a new process does) and ``get_items()`` of the
whole list, checked against the items given (or the figures mean nothing).

The sides: ``SQLiteSession`` (the peer), and ``DshSession`` on a JSONL folder and on
``sqlite:///...``, each in the DEFAULT mode (no ``keep_open``: every call takes the
writer lock and releases it, so other processes can write between calls) and with
``keep_open=True``. Every side runs in every round, the order rotated round by round so
that the machine's drift falls on all alike; each figure is the MEDIAN of its rounds.

Targets (ratios of figures of this run), on JSONL and SQLite, in the default mode:

- reload: the peer's reload time over ours, at least 2;
- adds: our items a second over the peer's, at least 1, for both ways of adding.

::

    python bench/peers.py                      # figures, ratios, target verdicts
    python bench/peers.py --items 2000 --rounds 3
    python bench/peers.py --json

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import statistics
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

ITEMS = 2000
ROUNDS = 5
RELOADS = 3
#: Items a call when adding as a run adds them (a user message, a call, its output, the
#: final message).
RUN_BATCH = 4
WAYS = {"run": RUN_BATCH, "one": 1}

#: Each side: how it makes a session over ``folder`` (``reload``: the fresh one).
SIDES: dict[str, Callable[[Path, bool], Any]] = {
    "peer": lambda folder, _reload: SQLiteSession("peer", str(folder / "sdk.db")),
    "jsonl": lambda folder, _reload: DshSession("dsh", store=str(folder / "logs")),
    "sqlite": lambda folder, _reload: DshSession("dsh", store=f"sqlite:///{folder}/dsh.db"),
    "jsonl_keep": lambda folder, reload: DshSession(
        "dsh", store=str(folder / "logs"), keep_open=not reload),
    "sqlite_keep": lambda folder, reload: DshSession(
        "dsh", store=f"sqlite:///{folder}/dsh.db", keep_open=not reload),
}

#: Each target: its name, the figure (ours over the peer's) and its limit.
TARGETS: dict[str, float] = {
    "jsonl_reload_vs_peer": 2.0,
    "sqlite_reload_vs_peer": 2.0,
    "jsonl_run_adds_vs_peer": 1.0,
    "sqlite_run_adds_vs_peer": 1.0,
    "jsonl_one_adds_vs_peer": 1.0,
    "sqlite_one_adds_vs_peer": 1.0,
}


async def _close(session: Any) -> None:
    if isinstance(session, DshSession):
        await session.aclose()
    else:
        session.close()


async def add(side: str, folder: Path, items: list[Any], batch: int) -> float:
    """Items a second of adding ``items``, ``batch`` a call, to a fresh session."""
    session = SIDES[side](folder, False)
    try:
        gc.collect()
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            await session.add_items(items[i:i + batch])
        return len(items) / (time.perf_counter() - t0)
    finally:
        await _close(session)


async def reload(side: str, folder: Path, expected: bytes) -> float:
    """Median milliseconds of a fresh session's ``get_items()``, checked."""
    times = []
    for _ in range(RELOADS):
        gc.collect()
        t0 = time.perf_counter()
        session = SIDES[side](folder, True)
        got = await session.get_items()
        times.append(time.perf_counter() - t0)
        await _close(session)
        if msgspec.json.encode(got) != expected:
            msg = f"{side}: the reload did not give back the items added"
            raise RuntimeError(msg)
    return statistics.median(times) * 1000


#: The event types of a dsh log in the groups its bytes are counted in.
GROUPS = {"agents/item": "items", "user/message": "typed", "assistant/message": "typed",
          "tool/call": "typed", "tool/result": "typed"}


def stored_bytes(side: str, folder: Path) -> dict[str, float]:
    """Bytes on disk of what ``side`` stored in ``folder`` (every file: a database with
    its WAL, a folder of logs); for the JSONL side also the bytes of its log's lines by
    group: ``items`` (``agents/item``, the items verbatim), ``typed`` (the conversation's
    events), ``structure`` (turns and steps, the header)."""
    found = {"bytes": float(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()))}
    if side == "jsonl":
        groups = {"items": 0.0, "typed": 0.0, "structure": 0.0}
        for log in folder.rglob("*.jsonl"):
            for line in log.read_bytes().splitlines(keepends=True):
                kind = msgspec.json.decode(line).get("type", "")
                groups[GROUPS.get(kind, "structure")] += len(line)
        found.update({f"bytes_{name}": value for name, value in groups.items()})
    return found


async def run(n: int, rounds: int) -> dict[str, float]:
    """The median over ``rounds`` of ``<side>_<way>_adds_per_s`` and
    ``<side>_reload_ms`` (the reload of what the ``run`` way added)."""
    items = conversation(n)
    expected = msgspec.json.encode(items)
    figures: dict[str, list[float]] = {}
    sides = list(SIDES)
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for way, batch in WAYS.items():
            folders = {side: Path(tempfile.mkdtemp(prefix="bench-peers-")) for side in sides}
            try:
                for side in order:
                    print(f"... round {r + 1}/{rounds}: {side} adds ({way})", file=sys.stderr,
                          flush=True)
                    rate = await add(side, folders[side], items, batch)
                    figures.setdefault(f"{side}_{way}_adds_per_s", []).append(rate)
                if way == "run":
                    for side in sides:
                        for name, value in stored_bytes(side, folders[side]).items():
                            figures.setdefault(f"{side}_{name}", []).append(value / n)
                    for side in order[::-1]:
                        ms = await reload(side, folders[side], expected)
                        figures.setdefault(f"{side}_reload_ms", []).append(ms)
            finally:
                for folder in folders.values():
                    shutil.rmtree(folder, ignore_errors=True)
    results = {name: statistics.median(values) for name, values in figures.items()}
    results["item_chars"] = len(expected) / n
    return results


def ratios(results: dict[str, float]) -> dict[str, float]:
    """Ours over the peer's: reload speed, and adds a second for each way."""
    found = {}
    for side in ("jsonl", "sqlite", "jsonl_keep", "sqlite_keep"):
        found[f"{side}_reload_vs_peer"] = results["peer_reload_ms"] / results[f"{side}_reload_ms"]
        for way in WAYS:
            found[f"{side}_{way}_adds_vs_peer"] = (results[f"{side}_{way}_adds_per_s"]
                                                   / results[f"peer_{way}_adds_per_s"])
    return found


def main() -> None:
    """Run once; print the figures and each target's verdict, or ``--json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds, the median of each figure kept (default {ROUNDS})")
    args = parser.parse_args()
    results = asyncio.run(run(args.items, args.rounds))
    found = ratios(results)
    targets = {name: {"value": found[name], "limit": limit, "op": ">="}
               for name, limit in TARGETS.items()}
    if args.json:
        sys.stdout.write(json.dumps({"results": results, "ratios": found, "targets": targets,
                                     "sqlite_session": sqlite_session_pragmas()}) + "\n")
        return
    pragmas = sqlite_session_pragmas()
    print(f"{args.items:,} items of {results['item_chars']:.0f} characters; median of "
          f"{args.rounds} rounds (reloads: median of {RELOADS} a round); SQLiteSession: "
          f"journal_mode={pragmas['journal_mode']}, synchronous={pragmas['synchronous']}")
    print(f"{'':22} {'run adds/s':>11} {'one adds/s':>11} {'reload ms':>10}")
    labels = {"peer": "SQLiteSession", "jsonl": "dsh jsonl (default)",
              "sqlite": "dsh sqlite (default)", "jsonl_keep": "dsh jsonl keep_open",
              "sqlite_keep": "dsh sqlite keep_open"}
    for side, label in labels.items():
        print(f"{label:22} {results[f'{side}_run_adds_per_s']:11,.0f} "
              f"{results[f'{side}_one_adds_per_s']:11,.0f} {results[f'{side}_reload_ms']:10,.1f}")
    print()
    print("bytes stored an item (the run way's log): "
          + ", ".join(f"{labels[side]} {results[f'{side}_bytes']:,.0f}"
                      for side in ("peer", "jsonl", "sqlite")))
    print(f"  the JSONL log's lines: the items verbatim (agents/item) "
          f"{results['jsonl_bytes_items']:,.0f}, the typed conversation "
          f"{results['jsonl_bytes_typed']:,.0f}, turns, steps and header "
          f"{results['jsonl_bytes_structure']:,.0f}; a reload reads the first alone")
    print()
    width = max(map(len, found))
    for name, value in found.items():
        line = f"{name:{width}} {value:6.2f}"
        if name in TARGETS:
            limit = TARGETS[name]
            line += f"  target >= {limit:<4} {'ok' if value >= limit else 'MISS'}"
        print(line)


if __name__ == "__main__":
    main()
