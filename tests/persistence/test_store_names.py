"""Issue 37, point 7: paths and URLs that surprise. ``_persistence/urls.py`` decides,
for the library and the command line, what names a store: a plain path is a JSONL
store's folder, so one that names a SQLite database (an existing SQLite file, or a new
store named ``agent.db``, as ``SQLiteSession("id", "agent.db")`` users write it) is
refused with the ``sqlite:`` URL to use, and nothing is made; a folder of that name
that exists still opens (stores made so before stay readable). A SQLAlchemy URL naming
a driver (``sqlite+aiosqlite:``, ``postgresql+asyncpg:``) is told to drop it; an empty
URL and a URL of the wrong type are refused."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from dsh_session_core import JsonlBackend, open_store, store_place
from dsh_session_core.errors import StoreUrlError


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)


def _everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", ["agent.db", "agent.db3", "agent.sqlite", "Agent.SQLite3",
                                  "sub/agent.db"])
def test_a_new_store_named_like_a_database_is_refused_with_its_url(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(StoreUrlError) as info:
        open_store(name)
    message = str(info.value)
    assert f"use its URL: sqlite:///{name}" in message
    assert f"jsonl:///{name}" in message  # a JSONL store of that name, on purpose
    assert "exists opens as it is" in message  # only a new store is refused
    assert _everything(tmp_path) == ["sub"]  # nothing was made


def test_an_absolute_path_gets_the_four_slash_url(tmp_path: Path) -> None:
    with pytest.raises(StoreUrlError, match=re.escape(f"use its URL: sqlite:///{tmp_path}/agent.db")):
        open_store(str(tmp_path / "agent.db"))
    with pytest.raises(StoreUrlError, match=r"sqlite:///agent\.db"):
        open_store(Path("agent.db"))  # a path-like, as given


def test_only_a_new_store_is_refused_an_existing_folder_opens(tmp_path: Path) -> None:
    with pytest.raises(StoreUrlError, match=r"sqlite:///agent\.db"):
        open_store("agent.db")
    with open_store("jsonl:///agent.db") as store:  # said on purpose: a JSONL folder
        s = store.create("kept")
        with s.turn() as turn:
            turn.user("hello")
    for url in ("agent.db", str(tmp_path / "agent.db"), "jsonl:agent.db"):
        with open_store(url) as store:  # as stores made so before stay readable
            assert isinstance(store.backend, JsonlBackend)
            assert [h.id for h in store.stored()] == ["kept"]


def test_a_sqlite_database_named_by_its_path_is_refused_with_its_url(tmp_path: Path) -> None:
    with open_store("sqlite:///chats") as store:  # a database without a suffix
        store.create("x").append("turn/start", {"turn": 1, "trigger": {
            "kind": "message", "source": {"kind": "user"}}})
    before = (tmp_path / "chats").read_bytes()
    with pytest.raises(StoreUrlError, match=r"'chats' is a SQLite database.*"
                                            r"open it by its URL: sqlite:///chats$"):
        open_store("chats")
    assert (tmp_path / "chats").read_bytes() == before
    sqlite3.connect(tmp_path / "made.db").close()  # an empty database is one too
    with pytest.raises(StoreUrlError, match=r"sqlite:///made\.db"):
        open_store("made.db")


@pytest.mark.parametrize(("url", "fix"), [
    ("sqlite+aiosqlite:///agent.db", "drop it: sqlite:///agent.db"),
    ("sqlite+pysqlite:////abs/agent.db", "drop it: sqlite:////abs/agent.db"),
    ("postgresql+asyncpg://user@host/db", "drop it: postgresql://user@host/db"),
    ("postgresql+psycopg://user@host:5432/db", "drop it: postgresql://user@host:5432/db"),
    ("postgres+psycopg2://host/db", "drop it: postgresql://host/db"),
    ("postgresql+asyncpg://ada:hunter2@host/db", "drop it: postgresql://ada@host/db"),
])
def test_a_url_naming_a_driver_is_told_to_drop_it(tmp_path: Path, url: str,
                                                   fix: str) -> None:
    with pytest.raises(StoreUrlError) as info:
        open_store(url)
    assert str(info.value).endswith(fix)
    assert "hunter2" not in str(info.value)  # a password is never shown
    assert isinstance(info.value, ValueError)  # what an unknown scheme was
    assert _everything(tmp_path) == []


def test_an_empty_url_is_refused_not_taken_for_the_working_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreUrlError, match="names no store"):
        open_store("")
    with pytest.raises(StoreUrlError, match="names no store"):
        store_place("")
    assert _everything(tmp_path) == []


@pytest.mark.parametrize("url", [b"x", 5, ["x"]])
def test_a_url_of_the_wrong_type_is_a_type_error(url: object) -> None:
    with pytest.raises(TypeError, match=r"^open_store\(\) takes a store URL or a folder "
                                        r"path, a str or an os\.PathLike of one"):
        open_store(url)  # type: ignore[arg-type]


def test_the_integrations_refuse_a_database_path_too(tmp_path: Path) -> None:
    # What SQLiteSession("id", "agent.db") and SQLAlchemy users write, given to ours.
    agents = pytest.importorskip("dsh_session_openai_agents")
    langgraph = pytest.importorskip("dsh_session_langgraph")
    with pytest.raises(StoreUrlError, match=r"sqlite:///agent\.db"):
        agents.DshSession("id", store="agent.db")
    with pytest.raises(StoreUrlError, match=r"sqlite:///agent\.db"):
        langgraph.DshCheckpointSaver("agent.db")
    assert not os.path.exists("agent.db")
