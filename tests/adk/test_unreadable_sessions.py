"""ADK sessions a reader cannot read take nothing else down (issue 37, point 4): on an
encrypted store, one ADK session crypto-shredded (its key gone) or tampered with, or the
store read without keys. ``dsh-session ls`` lists every row (the unreadable ones
without a label: the ADK adapter's hooks get nothing of them, never a sealed box),
``prune --per user`` keeps a session whose user it cannot read (rather than grouping it
with the sessions that have none), and ``DshSessionService.list_sessions`` lists the
others, naming the one it left out in an ``UnreadableSessionWarning``. And the
adapter's hooks are defensive on their own: an ``adk/session`` record without its names
(written by hand) gives no label rather than a ``KeyError``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import Keyring, open_store
from dsh_session_core._persistence.urls import local_store
from dsh_session_core.errors import (
    KeyUnavailableError,
    SealedRecordError,
    UnreadableSessionWarning,
)
from dsh_session_core.testing import run_cli

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

APP = "weather"
KEY1, KEY2 = bytes(range(32)), bytes(range(100, 132))
ADA, BOB = dsh_session_id(APP, "ada", "chat-a"), dsh_session_id(APP, "bob", "chat-b")


def _write(url: str, user: str, chat: str, keys: Keyring | None) -> None:
    """One ADK session of ``user`` (no shared state: no state sessions)."""

    async def fill() -> None:
        store = open_store(url, keys=keys)
        try:
            async with DshSessionService(store) as service:  # the store stays ours
                s = await service.create_session(app_name=APP, user_id=user,
                                                 session_id=chat)
                content = types.Content(role="user",
                                        parts=[types.Part(text=f"hi from {user}")])
                await service.append_event(s, Event(author="user", invocation_id="i",
                                                    content=content))
        finally:
            await store.aclose()  # in the loop: PostgreSQL's asyncio connections too

    asyncio.run(fill())


def _rotated(url: str) -> None:
    """Ada's session sealed under k1, Bob's under k2: given only k2, Ada's is shredded."""
    _write(url, "ada", "chat-a", Keyring({"k1": KEY1}))
    _write(url, "bob", "chat-b", Keyring({"k2": KEY2}))


def _env_keys(monkeypatch: pytest.MonkeyPatch, **keys: bytes) -> None:
    monkeypatch.setenv("DSH_SESSION_KEYS", ",".join(
        f"{kid}:{base64.b64encode(key).decode()}" for kid, key in keys.items()))


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)


def _ls(url: str) -> dict[str, str | None]:
    code, out, err = run_cli("ls", "--store", url, "--json")
    assert (code, err) == (0, ""), err
    return {r["id"]: r.get("label") for r in json.loads(out)}


def test_ls_lists_every_row_with_one_session_shredded(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _rotated(store_url)
    _env_keys(monkeypatch, k2=KEY2)
    assert _ls(store_url) == {ADA: None,
                              BOB: "app weather · user bob · session chat-b"}
    code, out, err = run_cli("ls", "--store", store_url)  # the table too
    assert (code, err) == (0, "")
    assert b"2 session(s)" in out


def test_ls_without_keys_lists_the_envelopes(store_url: str) -> None:
    _rotated(store_url)
    assert _ls(store_url) == {ADA: None, BOB: None}


def _prune(url: str) -> dict[str, tuple[str, str, str | None]]:
    """``prune --keep-latest 1 --per user --dry-run``: each session's action, rule and
    reason."""
    code, out, err = run_cli("prune", "--keep-latest", "1", "--per", "user", "--dry-run",
                             "--store", url, "--json")
    assert (code, err) == (0, ""), err
    return {s["id"]: (s["action"], s["rule"], s.get("reason"))
            for s in json.loads(out)["sessions"]}


def test_prune_per_user_keeps_what_it_cannot_group(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _rotated(store_url)
    _write(store_url, "bob", "chat-b2", Keyring({"k2": KEY2}))  # Bob's newest
    bob2 = dsh_session_id(APP, "bob", "chat-b2")
    # Without keys: no user can be read, so none is grouped (nor removed).
    plan = _prune(store_url)
    assert {sid: row[:2] for sid, row in plan.items()} == {
        ADA: ("keep", "unmeasured"), BOB: ("keep", "unmeasured"),
        bob2: ("keep", "unmeasured")}
    assert "encrypted at rest" in str(plan[ADA][2])
    # Ada's key shredded: hers is kept; Bob's older one goes, his newest stays.
    _env_keys(monkeypatch, k2=KEY2)
    plan = _prune(store_url)
    assert {sid: row[:2] for sid, row in plan.items()} == {
        ADA: ("keep", "unmeasured"), BOB: ("remove", "keep-latest"),
        bob2: ("keep", "keep-latest")}
    assert 'no key "k1"' in str(plan[ADA][2])


def _shredding(shredded: str | None) -> Keyring:
    def lookup(session_id: str, key_id: str) -> bytes | None:
        return None if session_id == shredded else KEY1

    return Keyring(lookup, current="s")


def _listed(url: str, keys: Keyring) -> tuple[list[str], list[UnreadableSessionWarning]]:
    async def listed() -> list[str]:
        store = open_store(url, keys=keys)
        try:
            async with DshSessionService(store) as service:
                found = await service.list_sessions(app_name=APP)
                return sorted(s.id for s in found.sessions)
        finally:
            await store.aclose()

    with pytest.warns(UnreadableSessionWarning) as caught:
        ids = asyncio.run(listed())
    return ids, [w.message for w in caught if isinstance(w.message, UnreadableSessionWarning)]


def test_list_sessions_with_one_session_shredded(store_url: str) -> None:
    _write(store_url, "ada", "chat-a", _shredding(None))
    _write(store_url, "bob", "chat-b", _shredding(None))
    ids, [warning] = _listed(store_url, _shredding(ADA))
    assert ids == ["chat-b"]
    assert warning.session_id == ADA
    assert isinstance(warning.error, KeyUnavailableError)


@contextlib.contextmanager
def _sql(url: str) -> Iterator[Any]:
    local = local_store(url)
    if local is not None:
        with contextlib.closing(sqlite3.connect(local[1])) as conn:
            yield conn
            conn.commit()
        return
    import psycopg

    with psycopg.connect(url) as conn:
        yield conn


def _edit(url: str, sid: str, seq: int, change: Any) -> None:
    """Rewrite the ``data`` of record ``seq`` of ``sid`` in the store's own storage
    (``change`` gets it as JSON and gives it back)."""
    local = local_store(url)
    if local is not None and local[0] == "jsonl":
        [log] = Path(local[1]).glob(f"*/{sid}.jsonl")
        lines = log.read_text().splitlines()
        wire = json.loads(lines[seq + 1])
        wire["data"] = change(wire["data"])
        lines[seq + 1] = json.dumps(wire, separators=(",", ":"))
        log.write_text("".join(line + "\n" for line in lines))
        return
    if url.startswith("redis://"):  # a stream's entries cannot change: write it again
        _edit_stream(url, sid, seq, change)
        return
    mark = "?" if local is not None else "%s"
    with _sql(url) as conn:
        [data] = conn.execute(f"SELECT data FROM events WHERE session_id = {mark} AND "
                              f"seq = {mark}", (sid, seq)).fetchone()
        conn.execute(f"UPDATE events SET data = {mark} WHERE session_id = {mark} AND "
                     f"seq = {mark}", (json.dumps(change(json.loads(data))), sid, seq))


def _edit_stream(url: str, sid: str, seq: int, change: Any) -> None:
    import redis

    from dsh_session_core._persistence.backends.redis.keys import SessionKeys, entry_id

    client: Any = redis.Redis.from_url(url.partition("?")[0])  # replies: bytes
    try:
        log = SessionKeys.of(url.partition("prefix=")[2], sid).log
        entries = client.xrange(log)
        client.delete(log)
        for at, fields in entries:
            line = fields[b"l"]
            if at == entry_id(seq).encode():
                wire = json.loads(line)
                wire["data"] = change(wire["data"])
                line = json.dumps(wire, separators=(",", ":")).encode()
            client.xadd(log, {"l": line}, id=at)
    finally:
        client.close()


def _flip(data: dict[str, Any]) -> dict[str, Any]:
    """One byte of a sealed record's ciphertext changed."""
    ct = bytearray(base64.b64decode(data["sealed"]["ct"]))
    ct[-1] ^= 0x01
    data["sealed"]["ct"] = base64.b64encode(bytes(ct)).decode()
    return data


def test_list_sessions_with_one_session_tampered(store_url: str) -> None:
    _write(store_url, "ada", "chat-a", _shredding(None))
    _write(store_url, "bob", "chat-b", _shredding(None))
    _edit(store_url, BOB, 1, _flip)  # its adk/session record
    ids, [warning] = _listed(store_url, _shredding(None))
    assert ids == ["chat-a"]
    assert warning.session_id == BOB
    assert isinstance(warning.error, SealedRecordError)


def test_an_adk_session_record_without_its_names_gives_no_label(store_url: str) -> None:
    _write(store_url, "ada", "chat-a", None)
    _write(store_url, "bob", "chat-b", None)
    _edit(store_url, ADA, 1, lambda d: {k: v for k, v in d.items() if k != "appName"})
    assert _ls(store_url) == {ADA: None, BOB: "app weather · user bob · session chat-b"}
    plan = _prune(store_url)  # read, without a user: in the group of those without one
    assert {sid: row[:2] for sid, row in plan.items()} == {
        ADA: ("keep", "keep-latest"), BOB: ("keep", "keep-latest")}
