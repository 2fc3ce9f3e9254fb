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

__all__ = ["ENV", "RedisCluster", "RedisServer", "find_server", "free_port",
           "wait_replicating"]

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
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


def _says(*command: object, text: str) -> Callable[[int], bool]:
    """Whether the server on a port answers ``command`` with ``text`` in its reply (an
    ``INFO``'s ``field:value`` among them; ``False`` while it does not answer)."""

    def says(port: int) -> bool:
        import redis

        try:
            reply = _command(port, *command)
        except redis.RedisError:
            return False
        if isinstance(reply, dict):  # INFO, as redis-py parses it
            field, _, value = text.partition(":")
            return str(reply.get(field)) == value
        return text.encode() in reply

    return says


def _online(port: int) -> bool:
    """Whether the replica on ``port`` is online for its primary (the primary has its
    first acknowledgement: until then ``WAIT`` does not count it)."""
    import redis

    try:
        mine = _command(port, "INFO", "replication")
        theirs = _command(int(mine["master_port"]), "INFO", "replication")
    except (redis.RedisError, KeyError):
        return False
    return any(isinstance(v, dict) and int(v.get("port", 0)) == port
               and v.get("state") == "online" for k, v in theirs.items()
               if k.startswith("slave"))


def _wait_until(servers: list[RedisServer], ready: Callable[[int], bool],
                what: str) -> None:
    """Wait until ``ready(port)`` holds for each server, within a bound.

    :raises RuntimeError: the bound passed; the servers' logs say why.
    """
    deadline = time.monotonic() + _PATIENCE
    waiting = list(servers)
    while waiting and time.monotonic() < deadline:
        if ready(waiting[0].port):
            waiting.pop(0)
            continue
        time.sleep(0.01)  # polling a condition (the server's state), not a race
    if waiting:
        logs = ", ".join(str(s.folder / "redis.log") for s in waiting)
        msg = f"{what}; see {logs}"
        raise RuntimeError(msg)


def wait_replicating(replicas: list[RedisServer]) -> None:
    """Wait until each replica's link to its primary is up (it has the primary's data
    and follows its writes), its primary counts it online (``WAIT`` counts it), and a
    durable replica has rewritten its append-only file from them (until then it refuses
    to stop on SIGTERM).

    :raises RuntimeError: the bound passed.
    """
    _wait_until(replicas, _says("INFO", "replication", text="master_link_status:up"),
                what="a replica did not catch up with its primary")
    _wait_until(replicas, _online, what="a primary did not see its replica online")
    for settled in ("aof_rewrite_in_progress:0", "aof_rewrite_scheduled:0"):
        _wait_until(replicas, _says("INFO", "persistence", text=settled),
                    what="a replica did not rewrite its append-only file")


class RedisCluster:
    """A Redis Cluster of ``primaries`` primaries (and ``replicas`` replicas of each,
    none by default), on free loopback ports in ``folder``: each node a
    :class:`RedisServer` with cluster mode on, durable (an append-only file fsynced at
    every write, so a primary killed and started again keeps every write it
    acknowledged), the slots shared evenly among the primaries.

    :meth:`start` starts the nodes, gives each primary its range of slots and each node
    a config epoch of its own, introduces them to the first (``CLUSTER MEET``), makes
    the replicas replicate their primaries, and waits until every node says
    ``cluster_state:ok`` (:meth:`wait_ok`) and every replica has caught up. A test that
    restarts a primary (``servers[i].kill()``, then ``servers[i].start()``: the same
    port, folder, data and ``nodes.conf``) waits with :meth:`wait_ok` before it counts
    on the cluster again.

    :param args: more ``redis-server`` options for every node.
    """

    def __init__(self, folder: Path, *, primaries: int = 3, replicas: int = 0,
                 args: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder)
        # A replica's first sync at once (the primary waits 5 s for more by default).
        args = ("--repl-diskless-sync-delay", "0", *args)
        #: The primaries.
        self.servers = [RedisServer(self.folder / f"node{i}", durable=True, cluster=True,
                                    args=args) for i in range(primaries)]
        #: The replicas of each primary (``replicas[i]``: those of ``servers[i]``).
        self.replicas = [[RedisServer(self.folder / f"node{i}-replica{j}", durable=True,
                                      cluster=True, args=args) for j in range(replicas)]
                         for i in range(primaries)]

    @property
    def nodes(self) -> list[RedisServer]:
        """Every node: the primaries, then the replicas."""
        return [*self.servers, *(r for group in self.replicas for r in group)]

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT``: the first node's (a client finds the others)."""
        return f"redis://127.0.0.1:{self.servers[0].port}"

    def start(self) -> RedisCluster:
        """Start the nodes, make the cluster, wait until every node says it is ok."""
        try:
            for server in self.nodes:
                server.start()
            for i, server in enumerate(self.servers):
                first, last = self.slots(i)
                _command(server.port, "CLUSTER", "ADDSLOTSRANGE", first, last)
            for epoch, server in enumerate(self.nodes, 1):
                # Epochs of their own, as redis-cli --cluster create gives: no collision
                # for the nodes to settle first.
                _command(server.port, "CLUSTER", "SET-CONFIG-EPOCH", epoch)
            first_node = self.servers[0]
            for server in self.nodes[1:]:
                _command(server.port, "CLUSTER", "MEET", "127.0.0.1", first_node.port,
                         first_node.bus_port)
            for primary, replicas in zip(self.servers, self.replicas, strict=True):
                ident = _command(primary.port, "CLUSTER", "MYID").decode()
                # A replica follows a primary it knows of (gossip tells it, from the
                # first node it met).
                _wait_until(replicas, _says("CLUSTER", "NODES", text=ident),
                            what="a replica did not learn of its primary")
                for replica in replicas:
                    _command(replica.port, "CLUSTER", "REPLICATE", ident)
            self.wait_ok()
            wait_replicating(self.nodes[len(self.servers):])
        except BaseException:
            self.stop()
            raise
        return self

    def slots(self, index: int) -> tuple[int, int]:
        """The first and last slot of the primary ``servers[index]``."""
        count = len(self.servers)
        return index * SLOTS // count, (index + 1) * SLOTS // count - 1

    def server_of(self, key: str | bytes) -> RedisServer:
        """The primary that holds ``key``'s slot (as the cluster was made)."""
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
        _wait_until(self.nodes, _says("CLUSTER", "INFO", text="cluster_state:ok"),
                    what="the Redis Cluster did not become ok")

    def stop(self) -> None:
        """Stop every node."""
        for server in self.nodes:
            server.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
