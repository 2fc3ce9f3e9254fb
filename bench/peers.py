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
writer lock, or finds it kept from the call before within the idle window, and releases
it after that window, so other processes can write between calls) and with
``keep_open=True``. Every side runs in every round, the order rotated round by round so
that the machine's drift falls on all alike; each figure is the MEDIAN of its rounds.
Every side is durable when ``add_items`` returns, each by its own fsync policy (printed
beside its figures, the SQLite pragmas as measured on the connections): one fsync a call.

Targets (ratios of figures of this run), on JSONL and SQLite, in the default mode, at
each size (2,000 and 20,000 items unless ``--sizes`` says otherwise):

- reload: the peer's reload time over ours, at least 2;
- adds: our items a second over the peer's, at least 1, for both ways of adding.

::

    python bench/peers.py                      # both sizes: figures, ratios, verdicts
    python bench/peers.py --sizes 2000 --rounds 3
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

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession
from openai_agents import conversation, sqlite_session_pragmas

SIZES = (2000, 20000)
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

#: Each side's fsync policy: what makes an ``add_items`` durable when it returns.
DURABILITY = {
    "peer": "WAL commit/call, synchronous={peer_sync}",
    "jsonl": "write+fsync/call",
    "sqlite": "WAL commit/call, synchronous={dsh_sync}",
    "jsonl_keep": "write+fsync/call",
    "sqlite_keep": "WAL commit/call, synchronous={dsh_sync}",
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


def dsh_sqlite_pragmas() -> dict[str, Any]:
    """``journal_mode`` and ``synchronous`` of a dsh SQLite store's own connection."""
    folder = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        with open_store(f"sqlite:///{folder}/probe.db") as store:
            conn = store.backend._conn  # type: ignore[attr-defined]  # its connection
            return {"journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                    "synchronous": conn.execute("PRAGMA synchronous").fetchone()[0]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ratios(results: dict[str, float]) -> dict[str, float]:
    """Ours over the peer's: reload speed, and adds a second for each way."""
    found = {}
    for side in ("jsonl", "sqlite", "jsonl_keep", "sqlite_keep"):
        found[f"{side}_reload_vs_peer"] = results["peer_reload_ms"] / results[f"{side}_reload_ms"]
        for way in WAYS:
            found[f"{side}_{way}_adds_vs_peer"] = (results[f"{side}_{way}_adds_per_s"]
                                                   / results[f"peer_{way}_adds_per_s"])
    return found


LABELS = {"peer": "SQLiteSession", "jsonl": "dsh jsonl (default)",
          "sqlite": "dsh sqlite (default)", "jsonl_keep": "dsh jsonl keep_open",
          "sqlite_keep": "dsh sqlite keep_open"}


def report(n: int, rounds: int, results: dict[str, float], durability: dict[str, str]) -> None:
    """Print one size's figures (each side's fsync policy beside them), the bytes, and
    each ratio with its target and verdict."""
    found = ratios(results)
    print(f"{n:,} items of {results['item_chars']:.0f} characters; median of {rounds} "
          f"rounds (reloads: median of {RELOADS} a round)")
    print(f"{'':22} {'run adds/s':>11} {'one adds/s':>11} {'reload ms':>10}  fsync policy")
    for side, label in LABELS.items():
        print(f"{label:22} {results[f'{side}_run_adds_per_s']:11,.0f} "
              f"{results[f'{side}_one_adds_per_s']:11,.0f} "
              f"{results[f'{side}_reload_ms']:10,.1f}  {durability[side]}")
    print()
    print("bytes stored an item (the run way's log): "
          + ", ".join(f"{LABELS[side]} {results[f'{side}_bytes']:,.0f}"
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
        side = name.split("_run_")[0].split("_one_")[0].split("_reload_")[0]
        if "_adds_" in name:
            line += f"  fsync: {durability[side]} | peer: {durability['peer']}"
        print(line)


def main() -> None:
    """Run once at each size; print the figures and each target's verdict, or
    ``--json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="items added at each size (default: 2000 20000)")
    parser.add_argument("--items", type=int, help="one size only (as --sizes N)")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds, the median of each figure kept (default {ROUNDS})")
    args = parser.parse_args()
    sizes = [args.items] if args.items is not None else args.sizes
    peer, dsh = sqlite_session_pragmas(), dsh_sqlite_pragmas()
    durability = {side: text.format(peer_sync=peer["synchronous"], dsh_sync=dsh["synchronous"])
                  for side, text in DURABILITY.items()}
    every: dict[str, Any] = {}
    for n in sizes:
        results = asyncio.run(run(n, args.rounds))
        if args.json:
            found = ratios(results)
            every[str(n)] = {
                "results": results, "ratios": found,
                "targets": {name: {"value": found[name], "limit": limit, "op": ">="}
                            for name, limit in TARGETS.items()}}
        else:
            report(n, args.rounds, results, durability)
            print()
    if args.json:
        sys.stdout.write(json.dumps({"sizes": every, "durability": durability,
                                     "sqlite_session": peer, "dsh_sqlite": dsh}) + "\n")
        return
    print(f"SQLiteSession: journal_mode={peer['journal_mode']}, synchronous="
          f"{peer['synchronous']}; dsh SQLite store: journal_mode={dsh['journal_mode']}, "
          f"synchronous={dsh['synchronous']} (2 = FULL: the WAL fsynced at each commit)")


if __name__ == "__main__":
    main()
