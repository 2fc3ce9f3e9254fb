"""The crash: a child process writes part of a turn and is killed with SIGKILL.

The child is a fresh interpreter (``python -c``), not a fork: it opens the store as any
other process would, takes the session's writer lock (the parent has released it), and
shares nothing else with the parent. It writes turn 5 up to a mid-turn flush, keeps
appending, then reports on a pipe and blocks on its stdin. The parent kills it the moment
the report arrives: no sleeps, and the kill always lands at the same point of the
script, so the log is the same on every run.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["ChildReport", "CrashError", "child_main", "crash_child"]

_CHILD_CODE = "import sys; from dsh_session_demo._crash import child_main; child_main(sys.argv[1:])"


class CrashError(RuntimeError):
    """The child failed before it reached the crash point (its last stderr line)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ChildReport:
    """What the killed child had done.

    :ivar durable: events durable on disk when it died (its last flush).
    :ivar written: events its live session held (the rest were never flushed).
    :ivar clock: its clock's last reading, so the parent's time moves on from there.
    :ivar signal: the signal that ended it (``9``, SIGKILL).
    """

    durable: int
    written: int
    clock: int
    signal: int


def child_main(argv: Sequence[str]) -> None:
    """The child's entry point: ``URL SESSION_ID START_MS REPORT_FD`` (an empty URL
    means the embedded default store)."""
    # Imported here: the parent process never needs them for spawning.
    from dsh_session_core import open_store
    from dsh_session_mode import Modes

    from ._harness import Harness
    from ._model import Clock
    from ._script import approve_plan, guard_prompt, interrupted_turn

    url, session_id, start, report = argv
    clock = Clock(int(start))
    store = open_store(url or None, clock=clock)
    session = store.open(session_id)
    harness = Harness(store, session, clock=clock, modes=Modes(), review=approve_plan,
                      prompt_hooks=[guard_prompt])
    durable = interrupted_turn(harness)
    os.write(int(report), f"{durable} {session.seq} {clock.now}\n".encode())
    # Wait to be killed. If the parent dies first, stdin closes and this returns; the
    # store is then left as a crash leaves it (no close, no flush).
    sys.stdin.buffer.read(1)
    os._exit(0)


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data


def crash_child(url: str | None, session_id: str, start: int) -> ChildReport:
    """Run the child, wait for its report, kill it with SIGKILL, reap it.

    :param url: the store URL (``None``: the embedded default, as the child sees it).
    :param session_id: the session to resume in the child.
    :param start: the child's clock start, epoch milliseconds.
    :raises CrashError: the child exited before reporting.
    """
    read_fd, write_fd = os.pipe()
    # The child must import this very package, even when it is not installed.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-c", _CHILD_CODE, url or "", session_id, str(start),
               str(write_fd)]
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, pass_fds=(write_fd,), env=env)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child holds its own copy: EOF here means it is gone
    try:
        line = _read_line(read_fd)
        proc.kill()  # SIGKILL: no handler, no flush, no cleanup runs in the child
        _, stderr = proc.communicate()
    finally:
        os.close(read_fd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    fields = line.split()
    if len(fields) != 3:
        text = stderr.decode(errors="replace").strip()
        lines = text.splitlines()
        error = CrashError(lines[-1] if lines else f"exit status {proc.returncode}")
        if len(lines) > 1:
            error.add_note(f"the child's stderr:\n{text}")  # shown with --debug
        raise error
    durable, written, clock = map(int, fields)
    # A negative status is the signal that ended it (0 would mean it exited on its own).
    return ChildReport(durable, written, clock, max(0, -proc.returncode))
