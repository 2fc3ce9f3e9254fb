"""The Redis servers of a test run: started on free loopback ports in temporary folders,
stopped after it.

A server is ``redis-server`` (Redis 7.0 or later) found on the ``PATH``, or the program
``DSH_SESSION_TEST_REDIS_SERVER`` names. Without one the Redis tests skip, except under
CI (``CI`` set), where they fail: CI must never pass by skipping them. No test uses a
fixed port, nor a server it did not start.

Each test's store is a key prefix of its own on the run's server (a fresh
``redis://127.0.0.1:PORT/0?prefix=...`` URL), so tests share one server without seeing
each other's sessions; a test that needs a server of its own (to kill it, to restart it)
starts one with :class:`RedisServer`. A Redis Cluster (:class:`RedisCluster`: three
primaries, no replicas, every one durable) is started once a run, when a test asks for
one, and its tests share it the same way. Needs pytest; imported only by the fixtures
that use a Redis store.
"""

from __future__ import annotations

__all__ = ["ENV", "RedisCluster", "RedisServer", "find_server", "free_port"]

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .postgresql import under_ci

#: The program to run instead of the ``redis-server`` on the ``PATH``.
ENV = "DSH_SESSION_TEST_REDIS_SERVER"
#: How long a server has to answer after it starts, and a cluster to be made (a bound
#: against a hang).
_PATIENCE = 30.0
#: The hash slots of a Redis Cluster.
SLOTS = 16384


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
    :param cluster: a node of a Redis Cluster (``cluster-enabled yes``), its cluster bus
        on a free port of its own (``cluster-port``: the default, the port plus 10000,
        may be over 65535, or taken), its cluster state in ``nodes.conf`` in ``folder``.
    :param args: more ``redis-server`` options (``["--requirepass", "pw"]``).
    """

    def __init__(self, folder: Path, *, durable: bool = False, cluster: bool = False,
                 args: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder)
        self.durable = durable
        self.cluster = cluster
        self.args = args
        self.port = 0
        #: The cluster bus's port (0: not a cluster node, or not started yet).
        self.bus_port = 0
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
            bus = (self.bus_port or free_port()) if self.cluster else 0
            persistence = (["--appendonly", "yes", "--appendfsync", "always"]
                           if self.durable else ["--appendonly", "no"])
            cluster = (["--cluster-enabled", "yes", "--cluster-port", str(bus),
                        "--cluster-config-file", "nodes.conf"] if self.cluster else [])
            process = subprocess.Popen(
                [program, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                 str(self.folder), "--save", "", *persistence, *cluster, "--daemonize", "no",
                 "--logfile", str(self.folder / "redis.log"), *self.args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            if self._answers(process, port):
                self.port, self.bus_port, self._process = port, bus, process
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


def _command(port: int, *args: object) -> Any:
    """One command to the server on ``port`` of this machine (redis-py's reply)."""
    import redis

    client: Any = redis.Redis(port=port, socket_timeout=_PATIENCE)  # typed loosely
    try:
        return client.execute_command(*args)
    finally:
        client.close()


class RedisCluster:
    """A Redis Cluster of ``primaries`` primaries and no replicas, on free loopback ports
    in ``folder``: each a :class:`RedisServer` with cluster mode on, durable (an
    append-only file fsynced at every write, so a primary killed and started again keeps
    every write it acknowledged), the slots shared evenly among them.

    :meth:`start` starts the servers, gives each its range of slots and a config epoch
    of its own, introduces them to the first (``CLUSTER MEET``), and waits until every
    node says ``cluster_state:ok`` (:meth:`wait_ok`). A test that restarts a primary
    (``servers[i].kill()``, then ``servers[i].start()``: the same port, folder, data and
    ``nodes.conf``) waits with :meth:`wait_ok` before it counts on the cluster again.

    :param args: more ``redis-server`` options for every node.
    """

    def __init__(self, folder: Path, *, primaries: int = 3,
                 args: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder)
        self.servers = [RedisServer(self.folder / f"node{i}", durable=True, cluster=True,
                                    args=args) for i in range(primaries)]

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT``: the first node's (a client finds the others)."""
        return f"redis://127.0.0.1:{self.servers[0].port}"

    def start(self) -> RedisCluster:
        """Start the nodes, make the cluster, wait until every node says it is ok."""
        try:
            for server in self.servers:
                server.start()
            for i, server in enumerate(self.servers):
                first, last = self.slots(i)
                _command(server.port, "CLUSTER", "ADDSLOTSRANGE", first, last)
                # Epochs of their own, as redis-cli --cluster create gives: no collision
                # for the nodes to settle first.
                _command(server.port, "CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            first_node = self.servers[0]
            for server in self.servers[1:]:
                _command(server.port, "CLUSTER", "MEET", "127.0.0.1", first_node.port,
                         first_node.bus_port)
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def slots(self, index: int) -> tuple[int, int]:
        """The first and last slot of the primary ``servers[index]``."""
        count = len(self.servers)
        return index * SLOTS // count, (index + 1) * SLOTS // count - 1

    def server_of(self, key: str | bytes) -> RedisServer:
        """The primary that holds ``key``'s slot."""
        slot = int(_command(self.servers[0].port, "CLUSTER", "KEYSLOT", key))
        for i, server in enumerate(self.servers):
            first, last = self.slots(i)
            if first <= slot <= last:
                return server
        raise AssertionError(slot)  # pragma: no cover - the ranges cover every slot

    def wait_ok(self) -> None:
        """Wait until every node answers and says ``cluster_state:ok`` (it sees every
        slot served), within a bound.

        :raises RuntimeError: the bound passed; the nodes' logs say why.
        """
        import redis

        deadline = time.monotonic() + _PATIENCE
        waiting = list(self.servers)
        while waiting and time.monotonic() < deadline:
            try:
                info = _command(waiting[0].port, "CLUSTER", "INFO")
            except redis.RedisError:
                info = b""
            if b"cluster_state:ok" in info:
                waiting.pop(0)
                continue
            time.sleep(0.01)  # polling a condition (the node's state), not a race
        if waiting:
            logs = ", ".join(str(s.folder / "redis.log") for s in waiting)
            msg = f"the Redis Cluster did not become ok; see {logs}"
            raise RuntimeError(msg)

    def stop(self) -> None:
        """Stop every node."""
        for server in self.servers:
            server.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
