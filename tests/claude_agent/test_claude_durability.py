"""``DshSessionStore`` on what every dsh store gives: two processes appending to one
session are fenced by its writer lock (every batch lands whole, in each process's
order, the log valid), an encrypted store seals the transcript at rest, and retention
(prune by policy, delete) applies to its sessions as to any."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk.types import SessionKey

from dsh_session_claude_agent import DshSessionStore, dsh_session_id
from dsh_session_core import Keyring, RetentionPolicy, open_store

KEY: SessionKey = {"project_key": "proj", "session_id": "shared"}

WRITER = """
import asyncio, sys
from dsh_session_claude_agent import DshSessionStore

async def main(url, name, count):
    key = {"project_key": "proj", "session_id": "shared"}
    async with DshSessionStore(url, lock_timeout=60) as store:
        for n in range(count):
            await store.append(key, [
                {"type": "user", "message": {"role": "user", "content": f"{name} {n}"},
                 "uuid": f"{name}-{n}-u"},
                {"type": "assistant", "message": {"id": f"{name}-{n}", "role": "assistant",
                 "content": [{"type": "text", "text": f"ok {name} {n}"}]},
                 "uuid": f"{name}-{n}-a"}])

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.store_kinds("jsonl", "sqlite", "postgresql")
def test_two_processes_appending_to_one_session_are_fenced(store_url: str) -> None:
    count = 15
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), store_url,
                               name, str(count)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err

    async def load() -> list[Any] | None:
        async with DshSessionStore(store_url) as store:
            return await store.load(KEY)

    loaded = asyncio.run(load())
    assert loaded is not None
    assert len(loaded) == 4 * count
    for name in ("a", "b"):
        mine = [e["uuid"] for e in loaded if e["uuid"].startswith(name)]
        assert mine == [f"{name}-{n}-{s}" for n in range(count) for s in ("u", "a")]
    # Each batch whole, in a turn of its own (the user's, then the assistant's entry).
    pairs = [(loaded[i]["uuid"][:-2], loaded[i + 1]["uuid"][:-2])
             for i in range(0, len(loaded), 2)]
    assert all(u == a for u, a in pairs)
    with open_store(store_url) as store:
        session = store.read_session(dsh_session_id(KEY))
    assert [e.type for e in session.events].count("turn/start") == 2 * count
    assert len(session.derive_messages()) == 4 * count


def test_an_encrypted_store_seals_the_transcript(tmp_path: Path) -> None:
    url = str(tmp_path / "sealed")
    keys = Keyring({"k1": bytes(range(32))})
    secret = "the launch code is 0000"
    entries: list[Any] = [
        {"type": "user", "message": {"role": "user", "content": secret}, "uuid": "u1"},
        {"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "text", "text": f"noted: {secret}"}]}, "uuid": "a1"}]

    async def run() -> tuple[list[Any] | None, list[Any]]:
        with open_store(url, keys=keys) as store:
            async with DshSessionStore(store) as claude:
                await claude.append(KEY, entries)
                summaries = await claude.list_session_summaries("proj")
                return await claude.load(KEY), summaries

    loaded, summaries = asyncio.run(run())
    assert json.dumps(loaded) == json.dumps(entries)
    assert summaries[0]["data"]["first_prompt"] == secret
    stored = b"".join(p.read_bytes() for p in Path(url).rglob("*") if p.is_file())
    assert b"launch code" not in stored  # the log and the projection's rows are sealed


def test_retention_prunes_and_deletes_claude_sessions(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    day = 86_400_000
    clock = {"now": 1_700_000_000_000}
    old: SessionKey = {"project_key": "proj", "session_id": "old"}
    new: SessionKey = {"project_key": "proj", "session_id": "new"}
    gone: SessionKey = {"project_key": "proj", "session_id": "gone"}

    async def write() -> None:
        with open_store(url, clock=lambda: clock["now"]) as store:
            async with DshSessionStore(store, idle_window=0) as claude:
                for key, days_ago in ((old, 90), (gone, 60), (new, 1)):
                    clock["now"] = 1_700_000_000_000 - days_ago * day
                    prompt: list[Any] = [{"type": "user", "uuid": "u", "message": {
                        "role": "user", "content": f"hello {key['session_id']}"}}]
                    await claude.append(key, prompt)
                    await claude.append({**key, "subpath": "subagents/agent-1"},
                                        [{"type": "x", "uuid": "s"}])
                await claude.delete(gone)

    asyncio.run(write())
    now = datetime.datetime.fromtimestamp(1_700_000_000, tz=datetime.UTC)
    with open_store(url) as store:
        removed = {r.data.session_id: r.data.rule for r in store.removals()}
        assert removed == {dsh_session_id(gone): "claude-agent-delete",
                           dsh_session_id({**gone, "subpath": "subagents/agent-1"}):
                               "claude-agent-delete"}
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(days=30)),
                             now=now)
        assert sorted(d.session_id for d in report.removed) == [
            dsh_session_id(old), dsh_session_id({**old, "subpath": "subagents/agent-1"})]

    async def listed() -> tuple[list[str], list[Any] | None]:
        async with DshSessionStore(url) as claude:
            sessions = await claude.list_sessions("proj")
            return [s["session_id"] for s in sessions], await claude.load(old)

    assert asyncio.run(listed()) == (["new"], None)
