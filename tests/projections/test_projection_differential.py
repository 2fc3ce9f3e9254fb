"""Projection == fold, whatever happens to a store: a differential property test.

Random runs of writes (by a store that keeps the projection, and by one that knows
nothing of it, as an older release), forks, removals, reindexes, copies to another
store and, on an encrypted store, rekeys; after each step every stored session's
projection, read by a fresh store as another process would, equals the fold of its log
by the contract's model (``expected_rows``, written apart from core's fold). And a
writer killed (SIGKILL) mid-run leaves rows that still read as the fold.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsh_session_core import (
    DurableStore,
    Keyring,
    SealedBackend,
    copy_sessions,
    create_plugin_manager,
    to_wire,
)
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core.testing import (
    BackendFactory,
    assistant,
    make_backend_factory,
    step_end,
    step_start,
    turn_end,
    user_turn,
)
from dsh_session_core.testing.projection_contract import (
    ContractPlugin,
    contract_projection,
    expected_rows,
)
from dsh_session_core.testing.stores import DURABLE_KINDS

NAME = contract_projection.name
# k1 seals until a rekey, k2 after it; both are always there to open (PostgreSQL's
# database outlives one example: the next starts with what the last one sealed).
KEYS = Keyring({"k1": b"1" * 32, "k2": b"2" * 32})
REKEYED = Keyring({"k2": b"2" * 32, "k1": b"1" * 32})


def _plugins(projecting: bool) -> Any:
    pm = create_plugin_manager(autoload=False)
    if projecting:
        pm.register(ContractPlugin(), "contract")
    return pm


class _Stores:
    """Opens stores over one storage (and a copy's destination), sealed or not."""

    def __init__(self, factory: BackendFactory, copies: BackendFactory, sealed: bool) -> None:
        self.factory, self.copies, self.sealed = factory, copies, sealed
        self.keys = KEYS

    def open(self, projecting: bool = True, *, copies: bool = False) -> DurableStore:
        backend: Any = (self.copies if copies else self.factory)()
        if self.sealed:
            backend = SealedBackend(backend, Sealer(self.keys))
        return DurableStore(backend, _plugins(projecting))


def _check(store: DurableStore) -> None:
    """Every stored session's projection equals the model's fold of its log."""
    for header in store.stored():
        log = [to_wire(e) for e in store.read(header.id)]
        rows, summary = expected_rows(log)
        view = store.projection(header.id, NAME)
        assert {k: v.text for k, v in view.rows()} == rows, header.id
        got = view.summary()
        assert (None if got is None else (got.seq, got.text)) == summary
        if rows:  # a read by range agrees with the whole
            newest = max(rows)
            assert [k for k, _ in view.rows(newest_first=True, limit=1)] == [newest]


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12)
#: How a written turn goes: answered; answered, then a second step (which drops its
#: answer's row); interrupted (which clears every row); left open (a crash: the next
#: open closes it).
_SHAPES = st.sampled_from(["answered", "two-steps", "interrupted", "open"])
_STEP = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 2), st.lists(_TEXT, min_size=1, max_size=3),
              _SHAPES),
    st.tuples(st.just("plain"), st.integers(0, 2), st.lists(_TEXT, min_size=1, max_size=2)),
    st.tuples(st.just("fork"), st.integers(0, 2)),
    st.tuples(st.just("rm"), st.integers(0, 2)),
    st.tuples(st.just("reindex")),
    st.tuples(st.just("copy")),
    st.tuples(st.just("rekey"), st.integers(0, 2)),
)


def _write(store: DurableStore, sid: str, texts: list[str], *, create: bool,
           shape: str = "answered") -> None:
    session = store.create(sid) if create else store.open(sid)
    turn = sum(e.type == "turn/start" for e in session.events)
    for n, text in enumerate(texts, turn + 1):
        last = n == turn + len(texts)
        user_turn(session, n, text, end=False)
        step_start(session, n, 1)
        assistant(session, n, 1, f"answer {n}")
        step_end(session, n, 1)
        if last and shape == "two-steps":
            step_start(session, n, 2)
            step_end(session, n, 2)
        if not (last and shape == "open"):
            turn_end(session, n, {"kind": "interrupted"} if last and shape == "interrupted"
                     else None)
        store.flush(session)
    store.release(session)


#: A run through every kind of step and every shape of turn, always among the examples.
EVERY_STEP: list[tuple[Any, ...]] = [
    ("write", 0, ["a", "b"], "two-steps"), ("write", 1, ["c"], "open"),
    ("plain", 1, ["d"]), ("write", 0, ["e"], "answered"), ("copy",), ("fork", 0),
    ("write", 0, ["f"], "interrupted"), ("rekey", 0), ("write", 2, ["g"], "open"),
    ("write", 2, ["h"], "answered"), ("rm", 1), ("reindex",), ("copy",),
    ("plain", 0, ["i"]), ("write", 0, ["j"], "two-steps"),
]


def _run(stores: _Stores, steps: list[tuple[Any, ...]]) -> None:
    ids = ["s0", "s1", "s2"]
    for step in steps:
        kind = step[0]
        with stores.open(kind != "plain") as store:
            stored = {h.id for h in store.stored()}
            if kind in ("write", "plain"):
                sid = ids[step[1]]
                _write(store, sid, step[2], create=sid not in stored,
                       shape=step[3] if kind == "write" else "answered")
            elif kind == "fork" and ids[step[1]] in stored:
                parent = store.read_session(ids[step[1]])
                ends = [e.seq for e in parent.events if e.type == "turn/end"]
                if ends:  # a fork is seeded up to a turn/end
                    child = store.fork(parent, ends[-1])
                    store.release(child)
                    ids[step[1]] = child.id  # the fork lives on in its parent's slot
            elif kind == "rm" and ids[step[1]] in stored:
                store.delete(ids[step[1]])
            elif kind == "reindex":
                store.reindex()
            elif kind == "copy":
                copy_sessions(store.backend, stores.open(copies=True).backend,
                              registry=store.registry, verify=False)
            elif kind == "rekey" and stores.sealed and ids[step[1]] in stored:
                stores.keys = REKEYED
                with stores.open() as rekeying:
                    rekeying.rekey(ids[step[1]])
        with stores.open() as reader:
            _check(reader)
        with stores.open(copies=True) as copied:
            _check(copied)


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("kind", [*DURABLE_KINDS, "memory"])
def test_projection_equals_the_fold_whatever_happens(
        kind: str, sealed: bool, request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # A server round trip per store opened: fewer runs there, as many steps each.
    runs = {"memory": 30, "postgresql": 4}.get(kind, 10)

    @settings(max_examples=runs, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_STEP, min_size=1, max_size=8))
    @example(EVERY_STEP)
    def run(steps: list[tuple[Any, ...]]) -> None:
        here = tmp_path_factory.mktemp("diff")
        # PostgreSQL's factory gives one database per test, Redis's one key prefix: their
        # copies go to SQLite.
        other = "sqlite" if kind in ("postgresql", "redis") else kind
        stores = _Stores(make_backend_factory(kind, request, here / "a"),
                         make_backend_factory(other, request, here / "b"), sealed)
        (here / "a").mkdir()
        (here / "b").mkdir()
        _run(stores, steps)

    run()


_WRITER = textwrap.dedent("""
    import sys
    from dsh_session_core import create_plugin_manager, open_store
    from dsh_session_core.testing import user_turn
    from dsh_session_core.testing.projection_contract import ContractPlugin

    pm = create_plugin_manager(autoload=False)
    pm.register(ContractPlugin(), "contract")
    store = open_store(sys.argv[1], plugin_manager=pm)
    session = store.create("killed")
    turn = 0
    while True:
        turn += 1
        user_turn(session, turn, f"turn {turn}")
        store.flush(session)
        print(turn, flush=True)
""")


@pytest.mark.parametrize("kind", DURABLE_KINDS)
def test_a_writer_killed_mid_run_leaves_rows_that_read_as_the_fold(
        kind: str, request: pytest.FixtureRequest, tmp_path: Any) -> None:
    from dsh_session_core.testing import make_store_url

    url = make_store_url(kind, request, tmp_path)
    with subprocess.Popen([sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE,
                          text=True) as writer:
        assert writer.stdout is not None
        for line in writer.stdout:  # wait for some flushes, not for time
            if int(line) >= 25:
                break
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    from dsh_session_core import open_store

    with open_store(url, plugin_manager=_plugins(True)) as store:
        _check(store)
        assert store.projection("killed", NAME).rows()  # it did keep rows
