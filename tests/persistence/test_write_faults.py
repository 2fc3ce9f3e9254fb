"""Fault injection on the write path: every system call of a flush, a first write, a
session's creation and a crash repair fails, once, twice in a row, or from there on,
then the operation is retried; a fresh process then loads every log.

The JSONL backend's system calls are injected by patching the ``os`` functions its
modules call (``os.write``, ``os.fsync``, ``os.ftruncate``, ``os.link``, ``os.open``,
``os.rename``, ``os.mkdir``, ``os.unlink``): a write fault writes half its bytes first,
as a full disk does. The backends whose I/O is not Python's (SQLite) or is none
(memory) get their faults at the backend seam, which the coordinator (shared by every
backend) sees the same way. In every case:

- the operation raises an error of ours (an ``OSError`` is a ``StoreWriteError``) or
  succeeds; never anything else;
- the retry succeeds, in the same store (no ``SessionLockedError`` from a lock kept by
  the failure), and the session goes on being written;
- in a fresh process, the log loads, holds every event once, in order, exactly as the
  live session has them (nothing reported durable is lost, nothing is duplicated), and
  no temp file is left once the store was listed.

Each case takes a few milliseconds; each backend's cases share one subprocess. Every
backend's cases run on a plain store and on an encrypted one (``sealed``: the sealing
sits above the faults, which must find the same guarantees below it).

And on a store keeping the contract projection (``projecting``: its rows in the events'
transaction on SQLite, in the sidecar written after the log on JSONL): after the fault,
after the retry and at the end, its read by the writing store and by a fresh one equals
the fold of the log as loaded, and so does the fresh process's read: never a stale row.
"""

from __future__ import annotations

import base64
import errno
import functools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from projection_support import assert_rows_are_the_fold, plugins

from dsh_session_core import JsonlBackend, Keyring, Session
from dsh_session_core._persistence.backends.memory import MemoryBackend
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.opening import sealed_backend
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import DshSessionError, StoreWriteError
from dsh_session_core.testing.projection_contract import expected_rows

USER = {"kind": "user"}
SID = "s"
#: The keys of the encrypted runs, as the checking subprocess reads them too.
KEYS_TEXT = "faults:" + base64.b64encode(bytes(range(32))).decode()


def _sealed(backend: Any, sealed: bool) -> Any:
    """``backend``, encrypted when ``sealed``."""
    return sealed_backend(backend, Keyring.parse(KEYS_TEXT)) if sealed else backend


def _check_env(sealed: bool, projecting: bool = False) -> dict[str, str]:
    """The checking subprocess's environment: the keys when the store is encrypted;
    ``CHECK_PROJECTION`` when it reads the contract projection too."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DSH_SESSION_KEYS", "CHECK_PROJECTION")}
    if projecting:
        env["CHECK_PROJECTION"] = "1"
    return {**env, "DSH_SESSION_KEYS": KEYS_TEXT} if sealed else env


@pytest.fixture(params=[False, True], ids=["no-projection", "projecting"])
def projecting(request: pytest.FixtureRequest) -> bool:
    """Whether the store keeps the contract projection."""
    return bool(request.param)


def _projected(got: dict[str, Any]) -> dict[str, Any]:
    """What the checking subprocess should have read of the projection: the model's fold
    of the lines it loaded."""
    rows, summary = expected_rows([json.loads(line) for line in got["lines"]])
    return {"rows": rows, "summary": None if summary is None else list(summary)}
CALLS = ("write", "fsync", "ftruncate", "link", "open", "rename", "mkdir", "unlink")


def _store(backend: Any, projecting: bool = False) -> DurableStore:
    return DurableStore(backend, plugins(projecting), clock=lambda: 7)


def _turn(s: Session, turn: int, *, end: bool = True) -> None:
    s.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    s.append("user/message", {"content": [{"type": "text", "text": f"q{turn} " * 20}],
                              "source": USER}, surface_op="append")
    s.append("step/start", {"turn": turn, "step": 1})
    if end:
        s.append("step/end", {"turn": turn, "step": 1})
        s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


# --- the faults -----------------------------------------------------------------------------


@dataclass
class Plan:
    """Which calls fail, by their index among the patched calls of the operation:
    ``once`` (one), ``twice`` (two in a row: a fault, then its rollback's), or ``from``
    (every one from there on, the first retry included)."""

    kind: str
    at: int

    def fails(self, index: int) -> bool:
        if self.kind == "once":
            return index == self.at
        if self.kind == "twice":
            return index in (self.at, self.at + 1)
        return index >= self.at

    def __str__(self) -> str:
        return f"{self.kind}@{self.at}"


def plans(count: int) -> Iterator[Plan]:
    for at in range(count):
        yield Plan("once", at)
        yield Plan("twice", at)
        yield Plan("from", at)


@dataclass
class Injector:
    """Counts the calls made through ``calls`` while ``armed`` and fails the planned
    ones."""

    plan: Plan | None = None
    armed: bool = False
    trace: list[str] = field(default_factory=list)
    injected: int = 0

    def reset(self) -> None:
        self.plan, self.armed, self.trace, self.injected = None, False, [], 0

    def check(self, name: str) -> bool:
        if not self.armed:
            return False
        index = len(self.trace)
        self.trace.append(name)
        if self.plan is not None and self.plan.fails(index):
            self.injected += 1
            return True
        return False


def _patch_os(monkeypatch: pytest.MonkeyPatch, injector: Injector) -> None:
    for name in CALLS:
        real = getattr(os, name)

        def fake(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            if injector.check(_name):
                if _name == "write" and len(args[1]) > 1:
                    _real(args[0], bytes(args[1][: len(args[1]) // 2]))
                raise OSError(errno.EIO, f"injected {_name} EIO")
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, fake)


class FaultyBackend:
    """A backend whose write methods fail where the injector says, before they run."""

    def __init__(self, inner: Any, injector: Injector) -> None:
        self.inner = inner
        self.name = inner.name
        self.injector = injector

    def _call(self, name: str, *args: Any) -> Any:
        if self.injector.check(name):
            raise OSError(errno.EIO, f"injected {name} EIO")
        return getattr(self.inner, name)(*args)

    def acquire(self, *args: Any) -> Any:
        return self._call("acquire", *args)

    def append_batch(self, *args: Any) -> Any:
        return self._call("append_batch", *args)

    def append_projected(self, *args: Any) -> Any:  # a batch with its rows
        return self._call("append_projected", *args)

    def write_rows(self, *args: Any) -> Any:  # rows caught up at an open
        return self._call("write_rows", *args)

    def commit_repair(self, *args: Any) -> Any:
        return self._call("commit_repair", *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# --- the scenarios ------------------------------------------------------------------------


@dataclass
class Case:
    store: DurableStore
    session: Session | None = None
    #: Log lines that were durable before the operation (a crash repair keeps them).
    kept: list[bytes] = field(default_factory=list)


def _flush_setup(backend: Any, projecting: bool) -> Case:
    st = _store(backend, projecting)
    s = st.create(SID, cwd="/w")
    _turn(s, 1)
    st.flush(s)
    _turn(s, 2)
    return Case(st, s, s.jsonl(0, 5).splitlines())


def _first_setup(backend: Any, projecting: bool) -> Case:
    st = _store(backend, projecting)
    s = st.create(SID, cwd="/w")
    _turn(s, 1)
    return Case(st, s)


def _create_setup(backend: Any, projecting: bool) -> Case:
    return Case(_store(backend, projecting))


def _flush_op(case: Case) -> None:
    assert case.session is not None
    case.store.flush(case.session)


def _create_op(case: Case) -> None:
    if case.session is None:
        case.session = case.store.create(SID, cwd="/w")
    if not case.session.events:
        _turn(case.session, 1)
    case.store.flush(case.session)


def _repair_op(case: Case) -> None:
    if case.session is None:
        case.session = case.store.open(SID)


@dataclass(frozen=True)
class Scenario:
    name: str
    setup: Callable[[Any, bool], Case]
    op: Callable[[Case], None]
    crashed: bool = False  # a crashed log is stored before the setup


SCENARIOS = [
    Scenario("flush", _flush_setup, _flush_op),
    Scenario("first-write", _first_setup, _flush_op),
    Scenario("create", _create_setup, _create_op),
    Scenario("repair", _create_setup, _repair_op, crashed=True),
]


def _crash(backend: Any, projecting: bool = False) -> list[bytes]:
    """Store a session whose last turn never ended; its lines."""
    st = _store(backend, projecting)
    s = st.create(SID, cwd="/w")
    _turn(s, 1)
    _turn(s, 2, end=False)
    st.flush(s)
    lines = s.jsonl().splitlines()
    st.persistence.backend.close()  # the process dies: no close, no turn/end
    return lines


def _run(scenario: Scenario, make: Callable[[Injector], Any], plan: Plan | None,
         injector: Injector, torn: Callable[[], None] | None = None,
         projecting: bool = False) -> tuple[bytes, list[bytes]]:
    """Run one case: the operation under ``plan``, its retries, one more turn; the live
    session's log lines and the lines that must have been kept. ``projecting``: the
    store keeps the contract projection, whose reads are checked against the log's fold
    after the fault, after the retry and at the end."""
    kept: list[bytes] = []
    if scenario.crashed:
        kept = _crash(make(Injector()), projecting)
        if torn is not None:
            torn()
    case = scenario.setup(make(injector), projecting)

    def check(when: str) -> None:
        if not projecting:
            return
        if case.store.backend.load_stored(SID, case.store.registry) is None:
            return  # nothing stored yet (a create that failed): nothing to read
        assert_rows_are_the_fold(case.store, SID, where=f"{scenario.name} {plan} {when}",
                                 fresh=lambda: _store(make(Injector()), True))

    kept = kept or case.kept
    injector.plan, injector.armed = plan, True
    errors: list[Exception] = []
    # While the device is still failing ("from"), so may the first retry.
    attempts = 2 if plan is not None and plan.kind == "from" else 1
    try:
        for _ in range(attempts):
            try:
                scenario.op(case)
            except (DshSessionError, OSError) as exc:
                errors.append(exc)
            else:
                break
    finally:
        injector.armed = False
    check("after the fault")
    assert plan is not None or not errors, errors
    for error in errors:  # ours, naming the session, never a bare OSError
        assert not isinstance(error, OSError) or isinstance(error, StoreWriteError), repr(error)
    scenario.op(case)  # the retry succeeds
    check("after the retry")
    s = case.session
    assert s is not None
    _turn(s, 9)
    case.store.flush(s)
    check("at the end")
    case.store.close()
    return s.jsonl(), kept


# --- JSONL: system calls --------------------------------------------------------------------

#: What both checks' children define: the contract projection as a fresh process reads
#: it (stored rows, mark checked).
_PROJECTED = textwrap.dedent("""
    def projected(backend):
        pm = create_plugin_manager(autoload=False)
        pm.register(ContractPlugin(), "contract")
        view = DurableStore(backend, pm).projection("s", contract_projection.name)
        got = view.summary()
        return {"rows": {k: v.text for k, v in view.rows()},
                "summary": None if got is None else [got.seq, got.text]}
    """)

_CHECK = textwrap.dedent("""
    import json, os, sys
    from dsh_session_core import Keyring, core_registry
    from dsh_session_core._persistence.opening import backend_for, sealed_backend
    from dsh_session_core import DurableStore, create_plugin_manager
    from dsh_session_core.testing.projection_contract import ContractPlugin, contract_projection

    {projected}

    out = {}
    for root in sys.argv[2:]:
        backend = backend_for(sys.argv[1] + root)
        if os.environ.get("DSH_SESSION_KEYS"):
            backend = sealed_backend(backend, Keyring.from_env())
        try:
            listed = [h.id for h in backend.list()]  # sweeps the temp files too
            stored = backend.load_stored("s", core_registry())
            lines = None if stored is None else stored.jsonl.decode().splitlines()
            files = sorted(n for d in os.listdir(root)
                           if d not in (".headers-cache", ".projections")
                           for n in os.listdir(os.path.join(root, d)))  # the buckets
            out[root] = {"listed": listed, "lines": lines, "torn": stored.torn, "files": files}
            if os.environ.get("CHECK_PROJECTION"):
                out[root]["projection"] = projected(backend)
        except Exception as exc:
            out[root] = {"error": repr(exc)}
    print(json.dumps(out))
""").replace("{projected}\n", _PROJECTED)


def _torn_writer(root: Path, compact: bool) -> Callable[[], None]:
    torn_line = b'{"type":"assistant/chunk","seq":8,"ti'
    if compact:  # the first bytes of a frame (of a whole line): a torn frame
        import zstandard

        torn_line = zstandard.ZstdCompressor().compress(torn_line + b'me":1}\n')[:-5]

    def torn() -> None:
        [log] = root.glob("*/s.jsonl.zst" if compact else "*/s.jsonl")
        with log.open("ab") as f:
            f.write(torn_line)

    return torn


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_jsonl_survives_a_fault_at_every_system_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: Scenario, kind: str,
    sealed: bool, projecting: bool,
) -> None:
    injector = Injector()
    _patch_os(monkeypatch, injector)
    compact = kind == "jsonl+zstd"  # the compact store (jsonl_zstd.py) is a JsonlBackend too

    def make(inj: Injector, *, root: Path) -> Any:
        if compact:
            from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend

            return _sealed(JsonlZstdBackend(root), sealed)
        return _sealed(JsonlBackend(root), sealed)

    dry = tmp_path / "dry"
    _run(scenario, functools.partial(make, root=dry), None, injector,
         _torn_writer(dry, compact), projecting)
    count = len(injector.trace)
    assert count >= (2 if scenario.name == "flush" else 3), injector.trace
    expected: dict[str, tuple[str, bytes, list[bytes]]] = {}
    for plan in plans(count):
        root = tmp_path / f"{plan.kind}-{plan.at}"
        injector.reset()
        lines, kept = _run(scenario, functools.partial(make, root=root), plan, injector,
                           _torn_writer(root, compact), projecting)
        assert injector.injected, f"{plan}: no fault was injected"
        expected[str(root)] = (str(plan), lines, kept)
    monkeypatch.undo()
    scheme = "jsonl+zstd:///" if compact else "jsonl:///"
    proc = subprocess.run([sys.executable, "-c", _CHECK, scheme, *expected],
                          capture_output=True, text=True, check=True,
                          env=_check_env(sealed, projecting))
    found = json.loads(proc.stdout)
    for where, (plan_name, lines, kept) in expected.items():
        got = found[where]
        assert "error" not in got, f"{scenario.name} {plan_name}: {got['error']}"
        want = lines.decode().splitlines()
        assert got["lines"] == want, f"{scenario.name} {plan_name}: the log differs"
        assert got["torn"] is None, f"{scenario.name} {plan_name}: a torn tail is left"
        assert got["lines"][: len(kept)] == [k.decode() for k in kept], plan_name
        assert got["listed"] == [SID], plan_name
        log = "s.jsonl.zst" if compact else "s.jsonl"
        assert got["files"] == [log, "s.lock"], f"{scenario.name} {plan_name}"
        if projecting:  # read from the sidecar, as another process would: the fold
            assert got["projection"] == _projected(got), f"{scenario.name} {plan_name}"


# --- memory and SQLite: the backend seam ----------------------------------------------------

_CHECK_SQLITE = textwrap.dedent("""
    import json, os, sys
    from dsh_session_core import Keyring, core_registry
    from dsh_session_core._persistence.opening import sealed_backend
    from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
    from dsh_session_core import DurableStore, create_plugin_manager
    from dsh_session_core.testing.projection_contract import ContractPlugin, contract_projection

    {projected}

    out = {}
    for path in sys.argv[1:]:
        backend = SqliteBackend(path)
        if os.environ.get("DSH_SESSION_KEYS"):
            backend = sealed_backend(backend, Keyring.from_env())
        try:
            stored = backend.load_stored("s", core_registry())
            out[path] = {"lines": None if stored is None else [
                line.decode() for line in (stored.jsonl or b"").splitlines()]}
            if stored is not None and stored.jsonl is None:
                from dsh_session_core import encode_events
                out[path]["lines"] = encode_events(stored.events).decode().splitlines()
            if stored is not None and os.environ.get("CHECK_PROJECTION"):
                out[path]["projection"] = projected(backend)
        except Exception as exc:
            out[path] = {"error": repr(exc)}
        finally:
            backend.close()
    print(json.dumps(out))
""").replace("{projected}\n", _PROJECTED)


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_backend_survives_a_fault_at_every_write(
    tmp_path: Path, scenario: Scenario, kind: str, sealed: bool, projecting: bool
) -> None:
    def make(inj: Injector, *, where: Path, memory: MemoryBackend) -> Any:
        inner: Any = memory if kind == "memory" else SqliteBackend(where)
        return _sealed(FaultyBackend(inner, inj), sealed)

    injector = Injector()
    dry = MemoryBackend()
    _run(scenario, functools.partial(make, where=tmp_path / "dry.db", memory=dry), None,
         injector, projecting=projecting)
    count = len(injector.trace)
    assert count >= 1, injector.trace
    expected: dict[str, tuple[str, bytes, list[bytes]]] = {}
    for plan in plans(count):
        where = tmp_path / f"{plan.kind}-{plan.at}.db"
        memory = MemoryBackend()
        injector = Injector()
        lines, kept = _run(scenario, functools.partial(make, where=where, memory=memory),
                           plan, injector, projecting=projecting)
        assert injector.injected, f"{plan}: no fault was injected"
        if kind == "memory":  # lives in this process: reloaded by a fresh store
            stored = _store(_sealed(memory, sealed)).persistence.load(SID)
            assert stored.jsonl is not None
            assert stored.jsonl == lines, f"{scenario.name} {plan}"
            assert stored.jsonl.splitlines()[: len(kept)] == kept
        else:
            expected[str(where)] = (str(plan), lines, kept)
    if not expected:
        return
    proc = subprocess.run([sys.executable, "-c", _CHECK_SQLITE, *expected],
                          capture_output=True, text=True, check=True,
                          env=_check_env(sealed, projecting))
    found = json.loads(proc.stdout)
    for path, (plan_name, lines, kept) in expected.items():
        got = found[path]
        assert "error" not in got, f"{scenario.name} {plan_name}: {got['error']}"
        assert got["lines"] == lines.decode().splitlines(), f"{scenario.name} {plan_name}"
        assert got["lines"][: len(kept)] == [k.decode() for k in kept], plan_name
        if projecting:  # read from the rows, as another process would: the fold
            assert got["projection"] == _projected(got), f"{scenario.name} {plan_name}"


# --- dsh-session repair: system calls ------------------------------------------------------


def _cli_repair(path: Path) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from dsh_session_core._cli.main import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as info:
        main(["repair", str(path)])
    code = info.value.code
    return code if isinstance(code, int) else 1, err.getvalue()


def test_cli_repair_survives_a_fault_at_every_system_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    injector = Injector()
    _patch_os(monkeypatch, injector)

    def crashed(root: Path) -> tuple[Path, list[bytes]]:
        kept = _crash(JsonlBackend(root))
        _torn_writer(root, compact=False)()
        [log] = root.glob("*/s.jsonl")
        return log, kept

    log, _ = crashed(tmp_path / "dry")
    injector.armed = True
    assert _cli_repair(log) == (0, "")
    injector.armed = False
    count = len(injector.trace)
    assert count >= 5, injector.trace  # open (lock, log), ftruncate, fsync, write, fsync
    expected: dict[str, tuple[str, bytes, list[bytes]]] = {}
    for plan in plans(count):
        injector.reset()
        log, kept = crashed(tmp_path / f"{plan.kind}-{plan.at}")
        injector.plan, injector.armed = plan, True
        code, err = _cli_repair(log)
        injector.armed = False
        assert injector.injected, f"{plan}: no fault was injected"
        assert code == 1, f"{plan}: {err}"
        assert "the repair failed: injected" in err, f"{plan}: {err}"
        assert "Traceback" not in err
        assert _cli_repair(log)[0] == 0, plan  # run again: it starts over from the disk
        st = _store(JsonlBackend(log.parent.parent))
        s = st.open(SID)
        assert s.events[-1].type == "turn/end", plan
        st.close()
        expected[str(log.parent.parent)] = (str(plan), s.jsonl(), kept)
    monkeypatch.undo()
    proc = subprocess.run([sys.executable, "-c", _CHECK, "jsonl:///", *expected],
                          capture_output=True, text=True, check=True)
    found = json.loads(proc.stdout)
    for where, (plan_name, lines, kept) in expected.items():
        got = found[where]
        assert "error" not in got, f"repair {plan_name}: {got['error']}"
        assert got["lines"] == lines.decode().splitlines(), f"repair {plan_name}"
        assert got["lines"][: len(kept)] == [k.decode() for k in kept], plan_name
