"""The viewer over the read model (issue 38): the list's rows and a session's page say
whether the store marks a session never to be pruned (``retained``, with its note), the
quick first page as the whole document, and a mark set or released while the page is
cached shows at the next read; its charts and pages are the timeline's own blocks
(:func:`dsh_session_core.inspect.timeline_blocks`), never a grouping of the viewer's."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server_support import running
from store_support import write_chat, write_turns

from dsh_session_core import SessionHeader, open_store
from dsh_session_core._cli.support import registry
from dsh_session_core.inspect import encode_json
from dsh_session_view import ViewServer, make_server


@contextlib.contextmanager
def _serving(*, url: str | None = None, file: str | None = None) -> Iterator[ViewServer]:
    with running(make_server(registry(), url=url, file=file)) as served:
        yield served


def _get(server: ViewServer, path: str) -> Any:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as response:
        return json.loads(response.read())


def test_the_list_and_the_page_say_which_sessions_are_retained(tmp_path: Path) -> None:
    store = write_chat(str(tmp_path / "store"), "hello")
    write_turns(store, "long", 60)  # more blocks than a page: a quick first page
    with open_store(store) as s:
        s.retain("long", note="the incident")
    with _serving(url=store) as server:
        rows = _get(server, "/api/sessions")
        assert {r["id"]: r.get("retained") for r in rows} == {"chat-1": None, "long": True}
        quick = _get(server, "/api/session/long")  # not read before: the quick page
        assert quick.get("partial") is True
        assert (quick["retained"], quick["retainedNote"]) == (True, "the incident")
        whole = _get(server, "/api/session/long?full=1")
        assert (whole["retained"], whole["retainedNote"]) == (True, "the incident")
        assert "retained" not in _get(server, "/api/session/chat-1")
        # Marks changed while both pages are cached: the next read says so.
        with open_store(store) as s:
            s.retain("long", False)
            s.retain("chat-1")
        assert "retained" not in _get(server, "/api/session/long?full=1")
        assert _get(server, "/api/session/chat-1")["retained"] is True
        rows = _get(server, "/api/sessions")
        assert {r["id"]: r.get("retained") for r in rows} == {"chat-1": True, "long": None}


_TRIGGER = {"kind": "message", "source": {"kind": "user"}}


def _said(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}


def _log(path: Path) -> Path:
    """A log whose first ``turn/start`` names no turn: the timeline shows it outside a
    turn, its one block running to the next ``turn/start`` (its ``turn/end`` ends no
    turn); a grouping that closed it there would count three blocks, not two."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("turn/start", {"trigger": _TRIGGER}),
        ("user/message", _said("one")),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("user/message", _said("two")),
        ("turn/start", {"turn": 2, "trigger": _TRIGGER}),
        ("user/message", _said("three")),
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    ]
    lines = [encode_json(SessionHeader(version=0, id="odd", created_at=0, cwd="/"))]
    for seq, (kind, data) in enumerate(events):
        wire: dict[str, Any] = {"type": kind, "seq": seq, "time": seq, "data": data}
        if kind == "user/message":
            wire["surfaceOp"] = "append"
        lines.append(encode_json(wire))
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_the_charts_and_pages_are_the_timelines_blocks(tmp_path: Path) -> None:
    with _serving(file=str(_log(tmp_path / "odd.jsonl"))) as server:
        for query in ("", "?full=1"):  # the quick first page, then the whole document
            doc = _get(server, "/api/session/odd" + query)
            assert [(b["turn"], b["startSeq"], b["endSeq"]) for b in doc["timeline"]] == [
                (None, 0, 3), (2, 4, 6)]
            assert doc["turnCount"] == 2
            assert doc["charts"]["turns"] == [None, 2]
            assert [sum(c) for c in doc["charts"]["counts"]] == [4, 3]
