"""Load tests of the PostgreSQL backend with real processes on one server (loopback only):
many writer processes at once, two processes fighting for one session, and writers
killed with SIGKILL whose lease the server must release.

Each writer is this file run as a script (``python test_postgres_load.py ROLE ...``): a
harness-like process that opens the store with ``open_store(url)``, appends turns and
flushes once per turn, and reports on stdout after each flush how many events are
durable. The test reads those reports (every wait bounded by a deadline), then reloads
the sessions: seqs are exactly ``0..n-1`` and every event a writer reported durable is
there, byte for byte what it appended.

Protocol (one line each way): the parent sends ``go``, ``retry``, ``release``; a child
reports ``ready``, ``won N`` (it holds the session, N events loaded), ``locked MESSAGE``,
``flushed N``, ``partial N``, ``holding``, ``released``, ``done N``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

#: Writer processes of the concurrent-writers test, and how long they write.
WRITERS = 8
WRITE_SECONDS = 3.0
MAX_TURNS = 400
#: The longest any single report may take to arrive (a bound for a failing run only).
REPORT_TIMEOUT = 60.0
CHUNKS = 6

Append = tuple[str, dict[str, Any], dict[str, Any]]


def turn_appends(turn: int) -> list[Append]:
    """The appends of one turn (deterministic, so the parent knows what was written)."""
    call = f"call-{turn}"
    out: list[Append] = [
        ("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                  "source": {"kind": "user"}}}, {}),
        ("user/message", {"content": [{"type": "text", "text": f"question {turn}"}],
                          "source": {"kind": "user"}}, {"surface_op": "append"}),
        ("step/start", {"turn": turn, "step": 1}, {}),
    ]
    out += [("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
        "type": "text-delta", "index": 0, "text": f"tok{turn}.{i} "}}, {})
        for i in range(CHUNKS)]
    out += [
        ("assistant/message", {"turn": turn, "step": 1, "content": [
            {"type": "text", "text": f"answer {turn}"},
            {"type": "tool-call", "id": call, "name": "bash", "arguments": "{}"}]},
         {"surface_op": "append"}),
        ("tool/result", {"turn": turn, "step": 1, "callId": call,
                         "content": [{"type": "text", "text": "ok"}], "isError": False},
         {"surface_op": "append"}),
        ("step/end", {"turn": turn, "step": 1}, {}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}),
    ]
    return out


#: Where a turn is cut by a writer that flushes mid-turn: after the chunks.
PARTIAL = 3 + CHUNKS
PER_TURN = len(turn_appends(1))


# --- the child processes ---------------------------------------------------------------------


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _command() -> str:
    """The parent's next command ('' when it closed our stdin)."""
    return sys.stdin.readline().strip()


def _write_turn(store: Any, session: Any, *, upto: int | None = None) -> None:
    """Append one turn (its first ``upto`` appends only, if given) and flush."""
    turn = sum(1 for e in session.events if e.type == "turn/start") + 1
    for etype, data, kw in turn_appends(turn)[:upto]:
        session.append(etype, data, **kw)
    store.flush(session)


def _open_or_create(store: Any, sid: str) -> Any:
    """What a harness does to resume a session, or start it when it does not exist yet.

    :raises SessionLockedError: another writer holds it.
    """
    from dsh_session_core.errors import PersistenceError

    for _ in range(10):
        try:
            return store.open(sid)
        except PersistenceError as exc:
            if not str(exc).endswith("not found"):
                raise
        try:
            return store.create(sid, cwd="/load")
        except PersistenceError as exc:  # stored by another writer in the meantime
            if "already has a persisted log" not in str(exc):
                raise
    raise AssertionError("open-or-create kept racing")


def _writer(url: str, sid: str, seconds: float, max_turns: int) -> None:
    """Its own session: turns with one flush each, for ``seconds`` after ``go``."""
    from dsh_session_core import open_store

    store = open_store(url)
    session = store.create(sid, cwd="/load")
    _say("ready")
    if _command() != "go":
        return
    deadline = time.monotonic() + seconds
    turns = 0
    while turns < max_turns and time.monotonic() < deadline:
        _write_turn(store, session)
        turns += 1
        _say(f"flushed {session.seq}")
    store.close()
    _say(f"done {turns}")


def _fighter(url: str, sid: str, turns: int, patient: float) -> None:
    """Open (or create) the session and write ``turns`` turns; then hold it until told to
    release it, and keep the store open until stdin closes. Refused: report it and wait
    for ``retry``; or, ``patient`` > 0, retry alone for that many seconds."""
    from dsh_session_core import open_store
    from dsh_session_core.errors import SessionLockedError

    store = open_store(url)
    _say("ready")
    if not patient and _command() != "go":
        return
    deadline = time.monotonic() + patient
    tries = 0
    while True:
        tries += 1
        try:
            session = _open_or_create(store, sid)
            break
        except SessionLockedError as exc:
            if patient and time.monotonic() < deadline:
                continue
            _say(f"locked {exc}")
            if patient or _command() != "retry":
                store.close()
                sys.exit(3)
    _say(f"won {len(session.events)} {tries}")
    for _ in range(turns):
        _write_turn(store, session)
        _say(f"flushed {session.seq}")
    _say("holding")
    if _command() == "release":
        store.release(session)
        _say("released")
        _command()
    store.close()
    _say(f"done {session.seq}")


def _victim(url: str, sid: str, turns: int, hang: bool) -> None:
    """Write the session until killed, flushing mid-turn (after the chunks) and at each
    turn's end. ``hang``: after ``turns`` turns, flush half a turn and wait to be killed."""
    from dsh_session_core import open_store

    store = open_store(url)
    session = _open_or_create(store, sid)
    _say(f"won {len(session.events)} 1")
    for _ in range(turns):
        _write_turn(store, session)
        _say(f"flushed {session.seq}")
    while hang:
        _write_turn(store, session, upto=PARTIAL)
        _say(f"partial {session.seq}")
        _command()  # blocks until the parent kills us
    while True:
        _write_turn(store, session, upto=PARTIAL)
        _say(f"flushed {session.seq}")
        turn = session.events[-PARTIAL].data.turn
        for etype, data, kw in turn_appends(turn)[PARTIAL:]:
            session.append(etype, data, **kw)
        store.flush(session)
        _say(f"flushed {session.seq}")


def _child_main(argv: list[str]) -> None:
    role, url, sid, *rest = argv
    if role == "writer":
        _writer(url, sid, float(rest[0]), int(rest[1]))
    elif role == "fighter":
        _fighter(url, sid, int(rest[0]), float(rest[1]))
    elif role == "victim":
        _victim(url, sid, int(rest[0]), rest[1] == "hang")
    else:
        raise SystemExit(f"unknown role {role!r}")


# --- the parent side ---------------------------------------------------------------------------


class Child:
    """A child process of this file, its stdout read line by line on a thread (so every
    wait for a report is bounded), its stderr kept in a file."""

    def __init__(self, tmp: Path, name: str, *args: str) -> None:
        self.name = name
        self.stderr_path = tmp / f"{name}.stderr"
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, *args], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,),
                                        daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def next(self) -> str | None:
        """The next report (``None``: stdout closed, the child ended)."""
        try:
            return self.lines.get(timeout=REPORT_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no report in {REPORT_TIMEOUT} s") from None

    def expect(self, word: str) -> list[str]:
        """The next report, which must start with ``word``; its other fields."""
        line = self.next() or ""
        assert line.split(" ")[0] == word, (
            f"{self.name}: expected {word!r}, got {line!r}\n{self.stderr()}")
        return line.split(" ")[1:]

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def finish(self) -> int:
        """Close stdin and wait for the exit; the exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=REPORT_TIMEOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=REPORT_TIMEOUT)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """Start a child (``spawn(name, role, url, sid, *args)``); all are killed after the test."""
    children: list[Child] = []

    def start(name: str, *args: str) -> Child:
        children.append(Child(tmp_path, name, *args))
        return children[-1]

    yield start
    for child in children:
        child.kill()
        if child.proc.stdin is not None:
            child.proc.stdin.close()
        if child.proc.stdout is not None:
            child.proc.stdout.close()


def _clean_exit(child: Child, status: int = 0) -> None:
    code = child.finish()
    err = child.stderr()
    assert code == status, f"{child.name} exited {code}:\n{err}"
    assert err == "", f"{child.name} wrote to stderr:\n{err}"


def _stored(url: str, sid: str) -> list[dict[str, Any]]:
    """The session as stored (read-only: no lease, no repair), as wire dicts; its seqs
    must be exactly 0..n-1 and nothing may be torn."""
    from dsh_session_core import core_registry, to_wire
    from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend

    backend = PostgresBackend(url)
    try:
        stored = backend.load_stored(sid, core_registry())
    finally:
        backend.close()
    assert stored is not None, f"session {sid} is not stored"
    assert stored.torn is None
    wires = [to_wire(e) for e in stored.events]
    assert [w["seq"] for w in wires] == list(range(len(wires))), f"{sid}: a gap or duplicate"
    return wires


def _appends_of(wires: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(w["type"], w["data"]) for w in wires]


def _expected(turns: range) -> list[tuple[str, Any]]:
    return [(t, d) for turn in turns for t, d, _ in turn_appends(turn)]


def _closed_as_interrupted(wires: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The events after ``turn``'s partial prefix up to its ``turn/end``, which must be
    the repair's closers, ending with an interrupted ``turn/end``."""
    starts = [i for i, w in enumerate(wires)
              if w["type"] == "turn/start" and w["data"]["turn"] == turn]
    assert len(starts) == 1
    start = starts[0]
    assert _appends_of(wires[start:start + PARTIAL]) == _expected(range(turn, turn + 1))[
        :PARTIAL]
    end = next(i for i in range(start, len(wires)) if wires[i]["type"] == "turn/end")
    assert wires[end]["data"] == {"turn": turn, "reason": {"kind": "interrupted"}}
    closers = wires[start + PARTIAL:end + 1]
    assert all(w["type"] in ("step/end", "turn/end") for w in closers), closers
    return closers


def _leases_left(url: str) -> int:
    """The advisory locks still granted in the database once they are all released. A
    closed connection's locks go when its server process exits, just after the client
    saw the close: wait (a bounded while) for the count to reach 0."""
    import psycopg

    deadline = time.monotonic() + REPORT_TIMEOUT
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM pg_locks l JOIN pg_database d"
                               " ON d.oid = l.database WHERE l.locktype = 'advisory'"
                               " AND l.granted AND d.datname = current_database()").fetchone()
            assert row is not None
            if row[0] == 0 or time.monotonic() >= deadline:
                return int(row[0])


# --- the tests -----------------------------------------------------------------------------------


def test_eight_writer_processes_lose_nothing_and_never_gap(
    postgresql_url: str, spawn: Any
) -> None:
    writers = [spawn(f"w{i}", "writer", postgresql_url, f"w{i}", str(WRITE_SECONDS),
                     str(MAX_TURNS)) for i in range(WRITERS)]
    for w in writers:
        w.expect("ready")
    for w in writers:  # all at once: they write concurrently for the same seconds
        w.send("go")
    durable: dict[str, int] = {}
    turns: dict[str, int] = {}
    for w in writers:
        last = 0
        while (line := w.next() or "").startswith("flushed "):
            n = int(line.split()[1])
            assert n == last + PER_TURN, f"{w.name}: flush reported {n} after {last}"
            last = n
        assert line.startswith("done "), f"{w.name}: {line!r}\n{w.stderr()}"
        durable[w.name], turns[w.name] = last, int(line.split()[1])
        _clean_exit(w)
    for w in writers:
        wires = _stored(postgresql_url, w.name)
        assert turns[w.name] >= 1
        # Every event reported durable is there, exactly as written, and nothing else.
        assert len(wires) == durable[w.name] == turns[w.name] * PER_TURN
        assert _appends_of(wires) == _expected(range(1, turns[w.name] + 1))
    assert _leases_left(postgresql_url) == 0  # every writer's lease went with it
    from dsh_session_core import open_store

    with open_store(postgresql_url) as store:  # a harness resuming them: nothing to repair
        for w in writers:
            assert len(store.open(w.name).events) == durable[w.name]


def test_two_processes_fight_for_one_session_then_hand_it_over(
    postgresql_url: str, spawn: Any
) -> None:
    turns = 10
    a, b = (spawn(name, "fighter", postgresql_url, "shared", str(turns), "0")
            for name in ("a", "b"))
    a.expect("ready")
    b.expect("ready")
    a.send("go")
    b.send("go")
    first = {c.name: c.next() or "" for c in (a, b)}
    verdicts = sorted(line.split(" ")[0] for line in first.values())
    assert verdicts == ["locked", "won"], first
    winner, loser = (a, b) if first["a"].startswith("won") else (b, a)
    assert first[winner.name] == "won 0 1"  # created it: nothing loaded, first try
    refused = first[loser.name]
    assert refused.startswith('locked session "shared" is being written by another writer'
                              " (lease held by dsh-session writer"), refused
    flushed = [int(winner.expect("flushed")[0]) for _ in range(turns)]
    assert flushed == [PER_TURN * (i + 1) for i in range(turns)]
    winner.expect("holding")
    # Refused again while the winner holds it: a refused attempt leaves nothing behind.
    loser.send("retry")
    assert loser.expect("locked")[:4] == ["session", '"shared"', "is", "being"]
    assert _appends_of(_stored(postgresql_url, "shared")) == _expected(range(1, turns + 1))

    winner.send("release")  # hands the session over, its process and store still open
    winner.expect("released")
    loser.send("retry")
    assert loser.expect("won")[0] == str(turns * PER_TURN)  # continues from the log
    flushed = [int(loser.expect("flushed")[0]) for _ in range(turns)]
    assert flushed == [PER_TURN * (turns + i + 1) for i in range(turns)]
    loser.expect("holding")
    _clean_exit(loser)
    _clean_exit(winner)
    assert loser.expect("done") == [str(2 * turns * PER_TURN)]

    wires = _stored(postgresql_url, "shared")
    assert _appends_of(wires) == _expected(range(1, 2 * turns + 1))


def test_a_loser_that_gives_up_exits_cleanly(postgresql_url: str, spawn: Any) -> None:
    holder = spawn("holder", "fighter", postgresql_url, "busy", "1", "0")
    holder.expect("ready")
    holder.send("go")
    holder.expect("won")
    holder.expect("flushed")
    holder.expect("holding")
    # Patient for no time at all: refused once, it reports the refusal and exits 3.
    other = spawn("other", "fighter", postgresql_url, "busy", "1", "0.001")
    other.expect("ready")
    refused = " ".join(other.expect("locked"))
    assert refused.startswith('session "busy" is being written by another writer'), refused
    assert other.next() is None
    _clean_exit(other, 3)
    holder.send("release")
    holder.expect("released")
    _clean_exit(holder)


def test_a_killed_writers_lease_is_released_and_its_open_turn_closed(
    postgresql_url: str, spawn: Any
) -> None:
    turns = 3
    victim = spawn("victim", "victim", postgresql_url, "killed", str(turns), "hang")
    victim.expect("won")
    for _ in range(turns):
        victim.expect("flushed")
    (durable,) = victim.expect("partial")  # half a turn is stored; the writer hangs
    assert int(durable) == turns * PER_TURN + PARTIAL
    victim.kill()  # SIGKILL: no release, no close; only the server can free the lease
    assert victim.proc.returncode == -signal.SIGKILL

    # Patient: retries a refused open until the server has seen the connection die.
    taker = spawn("taker", "fighter", postgresql_url, "killed", "2", "30")
    taker.expect("ready")
    loaded, _tries = taker.expect("won")
    for _ in range(2):
        taker.expect("flushed")
    taker.expect("holding")
    _clean_exit(taker)

    wires = _stored(postgresql_url, "killed")
    closers = _closed_as_interrupted(wires, turns + 1)
    assert int(loaded) == int(durable) + len(closers)  # the reload repaired the turn
    cut = int(loaded)
    assert _appends_of(wires[:turns * PER_TURN]) == _expected(range(1, turns + 1))
    assert _appends_of(wires[cut:]) == _expected(range(turns + 2, turns + 4))


def test_writers_killed_at_random_points_lose_nothing_durable(
    postgresql_url: str, spawn: Any
) -> None:
    """A writer that flushes twice a turn, killed right after a report: the kill lands
    anywhere in what follows (between appends, inside a transaction, after a COMMIT
    was sent). The next writer takes over; every reported event is there each time."""
    previous: list[dict[str, Any]] = []
    for round_, reports in enumerate((1, 4, 7)):
        victim = spawn(f"victim{round_}", "victim", postgresql_url, "random", "0", "run")
        victim.expect("won")
        durable = [int(victim.expect("flushed")[0]) for _ in range(reports)][-1]
        victim.kill()
        taker = spawn(f"taker{round_}", "fighter", postgresql_url, "random", "0", "30")
        taker.expect("ready")
        (loaded, _tries) = taker.expect("won")
        taker.expect("holding")
        _clean_exit(taker)
        wires = _stored(postgresql_url, "random")
        assert len(wires) == int(loaded) >= durable
        assert wires[:len(previous)] == previous, f"round {round_}: durable events changed"
        assert wires[-1]["type"] == "turn/end"
        assert {w["data"]["reason"]["kind"] for w in wires if w["type"] == "turn/end"} <= {
            "completed", "interrupted"}
        previous = wires


if __name__ == "__main__":
    _child_main(sys.argv[1:])
