"""``DshSessionService`` against ADK's session-service contract, on the JSONL, SQLite and
PostgreSQL stores.

The contract is ADK's ``BaseSessionService`` docstrings and what its own services do:
each scenario runs the same calls on ``DshSessionService`` and on ADK's
``InMemorySessionService`` and compares what they return, so that the expected values
come from ADK, not from our code. What only a durable store has (a reload by a new
service, the tombstone, a second writer) is checked on its own.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from adk_support import same_on_both
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import open_store
from lifecycle_support import at_once

APP, USER = "weather-app", "ada"



# Each test runs on a fresh store of each kind (the testing kit's ``store_url``).
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _event(author: str, text: str | None = None, *, ts: float, invocation: str = "inv-1",
           delta: dict[str, Any] | None = None, id: str | None = None,
           partial: bool | None = None) -> Event:
    content = None
    if text is not None:
        role = "user" if author == "user" else "model"
        content = types.Content(role=role, parts=[types.Part(text=text)])
    kwargs: dict[str, Any] = {}
    if id is not None:
        kwargs["id"] = id
    return Event(author=author, invocation_id=invocation, content=content, timestamp=ts,
                 actions=EventActions(state_delta=delta or {}), partial=partial, **kwargs)


def _shape(session: Session | None, *, times: bool = True) -> Any:
    """What a caller sees of a session (creation times differ between two services)."""
    if session is None:
        return None
    out: dict[str, Any] = {
        "id": session.id, "app": session.app_name, "user": session.user_id,
        "state": session.state,
        "events": [e.model_dump(mode="json") for e in session.events],
    }
    if times and session.events:
        out["last_update_time"] = session.last_update_time
    return out


def test_create_get_state_scopes(store_url: str) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        created = await svc.create_session(
            app_name=APP, user_id=USER, session_id="s1",
            state={"city": "Paris", "n": 1.5, "app:units": "metric", "user:lang": "fr",
                   "temp:scratch": 1, "nested": {"a": [1, None, True]}})
        other = await svc.create_session(app_name=APP, user_id="bob", session_id="s2")
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        missing = await svc.get_session(app_name=APP, user_id=USER, session_id="nope")
        wrong_user = await svc.get_session(app_name=APP, user_id="bob", session_id="s1")
        return [_shape(created), _shape(other), _shape(got), missing, wrong_user,
                await svc.get_user_state(app_name=APP, user_id=USER),
                await svc.get_user_state(app_name=APP, user_id="bob")]

    got = same_on_both(store_url, scenario)
    assert got[2]["state"] == {"city": "Paris", "n": 1.5, "nested": {"a": [1, None, True]},
                               "app:units": "metric", "user:lang": "fr"}
    assert got[1]["state"] == {"app:units": "metric"}  # app state: every user's


def test_generated_id_and_duplicate_id(store_url: str) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER)
        assert s.id
        assert await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
        await svc.create_session(app_name=APP, user_id=USER, session_id="dup")
        with pytest.raises(AlreadyExistsError):
            await svc.create_session(app_name=APP, user_id=USER, session_id="dup")
        # The same id under another user or app is another session.
        a = await svc.create_session(app_name=APP, user_id="bob", session_id="dup")
        b = await svc.create_session(app_name="other", user_id=USER, session_id="dup")
        return [_shape(a), _shape(b)]

    same_on_both(store_url, scenario)


def test_append_events_state_and_temp(store_url: str) -> None:
    t0 = time.time()

    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        e1 = await svc.append_event(s, _event("user", "hi", ts=t0, id="e1"))
        e2 = await svc.append_event(s, _event(
            "agent", "hello", ts=t0 + 1.25, id="e2",
            delta={"k": "v", "app:a": 1, "user:u": [1, 2], "temp:t": "gone"}))
        in_hand = _shape(s)
        assert s.state["temp:t"] == "gone"  # temp: applies to the session in hand only
        await svc.append_event(s, _event("agent", "p", ts=t0 + 2, id="e3", partial=True))
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        listed = await svc.list_sessions(app_name=APP, user_id=USER)
        return [e1.model_dump(mode="json"), e2.model_dump(mode="json"), in_hand,
                _shape(got), [_shape(x) for x in listed.sessions],
                await svc.get_user_state(app_name=APP, user_id=USER)]

    got = same_on_both(store_url, scenario)
    stored = got[3]
    assert [e["id"] for e in stored["events"]] == ["e1", "e2"]  # partial: not persisted
    assert "temp:t" not in stored["state"]
    assert "temp:t" not in str(stored["events"])
    assert stored["last_update_time"] == t0 + 1.25  # exactly the event's timestamp


def test_get_session_config(store_url: str) -> None:
    t0 = 1_700_000_000.125

    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        for i in range(5):
            await svc.append_event(s, _event("user", f"m{i}", ts=t0 + i, id=f"e{i}",
                                             invocation=f"inv-{i}"))
        out = []
        for config in [GetSessionConfig(num_recent_events=2),
                       GetSessionConfig(num_recent_events=0),
                       GetSessionConfig(num_recent_events=10),
                       GetSessionConfig(after_timestamp=t0 + 3),
                       GetSessionConfig(after_timestamp=t0 + 2.5, num_recent_events=1),
                       GetSessionConfig(after_timestamp=t0 + 99)]:
            got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1",
                                        config=config)
            assert got is not None
            out.append([e.id for e in got.events])
        return out

    got = same_on_both(store_url, scenario)
    assert got == [["e3", "e4"], [], [f"e{i}" for i in range(5)], ["e3", "e4"], ["e4"], []]


def test_list_and_delete(store_url: str) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        for uid, sid, ts in [(USER, "a", 30.0), (USER, "b", 10.0), ("bob", "c", 20.0)]:
            s = await svc.create_session(app_name=APP, user_id=uid, session_id=sid,
                                         state={"user:who": uid})
            await svc.append_event(s, _event("user", "x", ts=ts, id=f"e-{sid}"))
        await svc.create_session(app_name="other", user_id=USER, session_id="z")
        everyone = await svc.list_sessions(app_name=APP)
        mine = await svc.list_sessions(app_name=APP, user_id=USER)
        nobody = await svc.list_sessions(app_name=APP, user_id="nobody")
        await svc.delete_session(app_name=APP, user_id=USER, session_id="b")
        await svc.delete_session(app_name=APP, user_id=USER, session_id="never")  # no error
        after = await svc.list_sessions(app_name=APP, user_id=USER)
        gone = await svc.get_session(app_name=APP, user_id=USER, session_id="b")
        with pytest.raises(SessionNotFoundError):
            await svc.append_event(Session(id="b", app_name=APP, user_id=USER),
                                   _event("user", "y", ts=40.0))
        again = await svc.create_session(app_name=APP, user_id=USER, session_id="b")
        return [[_shape(x) for x in everyone.sessions], [_shape(x) for x in mine.sessions],
                nobody.sessions, [_shape(x) for x in after.sessions], gone, _shape(again)]

    got = same_on_both(store_url, scenario)
    assert [x["id"] for x in got[0]] == ["b", "c", "a"]  # oldest update first
    assert all(x["events"] == [] for x in got[0])  # listing carries no events
    assert got[5]["events"] == []  # a new session under a deleted one's id starts afresh


def test_duplicate_event_is_persisted_once(store_url: str) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        e = _event("user", "hi", ts=5.0, id="e1")
        await svc.append_event(s, e)
        stored = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert stored is not None
        await svc.append_event(stored, e)  # the same event again, through another copy
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        return _shape(got)

    assert [e["id"] for e in same_on_both(store_url, scenario)["events"]] == ["e1"]


def test_reload_by_a_new_service_and_the_tombstone(store_url: str) -> None:
    t0 = 1_750_000_000.5
    delta = {"k": {"deep": [1.25, "x", None]}, "app:flag": True, "user:n": 3}

    async def run() -> None:
        async with DshSessionService(store_url) as first:
            s = await first.create_session(app_name=APP, user_id=USER, session_id="s1",
                                           state={"init": 0})
            await first.append_event(s, _event("user", "hi", ts=t0, id="e1"))
            await first.append_event(s, _event("agent", "yo", ts=t0 + 1, id="e2",
                                               delta=delta))
            before = _shape(await first.get_session(app_name=APP, user_id=USER,
                                                    session_id="s1"))
        async with DshSessionService(store_url) as second:
            again = await second.get_session(app_name=APP, user_id=USER, session_id="s1")
            assert _shape(again) == before
            assert again is not None
            assert again.last_update_time == t0 + 1
            assert again.state == {"init": 0, "k": {"deep": [1.25, "x", None]},
                                   "app:flag": True, "user:n": 3}
            assert await second.get_user_state(app_name=APP, user_id=USER) == {"n": 3}
            await second.append_event(again, _event("user", "more", ts=t0 + 2, id="e3",
                                                    invocation="inv-2"))
            await second.delete_session(app_name=APP, user_id=USER, session_id="s1")
            assert await second.get_session(app_name=APP, user_id=USER,
                                            session_id="s1") is None
        # The log stays, tombstone last, readable by any dsh tool.
        async with open_store(store_url) as store:
            log = await store.aopen(dsh_session_id(APP, USER, "s1"))
            types_ = [e.type for e in log.events]
            # Every record is turn-enclosed: the service's own in one-shot turns.
            assert types_[:3] == ["turn/start", "adk/session", "turn/end"]
            assert types_[-3:] == ["turn/start", "adk/deleted", "turn/end"]
            assert types_.count("adk/event") == 3

    asyncio.run(run())


def test_stale_session_and_second_writer(store_url: str) -> None:
    # ADK's in-memory service keeps no revision: only persistent services detect stale
    # copies (the base class's docstring); ADK's database service does (the next test).
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        one = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        two = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert one is not None
        assert two is not None
        await svc.append_event(one, _event("user", "first", ts=time.time(), id="e1"))
        raised = None
        try:
            await svc.append_event(two, _event("user", "second", ts=time.time(), id="e2"))
        except StaleSessionError:
            raised = "stale"
        await svc.append_event(one, _event("agent", "ok", ts=time.time(), id="e3"))
        assert s.id == "s1"
        return raised

    async def run() -> None:
        async with DshSessionService(store_url) as ours:
            assert await scenario(ours) == "stale"
            # A second service (another process, another host) cannot write a session
            # this one holds: ADK's stale-session error, naming the writer rule.
            async with DshSessionService(store_url) as other:
                theirs = await other.get_session(app_name=APP, user_id=USER,
                                                 session_id="s1")
                assert theirs is not None
                assert [e.id for e in theirs.events] == ["e1", "e3"]
                with pytest.raises(StaleSessionError, match="writer"):
                    await other.append_event(theirs, _event("user", "x", ts=time.time()))
        async with DshSessionService(store_url) as later:  # released by close(): writable
            s = await later.get_session(app_name=APP, user_id=USER, session_id="s1")
            assert s is not None
            await later.append_event(s, _event("user", "later", ts=time.time(), id="e4"))

    asyncio.run(run())


def test_database_service_detects_stale_too(tmp_path: Path) -> None:
    """The stale-writer rule above is ADK's own: its database service raises the same."""
    pytest.importorskip("aiosqlite")
    from google.adk.sessions.database_session_service import DatabaseSessionService

    async def run() -> None:
        svc = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path}/adk.db")
        try:
            await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
            one = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
            two = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
            assert one is not None
            assert two is not None
            await svc.append_event(one, _event("user", "first", ts=time.time(), id="e1"))
            with pytest.raises(StaleSessionError):
                await svc.append_event(two, _event("user", "second", ts=time.time()))
        finally:
            await svc.close()

    asyncio.run(run())


def test_ids_with_surrounding_whitespace_find_their_session(store_url: str) -> None:
    """ADK's services strip a session id given to create, get and delete (the in-memory
    one always; the SQLite one unless a row is stored under the id as given): a padded id
    finds its session on each call, as on ADK's in-memory service."""
    async def scenario(svc: BaseSessionService) -> Any:
        created = await svc.create_session(app_name=APP, user_id=USER, session_id=" s1\t")
        with pytest.raises(AlreadyExistsError):
            await svc.create_session(app_name=APP, user_id=USER, session_id="s1 ")
        stored = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert stored is not None
        await svc.append_event(stored, _event("user", "hi", ts=5.0, id="e1"))
        padded = await svc.get_session(app_name=APP, user_id=USER, session_id="\ns1 ",
                                       config=GetSessionConfig(num_recent_events=5))
        listed = await svc.list_sessions(app_name=APP, user_id=USER)
        await svc.delete_session(app_name=APP, user_id=USER, session_id="  s1  ")
        gone = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        return [_shape(created), _shape(padded), [_shape(s) for s in listed.sessions], gone]

    got = same_on_both(store_url, scenario)
    assert got[0]["id"] == "s1"
    assert [e["id"] for e in got[1]["events"]] == ["e1"]
    assert [s["id"] for s in got[2]] == ["s1"]
    assert got[3] is None


def test_append_through_a_padded_id_finds_the_session(store_url: str) -> None:
    """``append_event`` resolves the id of the session in hand as get does (ADK's
    in-memory service would not find it: it strips on create, get and delete only), so a
    session object built by hand with a padded id writes to its session."""
    async def run() -> None:
        async with DshSessionService(store_url) as svc:
            await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
            hand = Session(id=" s1 ", app_name=APP, user_id=USER)
            await svc.append_event(hand, _event("user", "hi", ts=time.time(), id="e1"))
            got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
            assert got is not None
            assert [e.id for e in got.events] == ["e1"]
            with pytest.raises(SessionNotFoundError):
                await svc.append_event(Session(id=" s2 ", app_name=APP, user_id=USER),
                                       _event("user", "x", ts=time.time()))

    asyncio.run(run())


def test_get_session_gives_events_of_its_own(store_url: str) -> None:
    """The events ``get_session`` returns are the caller's: setting their fields changes
    neither what is stored nor what the next call returns (the service hands out copies
    of the events it validated once)."""
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        await svc.append_event(s, _event("user", "hi", ts=5.0, id="e1"))
        first = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert first is not None
        first.events[0].author = "someone else"
        first.events[0].content = None
        first.events.clear()
        again = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        return _shape(again)

    got = same_on_both(store_url, scenario)
    assert got["events"][0]["author"] == "user"
    assert got["events"][0]["content"]["parts"][0]["text"] == "hi"


def test_a_reader_follows_the_writers_appends_deletes_and_recreations(store_url: str) -> None:
    """A service that reads a session another one writes (it keeps what it read, and
    reads only what was appended since) sees each append, the delete and a new session
    under the same id, as a fresh service does."""
    t0 = 1_750_000_000.0

    async def run() -> None:
        async with DshSessionService(store_url) as writer, \
                DshSessionService(store_url) as reader:

            async def ids() -> list[str] | None:
                got = await reader.get_session(app_name=APP, user_id=USER, session_id="s1")
                async with DshSessionService(store_url) as fresh:
                    again = await fresh.get_session(app_name=APP, user_id=USER,
                                                    session_id="s1")
                assert _shape(got) == _shape(again)
                return None if got is None else [e.id for e in got.events]

            s = await writer.create_session(app_name=APP, user_id=USER, session_id="s1",
                                            state={"k": 0})
            assert await ids() == []
            await writer.append_event(s, _event("user", "a", ts=t0, id="e1"))
            assert await ids() == ["e1"]
            await writer.append_event(s, _event("agent", "b", ts=t0 + 1, id="e2",
                                                delta={"k": 1}))
            assert await ids() == ["e1", "e2"]
            got = await reader.get_session(app_name=APP, user_id=USER, session_id="s1")
            assert got is not None
            assert got.state == {"k": 1}
            await writer.delete_session(app_name=APP, user_id=USER, session_id="s1")
            assert await ids() is None
            await writer.create_session(app_name=APP, user_id=USER, session_id="s1")
            assert await ids() == []

    asyncio.run(run())


RACE = """
import asyncio, os, sys
from google.adk.errors.already_exists_error import AlreadyExistsError
from dsh_session_adk import DshSessionService

async def main():
    url, go, who = sys.argv[1:]
    async with DshSessionService(url) as service:
        while not os.path.exists(go):
            pass
        try:
            await service.create_session(app_name="weather-app", user_id="ada",
                                         session_id="same", state={"k": who})
            print("created")
        except AlreadyExistsError:
            print("exists")
        await service.create_session(app_name="weather-app", user_id="ada",
                                     session_id="own-" + who, state={"app:" + who: 1})

asyncio.run(main())
"""


def test_two_processes_creating_one_session_and_the_app_state_at_once(
    store_url: str, tmp_path: Path
) -> None:
    """Two processes create the same new session at the same moment, each also the
    first to write the app's state: one creates the session and the other is told it
    exists (ADK's ``AlreadyExistsError``, not a store's error), and both app-state
    writes land, as two writers on ADK's database service would see."""
    done = at_once(RACE, store_url, tmp_path, ("a", "b"))
    assert [d.returncode for d in done] == [0, 0], done
    assert sorted(d.stdout for d in done) == ["created\n", "exists\n"], done

    async def reload() -> tuple[Any, Any]:
        async with DshSessionService(store_url) as service:
            same = await service.get_session(app_name=APP, user_id=USER, session_id="same")
            return same.state if same else None, await service.get_app_state(app_name=APP)

    state, app = asyncio.run(reload())
    winner = "a" if done[0].stdout == "created\n" else "b"
    assert state is not None
    assert state["k"] == winner
    assert app == {"a": 1, "b": 1}
