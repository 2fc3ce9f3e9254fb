"""Deletes and prunes of ``DshCheckpointSaver``: a late write (``put``, ``put_writes``)
naming a deleted checkpoint is refused and leaves the log as it was, so a deleted thread
does not come back; ``prune`` keeps each namespace's latest checkpoint whole (the values
it needs, its writes) or deletes the threads; a rewrite under way holds the saver's
writers off until its new log is stored, so a write made meanwhile is not lost."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable

import msgspec
import pytest
from saver_support import chain, checkpoint, checkpoint_events, config, put, stored

from dsh_session_core import Session, SessionLockedError, open_store
from dsh_session_langgraph import (
    DshCheckpointSaver,
    LanggraphRemoved,
    LanggraphRemovedData,
    UnknownCheckpointError,
    _lease,
)

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


@pytest.mark.parametrize("late_saver", ["same", "another store"])
def test_a_late_write_to_a_deleted_thread_is_refused_and_does_not_bring_it_back(
        store_url: str, late_saver: str) -> None:
    with DshCheckpointSaver(store_url) as saver, DshCheckpointSaver(store_url) as other:
        ids = chain(saver, "t", 2)
        made_before = checkpoint({"n": 9}, {"n": 9})  # made, not stored, before the delete
        late = saver if late_saver == "same" else other
        late.get_tuple(config("t"))  # the late writer knew the thread
        saver.delete_thread("t")
        assert saver.get_tuple(config("t")) is None
        log = stored(store_url, "t")
        assert [e.data.checkpoints for e in log if isinstance(e, LanggraphRemoved)] == [2]

        attempts: list[Callable[[], object]] = [
            lambda: put(late, "t", ids[-1], checkpoint({"n": 5}, {"n": 5}), {"n": 5}),
            lambda: late.put_writes(config("t", checkpoint_id=ids[0]), [("n", 1)], "task"),
            lambda: put(late, "t", None, made_before, {"n": 9}),  # a first checkpoint
        ]
        for attempt in attempts:
            with pytest.raises(UnknownCheckpointError) as caught:
                attempt()
            assert caught.value.thread_id == "t"
            assert "refused, nothing was stored" in str(caught.value)
            assert stored(store_url, "t") == log
        for s in (saver, other):
            assert s.get_tuple(config("t")) is None
            assert list(s.list(config("t"))) == []

        # The thread starts anew with a checkpoint made now.
        fresh = put(late, "t", None, checkpoint({"n": 0}, {"n": 1}), {"n": 1})
        again = saver.get_tuple(config("t"))
        assert again is not None
        assert (again.checkpoint["id"], again.checkpoint["channel_values"]) == (
            fresh, {"n": 0})


def test_prune_keep_latest_keeps_each_namespace_latest_checkpoint_whole(
        store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        c1 = put(saver, "t", None, checkpoint({"a": "a1", "b": "b1"}, {"a": 1, "b": 1}),
                 {"a": 1, "b": 1})
        c2 = put(saver, "t", c1, checkpoint({"a": "a2", "b": "b1"}, {"a": 2, "b": 1}),
                 {"a": 2})
        c3 = put(saver, "t", c2, checkpoint({"a": "a2", "b": "b3"}, {"a": 2, "b": 3}),
                 {"b": 3})
        saver.put_writes(config("t", checkpoint_id=c1), [("a", "old")], "task-1")
        saver.put_writes(config("t", checkpoint_id=c3), [("a", "w1"), ("b", "w2")],
                         "task-3")
        d1, d2 = chain(saver, "t", 2, ns="child")
        other = chain(saver, "u", 3)
        before = saver.get_tuple(config("t", checkpoint_id=c3))
        assert before is not None
        before_child = saver.get_tuple(config("t", "child"))
        before_u = list(saver.list(config("u")))

        saver.prune(["t"], strategy="keep_latest")

        assert [(t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"])
                for t in saver.list({"configurable": {"thread_id": "t"}})] == sorted(
            [("", c3), ("child", d2)], key=lambda k: k[1], reverse=True)
        after = saver.get_tuple(config("t"))
        assert after is not None
        assert after.checkpoint == before.checkpoint
        assert after.checkpoint["channel_values"] == {"a": "a2", "b": "b3"}
        assert after.metadata == before.metadata
        assert after.pending_writes is not None
        assert sorted(after.pending_writes) == [("task-3", "a", "w1"), ("task-3", "b", "w2")]
        assert saver.get_tuple(config("t", "child")) == before_child
        for gone in (c1, c2):
            assert saver.get_tuple(config("t", checkpoint_id=gone)) is None
        assert saver.get_tuple(config("t", "child", d1)) is None
        assert list(saver.list(config("u"))) == before_u  # another thread: untouched
        assert [t.checkpoint["id"] for t in before_u] == other[::-1]

        made_after = checkpoint({}, {})["id"]
        log = stored(store_url, "t")
        removed = [e.data for e in log if isinstance(e, LanggraphRemoved)]
        assert [(r.checkpoints, r.reason, r.pending) for r in removed] == [(3, "prune", False)]
        assert max(c1, c2, d1, before.checkpoint["id"]) < removed[0].through < made_after
        assert {e.data.id for e in checkpoint_events(store_url, "t")} == {c3, d2}
        with pytest.raises(UnknownCheckpointError):
            saver.put_writes(config("t", checkpoint_id=c1), [("a", "late")], "task-1")
        assert stored(store_url, "t") == log
        c4 = put(saver, "t", c3, checkpoint({"a": "a4", "b": "b3"}, {"a": 4, "b": 3}),
                 {"a": 4})
        latest = saver.get_tuple(config("t"))
        assert latest is not None
        assert latest.checkpoint["id"] == c4
        assert latest.checkpoint["channel_values"] == {"a": "a4", "b": "b3"}


def test_prune_delete_deletes_the_threads_only(store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        chain(saver, "t", 3)
        chain(saver, "v", 1)
        kept = chain(saver, "u", 2)
        saver.prune(["t", "v"], strategy="delete")
        for tid in ("t", "v"):
            assert saver.get_tuple(config(tid)) is None
            assert checkpoint_events(store_url, tid) == []
        assert [t.checkpoint["id"] for t in saver.list(None)] == kept[::-1]
        with pytest.raises(ValueError, match="keep_latest"):
            saver.prune(["u"], strategy="keep_oldest")
        assert [t.checkpoint["id"] for t in saver.list(None)] == kept[::-1]


def _append_removed(session: Session, data: LanggraphRemovedData) -> None:
    """Append a ``langgraph/removed`` turn by hand, as a rewriter does."""
    turn = max((e.data.turn for e in session.events if e.type == "turn/start"),
               default=0) + 1
    trigger = {"kind": "injection", "source": {"kind": "plugin", "plugin": "test"}}
    session.append("turn/start", {"turn": turn, "trigger": trigger})
    session.append("langgraph/removed", data)
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


_MARKER = LanggraphRemovedData(through="0", checkpoints=2, reason="delete_thread",
                               pending=True)


def test_a_writer_waits_while_a_rewrite_marker_ends_the_log_then_writes_the_new_one(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A rewrite played by hand, its writer lock released between the marker and the
    # delete: the saver's put, made meanwhile from another store, must land in the new
    # log, not in the old one the delete removes.
    waiting = threading.Event()

    def sleep(seconds: float) -> None:
        waiting.set()
        time.sleep(seconds)

    # The lease's clock, telling when the writer waits on the marker.
    clock = types.SimpleNamespace(time=time.time, monotonic=time.monotonic, sleep=sleep)

    with DshCheckpointSaver(store_url) as saver:
        ids = chain(saver, "t", 2)
    with open_store(store_url) as store:
        session = store.open("t")
        _append_removed(session, _MARKER)
        store.release(session)
        monkeypatch.setattr(_lease, "time", clock)
        with DshCheckpointSaver(store_url) as writer:
            made: list[str] = []
            thread = threading.Thread(target=lambda: made.append(put(
                writer, "t", None, checkpoint({"n": 7}, {"n": 7}), {"n": 7})))
            thread.start()
            assert waiting.wait(30)
            fresh: Session | None = None
            deleted = False
            while fresh is None:  # the writer takes the lock to look, and lets go
                try:
                    if not deleted:
                        store.delete("t")
                        deleted = True
                    # The writer may make the thread first: its put is kept, before.
                    fresh = store.open_or_create("t")
                except SessionLockedError:
                    continue
            _append_removed(fresh, msgspec.structs.replace(_MARKER, pending=False))
            store.release(fresh)
            thread.join()
        assert [e.data.id for e in checkpoint_events(store_url, "t")] == made
        assert not set(ids) & set(made)


def test_a_marker_older_than_the_lock_timeout_is_passed_over(store_url: str) -> None:
    # Its rewriter died between the marker and the delete: the log is whole.
    with DshCheckpointSaver(store_url, lock_timeout=0.0) as saver:
        ids = chain(saver, "t", 2)
        with open_store(store_url) as store:
            session = store.open("t")
            _append_removed(session, _MARKER)
            store.release(session)
        new = put(saver, "t", ids[-1], checkpoint({"n": 7}, {"n": 7}), {"n": 7})
        found = saver.get_tuple(config("t"))
        assert found is not None
        assert found.checkpoint["id"] == new
        assert [e.data.id for e in checkpoint_events(store_url, "t")] == [*ids, new]


def test_puts_racing_prunes_from_another_store_are_never_lost(store_url: str) -> None:
    done = threading.Event()
    errors: list[BaseException] = []
    made: list[str] = []

    def writer() -> None:
        try:
            with DshCheckpointSaver(store_url) as saver:
                parent = None
                for i in range(40):
                    parent = put(saver, "t", parent, checkpoint({"n": i}, {"n": i + 1}),
                                 {"n": i + 1})
                    made.append(parent)
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    with DshCheckpointSaver(store_url) as pruner:
        thread = threading.Thread(target=writer)
        thread.start()
        prunes = 0
        while not done.is_set() or prunes == 0:
            pruner.prune(["t"], strategy="keep_latest")
            prunes += 1
        thread.join()
        assert errors == []
        latest = pruner.get_tuple(config("t"))
        assert latest is not None
        assert (latest.checkpoint["id"], latest.checkpoint["channel_values"]) == (
            made[-1], {"n": 39})
        pruner.prune(["t"], strategy="keep_latest")
        assert [t.checkpoint["id"] for t in pruner.list(config("t"))] == [made[-1]]
