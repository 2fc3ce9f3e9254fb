"""The Redis servers of a test run: started on free loopback ports in temporary folders,
stopped after it.

A server is ``redis-server`` (Redis 7.0 or later) found on the ``PATH``, or the program
``DSH_SESSION_TEST_REDIS_SERVER`` names. Without one the Redis tests skip, except under
CI (``CI`` set), where they fail: CI must never pass by skipping them. No test uses a
fixed port, nor a server it did not start.

Each test's store is a key prefix of its own on the run's server (a fresh
``redis://127.0.0.1:PORT/0?prefix=...`` URL), so tests share one server without seeing
each other's sessions; a test that needs a server of its own (to kill it, to restart it)
starts one with :class:`RedisServer`. Needs pytest; imported only by the fixtures that
use a Redis store.
"""

from __future__ import annotations

__all__ = ["ENV", "RedisServer", "find_server", "free_port"]

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from .postgresql import under_ci

#: The program to run instead of the ``redis-server`` on the ``PATH``.
ENV = "DSH_SESSION_TEST_REDIS_SERVER"
#: How long a server has to answer after it starts (a bound against a hang).
_PATIENCE = 30.0


def find_server() -> str:
    """The ``redis-server`` program, or skip (fail under CI) without one."""
    named = os.environ.get(ENV, "").strip()
    found = named or shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else "")
    if not found:
        reason = (f"no redis-server: install it (apt-get install redis-server), or set "
                  f"{ENV}=/path/to/redis-server")
        if under_ci():
            pytest.fail(f"{reason} (CI is set: Redis tests must not skip)", pytrace=False)
        pytest.skip(reason)
    return found


def free_port() -> int:
    """A loopback TCP port no socket holds now (the server may still lose it to a race:
    :meth:`RedisServer.start` then tries another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` on a free loopback port, its files in ``folder``.

    :param folder: where its data, its append-only file and its log go (made if
        missing).
    :param durable: keep an append-only file fsynced at every write
        (``appendfsync always``), so that a server killed and started again keeps every
        write it acknowledged; else nothing is kept on disk.
    :param args: more ``redis-server`` options (``["--requirepass", "pw"]``).
    """

    def __init__(self, folder: Path, *, durable: bool = False,
                 args: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder)
        self.durable = durable
        self.args = args
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start it (on the port it had, when started again) and wait until it answers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        program = find_server()
        for _ in range(5):
            port = self.port or free_port()
            persistence = (["--appendonly", "yes", "--appendfsync", "always"]
                           if self.durable else ["--appendonly", "no"])
            process = subprocess.Popen(
                [program, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                 str(self.folder), "--save", "", *persistence, "--daemonize", "no",
                 "--logfile", str(self.folder / "redis.log"), *self.args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            if self._answers(process, port):
                self.port, self._process = port, process
                return self
            process.kill()
            process.wait()
            if self.port:  # its own port is taken: give up rather than move
                break
        msg = f"redis-server did not start; see {self.folder / 'redis.log'}"
        raise RuntimeError(msg)

    @staticmethod
    def _answers(process: subprocess.Popen[bytes], port: int) -> bool:
        """Whether the server started answers PING (before it exits, or the bound)."""
        deadline = time.monotonic() + _PATIENCE
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    # PONG, or an error (a server that asks for a password): it answers.
                    if s.recv(64)[:1] in (b"+", b"-"):
                        return True
            except OSError:
                pass
            time.sleep(0.01)  # polling a condition (the server answers), not a race
        return False

    def kill(self) -> None:
        """Kill it (SIGKILL): what it acknowledged is kept only when ``durable``."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        """Stop it (SIGTERM, then wait)."""
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=_PATIENCE)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
