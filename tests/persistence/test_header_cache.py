"""The JSONL store's header cache (``_persistence/backends/jsonl/header_cache.py``): a
listing opens only the logs new or changed since the last one, and the cache is never
believed over the logs: a log appended to, replaced, rewritten in place, removed or added
is listed as it is now, and a cache that is corrupt, forged or unwritable changes
nothing but speed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest

from dsh_session_core import JsonlBackend, SessionHeader, open_store
from dsh_session_core._logformat.logfile import dump_log
from dsh_session_core._persistence.backends.jsonl import buckets, files, header_cache


def _write(root: Path, sid: str, created: int, cwd: str | None = None) -> Path:
    backend = JsonlBackend(root)
    header = (SessionHeader(version=0, id=sid, created_at=created, cwd=cwd) if cwd
              else SessionHeader(version=0, id=sid, created_at=created))
    path = Path(backend.location(header))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dump_log(header, []) + b'{"type":"turn/start","seq":0,"time":5,'
                     b'"data":{"turn":1,"trigger":{"kind":"message","source":'
                     b'{"kind":"user"}}}}\n')
    return path


def _listed(root: Path) -> dict[str, int | float]:
    return {h.id: h.created_at for h, _ in buckets.list_logs(str(root))}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose first line a listing reads (the real reads, counted)."""
    seen: list[str] = []
    real = files.first_line

    def counted(path: str) -> bytes | None:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(files, "first_line", counted)
    return seen


def test_a_second_listing_opens_no_log(tmp_path: Path, reads: list[str]) -> None:
    for i in range(5):
        _write(tmp_path, f"s{i}", 1000 + i, cwd=f"/p/{i % 2}")
    assert _listed(tmp_path) == {f"s{i}": 1000 + i for i in range(5)}
    assert len(reads) == 5
    cache = tmp_path / header_cache.CACHE_DIR / header_cache.CACHE_FILE
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    reads.clear()
    assert _listed(tmp_path) == {f"s{i}": 1000 + i for i in range(5)}
    assert reads == []


def test_what_changed_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    a, b, c = (_write(tmp_path, sid, 1) for sid in "abc")
    _listed(tmp_path)
    reads.clear()
    with open(a, "ab") as f:  # appended: the same header, read again once
        f.write(b'{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":'
                b'{"kind":"completed"}}}\n')
    b.unlink()  # removed, then made again: another session of the same id
    _write(tmp_path, "b", 2)
    data = c.read_bytes()  # rewritten in place, same inode, same size
    with open(c, "r+b") as f:
        f.write(data.replace(b'"createdAt":1', b'"createdAt":9'))
    os.utime(c, ns=(c.stat().st_atime_ns, c.stat().st_mtime_ns + 1_000_000))
    _write(tmp_path, "d", 4)  # new
    assert _listed(tmp_path) == {"a": 1, "b": 2, "c": 9, "d": 4}
    assert sorted(Path(p).name for p in reads) == ["a.jsonl", "b.jsonl", "c.jsonl",
                                                   "d.jsonl"]
    reads.clear()
    c.unlink()
    assert _listed(tmp_path) == {"a": 1, "b": 2, "d": 4}
    assert reads == []


_ENTRY = ["_no-cwd", "a.jsonl", 1, 2, 3, {"type": "session", "id": "a", "createdAt": 9}]


@pytest.mark.parametrize("content", [
    b"", b"not msgpack", msgspec.msgpack.encode([2, [[1, 2]]]),  # torn, garbage, mis-shaped
    msgspec.msgpack.encode([99, [_ENTRY]]),  # another version's cache
], ids=["empty", "garbage", "shape", "version"])
def test_a_bad_cache_is_a_cold_one(tmp_path: Path, content: bytes) -> None:
    _write(tmp_path, "a", 1)
    (tmp_path / header_cache.CACHE_DIR).mkdir()
    (tmp_path / header_cache.CACHE_DIR / header_cache.CACHE_FILE).write_bytes(content)
    assert header_cache.load(str(tmp_path)) == {}  # not believed
    assert _listed(tmp_path) == {"a": 1}
    assert header_cache.load(str(tmp_path)).keys() == {("_no-cwd", "a.jsonl")}


def test_a_forged_entry_for_another_file_is_not_believed(tmp_path: Path) -> None:
    path = _write(tmp_path, "a", 1)
    st = path.stat()
    forged = header_cache.Cached("_no-cwd", "a.jsonl", st.st_ino + 1, st.st_size,
                                 st.st_mtime_ns, SessionHeader(version=0, id="evil",
                                                               created_at=7))
    header_cache.save(str(tmp_path), [forged])
    assert _listed(tmp_path) == {"a": 1}


def test_a_misplaced_log_is_warned_about_every_time(tmp_path: Path) -> None:
    path = _write(tmp_path, "a", 1)
    path.rename(path.with_name("b.jsonl"))
    for _ in range(2):
        with pytest.warns(UserWarning, match="left out of the listing"):
            assert _listed(tmp_path) == {}


def test_a_read_only_store_is_listed_without_a_cache(tmp_path: Path) -> None:
    # A store the lister cannot write: as this user, or (the tests run as root, who
    # writes anywhere) as nobody or root without its overrides, in a process of its own.
    import shutil
    import tempfile

    from unprivileged_support import run_unprivileged

    root = Path(tempfile.mkdtemp(prefix="dsh-ro-store-"))
    try:
        _write(root, "a", 1)
        for folder in (root, *root.iterdir()):
            folder.chmod(0o555)  # the cache's folder cannot be made
        for log in root.glob("*/*.jsonl"):
            log.chmod(0o444)
        script = ("import sys; from dsh_session_core._persistence.backends.jsonl import buckets; "
                  "print(sorted(h.id for h, _ in buckets.list_logs(sys.argv[1])))")
        done = run_unprivileged(["-c", script, str(root)], reach=[str(root)], cwd="/")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "['a']"
        assert not (root / header_cache.CACHE_DIR).exists()
    finally:
        for folder in (root, *root.iterdir()):
            folder.chmod(0o755)
        shutil.rmtree(root)


def test_an_unwritable_cache_changes_nothing(tmp_path: Path) -> None:
    _write(tmp_path, "a", 1)
    cache = tmp_path / header_cache.CACHE_DIR
    (cache / header_cache.CACHE_FILE).mkdir(parents=True)  # a folder where the file goes
    assert _listed(tmp_path) == {"a": 1}
    assert _listed(tmp_path) == {"a": 1}
    assert [p.name for p in cache.iterdir()] == [header_cache.CACHE_FILE]  # no temp left


def test_the_store_api_lists_through_it(tmp_path: Path) -> None:
    with open_store(str(tmp_path)) as store:
        for sid in ("x", "y"):
            session = store.create(sid)
            with session.turn() as turn:
                turn.user("hi")
            store.release(session)
        first = sorted(h.id for h in store.stored())
        store.delete("x")  # recorded in the retention ledger, a session listed too
        assert sorted(h.id for h in store.stored()) == ["dsh-session.retention", "y"]
    assert first == ["x", "y"]
