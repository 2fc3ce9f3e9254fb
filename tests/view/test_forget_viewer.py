"""After ``forget``, the running viewer no longer shows the session: over HTTP, on the
real server, its listing, its search and the session's own routes (issue 40: "after
forget ... the viewer do[es] not show the session"). The viewer keeps running across
the forget, made by another store object, as a team's viewer would."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from server_support import running
from store_support import write_chat

from dsh_session_core import open_store
from dsh_session_core._cli.support import registry
from dsh_session_view import make_server

MARKER = "zqviewerforget41"


def _get(base: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_the_running_viewer_no_longer_shows_a_forgotten_session(
        kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else str(tmp_path / "s")
    write_chat(url, f"my name is {MARKER}")
    with open_store(url) as store:
        other = store.create("chat-2")
        with other.turn() as turn:
            turn.user("someone else")
        store.release(other)
    with running(make_server(registry(), url=url, host="127.0.0.1", port=0)) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        status, listed = _get(base, "/api/sessions")
        assert status == 200
        assert {s["id"] for s in listed} == {"chat-1", "chat-2"}
        assert [h["session"] for h in _get(base, f"/api/search?q={MARKER}")[1]] == ["chat-1"]
        assert _get(base, "/api/session/chat-1")[0] == 200
        with open_store(url) as store:
            assert store.forget("chat-1").complete
        status, listed = _get(base, "/api/sessions")
        assert status == 200
        assert [s["id"] for s in listed] == ["chat-2"]
        assert _get(base, f"/api/search?q={MARKER}") == (200, [])
        assert _get(base, "/api/session/chat-1")[0] == 404
        assert _get(base, "/api/session/chat-1/events?after=-1")[0] == 404
        status, everything = _get(base, "/api/sessions?all=1")  # hidden ones too
        assert status == 200
        assert "chat-1" not in {s["id"] for s in everything}
