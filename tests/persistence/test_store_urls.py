"""Issue 24, point 1: a store URL's path follows SQLAlchemy's rule (``sqlite:///name.db``
is relative to the working folder, ``sqlite:////abs/name.db`` absolute; the same for
``jsonl:`` and ``jsonl+zstd:``), ``file:`` follows RFC 8089, and a store is created only
in a folder that exists, never with the folders above it (``_persistence/urls.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import JsonlBackend, SqliteBackend, open_store
from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core._persistence.urls import url_for
from dsh_session_core.errors import StoreFolderError, StoreNotFoundError, StoreUrlError

#: Writes one session to the store its argument names, in the working folder it is run in.
_WRITE = textwrap.dedent("""
    import sys
    from dsh_session_core import open_store
    with open_store(sys.argv[1]) as store:
        s = store.create("s")
        s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                       "source": {"kind": "user"}}})
        store.flush(s)
""")


def _write(url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_SESSION")}
    return subprocess.run([sys.executable, "-c", _WRITE, url], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def unique() -> Iterator[str]:
    """A name no one else uses: where the old reading of three slashes would have
    written at the file system's root (removed after the test if it did)."""
    name = f"dsh-url-test-{uuid.uuid4().hex[:12]}"
    yield name
    _remove_at_root(f"{name}*")


def _remove_at_root(pattern: str) -> None:
    for leftover in Path("/").glob(pattern):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
        else:
            leftover.unlink()


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "jsonl+zstd"])
def test_three_slashes_name_a_path_in_the_working_folder(
    scheme: str, tmp_path: Path, unique: str
) -> None:
    name = f"{unique}.db" if scheme == "sqlite" else unique
    proc = _write(f"{scheme}:///{name}", tmp_path)  # a fresh process, cwd=tmp_path
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).exists()
    assert not os.path.lexists(f"/{name}")  # not at the root of the file system
    with open_store(f"{scheme}:///{tmp_path}/{name}") as store:  # the same store
        assert [h.id for h in store.stored()] == ["s"]


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "jsonl+zstd"])
def test_four_slashes_name_an_absolute_path_from_any_working_folder(
    scheme: str, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "abs").mkdir()
    name = "x.db" if scheme == "sqlite" else "x"
    url = f"{scheme}:///{tmp_path}/abs/{name}"
    assert url.startswith(f"{scheme}:////")
    proc = _write(url, tmp_path / "elsewhere")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "abs" / name).exists()
    assert _files(tmp_path / "elsewhere") == []


def test_the_short_form_and_the_memory_spellings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sqlite = backend_for("sqlite:agent.db")
    assert isinstance(sqlite, SqliteBackend)
    assert sqlite.path == str(tmp_path / "agent.db")
    sqlite.close()
    made_at_root = not any(Path("/").glob(":memory:*"))  # where the old reading put it
    try:
        for url in ("sqlite://", "sqlite::memory:", "sqlite:///:memory:", "sqlite:"):
            memory = backend_for(url)
            assert isinstance(memory, SqliteBackend)
            assert memory.path == ":memory:", url
            memory.close()
    finally:
        if made_at_root:
            _remove_at_root(":memory:*")  # with its -wal and -shm
    for url, kind in (("jsonl:rel", JsonlBackend), (f"jsonl:{tmp_path}/abs", JsonlBackend),
                      ("jsonl+zstd:rel", JsonlZstdBackend)):
        backend = backend_for(url)
        assert type(backend) is kind
        assert backend.root == os.path.abspath(url.partition(":")[2]), url
    assert _files(tmp_path) == ["agent.db"]  # the JSONL stores are made by a first write


def test_file_urls_are_rfc_8089s(tmp_path: Path) -> None:
    folder = tmp_path / "my sessions"
    for url in (folder.as_uri(), f"file://localhost{folder}", f"file:{folder}",
                f"file:///{folder}"):
        backend = backend_for(url)
        assert type(backend) is JsonlBackend
        assert backend.root == str(folder), url
    assert folder.as_uri().startswith("file:///")  # three slashes, and absolute
    with pytest.raises(StoreUrlError, match=r"absolute path.*jsonl:rel"):
        backend_for("file:rel")


@pytest.mark.parametrize(("url", "problem"), [
    ("sqlite://host/NAME.db", "names the host 'host'"),
    ("jsonl://host/NAME", "names the host 'host'"),
    ("file://host/NAME", "names the host 'host'"),
    ("sqlite:///NAME.db?mode=ro", "has options"),
    ("jsonl+zstd:///NAME?a=b", "has options"),
    ("jsonl://", "names no folder"),
    ("jsonl+zstd:///", "names no folder"),
    ("sqlite:///NAME%FF.db", "not UTF-8"),
])
def test_what_a_store_url_cannot_say_is_refused(
    url: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str
) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.replace("NAME", unique)  # the old reading wrote at the root: /NAME.db...
    with pytest.raises(StoreUrlError, match=problem) as caught:
        backend_for(url)
    assert isinstance(caught.value, ValueError)  # a bad URL, as an unknown scheme is
    assert caught.value.url == url
    assert _files(tmp_path) == []


@pytest.mark.parametrize("url", [
    "sqlite:///missing/x.db", "jsonl:///missing/x", "jsonl+zstd:///missing/x",
    "missing/x", "sqlite:missing/x.db", "jsonl:missing/x",
])
def test_a_store_in_a_missing_folder_is_refused_and_nothing_is_made(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str
) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.replace("missing", unique)  # the old reading made /<it> at the root
    with pytest.raises(StoreFolderError) as caught:
        open_store(url)
    error = caught.value
    assert isinstance(error, FileNotFoundError)
    assert error.path == str(tmp_path / unique / ("x.db" if url.endswith(".db") else "x"))
    assert error.folder == error.filename == str(tmp_path / unique)
    assert f"cannot create the store {error.path}: its folder {error.folder} does " \
           "not exist" in str(error)
    assert _files(tmp_path) == []
    # Four slashes: the same rule for an absolute path.
    absolute = url.replace(unique, f"{tmp_path}/{unique}")
    with pytest.raises(StoreFolderError):
        open_store(absolute)
    assert _files(tmp_path) == []


def test_the_old_reading_of_three_slashes_made_folders_at_the_root(unique: str) -> None:
    # sqlite:///missing_dir/x.db once made /missing_dir/: it is refused, and the root
    # of the file system is left alone.
    with pytest.raises(StoreFolderError):
        open_store(f"sqlite:///{unique}/x.db")
    assert not os.path.lexists(f"/{unique}")


def test_readers_of_a_missing_store_still_find_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in (f"{tmp_path}/missing/x", f"jsonl:///{tmp_path}/missing/x"):
        backend = backend_for(url, create=False)
        assert backend.list() == []
        assert not backend.exists()
    # A reader of a missing database is told where it looked: the absolute path.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreNotFoundError) as caught:
        backend_for("sqlite:///missing/x.db", create=False)
    assert caught.value.location == str(tmp_path / "missing" / "x.db")
    assert _files(tmp_path) == []


@pytest.mark.parametrize("kind", [JsonlBackend, JsonlZstdBackend])
def test_a_jsonl_store_makes_its_own_folder_and_none_above_it(
    kind: type[JsonlBackend], tmp_path: Path
) -> None:
    (tmp_path / "parent").mkdir()
    root = tmp_path / "parent" / "store"
    with open_store(f"{'jsonl' if kind is JsonlBackend else 'jsonl+zstd'}:///{root}") as store:
        s = store.create("a")  # the store's folder is made here
        store.flush(s)
        assert root.is_dir()
        # The store's folder and its parent removed under the writer: a write makes
        # neither again (it would land outside what is left of the store).
        store.release(s)
        shutil.rmtree(tmp_path / "parent")
        with pytest.raises(StoreFolderError) as caught:
            store.create("b")
        assert caught.value.path == str(root)
    assert _files(tmp_path) == []
    # A backend made directly, not by a URL, refuses at its first write.
    backend = kind(tmp_path / "missing" / "store")
    with DurableStore(backend) as direct, pytest.raises(StoreFolderError):
        direct.create("c")
    assert _files(tmp_path) == []


def test_a_sqlite_backend_made_directly_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreFolderError) as caught:
        SqliteBackend(tmp_path / "missing" / "x.db")
    assert caught.value.folder == str(tmp_path / "missing")
    assert _files(tmp_path) == []


def test_the_embedded_default_makes_its_own_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh machine: nothing of the data folder exists yet, and the default store is
    # made under it, folders and all (XDG's rule), by its first write.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    with open_store() as store:
        assert _files(tmp_path) == []  # opening makes nothing
        s = store.create("s")
        s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                       "source": {"kind": "user"}}})
        store.flush(s)
    assert (tmp_path / "data" / "dsh-session" / "sessions").is_dir()


# --- the rule, for any path -------------------------------------------------------------

#: A file name: anything but "/" and NUL (and lone surrogates, which have no UTF-8).
_NAMES = st.text(st.characters(codec="utf-8", exclude_characters="/\x00"),
                 min_size=1, max_size=30).filter(lambda n: n not in (".", ".."))


#: SQLAlchemy, the peer whose reading the rule is (installed with the ADK integration).
needs_sqlalchemy = pytest.mark.skipif(find_spec("sqlalchemy") is None,
                                      reason="SQLAlchemy is not installed")


@needs_sqlalchemy
@settings(max_examples=300, deadline=None)
@given(names=st.lists(_NAMES, min_size=1, max_size=3), absolute=st.booleans())
def test_the_url_of_a_path_names_that_path_as_sqlalchemy_reads_it(
    names: list[str], absolute: bool
) -> None:
    from sqlalchemy.engine import make_url

    path = ("/" if absolute else "") + "/".join(names)
    url = url_for("sqlite", path)
    assert url.startswith("sqlite:////" if absolute else "sqlite:///")
    assert url.startswith("sqlite:////") == absolute
    assert make_url(url).database == path  # the peer's reading
    for scheme in ("jsonl", "jsonl+zstd"):
        backend = backend_for(url_for(scheme, path), create=False)  # opening makes nothing
        assert isinstance(backend, JsonlBackend)
        assert backend.root == os.path.abspath(path)


@needs_sqlalchemy
@settings(max_examples=300, deadline=None)
@given(raw=st.text(st.characters(codec="utf-8", exclude_characters="?\x00"),
                   min_size=1))
def test_three_slashes_and_anything_read_as_sqlalchemy_reads_them(raw: str) -> None:
    from sqlalchemy.engine import make_url

    url = f"jsonl:///{raw}"
    try:
        unquote(raw, errors="strict")
    except UnicodeDecodeError:  # SQLAlchemy would put U+FFFD in the name: refused
        with pytest.raises(StoreUrlError, match="not UTF-8"):
            backend_for(url, create=False)
        return
    backend = backend_for(url, create=False)
    assert isinstance(backend, JsonlBackend)
    expected = make_url(f"sqlite:///{raw}").database
    assert expected  # raw is not empty
    assert backend.root == os.path.abspath(expected)
