"""Benchmark of what a projection adds to a small flush on SQLite (issue 39).

Two SQLite stores, one opened with a plugin that declares a projection (a row per
message, keyed by its seq, and a summary row: the shape of a conversation view), the
other without. Each round appends one small turn (turn/start, the user's message, a
step with the assistant's answer, turn/end: 6 events) to a session of each store and
times its flush (``store.flush``: the batch's one transaction), the two stores' order
alternating from round to round. The medians of each store's flushes, and their
difference: the fold of the batch, the rows' upserts and the mark's in the batch's
transaction, and the pages they add to its commit. Twice: on database files (each
commit synced: the figure a host sees, where the sync's own jitter is as large as the
difference), and on in-memory databases (no I/O: what the projection costs the
process). Then what an existing store pays to gain a projection: the first writer's open
of a 12,000-event session written before it existed (its rows folded and written), a
second open (rows current), and an open without the projection, on SQLite and JSONL::

    python bench/projections.py            # a table
    python bench/projections.py --json     # one JSON object

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import (
    DurableStore,
    Event,
    Session,
    create_plugin_manager,
    hookimpl,
    open_store,
)
from dsh_session_core.projections import Projection, Put, Summary
from dsh_session_core.testing import assistant, step_end, step_start, turn_end, turn_start, user
from run import Target, cli

#: Rounds timed (each flushes one turn in each store), after the warm-up ones.
ROUNDS = 400
WARM_UP = 40


class Message(msgspec.Struct):
    role: str
    text: str


class Last(msgspec.Struct):
    seq: int


def _fold(event: Event) -> Iterator[Any]:
    role = "user" if event.type == "user/message" else "assistant"
    text = event.data.content[0].text
    yield Put(f"{event.seq:012d}", Message(role, text))
    yield Summary(Last(event.seq))


MESSAGES = Projection("bench/messages", 1, frozenset({"user/message", "assistant/message"}),
                      Message, _fold, summary=Last)


class _Plugin:
    @hookimpl
    def register_projections(self) -> list[Projection]:
        return [MESSAGES]


def _turn(session: Session, turn: int) -> None:
    turn_start(session, turn)
    user(session, f"question {turn}: what does the log say about this?")
    step_start(session, turn, 1)
    assistant(session, turn, 1, f"answer {turn}: it says what it said, every word of it.")
    step_end(session, turn, 1)
    turn_end(session, turn)


def _timed_flush(store: DurableStore, session: Session, turn: int) -> float:
    _turn(session, turn)
    start = time.perf_counter_ns()
    store.flush(session)
    return (time.perf_counter_ns() - start) / 1e6


def _rounds(with_url: str, without_url: str) -> tuple[float, float]:
    """The median flush of each store, with the projection and without (ms)."""
    with_pm = create_plugin_manager(autoload=False)
    with_pm.register(_Plugin(), "bench-projections")
    plain_pm = create_plugin_manager(autoload=False)
    with open_store(with_url, plugin_manager=with_pm) as projected, \
            open_store(without_url, plugin_manager=plain_pm) as plain:
        sessions = {"with": (projected, projected.create()),
                    "without": (plain, plain.create())}
        times: dict[str, list[float]] = {"with": [], "without": []}
        for turn in range(1, WARM_UP + ROUNDS + 1):
            order = ("with", "without") if turn % 2 else ("without", "with")
            for name in order:
                store, session = sessions[name]
                ms = _timed_flush(store, session, turn)
                if turn > WARM_UP:
                    times[name].append(ms)
        # The rows are the stored ones, and all there.
        view = projected.projection(sessions["with"][1].id, MESSAGES.name)
        assert view.folded == 0
        assert len(view.rows()) == 2 * (WARM_UP + ROUNDS)
        for store, session in sessions.values():
            store.release(session)
    return statistics.median(times["with"]), statistics.median(times["without"])


#: Turns of the session a store written before the projection holds (6 events each).
FIRST_OPEN_TURNS = 2000


def _first_open(url: str) -> tuple[float, float, float]:
    """An existing store gaining its projection: a session of ``FIRST_OPEN_TURNS``
    turns written by a store that knows no projection; then the time (ms) of a writer's
    open and release with the projection (the first: its rows folded from the log and
    written), of the same again (the rows current: one read of the marks), and of an
    open and release without the projection."""
    plain_pm = create_plugin_manager(autoload=False)
    with open_store(url, plugin_manager=plain_pm) as plain:
        session = plain.create("long")
        for turn in range(1, FIRST_OPEN_TURNS + 1):
            _turn(session, turn)
        plain.flush(session)
        plain.release(session)
    timed: list[float] = []
    for projecting in (True, True, False):
        pm = create_plugin_manager(autoload=False)
        if projecting:
            pm.register(_Plugin(), "bench-projections")
        with open_store(url, plugin_manager=pm) as store:
            start = time.perf_counter_ns()
            store.release(store.open("long"))
            timed.append((time.perf_counter_ns() - start) / 1e6)
            if projecting:
                assert store.projection("long", MESSAGES.name).folded == 0
    return timed[0], timed[1], timed[2]


def run() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-projections-") as folder:
        with_ms, without_ms = _rounds(f"sqlite:///{folder}/with.db",
                                      f"sqlite:///{folder}/without.db")
        first: dict[str, float] = {}
        for kind, url in (("sqlite", f"sqlite:///{folder}/old.db"),
                          ("jsonl", f"{folder}/old-jsonl")):
            gain, again, plain_open = _first_open(url)
            first[f"{kind}_first_open_gaining_rows_ms"] = gain
            first[f"{kind}_open_rows_current_ms"] = again
            first[f"{kind}_open_without_projection_ms"] = plain_open
    mem_with, mem_without = _rounds("sqlite:///:memory:", "sqlite:///:memory:")
    return {
        "flush_without_projection_ms": without_ms,
        "flush_with_projection_ms": with_ms,
        "projection_adds_ms": with_ms - without_ms,
        "projection_adds_ratio": with_ms / without_ms,
        "memory_flush_without_projection_ms": mem_without,
        "memory_flush_with_projection_ms": mem_with,
        "memory_projection_adds_ms": mem_with - mem_without,
        "memory_projection_adds_ratio": mem_with / mem_without,
        "rounds": float(ROUNDS),
        **first,
    }


TARGETS: dict[str, Target] = {}


def main() -> None:
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
