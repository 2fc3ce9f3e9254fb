"""The projection the sidecar tests write and read (test_projection_sidecar.py, and its
child processes): its fold written again as plain dict operations over wire events (the
answer every read must equal), the logs they write, and how they write and read them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from dsh_session_core import (
    Event,
    PersistencePlugin,
    PluginManager,
    core_registry,
    create_plugin_manager,
    hookimpl,
)
from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend
from dsh_session_core._persistence.capabilities import Capabilities
from dsh_session_core._persistence.projections.read import ProjectionView, open_view
from dsh_session_core._plugins.core_plugin import CORE_EVENT_SPECS
from dsh_session_core._schema.projections import Clear, Delete, Projection, Put, Summary
from dsh_session_core._schema.registry import EventRegistry
from dsh_session_core.testing.events import (
    assistant_data,
    session_header,
    step_data,
    turn_end_data,
    turn_start_data,
    user_data,
    wire_event,
)

__all__ = [
    "KINDS", "NOTES", "PLAIN", "REGISTRY", "Answer", "Last", "Model", "NotesPlugin", "Text",
    "answer", "backend_of", "log", "opened", "plugins", "sidecar_path", "stored_wires",
    "turn", "write",
]

#: The stores that keep rows in a sidecar.
KINDS = ("jsonl", "jsonl+zstd")


class Text(msgspec.Struct, frozen=True):
    """A row: a message's text."""

    text: str


class Last(msgspec.Struct, frozen=True):
    """The summary row: the last user message's seq and text."""

    seq: int
    text: str


def _fold(event: Event) -> Iterator[Any]:
    """User messages by seq, and by their text (keys of any text: read in code-point
    order); each turn's assistant message; a step 2 drops its turn's answer; an
    interrupted turn clears every row."""
    data: Any = event.data
    if event.type == "user/message":
        text = data.content[0].text
        yield Put(f"u{event.seq:08d}", Text(text))
        yield Put(f"t:{text}", Text(text))
        yield Summary(Last(event.seq, text))
    elif event.type == "assistant/message":
        yield Put(f"a{data.turn:04d}", Text(data.content[0].text))
    elif event.type == "step/start" and data.step == 2:
        yield Delete(f"a{data.turn:04d}")
    elif event.type == "turn/end" and data.reason.kind == "interrupted":
        yield Clear()


NOTES = Projection("test/notes", 1,
                   frozenset({"user/message", "assistant/message", "step/start", "turn/end"}),
                   Text, _fold, summary=Last)
#: Core's event types and the projection; PLAIN: a writer that knows no projection.
REGISTRY = EventRegistry((("core", s) for s in CORE_EVENT_SPECS), (), [("test", NOTES)])
PLAIN = core_registry()


class Model:
    """The fold, as dict operations over wire events."""

    def __init__(self, wires: Sequence[dict[str, Any]] = ()) -> None:
        self.rows: dict[str, str] = {}
        self.summary: Last | None = None
        for wire in wires:
            self.see(wire)

    def see(self, wire: dict[str, Any]) -> None:
        kind, data, seq = wire["type"], wire["data"], wire["seq"]
        if kind == "user/message":
            text = data["content"][0]["text"]
            self.rows[f"u{seq:08d}"] = self.rows[f"t:{text}"] = text
            self.summary = Last(seq, text)
        elif kind == "assistant/message":
            self.rows[f"a{data['turn']:04d}"] = data["content"][0]["text"]
        elif kind == "step/start" and data["step"] == 2:
            self.rows.pop(f"a{data['turn']:04d}", None)
        elif kind == "turn/end" and data["reason"]["kind"] == "interrupted":
            self.rows.clear()


def turn(seq: int, number: int, *, text: str | None = None, interrupted: bool = False,
         two_steps: bool = False, time: int = 0) -> list[dict[str, Any]]:
    """One turn's wire events from ``seq`` on (times ``time + seq + 1``...)."""
    def event(kind: str, data: Any, **kw: Any) -> dict[str, Any]:
        at = seq + len(out)
        return wire_event(kind, at, data, time=time + at + 1, **kw)

    out: list[dict[str, Any]] = []
    out.append(event("turn/start", turn_start_data(number)))
    question = f"ask {number}" if text is None else text
    out.append(event("user/message", user_data(question), surface_op="append"))
    out.append(event("step/start", step_data(number, 1)))
    out.append(event("assistant/message", assistant_data(number, 1, f"answer {number}"),
                     surface_op="append"))
    out.append(event("step/end", step_data(number, 1)))
    if two_steps:
        out.append(event("step/start", step_data(number, 2)))
        out.append(event("step/end", step_data(number, 2)))
    reason = {"kind": "interrupted"} if interrupted else None
    out.append(event("turn/end", turn_end_data(number, reason)))
    return out


def log(*turns: dict[str, Any], first: int = 1, seq: int = 0, time: int = 0
        ) -> list[dict[str, Any]]:
    """Turns one after another (each ``turn``'s keywords), numbered from ``first``."""
    out: list[dict[str, Any]] = []
    for number, kw in enumerate(turns, first):
        out += turn(seq + len(out), number, time=time, **kw)
    return out


class NotesPlugin:
    """A plugin declaring :data:`NOTES` (for a store opened with a plugin manager)."""

    @hookimpl
    def register_projections(self) -> list[Projection]:
        return [NOTES]


def plugins() -> PluginManager:
    """A plugin manager with core and :class:`NotesPlugin` only."""
    pm = create_plugin_manager(autoload=False)
    pm.register(NotesPlugin(), "test-notes")
    return pm


def backend_of(kind: str, root: Path | str) -> JsonlBackend:
    """A fresh backend of ``kind`` over the store folder ``root``."""
    if kind == "jsonl+zstd":
        from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend

        return JsonlZstdBackend(root)
    return JsonlBackend(root)


def write(make: Callable[[], Any], sid: str, batches: Sequence[Sequence[dict[str, Any]]],
          registry: EventRegistry = REGISTRY) -> None:
    """Append ``batches`` to ``sid`` (created when it is not stored), each one flush,
    through a fresh backend and coordinator (as a process would)."""
    p = PersistencePlugin(make(), registry)
    try:
        if p.backend.load_stored(sid, registry) is None:
            p.create(session_header(sid))
        for batch in batches:
            p.append(sid, list(batch))
    finally:
        p.close()


@contextlib.contextmanager
def opened(make: Callable[[], Any], sid: str) -> Iterator[ProjectionView[Any]]:
    """The projection of ``sid`` read by a fresh backend (as another process)."""
    backend = make()
    try:
        view = open_view(Capabilities.of(backend), REGISTRY, NOTES, sid)
        assert view is not None, sid
        yield view
    finally:
        backend.close()


class Answer(msgspec.Struct, frozen=True):
    """What a read of a session's projection gave."""

    rows: dict[str, str]
    summary: Last | None
    covers: int
    folded: int


def answer(make: Callable[[], Any], sid: str) -> Answer:
    with opened(make, sid) as view:
        rows = {k: v.text for k, v in view.rows()}
        return Answer(rows, view.summary(), view.covers, view.folded)


def stored_wires(make: Callable[[], Any], sid: str) -> list[dict[str, Any]]:
    """The session's stored events, as wire dicts (what a fold of the log folds)."""
    backend = make()
    try:
        stored = backend.load_stored(sid, PLAIN)
        assert stored is not None
        assert stored.jsonl is not None
        return [msgspec.json.decode(line) for line in stored.jsonl.splitlines()]
    finally:
        backend.close()


def sidecar_path(root: Path | str) -> Path:
    return Path(os.fspath(root)) / ".projections" / "rows.sqlite3"
