"""Transcripts shaped as the Claude Agent SDK's CLI writes them (its JSONL transcript
format: one entry a line), for the tests and ``bench/claude_agent.py``.

A run of ``turns`` turns: each a user's prompt, the assistant's thinking (with its
signature), a text and a tool use (``Bash`` or ``Read``, one entry a content block, one
``message.id`` a model call, the call's ``usage`` on each), the tool's result (with the
CLI's ``toolUseResult`` beside it), and a final answer; a ``file-history-snapshot``
before each prompt and a ``summary``-less ``custom-title`` once. Deterministic: the
same arguments give the same entries.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

WORDS = ("the", "session", "log", "keeps", "every", "event", "typed", "and", "durable",
         "while", "agent", "reads", "files", "runs", "commands", "answers", "questions",
         "about", "project", "tree")


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


class _Run:
    def __init__(self, session_id: str, cwd: str, seed: int, sidechain: bool) -> None:
        self.rng = random.Random(seed)
        self.session_id = session_id
        self.cwd = cwd
        self.sidechain = sidechain
        self.parent: str | None = None
        self.clock = 1_760_000_000_000
        self.entries: list[dict[str, Any]] = []

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def stamp(self) -> str:
        self.clock += self.rng.randint(200, 4000)
        seconds, ms = divmod(self.clock, 1000)
        import datetime as dt

        when = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"

    def add(self, kind: str, message: dict[str, Any] | None = None, **extra: Any) -> None:
        me = self.uuid()
        entry: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": self.sidechain,
                                 "userType": "external", "cwd": self.cwd,
                                 "sessionId": self.session_id, "version": "2.0.37",
                                 "gitBranch": "main"}
        if kind == "assistant":
            entry["message"] = message
            entry["requestId"] = "req_011CU" + self.uuid().replace("-", "")[:18]
            entry["type"] = "assistant"
        else:
            entry["type"] = kind
            if message is not None:
                entry["message"] = message
        entry.update(extra)
        entry["uuid"] = me
        entry["timestamp"] = self.stamp()
        self.entries.append(entry)
        self.parent = me

    def usage(self) -> dict[str, Any]:
        created = self.rng.randint(0, 3000)
        return {"input_tokens": self.rng.randint(3, 12),
                "cache_creation_input_tokens": created,
                "cache_read_input_tokens": self.rng.randint(10_000, 40_000),
                "cache_creation": {"ephemeral_5m_input_tokens": created,
                                   "ephemeral_1h_input_tokens": 0},
                "output_tokens": self.rng.randint(20, 900), "service_tier": "standard"}

    def assistant(self, message_id: str, usage: dict[str, Any], block: dict[str, Any]) -> None:
        self.add("assistant", {"model": "claude-sonnet-4-5-20250929", "id": message_id,
                               "type": "message", "role": "assistant", "content": [block],
                               "stop_reason": None, "stop_sequence": None,
                               "usage": usage})

    def turn(self, number: int) -> None:
        rng = self.rng
        if not self.sidechain:
            self.entries.append({"type": "file-history-snapshot", "messageId": self.uuid(),
                                 "snapshot": {"messageId": self.uuid(),
                                              "trackedFileBackups": {},
                                              "timestamp": self.stamp()},
                                 "isSnapshotUpdate": False})
        self.add("user", {"role": "user", "content": f"Turn {number}: " + _words(rng, 18)},
                 thinkingMetadata={"level": "high", "disabled": False, "triggers": []})
        first = "msg_01" + self.uuid().replace("-", "")[:22]
        usage = self.usage()
        signature = "Eu" + "".join(rng.choice("ABCDEFabcdef0123456789+/") for _ in range(420))
        self.assistant(first, usage, {"type": "thinking", "thinking": _words(rng, 60),
                                      "signature": signature})
        self.assistant(first, usage, {"type": "text", "text": _words(rng, 25)})
        call = "toolu_01" + self.uuid().replace("-", "")[:22]
        if number % 2:
            command = f"ls -la src/module_{number}"
            self.assistant(first, usage, {"type": "tool_use", "id": call, "name": "Bash",
                                          "input": {"command": command,
                                                    "description": "List the files"}})
            out = "\n".join(f"-rw-r--r-- 1 u u {rng.randint(100, 9999)} file_{i}.py"
                            for i in range(rng.randint(8, 30)))
            self.add("user", {"role": "user", "content": [
                {"tool_use_id": call, "type": "tool_result", "content": out,
                 "is_error": False}]},
                toolUseResult={"stdout": out, "stderr": "", "interrupted": False,
                               "isImage": False})
        else:
            path = f"{self.cwd}/src/module_{number}.py"
            self.assistant(first, usage, {"type": "tool_use", "id": call, "name": "Read",
                                          "input": {"file_path": path}})
            lines = [f"def f_{i}(x):\n    return x * {i}  # {_words(rng, 4)}"
                     for i in range(rng.randint(20, 75))]
            body = "\n".join(lines)
            numbered = "\n".join(f"{i + 1:>6}\u2192{line}"
                                 for i, line in enumerate(body.split("\n")))
            self.add("user", {"role": "user", "content": [
                {"tool_use_id": call, "type": "tool_result", "content": numbered}]},
                toolUseResult={"type": "text", "file": {
                    "filePath": path, "content": body, "numLines": body.count("\n") + 1,
                    "startLine": 1, "totalLines": body.count("\n") + 1}})
        final = "msg_01" + self.uuid().replace("-", "")[:22]
        self.assistant(final, self.usage(), {"type": "text", "text": _words(rng, 70)})


def transcript(turns: int, *, session_id: str = "4f1c2b1e-9a1d-4c55-8e38-2b8f6f0c7a10",
               cwd: str = "/home/user/project", seed: int = 0,
               sidechain: bool = False) -> list[dict[str, Any]]:
    """The entries of a run of ``turns`` turns (see the module docstring)."""
    run = _Run(session_id, cwd, seed, sidechain)
    for number in range(1, turns + 1):
        run.turn(number)
        if number == 1 and not sidechain:
            run.entries.append({"type": "custom-title", "customTitle": "Exploring the tree",
                                "sessionId": session_id})
    return run.entries


def turn_batches(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The entries as the SDK's batched mirror appends them: a batch a turn (flushed at
    each result), the snapshot before a prompt in the batch of the turn it opens."""
    batches: list[list[dict[str, Any]]] = []
    pending: list[dict[str, Any]] = []
    for entry in entries:
        if entry.get("type") == "file-history-snapshot" and pending:
            batches.append(pending)
            pending = []
        pending.append(entry)
    if pending:
        batches.append(pending)
    return batches


def jsonl(entries: list[dict[str, Any]]) -> bytes:
    """The transcript file the CLI writes: a compact JSON line an entry."""
    return b"".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                    for e in entries)
