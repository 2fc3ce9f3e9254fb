"""Running the demo end to end on a durable store: the session, the fork, the crash, the
repair and the compaction, and what the printer needs to know about them.

The store is opened twice. The first store writes turns 1-4 and the fork, then closes,
which flushes and releases the writer locks so the crash child can take the session.
After the child is killed the second store reopens the session (``open`` repairs it)
and the demo continues on it: that reopened session is the one printed.
"""

from __future__ import annotations

import dataclasses
import sqlite3

from dsh_session_compact import (
    CompactionResult,
    ExtractiveSummarizer,
    TokenEstimator,
    compact_region,
)
from dsh_session_core import DurableStore, Event, Session, open_store, store_place
from dsh_session_core.errors import SessionIdError
from dsh_session_mode import Modes

from ._crash import ChildReport, CrashError, crash_child
from ._harness import Harness
from ._model import Clock
from ._script import (
    approve_plan,
    before_the_fork,
    guard_prompt,
    on_the_fork,
    resumed_prompt,
    resumed_turn,
)
from ._texts import CWD, MODEL, START_MS

__all__ = ["Compaction", "DemoError", "DemoRun", "Location", "run_demo"]

#: Event types the demo writes that plugins (not core) declare: without them the log
#: would hold untyped events and the strict check would fail.
_PLUGIN_TYPES = {"compact/summary": "compact", "hook/result": "hooks", "mode/set": "mode",
                 "todo/write": "todo"}


class DemoError(Exception):
    """The demo cannot run as asked: a message, a hint, and the exit status.

    :ivar hint: what to do about it (one line).
    :ivar status: ``2`` for a wrong command line, ``1`` otherwise.
    """

    def __init__(self, message: str, hint: str, status: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.status = status


@dataclasses.dataclass(frozen=True, slots=True)
class Location:
    """Where the logs are.

    :ivar backend: the kind of store (:func:`~dsh_session_core.store_place`):
        ``"jsonl"``, ``"jsonl+zstd"``, ``"sqlite"`` or ``"postgresql"``.
    :ivar store: the store's folder, database file or server URL (without password).
    :ivar log: the session's JSONL file (``None`` for SQLite).
    :ivar fork_log: the fork's JSONL file (``None`` for SQLite).
    """

    backend: str
    store: str
    log: str | None
    fork_log: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Compaction:
    """The compaction of turn 6, with the surface before and after it."""

    result: CompactionResult
    nodes_before: int
    nodes_after: int
    tokens_before: int
    tokens_after: int


@dataclasses.dataclass(frozen=True, slots=True)
class DemoRun:
    """Everything a finished demo run produced.

    :ivar session: the main session, as reopened (repaired) and continued.
    :ivar fork: the fork taken after turn 4, with its own turn.
    :ivar fork_boundary: the seq of the ``turn/end`` the fork was cut after.
    :ivar crash: what the killed child had written.
    :ivar closers: the events the reopen appended to close the interrupted turn.
    :ivar compaction: the compaction of the oldest turns.
    :ivar location: where the logs are.
    """

    session: Session
    fork: Session
    fork_boundary: int
    crash: ChildReport
    closers: list[Event]
    compaction: Compaction
    location: Location


def _open(url: str | None, clock: Clock) -> DurableStore:
    try:
        store = open_store(url, clock=clock)
    except ValueError as exc:
        raise DemoError(str(exc), "run `dsh-session demo --help` for the store URLs", 2) from exc
    except (OSError, sqlite3.Error) as exc:
        msg = f"cannot open the store {url}: {exc}"
        raise DemoError(msg, "pass --store with a writable folder or sqlite:///file.db") from exc
    # The backend says whether its store lives in this process only (any backend, a
    # plugin's too): the crash child could not see it.
    if store.backend.store_identity() is None:
        store.close()
        msg = "the demo cannot use an in-memory store: its crash reopens the session from " \
              "another process"
        raise DemoError(msg, "use a folder (--store /tmp/dsh-demo) or a database file "
                        "(--store sqlite:////tmp/dsh-demo.db)", 2)
    missing = sorted({p for t, p in _PLUGIN_TYPES.items() if store.registry.get(t) is None})
    if missing:
        store.close()
        msg = f"the demo needs the {', '.join(missing)} plugin(s), which are not loaded"
        raise DemoError(msg, "check DSH_SESSION_DISABLE_PLUGINS and `dsh-session plugins`")
    return store


def _pick_id(store: DurableStore, wanted: str | None) -> str:
    """``wanted``, or the first free one of ``demo``, ``demo-2``... (with its fork id)."""
    taken = {h.id for h in store.stored()}
    if wanted is not None:
        # The one id rule of every command: the store's own (Backend.check_id).
        for candidate in (wanted, f"{wanted}-fork"):
            try:
                store.backend.check_id(candidate)
            except SessionIdError as exc:
                msg = f"invalid --session-id {wanted!r}: {exc.problem}"
                raise DemoError(msg, f"the {exc.backend} backend's session ids are "
                                     f"{exc.rule}", 2) from None
        if wanted in taken or f"{wanted}-fork" in taken:
            msg = f'session "{wanted}" (or "{wanted}-fork") already exists in this store'
            raise DemoError(msg, "pick another --session-id, or leave it out to get a free one")
        return wanted
    n = 1
    while True:
        candidate = "demo" if n == 1 else f"demo-{n}"
        if candidate not in taken and f"{candidate}-fork" not in taken:
            return candidate
        n += 1


def _locate(url: str | None, store: DurableStore, session_id: str, fork_id: str
            ) -> Location:
    """Where the logs are: the store the URL names (by the URL rules: what kind, which
    folder, file or server), and each session's own file where it has one."""
    place = store_place(url)
    if not place.log_files:
        return Location(place.kind, place.where, None, None)
    return Location(place.kind, place.where, store.location(session_id),
                    store.location(fork_id))


def _compact_oldest(harness: Harness) -> Compaction:
    """Compact turns 1 and 2 (every surface node up to turn 2's end) in the open turn."""
    session = harness.session
    turn2_end = next(e.seq for e in session.events
                     if e.type == "turn/end" and e.data.turn == 2)
    nodes = session.surface.seqs
    old = [seq for seq in nodes if seq < turn2_end]
    estimator = TokenEstimator()
    before = estimator.estimate_tokens(session.derive_messages())
    result = compact_region(session, old[0], old[-1], model=MODEL,
                            summarizer=ExtractiveSummarizer(model="extractive-summarizer"))
    after = estimator.estimate_tokens(session.derive_messages())
    return Compaction(result, len(nodes), len(session.surface.seqs), before, after)


def run_demo(url: str | None = None, session_id: str | None = None) -> DemoRun:
    """Run the scripted session into the store at ``url`` (the embedded default store
    when ``None``) and return what happened.

    :raises DemoError: the store cannot be used, the id is taken, or the crash child
        failed.
    """
    clock = Clock(START_MS)
    try:
        with _open(url, clock) as store:
            sid = _pick_id(store, session_id)
            fork_id = f"{sid}-fork"
            session = store.create(sid, cwd=CWD)
            harness = Harness(store, session, clock=clock, modes=Modes(),
                              review=approve_plan, prompt_hooks=[guard_prompt])
            before_the_fork(harness)
            boundary = session.events[-1].seq
            fork = store.fork(session, boundary=boundary, child_id=fork_id)
            on_the_fork(Harness(store, fork, clock=clock, modes=Modes(),
                                review=approve_plan, prompt_hooks=[guard_prompt]))
        # Closed: flushed, and the writer locks are released for the child to take.
        try:
            crash = crash_child(url, sid, clock.now + 30_000)
        except CrashError as exc:
            msg = f"the crash step's child process failed: {exc}"
            raise DemoError(msg, "run again with --debug to see the child's stderr") from exc
        clock.now = max(clock.now, crash.clock)  # the child's events are older than ours
        with _open(url, clock) as store:
            session = store.open(sid)  # cuts a torn tail, closes the interrupted turn
            closers = list(session.events[crash.durable:])
            harness = Harness(store, session, clock=clock, modes=Modes(),
                              review=approve_plan, prompt_hooks=[guard_prompt])
            resumed_prompt(harness)
            compaction = _compact_oldest(harness)
            resumed_turn(harness)
            location = _locate(url, store, sid, fork_id)
    except OSError as exc:
        msg = f"cannot write the demo session: {exc.strerror or exc}"
        where = f" ({exc.filename})" if exc.filename else ""
        raise DemoError(msg + where, "pass --store with a writable folder") from exc
    return DemoRun(session, fork, boundary, crash, closers, compaction, location)
