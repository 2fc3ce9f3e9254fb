"""Issue 40, point 3: ADK sessions by the name an ADK user knows, ``app/user/session``,
read from the ``adk/sessions`` summary rows (sealed on an encrypted store): ``show``,
``tail``, ``search --session`` and ``rm`` take it for the id, ``ls``, ``show`` and
``search`` print it; a deleted ADK session is marked deleted in ``ls`` and left out
unless ``--all``; a session stored under exactly the text wins over a name; a name two
sessions bear is refused naming both; on a sealed store the names are nowhere in the
clear, and a reader without keys neither reads nor resolves them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path

import pytest
from google.adk.events.event import Event
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import DurableStore, Keyring, open_store
from dsh_session_core.testing import run_cli
from erasing_support import pg_tables_holding
from redis_support import stored_values

NAME = "weather/ada/chat-1"
SESSION = dsh_session_id("weather", "ada", "chat-1")
GONE = dsh_session_id("weather", "ada", "chat-2")
KEY = bytes(range(32))

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


@pytest.fixture(params=["plain", "sealed"])
def keys(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
         ) -> Keyring | None:
    """No keys (a plain store), or a keyring (a sealed store), which the command line
    reads from ``DSH_SESSION_KEYS``."""
    monkeypatch.setenv("NO_COLOR", "1")
    if request.param == "plain":
        monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)
        return None
    monkeypatch.setenv("DSH_SESSION_KEYS", "k1:" + base64.b64encode(KEY).decode())
    return Keyring({"k1": KEY})


def _store(url: str, keys: Keyring | None) -> DurableStore:
    return open_store(url, keys=keys) if keys is not None else open_store(url)


async def _say(service: DshSessionService, app: str, user: str, sid: str) -> None:
    s = await service.create_session(app_name=app, user_id=user, session_id=sid)
    content = types.Content(role="user", parts=[types.Part(text=f"sunny in {sid}?")])
    await service.append_event(s, Event(author="user", invocation_id="i", content=content))


@pytest.fixture
def store(store_url: str, keys: Keyring | None) -> str:
    """A store holding the ADK session weather/ada/chat-1, and weather/ada/chat-2,
    deleted."""

    async def fill() -> None:
        with _store(store_url, keys) as st:
            service = DshSessionService(st)
            await _say(service, "weather", "ada", "chat-1")
            await _say(service, "weather", "ada", "chat-2")
            await service.delete_session(app_name="weather", user_id="ada",
                                         session_id="chat-2")
            await service.close()

    asyncio.run(fill())
    return store_url


def _ok(*argv: str) -> str:
    code, out, err = run_cli(*argv)
    assert code == 0, err
    return out.decode()


def test_show_tail_and_search_take_the_name(store: str) -> None:
    doc = json.loads(_ok("show", "--json", "--store", store, NAME))
    assert (doc["header"]["id"], doc["name"]) == (SESSION, NAME)
    assert "deleted" not in doc
    assert f"  name {NAME}" in _ok("show", "--store", store, NAME).splitlines()
    gone = json.loads(_ok("show", "--json", "--store", store, "weather/ada/chat-2"))
    assert (gone["header"]["id"], gone["deleted"]) == (GONE, True)
    tail = [json.loads(line) for line in
            _ok("tail", "--json", "-n", "1", "--store", store, NAME).splitlines()]
    assert [e["type"] for e in tail] == ["user/message"]
    hits = json.loads(_ok("search", "sunny", "--json", "--store", store, "--session", NAME))
    assert [(h["session"], h["sessionName"]) for h in hits] == [(SESSION, NAME)]
    text = _ok("search", "sunny", "--store", store)
    assert f"{SESSION} ({NAME})  #" in text
    assert f"{GONE} (weather/ada/chat-2)  #" in text


def test_ls_names_the_sessions_and_marks_the_deleted_one(store: str) -> None:
    rows = json.loads(_ok("ls", "--json", "--store", store))
    assert [(r["id"], r.get("name"), r.get("deleted")) for r in rows] == [
        (SESSION, NAME, None)]
    assert _ok("ls", "-q", "--store", store).split() == [SESSION]
    every = {r["id"]: r for r in json.loads(_ok("ls", "--json", "--all", "--store", store))}
    assert (every[GONE]["name"], every[GONE]["deleted"]) == ("weather/ada/chat-2", True)
    assert "deleted" not in every[SESSION]
    table = _ok("ls", "--all", "--store", store).splitlines()
    assert table[0].split()[:2] == ["ID", "NAME"]
    assert [line.split()[1:3] for line in table if line.startswith(GONE)] == [
        ["weather/ada/chat-2", "(deleted)"]]
    assert [line.split()[1] for line in table if line.startswith(SESSION)] == [NAME]


def test_rm_takes_the_name(store: str, keys: Keyring | None) -> None:
    out = _ok("rm", "--yes", "--store", store, NAME)
    assert out.startswith(f"removed {SESSION}: ")
    with _store(store, keys) as st:
        assert SESSION not in {h.id for h in st.stored()}
        assert GONE in {h.id for h in st.stored()}


def test_a_session_stored_under_the_text_wins_over_the_name(store: str,
                                                            keys: Keyring | None) -> None:
    # A JSONL store's ids hold no "/": a look-alike under the name's first part instead.
    with _store(store, keys) as st:
        try:
            st.backend.check_id(NAME)
        except ValueError:
            pytest.skip("this backend's ids hold no '/'")
        twin = st.create(NAME)
        with twin.turn() as turn:
            turn.user("the look-alike")
        st.release(twin)
    doc = json.loads(_ok("show", "--json", "--store", store, NAME))
    assert (doc["header"]["id"], doc.get("name")) == (NAME, None)


def test_a_name_two_sessions_bear_is_refused(store_url: str, keys: Keyring | None) -> None:
    async def fill() -> None:
        with _store(store_url, keys) as st:
            service = DshSessionService(st)
            await _say(service, "a/b", "c", "d")   # both named a/b/c/d
            await _say(service, "a", "b/c", "d")
            await service.close()

    asyncio.run(fill())
    ids = sorted([dsh_session_id("a/b", "c", "d"), dsh_session_id("a", "b/c", "d")])
    code, out, err = run_cli("show", "--store", store_url, "a/b/c/d")
    assert (code, out) == (1, b"")
    assert err.splitlines() == [
        f'dsh-session: the name "a/b/c/d" is borne by 2 sessions in {store_url}: '
        f"{ids[0]}, {ids[1]}",
        "hint: give the session's id instead"]
    code, out, err = run_cli("rm", "--yes", "--store", store_url, "a/b/c/d")
    assert code == 1
    with _store(store_url, keys) as st:
        assert set(ids) <= {h.id for h in st.stored()}


@pytest.mark.parametrize("keys", ["sealed"], indirect=True)
def test_a_sealed_store_keeps_the_names_sealed(store: str, keys: Keyring | None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if store.startswith("redis"):  # the server's files are its own: its keys' values
        held = stored_values(store)
        assert SESSION.encode() in held  # (the id is in the clear)
        assert b"weather" not in held
        assert b"chat-1" not in held
    elif store.startswith("postgresql"):  # the server's files are its own: its rows
        assert pg_tables_holding(store, SESSION) != []  # (the id is in the clear)
        assert pg_tables_holding(store, "weather") == []
        assert pg_tables_holding(store, "chat-1") == []
    else:
        _no_file_holds_the_names(store)
    # Without the keys, no name is read (nor resolved): the sessions list by their ids.
    monkeypatch.delenv("DSH_SESSION_KEYS")
    rows = json.loads(_ok("ls", "--json", "--all", "--store", store))
    assert SESSION in {r["id"] for r in rows}
    assert not any("name" in r for r in rows)
    code, _, err = run_cli("show", "--store", store, NAME)
    assert code == 1
    assert err.startswith(f'dsh-session: no session "{NAME}" in ')


def _no_file_holds_the_names(store: str) -> None:
    root = Path(store.removeprefix("sqlite:///")) if store.startswith("sqlite") else Path(store)
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    files += [Path(f"{root}{suffix}") for suffix in ("-wal", "-journal")
              if os.path.exists(f"{root}{suffix}")]
    assert files
    for path in files:
        data = path.read_bytes()
        assert b"weather" not in data, path
        assert b"chat-1" not in data, path
