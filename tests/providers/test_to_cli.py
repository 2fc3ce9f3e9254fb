"""``dsh-session derive --to TARGET FILE``: the same request the ``to_*`` functions build
from the log's session, as JSON; and every kind of source converts alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import UPSTREAM
from dsh_session_core import read_session, to_wire
from dsh_session_core.providers import (
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)

LOG = UPSTREAM / "fixtures/examples/acp-agent/tests/snapshots/both-mode-turn/session.jsonl"
CONVERSIONS = {"openai-chat": to_openai_chat, "openai-responses": to_openai_responses,
               "anthropic": to_anthropic}


def _derive(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_session_core", "derive", *args],
                          capture_output=True, text=True, check=False)


@pytest.fixture
def log(upstream: Path) -> Path:
    return LOG


@pytest.mark.parametrize("target", sorted(CONVERSIONS))
def test_derive_to_prints_the_conversion(log: Path, target: str) -> None:
    proc = _derive("--to", target, str(log))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == CONVERSIONS[target](read_session(log))
    rows = _derive("--jsonl", "--to", target, str(log), str(log))
    assert [json.loads(r)["messages"] for r in rows.stdout.splitlines()] == [
        json.loads(proc.stdout)] * 2


def test_derive_to_pydantic_ai_prints_the_adapter_json(log: Path) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    proc = _derive("--to", "pydantic-ai", str(log))
    assert proc.returncode == 0, proc.stderr
    loaded = ModelMessagesTypeAdapter.validate_json(proc.stdout)
    ours = to_pydantic_ai(read_session(log))
    assert [type(m) for m in loaded] == [type(m) for m in ours]
    assert [len(m.parts) for m in loaded] == [len(m.parts) for m in ours]


def test_an_unknown_target_is_a_usage_error(log: Path) -> None:
    proc = _derive("--to", "gemini", str(log))
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


@pytest.mark.parametrize("target", sorted(CONVERSIONS))
def test_every_source_kind_converts_alike(log: Path, target: str) -> None:
    convert = CONVERSIONS[target]
    session = read_session(log)
    messages = session.derive_messages()
    wire = to_wire(messages)
    printed = _derive(str(log)).stdout
    expected = convert(messages)
    assert convert(wire) == expected
    assert convert(printed) == expected
    assert convert(printed.encode()) == expected
    # A session adds its request header: the system prompt, then the prefix messages.
    assert convert(session) != expected


def test_a_source_of_another_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="Session, a sequence of derived messages"):
        to_openai_chat(42)
    with pytest.raises(TypeError, match="not a derived message"):
        to_openai_chat([{"role": "tool", "content": []}])
