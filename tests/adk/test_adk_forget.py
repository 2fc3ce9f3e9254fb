"""Erasing an ADK user: what ``delete_session`` leaves, what ``forget_session`` and
``forget_user`` take, checked by searching every file of the store for a marker
(docs/erasing.md, docs/adk.md)."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest
from google.adk.events.event import Event
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import open_store
from dsh_session_core.testing import run_cli

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")


def _holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _root(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///")).parent if url.startswith("sqlite:") \
        else Path(url)


async def _chat(service: DshSessionService, user: str, sid: str, text: str) -> None:
    s = await service.create_session(app_name="weather", user_id=user, session_id=sid,
                                     state={"user:name": text, "app:units": "metric"})
    content = types.Content(role="user", parts=[types.Part(text=text)])
    await service.append_event(s, Event(author="user", invocation_id="i", content=content))


def test_delete_leaves_the_log_and_forget_user_takes_the_user_and_their_state(
        store_url: str) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    root = _root(store_url)

    async def run() -> None:
        async with DshSessionService(store_url) as service:
            await _chat(service, "ada", "a1", f"I am {marker}")
            await _chat(service, "ada", "a2", f"still {marker}")
            await _chat(service, "bob", "b1", "bob here")
            await service.delete_session(app_name="weather", user_id="ada", session_id="a1")
            # delete_session is a tombstone: the log stays, with the marker.
            assert _holding(root, marker.encode())
            done = await service.forget_user(app_name="weather", user_id="ada")
            assert sorted(f.session_id for f in done) == sorted([
                dsh_session_id("weather", "ada", "a1"), dsh_session_id("weather", "ada", "a2"),
                dsh_session_id("weather", "ada")])
            assert all(f.complete for f in done)
            assert await service.get_user_state(app_name="weather", user_id="ada") == {}
            listed = await service.list_sessions(app_name="weather")
            assert [s.id for s in listed.sessions] == ["b1"]
            assert await service.get_app_state(app_name="weather") == {"units": "metric"}

    asyncio.run(run())
    assert _holding(root, marker.encode()) == []


def test_forget_session_takes_one_session(store_url: str) -> None:
    marker = f"zq{secrets.token_hex(6)}"

    async def run() -> None:
        async with DshSessionService(store_url) as service:
            await _chat(service, "ada", "a1", f"I am {marker}")
            await _chat(service, "ada", "a2", "another")
            done = await service.forget_session(app_name="weather", user_id="ada",
                                                session_id="a1")
            assert done is not None
            assert done.complete
            assert await service.get_session(app_name="weather", user_id="ada",
                                             session_id="a1") is None
            assert await service.forget_session(app_name="weather", user_id="ada",
                                                session_id="a1") is None

    asyncio.run(run())
    with open_store(store_url) as store:
        assert [h.session_id for h in store.search(marker)] == []


def test_the_command_forgets_a_person_by_labels(store_url: str) -> None:
    marker = f"zq{secrets.token_hex(6)}"

    async def run() -> None:
        async with DshSessionService(store_url) as service:
            await _chat(service, "ada", "a1", f"I am {marker}")
            await _chat(service, "bob", "b1", "bob here")

    asyncio.run(run())
    code, out, err = run_cli("forget", "--label", "app=weather", "--label", "user=ada",
                             "--store", store_url, "--yes")
    assert (code, err) == (0, "")
    assert out.decode().count("forgot adk-") == 2  # the session, and ada's state
    assert _holding(_root(store_url), marker.encode()) == []
    with open_store(store_url) as store:
        assert dsh_session_id("weather", "bob", "b1") in {h.id for h in store.stored()}
