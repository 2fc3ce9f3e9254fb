"""The saver's idle window (issue 39, point 4): a write keeps the thread's writer lock for
``idle_window`` seconds, so that the next one (a ``put_writes`` after its ``put``) takes
the thread back without locking; another process's saver waiting within its
``lock_timeout`` gets in once this one is idle, and at once after ``close()``."""

from __future__ import annotations

import textwrap

import pytest
from saver_support import chain, config

from dsh_session_core import open_store
from dsh_session_langgraph import DshCheckpointSaver
from process_support import ask, line_worker

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

#: Another process's saver: at each line on stdin (a lock timeout and a checkpoint id),
#: ``put_writes`` of one write for that checkpoint of thread "t"; it says
#: "stored <seconds>" or "refused".
OTHER = textwrap.dedent("""
    import sys, time
    from dsh_session_core import SessionLockedError
    from dsh_session_langgraph import DshCheckpointSaver

    print("ready", flush=True)
    for line in sys.stdin:
        timeout, cid = line.split()
        with DshCheckpointSaver(sys.argv[1], lock_timeout=float(timeout),
                                idle_window=0) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                       "checkpoint_id": cid}}
            t0 = time.monotonic()
            try:
                saver.put_writes(config, [("other", timeout)], task_id=f"o{timeout}")
                print(f"stored {time.monotonic() - t0:.3f}", flush=True)
            except SessionLockedError:
                print("refused", flush=True)
""")


def test_another_process_waits_for_the_window_and_gets_in(store_url: str) -> None:
    with (line_worker(OTHER, store_url) as other,
          DshCheckpointSaver(store_url, idle_window=2.0) as saver):
        ids = chain(saver, "t", 2)
        assert ask(other, f"0 {ids[-1]}") == "refused"  # the lock is kept
        answer = ask(other, f"30 {ids[-1]}")  # the saver idle: the timer lets go
        assert answer.startswith("stored "), answer
        assert float(answer.split()[1]) < 30
        saver.put_writes(config("t", checkpoint_id=ids[-1]), [("mine", 1)], task_id="m")
        found = saver.get_tuple(config("t"))
        assert found is not None
        assert sorted(w[1] for w in found.pending_writes or []) == ["mine", "other"]


def test_close_ends_the_windows_of_a_store_of_the_callers(store_url: str) -> None:
    with line_worker(OTHER, store_url) as other, open_store(store_url) as store:
        saver = DshCheckpointSaver(store, idle_window=600)
        ids = chain(saver, "t", 1)
        assert ask(other, f"0 {ids[-1]}") == "refused"
        saver.close()
        assert ask(other, f"0 {ids[-1]}").startswith("stored")
