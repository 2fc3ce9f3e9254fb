"""Issue 24, point 10: a failed flush's bytes never become history.

A double fault on a JSONL store (the batch's write or fsync fails, then the rollback's
truncate fails too) used to leave the failed batch at the log's end: whole, valid lines
(or, in a compact store, whole zstd frames) that a reopen in another process loaded as
if they were durable. Now the writer marks the log's durable end beside it
(``<log>.durable``, :mod:`dsh_session_core._persistence.backends.jsonl.endmark`) before the flush
raises, and every reader stops there. Each case below is written here, with the faults
injected at the ``os`` functions the backend calls (as the fault suite,
test_write_faults.py, does), then the writer "dies" (its descriptors and lock are
dropped, nothing is flushed again) and a FRESH PROCESS reads the log by every path: a
load, ``tail``, ``read``, ``read_lines``, a search, the counts of ``ls``, the header
listing, a follower, ``copy``, and the CLI's ``ls``, ``tail``, ``export``, ``search``
and ``copy``; then opens it as a writer, whose repair cuts the log at the mark and
removes the mark.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dsh_session_core import JsonlBackend, Session, create_plugin_manager
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import StoreWriteError
from dsh_session_core.testing import user_turn

SID = "s"
KINDS = ["jsonl", "jsonl+zstd"]


def _backend(kind: str, root: Path) -> JsonlBackend:
    if kind == "jsonl+zstd":
        from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend

        return JsonlZstdBackend(root)
    return JsonlBackend(root)


def _store(backend: JsonlBackend) -> DurableStore:
    return DurableStore(backend, create_plugin_manager(autoload=False), clock=lambda: 7)


def _log(root: Path, kind: str) -> Path:
    [log] = root.glob("*/s.jsonl.zst" if kind == "jsonl+zstd" else "*/s.jsonl")
    return log


def _mark(log: Path) -> Path:
    return log.with_name(log.name + ".durable")


# --- the faults ---------------------------------------------------------------------------


class Faults:
    """Fail the calls of ``os.<name>`` whose 0-based index (per name, counted while
    armed) is in ``plan[name]``. ``write`` takes a mode: ``"nothing"`` writes nothing and
    fails, ``"half"`` writes half and fails, ``"short"`` writes half and returns (the
    caller writes the rest: a short write is no error)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, plan: dict[str, set[int]],
                 write: str = "half") -> None:
        self.plan, self.write, self.armed = plan, write, False
        self.counts: dict[str, int] = {}
        for name in ("write", "fsync", "ftruncate", "open", "rename", "unlink"):
            monkeypatch.setattr(os, name, self._fake(name, getattr(os, name)))

    def _fake(self, name: str, real: Any) -> Callable[..., Any]:
        def fake(*args: Any, **kwargs: Any) -> Any:
            if not self.armed:
                return real(*args, **kwargs)
            index = self.counts.get(name, 0)
            self.counts[name] = index + 1
            if index not in self.plan.get(name, ()):
                return real(*args, **kwargs)
            if name == "write" and self.write != "nothing":
                written: int = real(args[0], bytes(args[1][: len(args[1]) // 2]))
                if self.write == "short":
                    return written
            raise OSError(errno.EIO, f"injected {name} EIO")

        return fake


#: The double faults: how the batch's write fails, then its rollback's truncate fails.
DOUBLE = {
    "write-fails-writing-nothing": ({"write": {0}, "ftruncate": {0}}, "nothing"),
    "write-fails-half-written": ({"write": {0}, "ftruncate": {0}}, "half"),
    "written-whole-fsync-fails": ({"fsync": {0}, "ftruncate": {0}}, "half"),
    "short-write-then-fsync-fails": ({"write": {0}, "fsync": {0}, "ftruncate": {0}}, "short"),
}


def _durable_then_failed(kind: str, root: Path, faults: Faults
                         ) -> tuple[DurableStore, Session, list[str], int, StoreWriteError]:
    """Two durable flushes, then a third whose batch fails as ``faults`` says: the
    store, the session, the durable lines (header first), the log's durable size and
    the flush's error."""
    store = _store(_backend(kind, root))
    s = store.create(SID, cwd="/w")
    user_turn(s, 1, "alpha durableword")
    store.flush(s)
    user_turn(s, 2, "beta")
    store.flush(s)
    size = _log(root, kind).stat().st_size
    lines = s.jsonl().decode().splitlines()
    user_turn(s, 3, "zebrafailed " * 300)  # a batch of some kilobytes, as in the report
    faults.armed = True
    try:
        with pytest.raises(StoreWriteError) as info:
            store.flush(s)
    finally:
        faults.armed = False
    return store, s, lines, size, info.value


def _die(store: DurableStore) -> None:
    """The writer's process ends here: its descriptors and lock go, nothing is flushed."""
    store.persistence.backend.close()


# --- reading in a fresh process -----------------------------------------------------------

_READ = textwrap.dedent("""
    import io, json, os, sys
    from contextlib import redirect_stdout, redirect_stderr
    from dsh_session_core import JsonlBackend, create_plugin_manager, core_registry
    from dsh_session_core._persistence.copy import copy_sessions
    from dsh_session_core._persistence.store.durable import DurableStore
    from dsh_session_core._cli.main import main

    kind, root, log, scratch = sys.argv[1:]
    def backend(where, k=kind):
        if k == "jsonl+zstd":
            from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend
            return JsonlZstdBackend(where)
        return JsonlBackend(where)
    def cli(*argv):
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        err = io.StringIO()
        code = 0
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(argv))
            except SystemExit as exc:
                code = exc.code
        out.flush()
        return code, out.buffer.getvalue().decode(), err.getvalue()
    def texts(lines):
        return [line.decode() for line in lines]
    reg = core_registry()
    store_url = ("jsonl+zstd:" + os.path.relpath(root)) if kind == "jsonl+zstd" else root
    out = {}
    b = backend(root)
    stored = b.load_stored("s", reg)
    out["load"] = texts(stored.jsonl.splitlines())
    out["load_torn"] = stored.torn is not None
    tail = b.tail_lines("s", 1000)
    out["tail"] = texts(tail.lines)
    out["read"] = texts(b.read_lines("s", -1, None))
    out["read_after_1"] = texts(b.read_lines("s", 1, None))
    out["types"] = texts(b.lines_of_types("s", ["user/message"]))
    st = DurableStore(backend(root), create_plugin_manager(autoload=False))
    out["store_read"] = [e.seq for e in st.read("s")]
    out["store_tail"] = [e.seq for e in st.tail("s", 1000)]
    out["search_failed"] = len(st.search("zebrafailed"))
    out["search_durable"] = len(st.search("durableword"))
    out["listed"] = [h.id for h in st.stored()]
    [summary] = b.summaries()
    out["counts"] = [summary.events, summary.turns, summary.torn]
    [summary] = b.summaries_of([stored.header])
    out["counts_of"] = [summary.events, summary.turns, summary.torn]
    news = list(b.follow_lines("s", tail.position, timeout=0.3))
    out["follow"] = [texts(n.lines) for n in news]
    dst = JsonlBackend(os.path.join(scratch, "copied"))
    report = copy_sessions(b, dst, registry=reg)
    out["copy_ok"] = report.ok
    out["copy"] = texts(dst.load_stored("s", reg).jsonl.splitlines())
    code, text, err = cli("ls", "--json", "--store", store_url)
    out["cli_ls"] = [code, [[r["id"], r["events"], r["turns"], r["torn"]]
                            for r in json.loads(text)] if code == 0 else err]
    code, text, err = cli("export", log)
    out["cli_export"] = [code, text.splitlines()[1:] if code == 0 else err]
    code, text, err = cli("tail", "-n", "1000", "s", "--store", store_url)
    out["cli_tail_stored"] = [code, [int(line.split()[0]) for line in text.splitlines()
                                     if line.split()[:1] and line.split()[0].isdigit()]
                              if code == 0 else err]
    if kind == "jsonl":  # the file itself (tail FILE reads plain logs only)
        code, text, err = cli("tail", "-n", "1000", log)
        out["cli_tail"] = [code, [int(line.split()[0]) for line in text.splitlines()
                                  if line.split()[:1] and line.split()[0].isdigit()]
                           if code == 0 else err]
    code, text, err = cli("search", "zebrafailed", "--store", store_url, "--json")
    out["cli_search_failed"] = [code, len(json.loads(text)) if code == 0 else err]
    code, text, err = cli("copy", store_url, os.path.join(scratch, "cli-copied"))
    out["cli_copy"] = code
    cb = JsonlBackend(os.path.join(scratch, "cli-copied"))
    out["cli_copied"] = texts(cb.load_stored("s", reg).jsonl.splitlines())
    # A writer's open: its repair cuts the log at the mark and removes the mark.
    writer = DurableStore(backend(root), create_plugin_manager(autoload=False))
    out["open"] = [e.seq for e in writer.open("s").events]
    writer.close()
    out["after_size"] = os.path.getsize(log)
    out["after_mark"] = os.path.exists(log + ".durable")
    again = backend(root).load_stored("s", reg)
    out["after_load"] = texts(again.jsonl.splitlines())
    out["after_torn"] = again.torn is not None
    print(json.dumps(out))
""")


def _read_fresh(kind: str, root: Path, scratch: Path) -> dict[str, Any]:
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _READ, kind, str(root), str(_log(root, kind)), str(scratch)],
        capture_output=True, text=True, cwd=root.parent, check=False)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def _check_fresh(found: dict[str, Any], durable: list[str], size: int) -> None:
    """Every reader saw the durable events, each once, and none of the failed batch."""
    events = durable
    seqs = list(range(len(events)))
    assert found["load"] == events
    assert found["tail"] == events
    assert found["read"] == events
    assert found["read_after_1"] == events[2:]
    assert found["types"] == [line for line in events if '"user/message"' in line]
    assert found["store_read"] == seqs
    assert found["store_tail"] == seqs
    assert found["search_failed"] == 0, found
    assert found["search_durable"] == 1
    assert found["listed"] == [SID]
    turns = sum('"turn/start"' in line for line in events)
    assert found["counts"] == [len(events), turns, False]
    assert found["counts_of"] == [len(events), turns, False]
    assert all(lines == [] for lines in found["follow"]), found["follow"]
    assert found["copy_ok"]
    assert found["copy"] == events
    assert found["cli_ls"] == [0, [[SID, len(events), turns, False]]], found["cli_ls"]
    assert found["cli_export"] == [0, events]
    assert found.get("cli_tail", [0, seqs]) == [0, seqs]  # plain logs only
    assert found["cli_tail_stored"] == [0, seqs]
    assert found["cli_search_failed"] == [0, 0]
    assert found["cli_copy"] == 0
    assert found["cli_copied"] == events
    assert found["open"] == seqs
    assert found["after_size"] == size
    assert found["after_mark"] is False
    assert found["after_load"] == events
    assert found["after_torn"] is False


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("double", list(DOUBLE), ids=list(DOUBLE))
def test_a_double_fault_leaves_no_history_a_fresh_process_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, double: str
) -> None:
    plan, write = DOUBLE[double]
    faults = Faults(monkeypatch, plan, write)
    root = tmp_path / "store"
    store, _, durable, size, error = _durable_then_failed(kind, root, faults)
    monkeypatch.undo()
    log = _log(root, kind)
    if write != "nothing":  # the failed batch's bytes really are there
        assert log.stat().st_size > size
    mark = _mark(log).read_bytes() if _mark(log).exists() else None
    _die(store)
    _check_fresh(_read_fresh(kind, root, tmp_path / "scratch"), durable, size)
    assert mark == b"%d\n" % size
    message = str(error)
    assert "Nothing of it is acknowledged" in message
    assert f"byte {size} is marked as its durable end in {_mark(log)}" in message


@pytest.mark.parametrize("kind", KINDS)
def test_the_next_write_cuts_at_the_mark_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    faults = Faults(monkeypatch, {"fsync": {0}, "ftruncate": {0}})
    root = tmp_path / "store"
    store, s, _, _, _ = _durable_then_failed(kind, root, faults)
    monkeypatch.undo()
    log = _log(root, kind)
    assert _mark(log).exists()
    # Meanwhile this process's readers stop at the mark too.
    assert [e.seq for e in store.read(SID)] == list(range(6))
    store.flush(s)  # the retry: cut back to the mark, mark removed, batch written once
    assert not _mark(log).exists()
    user_turn(s, 4, "delta")
    store.flush(s)
    store.close()
    assert sorted(p.name for p in log.parent.iterdir()) == [log.name, "s.lock"]
    reopened = _store(_backend(kind, root))
    assert [e.seq for e in reopened.open(SID).events] == list(range(12))
    reopened.close()


@pytest.mark.parametrize("kind", KINDS)
def test_when_marking_fails_too_the_flush_says_the_session_is_not_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The batch's fsync fails, its truncate fails, and so does the mark's temp file.
    faults = Faults(monkeypatch, {"fsync": {0}, "ftruncate": {0, 1}, "open": {0}})
    root = tmp_path / "store"
    store, s, _, size, error = _durable_then_failed(kind, root, faults)
    log = _log(root, kind)
    message = str(error)
    assert "Nothing of it is acknowledged" in message
    assert "the session is NOT DURABLE" in message
    assert "the log loads as of its last durable event" not in message
    assert f"truncate -s {size} {log}" in message
    assert not _mark(log).exists()
    assert log.stat().st_size > size  # the failed batch, unmarked
    # This backend knows where the history ends: a load by it stops there (and its
    # repair would cut the log there).
    backend = store.persistence.backend
    stored = backend.load_stored(SID, store.registry)
    assert stored is not None
    assert [e.seq for e in stored.events] == list(range(6))
    # Refused while the bytes stand: the cut fails again, so does marking (its rename).
    faults.plan, faults.counts = {"ftruncate": {0}, "rename": {0}}, {}
    faults.armed = True
    with pytest.raises(StoreWriteError, match="NOT DURABLE"):
        store.flush(s)
    faults.armed = False
    assert not _mark(log).exists()
    # Refused again when the cut fails once more; marking works this time.
    faults.plan, faults.counts = {"ftruncate": {0}}, {}
    faults.armed = True
    with pytest.raises(StoreWriteError, match=r"nothing is appended to it until they are "
                                              r"cut; byte .* is marked as its durable end"):
        store.flush(s)
    faults.armed = False
    assert _mark(log).read_bytes() == b"%d\n" % size
    monkeypatch.undo()
    store.flush(s)  # the device works again: cut first, then the batch once
    store.close()
    assert not _mark(log).exists()
    reopened = _store(_backend(kind, root))
    assert [e.seq for e in reopened.open(SID).events] == list(range(9))
    reopened.close()


def test_the_printed_hand_fix_makes_the_log_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = Faults(monkeypatch, {"fsync": {0}, "ftruncate": {0}, "open": {0}})
    root = tmp_path / "store"
    store, _, durable, _, error = _durable_then_failed("jsonl", root, faults)
    monkeypatch.undo()
    _die(store)
    command = str(error).split("cut them by hand: ", 1)[1].split()
    assert command[:2] == ["truncate", "-s"]
    subprocess.run(command, check=True)
    assert _log(root, "jsonl").read_text().splitlines()[1:] == durable


def test_a_stale_mark_of_a_removed_log_never_cuts_a_new_one(tmp_path: Path) -> None:
    store = _store(JsonlBackend(tmp_path))
    s = store.create(SID, cwd="/w")
    user_turn(s, 1, "first")
    store.close()
    log = _log(tmp_path, "jsonl")
    log.unlink()  # a delete killed between removing the log and its mark
    _mark(log).write_bytes(b"10\n")
    store = _store(JsonlBackend(tmp_path))
    s = store.create(SID, cwd="/w")
    user_turn(s, 1, "second")
    store.close()
    assert not _mark(log).exists()
    assert [e.seq for e in _store(JsonlBackend(tmp_path)).read(SID)] == [0, 1, 2]


def test_rm_removes_the_mark_with_the_log(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    faults = Faults(monkeypatch, {"fsync": {0}, "ftruncate": {0}})
    store, _, _, _, _ = _durable_then_failed("jsonl", tmp_path, faults)
    monkeypatch.undo()
    _die(store)
    log = _log(tmp_path, "jsonl")
    report = _store(JsonlBackend(tmp_path)).delete(SID)
    assert str(_mark(log)) in report.removed
    assert report.events == 6  # the durable ones
    assert sorted(p.name for p in log.parent.iterdir()) == []


def test_a_mark_edited_by_hand_is_a_clear_error(tmp_path: Path) -> None:
    from dsh_session_core.errors import LogFormatError

    store = _store(JsonlBackend(tmp_path))
    s = store.create(SID, cwd="/w")
    user_turn(s, 1, "x")
    store.close()
    log = _log(tmp_path, "jsonl")
    _mark(log).write_bytes(b"twelve\n")
    with pytest.raises(LogFormatError, match=r"should hold the byte count .* remove"):
        _store(JsonlBackend(tmp_path)).open(SID)


# --- every fault position -----------------------------------------------------------------


_CALLS = ["write", "fsync", "ftruncate", "open", "rename", "unlink"]
#: Any calls failing (by their index among the flush's calls of that name).
_ANY = st.dictionaries(st.sampled_from(_CALLS), st.sets(st.integers(0, 3), min_size=1,
                                                        max_size=2), max_size=4)
#: A double fault (the batch's write or fsync, then its truncate), and perhaps more.
_DOUBLE = st.builds(lambda first, more: {**more, first: {0}, "ftruncate": {0}},
                    st.sampled_from(["write", "fsync"]),
                    st.dictionaries(st.sampled_from(["open", "rename", "unlink"]),
                                    st.sets(st.integers(0, 2), min_size=1, max_size=2),
                                    max_size=1))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS),
       flushes=st.lists(st.one_of(_DOUBLE, _ANY), min_size=1, max_size=4),
       write=st.sampled_from(["nothing", "half", "short"]))
def test_after_any_faults_a_fresh_reader_sees_exactly_what_was_acknowledged(
    tmp_path_factory: pytest.TempPathFactory, kind: str,
    flushes: list[dict[str, set[int]]], write: str,
) -> None:
    """Flushes under any faults (each flush its own plan), then the writer dies: a
    fresh backend reads exactly the events of the flushes that returned (each once),
    unless the last failure said the session is not durable."""
    root = tmp_path_factory.mktemp("prop")
    with pytest.MonkeyPatch.context() as monkeypatch:
        faults = Faults(monkeypatch, {}, write)
        store = _store(_backend(kind, root))
        s = store.create(SID, cwd="/w")
        acked = 0
        undurable = False
        # The first write is durable: a first write that published its log but could
        # neither make it durable nor withdraw it is another case (not marked).
        for turn, plan in enumerate([{}, *flushes], 1):
            user_turn(s, turn, f"turn{turn} " * 50)
            faults.plan, faults.counts, faults.armed = plan, {}, True
            try:
                store.flush(s)
            except StoreWriteError as exc:
                undurable = "NOT DURABLE" in str(exc)
                event("not durable" if undurable else "marked" if "is marked as its "
                      "durable end" in str(exc) else "rolled back")
            else:
                acked, undurable = len(s.events), False
            finally:
                faults.armed = False
            # This backend's own loads are the acknowledged events, whatever happened.
            stored = store.persistence.backend.load_stored(SID, store.registry)
            assert stored is not None
            assert [e.seq for e in stored.events] == list(range(acked))
        _die(store)
    if undurable:
        return  # said so: the bytes may stand unmarked (the error says how to cut them)
    fresh = _backend(kind, root)
    stored = fresh.load_stored(SID, _store(fresh).registry)
    assert stored is not None
    assert [e.seq for e in stored.events] == list(range(acked))
    tail = fresh.tail_lines(SID, 10_000)
    assert tail is not None
    assert len(tail.lines) == acked
    assert [summary.events for summary in fresh.summaries()] == [acked]
    reopened = _store(_backend(kind, root))
    assert [e.seq for e in reopened.open(SID).events] == list(range(acked))
    reopened.close()
    log = _log(root, kind)
    assert not _mark(log).exists()
