"""The viewer never shows a Redis store's password (issue 41: "a password is never
printed (`ls`, errors, `copy` reports, the viewer)"): the real server on a store whose
URL holds an ACL user's password, every route it serves read, the command's own output
too; none holds the password."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import running

from dsh_session_core import open_store
from dsh_session_core._cli.support import registry
from dsh_session_view import make_server
from redis_support import acl_store

SECRET = "pw-zq7viewer"


@pytest.fixture
def acl_url(tmp_path: Path) -> Iterator[str]:
    pytest.importorskip("redis")
    with acl_store(tmp_path / "server", SECRET, "v:") as url:
        yield url


def _read(base: str, path: str) -> bytes:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        return bytes(exc.read())


def test_no_route_of_the_viewer_shows_the_password(acl_url: str) -> None:
    with open_store(acl_url) as store:
        s = store.create("chat-1", cwd="/w")
        with s.turn() as turn:
            turn.user("hello there")
        store.release(s)
    with running(make_server(registry(), url=acl_url, host="127.0.0.1", port=0)) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        listed = json.loads(_read(base, "/api/sessions"))
        assert [s["id"] for s in listed] == ["chat-1"]  # it reads the store
        bodies = [_read(base, path) for path in (
            "/", "/s/chat-1", "/api/sessions", "/api/search?q=hello",
            "/api/session/chat-1", "/api/session/chat-1/events?after=-1",
            "/api/session/nobody", "/static/app.js")]
    for body in bodies:
        assert SECRET.encode() not in body


@pytest.mark.parametrize("argv", [
    ("ls",), ("ls", "--json"), ("show", "chat-1"), ("show", "nobody"),
    ("show", "chat-1", "--json"), ("search", "hello"), ("search", "nothing-such"),
    ("search", "hello", "--session", "nobody"), ("tail", "chat-1"), ("stats", "chat-1"),
    ("export", "chat-1"), ("validate", "chat-1"), ("derive", "chat-1"),
    ("validate", "nobody"), ("retain", "nobody"), ("rm", "nobody", "--yes"),
    ("forget", "nobody", "--yes"), ("prune", "--keep-latest", "5", "--dry-run"),
    ("prune", "--log"), ("rekey", "chat-1"), ("reindex", "chat-1"),
    ("fork", "chat-1", "--as", "chat-2"), ("stats", "nobody"),
])
def test_no_command_prints_the_password(acl_url: str, argv: tuple[str, ...]) -> None:
    # What each command prints of the store it reads, its reports, its errors.
    with open_store(acl_url) as store:
        s = store.create("chat-1", cwd="/w")
        with s.turn() as turn:
            turn.user("hello there")
        store.release(s)
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", *argv, "--store",
                           acl_url], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_the_view_command_names_the_store_without_the_password(acl_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh_session_core", "view", "--store", acl_url, "--no-open",
         "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()  # printed once it listens
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert banner.startswith("viewing redis://agent@127.0.0.1:"), banner
    assert SECRET not in banner + err
