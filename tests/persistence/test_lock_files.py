"""A session created and never flushed leaves no ``.lock`` file behind (JSONL, compact
JSONL, SQLite), while its writer lock still keeps a second writer out for as long as it
is held, in another process too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_session_core import create_plugin_manager, open_store
from dsh_session_core.errors import SessionLockedError
from lifecycle_support import USER, Clock, opened, store_url, write

KINDS = ("jsonl", "jsonl+zstd", "sqlite")

_CREATOR = textwrap.dedent("""
    import sys
    from dsh_session_core import create_plugin_manager, open_store

    pm = create_plugin_manager(autoload=False)
    with open_store(sys.argv[1], plugin_manager=pm) as store:
        session = store.create(sys.argv[2])  # never flushed
        print("holding", flush=True)
        sys.stdin.readline()  # until the test lets go
        store.release(session)
    print("released", flush=True)
""")


def _locks(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*.lock"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_never_flushed_leaves_no_lock_file(kind: str, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    url = store_url(kind, request, tmp_path)
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "kept")  # a stored session keeps its lock file, as before
        kept = _locks(tmp_path)
        assert len(kept) == 1
        released = store.create("released")
        assert len(_locks(tmp_path)) == 2  # held: its lock file is there
        store.release(released)
        assert _locks(tmp_path) == kept
        store.create("closed-with-the-store")
        assert len(_locks(tmp_path)) == 2
    assert _locks(tmp_path) == kept
    with opened(url) as store:
        assert [h.id for h in store.stored()] == ["kept"]
        store.release(store.create("released"))  # the id is free again
        store.release(store.open("kept"))
    assert _locks(tmp_path) == kept


@pytest.mark.parametrize("kind", KINDS)
def test_the_lock_of_a_session_never_flushed_still_keeps_a_second_writer_out(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _CREATOR, url, "s"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdin is not None
    try:
        assert proc.stdout.readline() == "holding\n", proc.stderr
        pm = create_plugin_manager(autoload=False)
        with open_store(url, plugin_manager=pm) as store:
            with pytest.raises(SessionLockedError):
                store.create("s")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "released\n"
            assert _locks(tmp_path) == []
            # Free again, and locked again by its next writer (a new lock file).
            mine = store.create("s")
            with (open_store(url, plugin_manager=create_plugin_manager(autoload=False)) as other,
                  pytest.raises(SessionLockedError)):
                other.create("s")
            mine.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                              "source": USER}})
            mine.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            store.flush(mine)
            store.release(mine)
        assert len(_locks(tmp_path)) == 1  # stored now: its lock file stays
    finally:
        _, err = proc.communicate(timeout=60)  # its stdin closed: it lets go and exits
    assert proc.returncode == 0, err
