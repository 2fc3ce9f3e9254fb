"""Benchmark of ``dsh-session ls`` on a 100,000-session JSONL store (issue 15, point 3).

The store: 100,000 small sessions (one turn of 6 events, about 700 bytes each) spread
over 500 cwd buckets, one in ten a fork of another, written directly in the store's
layout (the library's own header encoder and path helpers, so it is the layout a store
writes) and cached under the temp folder (``$TMPDIR/dsh-session-bench-ls``) for the next
run. Timed, each the best of several runs (other processes slow a run down, never speed
it up):

- ``ls --limit 20`` in-process (the CLI's ``main``) and as a subprocess (the user's wait,
  interpreter start included);
- ``ls -q`` (every id) in-process;
- ``ls --limit 20 --cwd PATH`` in-process (a filter on the headers);
- ``ls --limit 20 --sort activity`` in-process: a sort that needs every log's counts
  (what every ``ls`` cost before: each log read whole);
- the baseline, ``grep -c '"type":"turn/start"'`` over the same files, as a subprocess
  (what reading every log costs).

Target: the first page in well under a second (0.5 s, subprocess included)::

    python bench/ls.py            # a table with the targets
    python bench/ls.py --json     # one JSON object

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from dsh_session_core import SessionHeader
from dsh_session_core._cli.main import main as cli_main
from dsh_session_core._logformat.logfile import dump_log
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from run import Target, cli

SESSIONS = 100_000
BUCKETS = 500
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z, epoch ms
ROOT = os.path.join(tempfile.gettempdir(), "dsh-session-bench-ls")

#: One turn, as a store writes it; ``{t}`` is each event's time.
_BODY = (
    '{{"type":"turn/start","seq":0,"time":{t},"data":{{"turn":1,"trigger":{{"kind":'
    '"message","source":{{"kind":"user"}}}}}}}}\n'
    '{{"type":"user/message","seq":1,"time":{t},"data":{{"content":[{{"type":"text",'
    '"text":"hi"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}\n'
    '{{"type":"step/start","seq":2,"time":{t},"data":{{"turn":1,"step":1}}}}\n'
    '{{"type":"assistant/message","seq":3,"time":{t},"data":{{"turn":1,"step":1,'
    '"content":[{{"type":"text","text":"yo"}}]}},"surfaceOp":"append"}}\n'
    '{{"type":"step/end","seq":4,"time":{t},"data":{{"turn":1,"step":1}}}}\n'
    '{{"type":"turn/end","seq":5,"time":{t},"data":{{"turn":1,"reason":{{"kind":'
    '"completed"}}}}}}\n'
)


def store() -> str:
    """The cached store's root, generated on first use (a marker file says it is whole)."""
    done = os.path.join(ROOT, ".complete")
    if os.path.exists(done):
        return ROOT
    shutil.rmtree(ROOT, ignore_errors=True)
    os.makedirs(ROOT, mode=0o700)
    made: set[str] = set()
    for i in range(SESSIONS):
        cwd = f"/home/user/project-{i % BUCKETS}"
        created = START + i * 60_000  # one a minute
        parent = f"s{i - 1:06d}" if i % 10 == 9 else None
        header = (SessionHeader(version=0, id=f"s{i:06d}", created_at=created, cwd=cwd,
                                parent_session=parent)
                  if parent else SessionHeader(version=0, id=f"s{i:06d}", created_at=created,
                                               cwd=cwd))
        path = log_path(ROOT, cwd, header.id)
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            made.add(folder)
        # Last activity: not in creation order, so that the sorts differ.
        last = created + (i * 7_919 % 100_000) * 1000
        with open(path, "wb") as f:
            f.write(dump_log(header, []) + _BODY.format(t=last).encode())
    with open(done, "w"):
        pass
    return ROOT


def _best_ms(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def _in_process(*argv: str) -> Callable[[], None]:
    def call() -> None:
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        try:
            with contextlib.redirect_stdout(out):
                cli_main(list(argv))
        except SystemExit as exit_:
            if exit_.code:
                msg = f"ls {' '.join(argv)} exited {exit_.code}"
                raise SystemExit(msg) from None

    return call


def _subprocess(*argv: str) -> Callable[[], None]:
    def call() -> None:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)

    return call


def run() -> dict[str, float]:
    t0 = time.perf_counter()
    root = store()
    results: dict[str, float] = {"sessions": SESSIONS,
                                 "store_ready_s": time.perf_counter() - t0}
    exe = [os.path.join(os.path.dirname(sys.executable), "dsh-session")]
    results["ls_limit20_ms"] = _best_ms(
        _in_process("ls", "--store", root, "--limit", "20"), 5)
    results["ls_limit20_subprocess_ms"] = _best_ms(
        _subprocess(*exe, "ls", "--store", root, "--limit", "20"), 5)
    results["ls_quiet_ms"] = _best_ms(_in_process("ls", "--store", root, "-q"), 3)
    results["ls_cwd_limit20_ms"] = _best_ms(
        _in_process("ls", "--store", root, "--limit", "20", "--cwd", "/home/user/project-7"), 3)
    results["ls_sort_activity_limit20_ms"] = _best_ms(
        _in_process("ls", "--store", root, "--limit", "20", "--sort", "activity"), 3)
    files = [os.path.join(d.path, f.name) for d in os.scandir(root) if d.is_dir()
             for f in os.scandir(d.path) if f.name.endswith(".jsonl")]
    lists = os.path.join(root, ".files")
    with open(lists, "w") as f:
        f.write("\0".join(files))
    results["grep_c_turn_start_ms"] = _best_ms(_subprocess(
        "sh", "-c", f"xargs -0 grep -c '\"type\":\"turn/start\"' < {lists}"), 3)
    return results


TARGETS: dict[str, Target] = {
    "ls_limit20_subprocess_ms": ("<=", lambda r: r["ls_limit20_subprocess_ms"], 500),
    "ls_limit20_ms / grep_c_turn_start_ms": (
        "<=", lambda r: r["ls_limit20_ms"] / r["grep_c_turn_start_ms"], 1),
}


def main() -> None:
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
