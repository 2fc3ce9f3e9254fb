"""Benchmark of encrypted stores (issue 28, point 4; issue 39, point 5): the standard
workload (see bench/run.py) appended and loaded on a store opened with keys (records
sealed with AES-256-GCM, in a batch a flush: docs/encryption.md) against the same store
without them, each backend (JSONL, SQLite) measured in the same run, the rounds
alternating (plain first, then sealed first), medians of the rounds:

- append: the whole run (every append, one durable flush per turn: 2,084 flushes of 48
  events), encrypted over plain; target: at most 1.2;
- load: the cold load of the session (open: read, open each batch, decode, scan, repair
  check, build; then derive), encrypted over plain; target: at most 1.5;
- for the record: ChaCha20-Poly1305 in AES-GCM's place, on JSONL.

Each figure is printed with the durability it was measured under (the fsync policy: each
flush is durable when it returns). Wall-clock time is what the targets are about; the
process's CPU time is printed beside it, as the wall clock of a machine other programs
share (and whose disk they share: an fsync waits for theirs) is noisy::

    python bench/encryption.py              # a table with the targets
    python bench/encryption.py --json       # one JSON object
    python bench/encryption.py --rounds 9   # more rounds (default 5)

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import Keyring, create_plugin_manager
from dsh_session_core._persistence.opening import backend_for, sealed_backend
from dsh_session_core._persistence.store.durable import DurableStore
from persistence import durable_fill
from run import Append, workload

ROUNDS = 5
#: A load is timed this many times a round (the median kept).
LOADS = 3
KEYS = Keyring({"bench": os.urandom(32)})
CHACHA = Keyring({"bench": os.urandom(32)}, algorithm="chacha20-poly1305")
SIDES: dict[str, Keyring | None] = {"plain": None, "sealed": KEYS, "chacha": CHACHA}
#: What each backend does to make a flush durable (its default, the one measured).
FSYNC = {
    "jsonl": "fsync per flush (one O_APPEND write + fsync a turn)",
    "sqlite": "fsync per commit (WAL, synchronous=FULL; a transaction a turn)",
}
TARGETS = {"append": 1.2, "load": 1.5}


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds of one call (what it returns freed after)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    made = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    del made
    return wall * 1000, cpu * 1000


def _load(url: str, keys: Keyring | None) -> None:
    backend = backend_for(url)
    if keys is not None:
        backend = sealed_backend(backend, keys)
    store = DurableStore(backend, create_plugin_manager(autoload=False))
    store.open("bench").derive_messages()
    store.close()


def _url(kind: str, tmp: str, name: str) -> str:
    return f"sqlite:///{tmp}/{name}.db" if kind == "sqlite" else f"{tmp}/{name}"


def _round(kind: str, tmp: str, i: int, names: tuple[str, ...], appends: list[Append],
           figures: dict[str, list[float]]) -> None:
    """One round: each side written, then loaded; plain first in even rounds."""
    for name in names if i % 2 == 0 else names[::-1]:
        url = _url(kind, tmp, f"{kind}-{name}-{i}")
        wall, cpu = _timed(lambda: durable_fill(url, appends, keys=SIDES[name]))  # noqa: B023
        figures[f"{name}_append_ms"].append(wall)
        figures[f"{name}_append_cpu_ms"].append(cpu)
        loads = [_timed(lambda: _load(url, SIDES[name])) for _ in range(LOADS)]  # noqa: B023
        figures[f"{name}_load_ms"].append(statistics.median(w for w, _ in loads))
        figures[f"{name}_load_cpu_ms"].append(statistics.median(c for _, c in loads))


def run(rounds: int = ROUNDS) -> dict[str, float]:
    appends = workload()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-encryption-") as tmp:
        for kind in ("jsonl", "sqlite"):
            names = ("plain", "sealed", "chacha") if kind == "jsonl" else ("plain", "sealed")
            figures: dict[str, list[float]] = {
                f"{name}_{what}{cpu}_ms": [] for name in names
                for what in ("append", "load") for cpu in ("", "_cpu")}
            for i in range(rounds):
                _round(kind, tmp, i, names, appends, figures)
            for key, values in figures.items():
                results[f"{kind}_{key}"] = statistics.median(values)
            for name in names[1:]:
                for what in ("append", "load"):
                    for cpu in ("", "_cpu"):
                        results[f"{kind}_{name}_{what}{cpu}_ratio"] = (
                            results[f"{kind}_{name}_{what}{cpu}_ms"]
                            / results[f"{kind}_plain_{what}{cpu}_ms"])
    return results


def _table(results: dict[str, float]) -> str:
    rows = [f"{'':24} {'plain ms':>9} {'sealed ms':>9} {'ratio':>6} {'target':>8}  "
            f"{'':4} {'cpu ratio':>9}  fsync policy"]
    for kind in ("jsonl", "sqlite"):
        for name in ("sealed", "chacha"):
            if f"{kind}_{name}_load_ratio" not in results:
                continue
            for what in ("append", "load"):
                ratio = results[f"{kind}_{name}_{what}_ratio"]
                target = TARGETS[what] if name == "sealed" else None
                verdict = "" if target is None else "ok" if ratio <= target else "MISS"
                label = f"{kind} {what}" + ("" if name == "sealed" else " (chacha20)")
                rows.append(
                    f"{label:24} {results[f'{kind}_plain_{what}_ms']:9,.1f} "
                    f"{results[f'{kind}_{name}_{what}_ms']:9,.1f} {ratio:6.2f} "
                    f"{'' if target is None else f'<= {target}':>8}  {verdict:4} "
                    f"{results[f'{kind}_{name}_{what}_cpu_ratio']:9.2f}  {FSYNC[kind]}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"alternating rounds (default {ROUNDS})")
    args = parser.parse_args()
    results = run(args.rounds)
    if args.json:
        doc = {**results, "fsync": FSYNC, "targets": TARGETS, "rounds": args.rounds}
        sys.stdout.buffer.write(msgspec.json.encode(doc) + b"\n")
        return
    print(f"medians of {args.rounds} alternating rounds (loads: median of {LOADS} a round)")
    print(_table(results))


if __name__ == "__main__":
    main()
