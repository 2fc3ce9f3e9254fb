"""A store whose server cannot be reached, or goes away: one line naming the store (never
its password) and what to check, no traceback, never "internal error"; the same for
PostgreSQL and Redis (issue 41: Redis reads raised redis-py's errors as bugs)."""

from __future__ import annotations

import socket

import pytest

from dsh_session_core._cli.support import SERVER_HINT, failure_for
from dsh_session_core.testing import run_cli


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
@pytest.mark.parametrize("argv", [
    ("ls",), ("show", "chat-1"), ("search", "hello"), ("rm", "chat-1", "--yes"),
    ("forget", "chat-1", "--yes"), ("prune", "--keep-latest", "1", "--yes"),
    ("tail", "chat-1"), ("stats", "chat-1"),
])
def test_a_store_whose_server_is_down_is_said_in_one_line(scheme: str,
                                                          argv: tuple[str, ...]) -> None:
    pytest.importorskip("redis" if scheme == "redis" else "psycopg")
    port = _dead_port()
    url = (f"redis://agent:s3cret@127.0.0.1:{port}/0" if scheme == "redis"
           else f"postgresql://agent:s3cret@127.0.0.1:{port}/db")
    code, out, err = run_cli(*argv, "--store", url)
    assert (code, out) == (1, b"")
    lines = err.splitlines()
    assert lines[0].startswith("dsh-session: cannot open the store "), lines
    assert "internal error" not in err
    assert "Traceback" not in err
    assert "s3cret" not in err
    assert lines[1] == f"hint: {SERVER_HINT}"


def test_a_server_going_away_mid_command_is_the_servers_not_a_bug() -> None:
    # What a command meets when the server goes away after the store opened: the
    # driver's own error, shown as the server's, with what to check.
    redis = pytest.importorskip("redis")
    failure = failure_for(redis.ConnectionError("Connection closed by server."))
    assert str(failure) == "the store's server: ConnectionError: Connection closed by server."
    assert failure.hint == SERVER_HINT
    psycopg = pytest.importorskip("psycopg")
    failure = failure_for(psycopg.OperationalError("server closed the connection"))
    assert str(failure).startswith("the store's server: ")
    assert failure.hint == SERVER_HINT
