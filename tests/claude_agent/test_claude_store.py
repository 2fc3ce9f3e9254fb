"""``DshSessionStore`` beyond the SDK's conformance suite: ``load`` gives back exactly
what was appended (arbitrary JSON, unknown entry types, the SDK's real shapes), a
transcript replayed through the store reads as the run (its turns, steps, calls and
results, validated strictly, ``show``), the content is held once, subagents' sessions
name their parent, a refused append leaves the log as it was."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk.types import SessionKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sdk_transcript import jsonl, transcript, turn_batches

from dsh_session_claude_agent import DshSessionStore, dsh_session_id
from dsh_session_core import open_store
from dsh_session_core.errors import NotJsonError

KEY: SessionKey = {"project_key": "-home-user-project", "session_id": "4f1c2b1e"}


def _dumps(entries: Any) -> str:
    """What the SDK's own round trip compares: the JSON text, keys in their order."""
    return json.dumps(entries, ensure_ascii=False)


def _any(entries: list[dict[str, Any]]) -> list[Any]:
    """Entries as the SDK's append takes them (its TypedDict, open to any key)."""
    return list(entries)


def _replay(url: str, batches: list[list[Any]], key: SessionKey = KEY) -> list[Any] | None:
    async def run() -> list[Any] | None:
        async with DshSessionStore(url) as store:
            for batch in batches:
                await store.append(key, batch)
            return await store.load(key)
    return asyncio.run(run())


# --- load gives back what was appended --------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
_block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use",
                              "tool_result", "image", "server_tool_use", "other"])},
    optional={"text": _json | st.text(max_size=8), "thinking": _json | st.text(max_size=8),
              "signature": _json | st.text(max_size=8), "data": _json,
              "id": st.text(max_size=5) | _json, "name": st.text(max_size=5) | _json,
              "input": _json, "tool_use_id": st.text(max_size=5) | _json,
              "content": _json | st.text(max_size=8)
              | st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image"])},
                                               optional={"text": _json | st.text()}),
                         max_size=3),
              "is_error": _json})
_entry = st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "system", "summary", "x"])},
    optional={"uuid": st.text(max_size=6), "message": st.fixed_dictionaries(
        {}, optional={"role": st.text(max_size=4), "id": st.text(max_size=4) | _json,
                      "content": _json | st.text() | st.lists(_block | _json, max_size=4),
                      "usage": _json})}) | st.dictionaries(st.text(max_size=6), _json)


@given(batches=st.lists(st.lists(_entry, min_size=1, max_size=5), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_load_gives_back_every_entry_as_it_was_appended(batches: list[list[Any]]) -> None:
    appended = [entry for batch in batches for entry in batch]
    assert _dumps(_replay("memory:", batches)) == _dumps(appended)


@pytest.mark.store_kinds("jsonl", "sqlite", "postgresql")
def test_a_real_transcript_comes_back_byte_for_byte(store_url: str) -> None:
    entries = transcript(6)
    loaded = _replay(store_url, turn_batches(entries))
    assert loaded is not None
    assert jsonl(loaded) == jsonl(entries)  # the SDK's own file, line for line


# --- the run, as dsh reads it -----------------------------------------------------------

def _turns(url: str) -> list[list[tuple[Any, ...]]]:
    """Each turn's events, as (type, details): the structure show reads."""
    with open_store(url) as store:
        events = store.read(dsh_session_id(KEY))
    turns: list[list[tuple[Any, ...]]] = []
    for e in events:
        if e.type == "turn/start":
            turns.append([(e.type, e.data.trigger.source.kind)])
        elif e.type == "assistant/message":
            turns[-1].append((e.type, e.data.step,
                              tuple(type(b).__name__ for b in e.data.content)))
        elif e.type == "tool/result":
            turns[-1].append((e.type, e.data.step, e.data.call_id.startswith("toolu_")))
        elif e.type == "turn/end":
            turns[-1].append((e.type, e.data.reason.kind))
        else:
            turns[-1].append((e.type,))
    return turns


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_a_replayed_transcript_is_the_run_turn_by_turn(store_url: str) -> None:
    _replay(store_url, turn_batches(transcript(3)))
    one_turn = [
        ("turn/start", "user"), ("claude-agent/entries",), ("user/message",),
        ("step/start",),
        # the model's first call: thinking, text and a tool use (three SDK entries)
        ("assistant/message", 1, ("ReasoningBlock", "TextBlock", "ToolCallBlock")),
        ("tool/result", 1, True), ("step/end",),
        ("step/start",), ("assistant/message", 2, ("TextBlock",)), ("step/end",),
    ]
    turns = _turns(store_url)
    assert len(turns) == 3
    # The first append folds the SDK's summary (it changes there only: later turns
    # have no new title or first prompt).
    assert turns[0] == [*one_turn, ("claude-agent/summary",), ("turn/end", "completed")]
    for turn in turns[1:]:
        assert turn == [*one_turn, ("turn/end", "completed")]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *args],
                          capture_output=True, text=True, check=False)


def test_the_log_validates_strictly_and_show_reads_the_run(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    entries = transcript(2)
    _replay(url, turn_batches(entries))
    sid = dsh_session_id(KEY)
    checked = _cli("validate", "--strict", sid, "--store", url)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = _cli("show", sid, "--store", url)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "2 turn(s)" in out
    assert out.count("· 2 step(s) · completed") == 2
    assert "[calls Bash]" in out
    assert "[calls Read]" in out
    assert "user       Turn 1:" in out
    assert "user       Turn 2:" in out
    # The SDK's transcript entries (the typed events' raw form) fold away unless --raw.
    assert "claude-agent/entries" not in out
    assert "2 raw record(s) folded away (--raw shows them)" in out
    raw = _cli("show", sid, "--store", url, "--raw", "--json")
    assert raw.returncode == 0, raw.stderr
    kept = [(i["type"], i.get("raw", False)) for block in json.loads(raw.stdout)["timeline"]
            for i in block["items"] if i["type"] == "claude-agent/entries"]
    assert kept == [("claude-agent/entries", True)] * 2
    with open_store(url) as store:
        messages = store.read_session(sid).derive_messages()
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"] * 2


def test_an_eager_mirror_one_entry_an_append_validates_and_loads(tmp_path: Path) -> None:
    # The SDK's "eager" flush mode: appends as the entries come, a tool's result in an
    # append after its call's.
    url = str(tmp_path / "store")
    entries = transcript(2)
    loaded = _replay(url, [[e] for e in entries])
    assert loaded is not None
    assert jsonl(loaded) == jsonl(entries)
    checked = _cli("validate", "--strict", dsh_session_id(KEY), "--store", url)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with open_store(url) as store:
        events = store.read(dsh_session_id(KEY))
    reasons = [e.data.reason.kind for e in events if e.type == "turn/end"]
    assert "aborted" in reasons  # a call whose result came in the next append


def test_the_content_is_held_once(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    entries = transcript(1)
    _replay(url, turn_batches(entries))
    with open_store(url) as store:
        path = Path(store.location(dsh_session_id(KEY)))
    # The SDK's summary (its own fold, kept verbatim) repeats the first prompt: not the
    # entries' content.
    log = "".join(line for line in path.read_text(encoding="utf-8").splitlines(True)
                  if '"type":"claude-agent/summary"' not in line)
    thinking = next(b["thinking"] for e in entries if e["type"] == "assistant"
                    for b in e["message"]["content"] if b["type"] == "thinking")
    signature = next(b["signature"] for e in entries if e["type"] == "assistant"
                     for b in e["message"]["content"] if b["type"] == "thinking")
    prompt = entries[1]["message"]["content"]
    for text in (thinking, signature, prompt):
        assert log.count(json.dumps(text, ensure_ascii=False)) == 1


# --- keys, subagents, refusals ------------------------------------------------------------

def test_a_subagent_transcript_is_a_session_linked_to_its_parent(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    sub: SessionKey = {**KEY, "subpath": "subagents/agent-a1"}

    async def run() -> list[str]:
        async with DshSessionStore(url) as store:
            await store.append(KEY, _any(transcript(1)))
            await store.append(sub, _any(transcript(1, sidechain=True, seed=3)))
            return await store.list_subkeys(KEY)

    assert asyncio.run(run()) == ["subagents/agent-a1"]
    with open_store(url) as store:
        header = store.read_session(dsh_session_id(sub)).header
    assert header.parent_session == dsh_session_id(KEY)
    assert dsh_session_id(sub) == "claude/-home-user-project/4f1c2b1e/subagents/agent-a1"


def test_ids_escape_what_would_split_them() -> None:
    key = {"project_key": "a/b%2F", "session_id": "s/1"}
    assert dsh_session_id(key) == "claude/a%2Fb%252F/s%2F1"
    with pytest.raises(ValueError, match="subpath"):
        dsh_session_id({**key, "subpath": ""})


def test_an_append_the_log_refuses_leaves_it_as_it_was(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    good = transcript(1)

    async def run() -> list[Any] | None:
        async with DshSessionStore(url) as store:
            await store.append(KEY, _any(good))
            bad: list[Any] = [{"type": "x", "n": float("nan")}]
            with pytest.raises(NotJsonError):
                await store.append(KEY, bad)
            return await store.load(KEY)

    assert _dumps(asyncio.run(run())) == _dumps(good)
