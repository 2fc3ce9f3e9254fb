"""Benchmark of ``DshCheckpointSaver`` (dsh-session-langgraph) against LangGraph's own
``SqliteSaver`` (langgraph-checkpoint-sqlite), measured in one run on the same
checkpoints: a graph's loop of ``put`` (the step counter and the state's scratch value
new at every step, the graph's configuration once) each followed by a ``put_writes``
of the next task, on one thread, the savers taking turns by chunks of the loop (each
chunk on each saver, the order rotated chunk by chunk, so that the machine's drift
falls on all alike; each saver's rate is its checkpoints over the time of its own
chunks); then, from a fresh saver on the stored thread,
``get_tuple`` of the latest checkpoint and of a random one, and ``list`` (the newest 10,
and all), the median of alternating rounds in milliseconds; then the bytes on disk. Each
answer is checked equal to the peer's. The dsh saver is measured on its SQLite and its
JSONL store; the targets of issue 39 (at least the peer's speed, at most half its size,
a fresh saver's first ``get_tuple`` within twice the peer's time) are printed with each
ratio::

    python bench/langgraph.py                  # 10,000 checkpoints, a table
    python bench/langgraph.py --checkpoints 2000 --json

A benchmark, not a test: it asserts nothing of its figures and is never run by the test
suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, where this very module
# would shadow the langgraph package: the folder is taken off before LangGraph is imported.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, create_checkpoint  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint as _empty  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from dsh_session_langgraph import DshCheckpointSaver  # noqa: E402

THREAD = "bench"
ROOT: RunnableConfig = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}


def _steps(n: int) -> Iterator[tuple[Checkpoint, dict[str, Any], dict[str, Any]]]:
    """``n`` checkpoints as a graph's loop makes them, with their metadata and the
    channel versions each one makes new."""
    previous = _empty()
    previous["channel_values"] = {"config": {"model": "m", "tools": ["a", "b", "c"]}}
    previous["channel_versions"] = {"config": 1}
    for step in range(n):
        checkpoint = create_checkpoint(previous, None, step)
        checkpoint["channel_values"] = {
            **previous["channel_values"], "step": step,
            "scratch": {"note": f"step {step} " + "x" * 120, "seen": list(range(8))}}
        new = {"step": step + 2, "scratch": step + 2}
        if step == 0:
            new["config"] = 1
        checkpoint["channel_versions"] = {**previous["channel_versions"], **new}
        yield checkpoint, {"source": "loop", "step": step, "parents": {}}, new
        previous = checkpoint


Steps = list[tuple[Checkpoint, dict[str, Any], dict[str, Any]]]


#: How many chunks the loop of puts is cut into, the savers taking turns chunk by chunk.
CHUNKS = 20


def _fill(saver: BaseCheckpointSaver[Any], steps: Steps, config: RunnableConfig = ROOT
          ) -> tuple[float, RunnableConfig]:
    """Put the checkpoints (each with its writes) after ``config``'s; the seconds taken
    and the config of the last one."""
    t0 = time.perf_counter()
    for checkpoint, metadata, new in steps:
        config = saver.put(config, checkpoint, metadata, new)  # type: ignore[arg-type]
        saver.put_writes(config, [("scratch", {"next": checkpoint["id"]})], task_id="t")
    return time.perf_counter() - t0, config


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _dsh(url: str) -> DshCheckpointSaver:
    return DshCheckpointSaver(url)


def _peer(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path / "peer.db", check_same_thread=False))


def _close(saver: BaseCheckpointSaver[Any]) -> None:
    if isinstance(saver, SqliteSaver):
        saver.conn.close()
    else:
        assert isinstance(saver, DshCheckpointSaver)
        saver.store.close()


def _reads(saver: BaseCheckpointSaver[Any], ids: list[str], rng: random.Random
           ) -> dict[str, Callable[[], Any]]:
    def one() -> Any:
        cid = rng.choice(ids)
        config: RunnableConfig = {"configurable": {**ROOT["configurable"],
                                                   "checkpoint_id": cid}}
        found = saver.get_tuple(config)
        assert found is not None
        assert found.checkpoint["id"] == cid
        return found.checkpoint["channel_values"]["step"]

    return {
        "get_tuple_latest": lambda: saver.get_tuple(ROOT).checkpoint["id"],  # type: ignore[union-attr]
        "get_tuple_random": one,
        "list_10": lambda: [t.checkpoint["id"] for t in saver.list(ROOT, limit=10)],
        "list_all": lambda: len(list(saver.list(ROOT))),
    }


def run(n: int, rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-langgraph-") as tmp:
        base = Path(tmp)
        places = {"peer": base / "peer", "dsh_sqlite": base / "sqlite",
                  "dsh_jsonl": base / "jsonl"}
        for place in places.values():
            place.mkdir()
        makers: dict[str, Callable[[], BaseCheckpointSaver[Any]]] = {
            "peer": lambda: _peer(places["peer"]),
            "dsh_sqlite": lambda: _dsh(f"sqlite:///{places['dsh_sqlite'] / 'g.db'}"),
            "dsh_jsonl": lambda: _dsh(str(places["dsh_jsonl"])),
        }
        steps = list(_steps(n))  # the same checkpoints, ids included, for every saver
        ids = [checkpoint["id"] for checkpoint, _, _ in steps]
        savers = {name: make() for name, make in makers.items()}
        elapsed = dict.fromkeys(makers, 0.0)
        configs = dict.fromkeys(makers, ROOT)
        size = max(1, -(-n // CHUNKS))
        for k, start in enumerate(range(0, n, size)):
            order = list(makers)[k % len(makers):] + list(makers)[:k % len(makers)]
            for name in order:
                seconds, configs[name] = _fill(savers[name], steps[start:start + size],
                                               configs[name])
                elapsed[name] += seconds
        for name, saver in savers.items():
            _close(saver)
            results[f"{name}_put_per_s"] = n / elapsed[name]
            results[f"{name}_bytes"] = _size(places[name])
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in makers}
        answers: dict[str, dict[str, Any]] = {name: {} for name in makers}
        for r in range(rounds):
            for name, make in makers.items():
                saver = make()
                t0 = time.perf_counter()
                saver.get_tuple(ROOT)
                samples[name].setdefault("first_get_tuple", []).append(
                    (time.perf_counter() - t0) * 1000)
                for what, call in _reads(saver, ids, random.Random(r)).items():
                    t0 = time.perf_counter()
                    answer = call()
                    samples[name].setdefault(what, []).append(
                        (time.perf_counter() - t0) * 1000)
                    answers[name][what] = answer
                _close(saver)
        for name in makers:
            if answers[name] != answers["peer"]:
                msg = f"{name} answered {answers[name]} where the peer answered {answers['peer']}"
                raise SystemExit(msg)
            for what, values in samples[name].items():
                results[f"{name}_{what}_ms"] = statistics.median(values)
        for name in ("dsh_sqlite", "dsh_jsonl"):
            results[f"{name}_put_ratio"] = results[f"{name}_put_per_s"] / results["peer_put_per_s"]
            results[f"{name}_size_ratio"] = results[f"{name}_bytes"] / results["peer_bytes"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run(args.checkpoints, args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for key, value in results.items():
        print(f"{key:36} {value:>14,.3f}")
    print()
    for name in ("dsh_sqlite", "dsh_jsonl"):
        put, size = results[f"{name}_put_ratio"], results[f"{name}_size_ratio"]
        print(f"{name} put/s over the peer's {put:6.2f}  target >= 1    "
              f"{'ok' if put >= 1 else 'MISS'}")
        print(f"{name} size over the peer's  {size:6.2f}  target <= 0.5  "
              f"{'ok' if size <= 0.5 else 'MISS'}")
        for what in ("first_get_tuple", "get_tuple_latest", "get_tuple_random", "list_10",
                     "list_all"):
            ratio = results[f"peer_{what}_ms"] / results[f"{name}_{what}_ms"]
            # A fresh saver's first read may take twice the peer's (it opens a store).
            target = 0.5 if what == "first_get_tuple" else 1
            print(f"{name} {what} speed over the peer's {ratio:6.2f}  target >= {target:<4}"
                  f" {'ok' if ratio >= target else 'MISS'}")


if __name__ == "__main__":
    os.environ.setdefault("DSH_SESSION_DISABLE_PLUGINS", "example")
    main()
