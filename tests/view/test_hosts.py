"""The viewer refuses a request whose ``Host`` header names another host (DNS rebinding,
issue 24): the real server on a free loopback port in a thread, called with
``http.client`` and a forged ``Host`` on every route (the page, the static files, each
API route, an unknown path, another method); the names it answers to (loopback, the
bound address, ``--allowed-host``); HTTP/1.0 without ``Host``; and the command's rules
for ``--allowed-host`` and a wildcard ``--host``, through a real subprocess."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from server_support import running
from store_support import write_chat

from dsh_session_core._cli.support import registry
from dsh_session_view import ViewServer, make_server

#: Every route the server has, with a session of the store: each must be refused alike.
ROUTES = (
    "/",
    "/index.html",
    "/s/chat-1",
    "/static/app.js",
    "/static/app.css",
    "/api/sessions",
    "/api/search?q=secret",
    "/api/session/chat-1",
    "/api/session/chat-1?all=1",
    "/api/session/chat-1/events?after=-1",
    "/api/session/chat-1/follow",
    "/no/such/page",
)
SECRET = "the launch code is 0000"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_chat(str(tmp_path_factory.mktemp("hosts") / "store"), SECRET)


@contextlib.contextmanager
def serving(store: str, host: str = "127.0.0.1", allowed: tuple[str, ...] = ()
            ) -> Iterator[ViewServer]:
    # Without names of its own, the server as any caller makes it (no allowed_hosts).
    server = (make_server(registry(), url=store, host=host, port=0, allowed_hosts=allowed)
              if allowed else make_server(registry(), url=store, host=host, port=0))
    with running(server) as served:
        yield served


@pytest.fixture(scope="module")
def server(store: str) -> Iterator[ViewServer]:
    with serving(store) as running:
        yield running


def request(server: ViewServer, path: str, host: str | None, *, method: str = "GET",
            version: str = "HTTP/1.1") -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection, with the Host header ``host`` exactly (None:
    none at all), written by hand so that nothing fills it in."""
    address, port = server.server_address[:2]
    lines = [f"{method} {path} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines.append("Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    with socket.create_connection((str(address), port), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        headers = {k.lower(): v for k, v in response.getheaders()}
        # A follow stream never ends: its first bytes are enough.
        body = response.read(1) if path.endswith("/follow") and response.status == 200 \
            else response.read()
        response.close()
    return response.status, headers, body


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}",
                                  "localhost.evil.example", "127.0.0.1.evil.example"])
def test_a_foreign_host_is_refused_on_every_route(server: ViewServer, path: str,
                                                  host: str) -> None:
    status, headers, body = request(server, path,
                                    host.format(port=server.server_address[1]))
    assert status == 421
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"
    text = body.decode()
    name = host.split(":")[0]
    assert f"does not answer to the host {name}" in text
    assert f"--allowed-host {name}" in text
    assert "chat-1" not in text
    assert SECRET not in text


def test_the_same_requests_are_answered_for_the_loopback_names(server: ViewServer) -> None:
    port = server.server_address[1]
    for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"localhost:{port}",
                 "LocalHost.", f"[::1]:{port}", "[::1]", "[0:0:0:0:0:0:0:1]",
                 "localhost:9000"):  # another port: a tunnel's (ssh -L 9000:...)
        for path in ROUTES[:-1]:
            status, _, body = request(server, path, host)
            assert status == 200, (host, path, body[:200])
    status, _, body = request(server, "/api/session/chat-1?all=1", "localhost")
    assert SECRET in body.decode()


def test_other_methods_are_refused_for_a_foreign_host_first(server: ViewServer) -> None:
    for method in ("POST", "DELETE", "HEAD"):
        status, _, body = request(server, "/api/sessions", "evil.example", method=method)
        assert status == 421
        if method != "HEAD":
            assert b"does not answer to the host evil.example" in body
        status, _, _ = request(server, "/api/sessions", "localhost", method=method)
        assert status == 405


def test_a_target_in_absolute_form_names_its_host_too(server: ViewServer) -> None:
    status, _, _ = request(server, "http://evil.example/api/sessions", "localhost")
    assert status == 421
    status, _, body = request(server, "http://localhost/api/sessions", "localhost")
    assert status == 200
    assert json.loads(body)[0]["id"] == "chat-1"


def test_malformed_missing_and_repeated_hosts(server: ViewServer) -> None:
    for bad in ("", "::1", "local host", "localhost:99999", "localhost:http", "[::1",
                "user@localhost", "localhost/x", "[evil]"):
        status, _, body = request(server, "/api/sessions", bad)
        assert status == 400, (bad, body)
        assert b"chat-1" not in body
    # HTTP/1.1 requires exactly one Host (RFC 9112 section 3.2).
    assert request(server, "/api/sessions", None)[0] == 400
    address, port = server.server_address[:2]
    with socket.create_connection((str(address), port), timeout=30) as sock:
        sock.sendall(b"GET /api/sessions HTTP/1.1\r\nHost: localhost\r\nHost: evil.example"
                     b"\r\nConnection: close\r\n\r\n")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 400
    # HTTP/1.0 without Host: no name to check, and no browser sends one so.
    status, _, body = request(server, "/api/sessions", None, version="HTTP/1.0")
    assert status == 200
    assert json.loads(body)[0]["id"] == "chat-1"
    assert request(server, "/api/sessions", "evil.example", version="HTTP/1.0")[0] == 421


def test_http_client_with_a_forged_host_as_a_rebinding_page_sends_it(
        server: ViewServer) -> None:
    # What the browser of a rebinding attack sends: the attacker's name, our port.
    address, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(address), port, timeout=30)
    try:
        connection.request("GET", "/api/sessions", headers={"Host": f"evil.example:{port}"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    assert response.status == 421
    assert b"chat-1" not in body


_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(labels=st.lists(_LABEL, min_size=1, max_size=4),
       port=st.one_of(st.none(), st.integers(1, 65535)))
def test_any_other_name_is_refused(server: ViewServer, labels: list[str],
                                   port: int | None) -> None:
    name = ".".join(labels)
    assume(name not in ("localhost", "127.0.0.1"))
    host = name if port is None else f"{name}:{port}"
    status, _, body = request(server, "/api/sessions", host)
    assert status == 421, host
    assert b"chat-1" not in body


def test_allowed_hosts_and_the_bound_address_are_answered(store: str) -> None:
    with serving(store, allowed=("Viewer.Example.org", "[fe80::1]", "10.1.2.3")) as server:
        for host in ("viewer.example.org", "viewer.example.org.:8080", "[fe80::1]:1",
                     "10.1.2.3", "localhost"):
            assert request(server, "/api/sessions", host)[0] == 200, host
        for host in ("example.org", "sub.viewer.example.org", "10.1.2.4"):
            assert request(server, "/api/sessions", host)[0] == 421, host
    # Bound to another loopback address: that one is answered too, its neighbours not.
    with serving(store, host="127.0.0.2") as server:
        assert request(server, "/api/sessions", "127.0.0.2")[0] == 200
        assert request(server, "/api/sessions", "127.0.0.3")[0] == 421
    with pytest.raises(ValueError, match="is not a host name"):
        make_server(registry(), url=store, allowed_hosts=["http://viewer.example.org"])


def _view(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_session_core", "view", *argv],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_the_command_refuses_a_bad_allowed_host_and_a_bare_wildcard(store: str) -> None:
    for bad in ("http://viewer.example.org", "viewer.example.org:8080", "*", "a/b", "0.0.0.0"):
        out = _view("--store", store, "--no-open", "--allowed-host", bad)
        assert out.returncode == 2, out  # a usage error
        assert out.stderr.startswith(f"dsh-session: --allowed-host {bad!r} is not a host name")
    out = _view("--store", store, "--no-open", "--host", "0.0.0.0", "--allow-remote")
    assert out.returncode == 2
    assert out.stderr.startswith("dsh-session: --host 0.0.0.0 listens on every address")
    assert "--allowed-host NAME" in out.stderr


def test_the_command_answers_the_names_it_is_given(store: str, tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "dsh_session_core", "view", "--store", store, "--no-open",
         "--allowed-host", "viewer.example.org"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            first = proc.stdout.readline()
            assert first.startswith("viewing "), first + proc.stderr.read()
            url = first.split(" at ")[1].strip()
            address, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
            said = proc.stderr.readline()
            assert said.startswith("dsh-session: answering requests to ")
            assert "viewer.example.org" in said
            assert "localhost" in said

            def status(host: str) -> int:
                connection = http.client.HTTPConnection(address, int(port), timeout=30)
                try:
                    connection.request("GET", "/api/sessions", headers={"Host": host})
                    return connection.getresponse().status
                finally:
                    connection.close()

            assert status("viewer.example.org") == 200
            assert status(f"localhost:{port}") == 200
            assert status("evil.example") == 421
        finally:
            proc.terminate()
            proc.wait(30)
