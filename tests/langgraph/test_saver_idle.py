"""The saver's idle window (issue 39, point 4): a write keeps the thread's writer lock for
``idle_window`` seconds, so that the next one (a ``put_writes`` after its ``put``) takes
the thread back without locking; another process's saver waiting within its
``lock_timeout`` gets in once this one is idle, and at once after ``close()``."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from saver_support import chain, config

from dsh_session_core import open_store
from dsh_session_langgraph import DshCheckpointSaver

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


@contextlib.contextmanager
def _other(store_url: str) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen([sys.executable, "-c", OTHER, store_url], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline() == "ready\n"
            yield proc
        finally:
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err


def _ask(proc: subprocess.Popen[str], timeout: float, cid: str) -> str:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(f"{timeout} {cid}\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_another_process_waits_for_the_window_and_gets_in(store_url: str) -> None:
    with _other(store_url) as other, DshCheckpointSaver(store_url, idle_window=2.0) as saver:
        ids = chain(saver, "t", 2)
        assert _ask(other, 0, ids[-1]) == "refused"  # the lock is kept
        answer = _ask(other, 30, ids[-1])  # the saver idle: the timer lets go
        assert answer.startswith("stored "), answer
        assert float(answer.split()[1]) < 30
        saver.put_writes(config("t", checkpoint_id=ids[-1]), [("mine", 1)], task_id="m")
        found = saver.get_tuple(config("t"))
        assert found is not None
        assert sorted(w[1] for w in found.pending_writes or []) == ["mine", "other"]


def test_close_ends_the_windows_of_a_store_of_the_callers(store_url: str) -> None:
    with _other(store_url) as other, open_store(store_url) as store:
        saver = DshCheckpointSaver(store, idle_window=600)
        ids = chain(saver, "t", 1)
        assert _ask(other, 0, ids[-1]) == "refused"
        saver.close()
        assert _ask(other, 0, ids[-1]).startswith("stored")
