"""Shared pieces of the lifecycle tests (``store.delete``/``prune``, ``rm``/``prune``):
the kinds of store (their URLs are the testing kit's), sessions
written at chosen times, a second process holding a session, processes racing from one
start, and a store's exported bytes."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

from dsh_session_core import DurableStore, open_store
from dsh_session_core._schema.codec import ENCODER
from dsh_session_core.testing import USER_SOURCE, make_store_url, user_turn

USER = dict(USER_SOURCE)

#: The durable kinds of store the lifecycle tests run on.
KINDS = ("jsonl", "sqlite", "postgresql")

#: The URL of a fresh store of a kind: the testing kit's (every test that runs on several
#: kinds of store takes its URL there, or from the kit's ``store_url`` fixture).
store_url = make_store_url


class Clock:
    """A settable clock (epoch ms): the events written at ``clock.now`` carry that time."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def write(store: DurableStore, clock: Clock, session_id: str, *, cwd: str | None = None,
          at: int | None = None, turns: int = 1, text: str = "hello") -> None:
    """Store a session of ``turns`` closed turns, every event at ``at`` (default: the
    clock's time), and release it."""
    if at is not None:
        clock.now = at
    s = store.create(session_id, cwd=cwd)
    for turn in range(1, turns + 1):
        user_turn(s, turn, f"{text} {turn}")
    store.release(s)


def exported(store: DurableStore, session_id: str) -> bytes:
    """A stored session as ``export`` writes it: its header line, then its event lines."""
    stored = store.backend.load_stored(session_id, store.registry)
    assert stored is not None, session_id
    assert stored.jsonl is not None
    return ENCODER.encode(stored.header) + b"\n" + stored.jsonl


#: The id of a store's retention ledger, which every removal writes (its records are
#: checked by tests/retention; the tests here look at the sessions beside it).
LEDGER = "dsh-session.retention"
#: Its files: a JSONL store's log and lock file; a SQLite store's lock file.
_LEDGER_FILES = (f"{LEDGER}.jsonl", f"{LEDGER}.lock",
                 f"{hashlib.sha256(LEDGER.encode()).hexdigest()}.lock")


def sessions(store: DurableStore) -> list[str]:
    """The ids of the stored sessions but the retention ledger, as stored."""
    return [h.id for h in store.stored() if h.id != LEDGER]


def snapshot(store: DurableStore) -> dict[str, bytes]:
    """Every stored session's exported bytes, by id (but the retention ledger's)."""
    return {h.id: exported(store, h.id) for h in store.stored() if h.id != LEDGER}


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes) but a JSONL store's header cache,
    which every listing may refresh (``_persistence/backends/jsonl/header_cache.py``): it
    holds nothing a log does not; and but the retention ledger's log and lock file."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] != ".headers-cache"
            and p.name not in _LEDGER_FILES}


_HOLDER = textwrap.dedent("""
    import sys
    from dsh_session_core import open_store

    with open_store(sys.argv[1]) as store:
        session = store.open(sys.argv[2])
        print("holding", len(session.events), flush=True)
        sys.stdin.readline()  # until the test lets go
""")


@contextlib.contextmanager
def held_by_another_process(url: str, session_id: str) -> Iterator[subprocess.Popen[str]]:
    """A second process that opens ``session_id`` of ``url`` (taking its writer lock)
    and holds it for the ``with`` block; no sleep: it says when it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, url, session_id],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("holding"):
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"the holder did not start: {line!r} {err}")
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.communicate("done\n", timeout=60)
    assert proc.returncode == 0, proc.stderr


def at_once(script: str, url: str, tmp_path: Path, names: tuple[str, ...]
            ) -> list[subprocess.CompletedProcess[str]]:
    """Run ``script`` in one process per name, all let go at the same moment: each is
    given ``url``, the path of a file to wait for and its name (``sys.argv[1:4]``), and
    spins until the file exists, which is made once all have started. Their results, in
    the order of ``names``."""
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", script, url, str(go), name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in names]
    go.touch()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def opened(url: str, clock: Callable[[], int] | None = None) -> DurableStore:
    """A store over ``url`` with core's plugins only."""
    from dsh_session_core import create_plugin_manager

    return open_store(url, plugin_manager=create_plugin_manager(autoload=False), clock=clock)


def user_texts(session: object) -> list[str]:
    """The text of each ``user/message`` of a session, in order."""
    return [e.data.content[0].text for e in session.events  # type: ignore[attr-defined]
            if e.type == "user/message"]
