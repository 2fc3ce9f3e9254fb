"""What the JSONL store's projection sidecar costs a flush, and what it saves a read
(issue 39): one store whose plugins declare a projection (its rows written to
``.projections/rows.sqlite3`` after each flush's log), one whose plugins declare none,
measured in the same run.

- ``flush``: a small turn (6 events: a user message, one step with an answer) appended
  and flushed (``store.flush``: the log's write and fsync, then, with the projection,
  the rows' transaction), ``--flushes`` a round in each store, alternating rounds; the
  median microseconds of a flush in each, the difference, and the rows' transaction
  alone;
- ``read``: in the store with the projection, a row by key and the 10 newest rows
  (``store.projection(...).get`` / ``.rows(newest_first=True, limit=10)``, the view
  opened each time) from the rows, then with the sidecar removed (the log folded), on
  a session of ``--turns`` turns; median microseconds.

::

    python bench/projection_sidecar.py               # 11 rounds of 100 flushes
    python bench/projection_sidecar.py --rounds 21 --flushes 200 --turns 2000

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from dsh_session_core import Event, Projection, create_plugin_manager, hookimpl, open_store
from dsh_session_core.projections import Put, Summary


class Text(msgspec.Struct):
    text: str


class Last(msgspec.Struct):
    seq: int


def fold(event: Event) -> Iterator[Any]:
    """Each user message and answer by seq; the last user message's seq."""
    data: Any = event.data
    if event.type in ("user/message", "assistant/message"):
        yield Put(f"{event.seq:012d}", Text(data.content[0].text))
        if event.type == "user/message":
            yield Summary(Last(event.seq))


MESSAGES = Projection("bench/messages", 1, frozenset({"user/message", "assistant/message"}),
                      Text, fold, summary=Last)


class Plugin:
    @hookimpl
    def register_projections(self) -> list[Projection]:
        return [MESSAGES]


def _store(folder: Path, projections: bool) -> Any:
    pm = create_plugin_manager(autoload=False)
    if projections:
        pm.register(Plugin(), "bench-projections")
    return open_store(str(folder), plugin_manager=pm)


def _turn(session: Any, n: int) -> None:
    with session.turn() as turn:
        turn.user(f"question {n}")
        with turn.step() as step:
            step.assistant(f"answer {n}")


def _flushes(store: Any, session: Any, count: int, start: int) -> list[float]:
    """The seconds of ``count`` flushes, each of one turn."""
    times = []
    for n in range(start, start + count):
        _turn(session, n)
        t0 = time.perf_counter()
        store.flush(session)
        times.append(time.perf_counter() - t0)
    return times


def _timed_sidecar(backend: Any) -> list[float]:
    """The seconds of each rows' transaction of ``backend``'s sidecar, from now on (the
    rest of a flush's difference is the log's fsync meeting the sidecar's writes)."""
    times: list[float] = []
    write = backend._sidecar.write

    def timed(*args: Any, **kwargs: Any) -> bool:
        t0 = time.perf_counter()
        try:
            done: bool = write(*args, **kwargs)
            return done
        finally:
            times.append(time.perf_counter() - t0)

    backend._sidecar.write = timed
    return times


def _reads(store: Any, sid: str, key: str, repeat: int) -> tuple[float, float, int]:
    """Median seconds of a view opened and one row read by key; of a view opened and
    its 10 newest rows read; how many events the view folded."""
    by_key, newest = [], []
    folded = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        view = store.projection(sid, MESSAGES.name)
        row = view.get(key)
        by_key.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        view = store.projection(sid, MESSAGES.name)
        rows = view.rows(newest_first=True, limit=10)
        newest.append(time.perf_counter() - t0)
        folded = view.folded
        if row is None or len(rows) != 10:
            msg = "the read did not find the rows written"
            raise RuntimeError(msg)
    return statistics.median(by_key), statistics.median(newest), folded


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--flushes", type=int, default=100)
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-sidecar-"))
    try:
        stores = {kept: _store(folder / ("with" if kept else "without"), kept)
                  for kept in (False, True)}
        sessions = {kept: store.create() for kept, store in stores.items()}
        own = _timed_sidecar(stores[True].backend)
        times: dict[bool, list[float]] = {False: [], True: []}
        rounds: dict[bool, list[float]] = {False: [], True: []}
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for kept in order:
                took = _flushes(stores[kept], sessions[kept], args.flushes,
                                r * args.flushes)
                times[kept] += took
                rounds[kept].append(statistics.median(took))
        plain, rows = statistics.median(times[False]), statistics.median(times[True])
        print(f"flush of a 6-event turn ({args.rounds} alternating rounds of "
              f"{args.flushes}): without a projection {plain * 1e6:,.0f} us, with one "
              f"{rows * 1e6:,.0f} us (median); the sidecar adds {(rows - plain) * 1e6:+,.0f}"
              f" us ({rows / plain:.2f}x); medians of the rounds' medians "
              f"{statistics.median(rounds[False]) * 1e6:,.0f} / "
              f"{statistics.median(rounds[True]) * 1e6:,.0f} us; the rows' transaction "
              f"itself {statistics.median(own) * 1e6:,.0f} us (median)")
        for kept, store in stores.items():
            store.release(sessions[kept])
            store.close()
        # Reads: a session of --turns turns, read from its rows, then by folding its log.
        store = _store(folder / "reads", True)
        session = store.create()
        for n in range(args.turns):
            _turn(session, n)
            if n % 50 == 49:
                store.flush(session)
        store.release(session)
        key = f"{session.events[len(session.events) // 2].seq:012d}"
        while not store.projection(session.id, MESSAGES.name).get(key):
            key = f"{int(key) + 1:012d}"
        events = len(session.events)
        got = _reads(store, session.id, key, 21)
        store.close()
        shutil.rmtree(folder / "reads" / ".projections")
        store = _store(folder / "reads", True)
        folded = _reads(store, session.id, key, 7)
        store.close()
        print(f"read of a session of {events:,} events, view opened each time: by key "
              f"{got[0] * 1e6:,.0f} us from the rows ({got[2]} events folded), "
              f"{folded[0] * 1e6:,.0f} us folding the log; the 10 newest rows "
              f"{got[1] * 1e6:,.0f} us / {folded[1] * 1e6:,.0f} us")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
