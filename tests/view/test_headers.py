"""Every answer of the viewer carries the same security headers (issue 37): each route's
200, the live stream, each refusal of the viewer's own (400, 404, 405, 421, 422), and the
standard library's (a request line too long 414, a header too large 431, an unknown
method 501, an unreadable version 400 and 505, HTTP/0.9), each provoked by a raw request
written on a socket to the real server on a free loopback port; and the standard
library's refusals are the viewer's JSON, not its HTML page."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import running
from store_support import write_chat

from dsh_session_core._cli.support import registry
from dsh_session_view import ViewServer, make_server

#: The headers, exactly once each, on every answer: the page loads its own files only,
#: no page may frame it (two ways: frame-ancestors, and X-Frame-Options for browsers
#: that predate it), no answer is sniffed into another type, sends a Referer or is kept.
EXPECTED = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
SECRET = "the launch code is 0000"


def _get(path: str, host: str = "127.0.0.1", method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


#: Every kind of answer: (what it is, the raw request, its status).
ANSWERS = [
    ("the list page", _get("/"), 200),
    ("the page as index.html", _get("/index.html"), 200),
    ("a session's page", _get("/s/chat-1"), 200),
    ("a module", _get("/static/app.js"), 200),
    ("the style", _get("/static/app.css"), 200),
    ("the sessions", _get("/api/sessions"), 200),
    ("a search", _get("/api/search?q=launch"), 200),
    ("a session's first page", _get("/api/session/chat-1"), 200),
    ("a whole session", _get("/api/session/chat-1?all=1"), 200),
    ("raw events", _get("/api/session/chat-1/events?after=-1&limit=5"), 200),
    ("the live stream", _get("/api/session/chat-1/follow"), 200),
    ("HTTP/1.0 without Host", b"GET /api/sessions HTTP/1.0\r\n\r\n", 200),
    ("a bad id", _get("/api/session/%FF"), 400),
    ("a bad range", _get("/api/session/chat-1?turns=z"), 400),
    ("a bad seq", _get("/api/session/chat-1/events?after=z"), 400),
    ("a bad limit", _get("/api/search?q=launch&limit=-1"), 400),
    ("a bad filter", _get("/api/sessions?since=yesterday-ish"), 400),
    ("a bad id on the stream", _get("/api/session/%FF/follow"), 400),
    ("no such session", _get("/api/session/nope"), 404),
    ("no such session's stream", _get("/api/session/nope/follow"), 404),
    ("no such page", _get("/no/such/page"), 404),
    ("no such file", _get("/static/index.html"), 404),
    ("POST", _get("/api/sessions", method="POST"), 405),
    ("PUT", _get("/", method="PUT"), 405),
    ("DELETE", _get("/", method="DELETE"), 405),
    ("PATCH", _get("/", method="PATCH"), 405),
    ("OPTIONS", _get("/", method="OPTIONS"), 405),
    ("HEAD", _get("/", method="HEAD"), 405),
    ("a foreign host", _get("/api/sessions", host="evil.example"), 421),
    ("a foreign host in the target", _get("http://evil.example/api/sessions"), 421),
    ("a malformed host", _get("/api/sessions", host="local host"), 400),
    ("HTTP/1.1 without Host", b"GET /api/sessions HTTP/1.1\r\n\r\n", 400),
    ("two hosts",
     b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", 400),
    ("a request line too long (stdlib)",
     b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
    ("a header line too long (stdlib)",
     b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    ("too many headers (stdlib)",
     b"GET / HTTP/1.1\r\nHost: localhost\r\n" + b"X-Many: a\r\n" * 120 + b"\r\n", 431),
    ("an unknown method (stdlib)", _get("/", method="BREW"), 501),
    ("TRACE (stdlib)", _get("/", method="TRACE"), 501),
    ("an unreadable version (stdlib)",
     b"GET / HTTP/x.y\r\nHost: localhost\r\n\r\n", 400),
    ("HTTP/2 on a HTTP/1 socket (stdlib)",
     b"GET / HTTP/2.0\r\nHost: localhost\r\n\r\n", 505),
    ("a request line of one word (stdlib)", b"GET\r\n\r\n", 400),
    ("an HTTP/0.9 request of another method (stdlib)", b"POST /\r\n\r\n", 400),
    ("an HTTP/0.9 request", b"GET /api/sessions\r\nHost: localhost\r\n\r\n", 505),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_chat(str(tmp_path_factory.mktemp("headers") / "store"), SECRET)


@pytest.fixture(scope="module")
def server(store: str) -> Iterator[ViewServer]:
    with running(make_server(registry(), url=store, port=0)) as served:
        yield served


@contextlib.contextmanager
def _answer(server: ViewServer, raw: bytes) -> Iterator[http.client.HTTPResponse]:
    """The answer to ``raw``, written as it is on a fresh connection, its status line
    and headers read (an answer without them fails here)."""
    address, port = server.server_address[:2]
    with socket.create_connection((str(address), port), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock, method=raw.split(b" ", 1)[0].decode())
        try:
            response.begin()
            yield response
        finally:
            response.close()


def _body(response: http.client.HTTPResponse) -> bytes:
    # A live stream never ends: its first event is enough.
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        return response.readline() + response.readline()
    return response.read()


def _check(response: http.client.HTTPResponse) -> None:
    for name, value in EXPECTED.items():
        assert response.msg.get_all(name) == [value], name


@pytest.mark.parametrize(("raw", "status"), [(raw, status) for _, raw, status in ANSWERS],
                         ids=[what for what, _, _ in ANSWERS])
def test_every_answer_carries_the_headers(server: ViewServer, raw: bytes,
                                          status: int) -> None:
    with _answer(server, raw) as response:
        assert response.status == status
        _check(response)
        body = _body(response)
    if status != 200:
        assert SECRET.encode() not in body
    if body:
        assert response.getheader("Content-Type")


def test_a_store_that_does_not_read_is_refused_with_the_headers(tmp_path: Path) -> None:
    # 422: the file given is not there (any more).
    server = make_server(registry(), file=str(tmp_path / "gone.jsonl"), port=0)
    with running(server), _answer(server, _get("/api/sessions")) as response:
        assert response.status == 422
        _check(response)
        assert "error" in json.loads(response.read())


@pytest.mark.parametrize(("raw", "status"),
                         [(raw, status) for what, raw, status in ANSWERS if "stdlib" in what]
                         + [(b"GET /api/sessions\r\nHost: localhost\r\n\r\n", 505)],
                         ids=[what for what, _, _ in ANSWERS if "stdlib" in what]
                         + ["HTTP/0.9"])
def test_the_standard_library_refusals_are_the_viewer_json(server: ViewServer, raw: bytes,
                                                           status: int) -> None:
    with _answer(server, raw) as response:
        assert response.status == status
        assert response.getheader("Content-Type") == "application/json"
        assert response.getheader("Connection") == "close"
        answer = json.loads(response.read())
    assert answer["status"] == status
    assert answer["error"]
    assert "hint" in answer


def test_an_http_0_9_request_gets_no_session(server: ViewServer) -> None:
    # HTTP/0.9 has no headers: the standard library would answer with the bare body,
    # without any of the headers. The viewer refuses it.
    with _answer(server, b"GET /api/session/chat-1?all=1\r\nHost: localhost\r\n\r\n"
                 ) as response:
        assert response.status == 505
        body = response.read()
    assert SECRET.encode() not in body
    assert b"HTTP/0.9" in body

