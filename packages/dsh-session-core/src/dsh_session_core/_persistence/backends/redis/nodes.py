"""Where the Redis backend's commands go: one server, or the nodes of a Redis Cluster.

A store URL names one node (:mod:`.url`). Whether it is a server of its own or a node of
a Redis Cluster, the node says: ``INFO`` (read once, at start, with the server's
version) has ``cluster_enabled:1`` on a node started with ``cluster-enabled yes``. On
a cluster the backend's client is redis-py's ``RedisCluster``, started from that node:
it learns every node and their slots from it, sends each command to the node that holds
its key's slot, and follows a slot that moves (``MOVED``). A session's keys share a
hash tag (:mod:`.keys`), so each script's keys are in one slot, on one node.

No option says which: the same URL (a node, or a name a cloud gives a cluster's
endpoint) works whichever the server is, as a ``redis-cli -c`` user would expect, and a
plain client pointed at a cluster's node could only fail (``MOVED``) on most keys. A
cluster has database 0 only: a URL naming another is refused (:class:`StoreUrlError`),
before anything is written.

Leases are held on a connection of their own to the node that holds the session's slot
(:meth:`Reach.lease_connection`): a lease names its holder's connection id, which is
a node's. Listings send their commands in one plain pipeline a node
(:meth:`Reach.pipelined`), and ``WAIT`` goes on the connection that wrote
(:meth:`Reach.then_wait`); each follows a slot that moved (:func:`moved`) once.
:func:`unavailable` tells what a write's failure to reach its node is, for the backend
to raise as an :class:`OSError` (the store names the session and says the batch stays
buffered).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from ....errors import PersistenceError, StoreUrlError
from .url import RedisTarget

__all__ = ["MIN_VERSION", "NOT_ON_A_CLUSTER", "Reach", "moved", "unavailable"]

#: The oldest server the scripts run on (``#!lua``, ``XSETID`` to a lower id).
MIN_VERSION: Final = (7, 0)
#: Options of a server's client that redis-py's cluster client does not take (its nodes'
#: connections are made by it): dropped on a cluster.
NOT_ON_A_CLUSTER: Final = ("db", "host", "port", "health_check_interval")


def _version(info: dict[str, Any]) -> tuple[int, ...]:
    text = str(info.get("redis_version", "0"))
    return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())


class Reach:
    """The backend's client (a server's, or a cluster's), and the connections its leases
    are held on: one to the server, or one to each node that holds a leased session.

    :param redis: the ``redis`` module (imported by the backend, which says when it is
        missing).
    :raises StoreUrlError: the URL names a database other than 0 of a cluster.
    :raises PersistenceError: the server is older than Redis 7.0.
    :raises redis.ConnectionError: the node cannot be reached.
    """

    def __init__(self, redis: Any, target: RedisTarget) -> None:
        self._redis = redis
        self.target = target
        # Database 0 for the question: a cluster's node refuses SELECT of any other.
        probe = redis.Redis(**{**target.options, "db": 0})
        try:
            info = probe.info("server", "cluster")
            #: Whether the node is one of a Redis Cluster's.
            self.cluster = int(info.get("cluster_enabled", 0) or 0) == 1
            self._check(info)
        except BaseException:
            probe.close()
            raise
        if self.cluster:
            probe.close()
            options = {k: v for k, v in target.options.items() if k not in NOT_ON_A_CLUSTER}
            self.client: Any = redis.cluster.RedisCluster(
                host=target.host, port=target.port, **options)
        elif target.db:
            probe.close()
            self.client = redis.Redis(**target.options)
        else:
            self.client = probe
        self._leases: dict[str, Any] = {}

    def _check(self, info: dict[str, Any]) -> None:
        shown = self.target.shown
        if _version(info) < MIN_VERSION:
            msg = (f"the Redis backend needs Redis 7.0 or later; {shown} runs "
                   f"{info.get('redis_version', '?')}")
            raise PersistenceError(msg, session_id="")
        if self.cluster and self.target.db:
            raise StoreUrlError(
                shown, f"names database {self.target.db} of a Redis Cluster, which has "
                       f"database 0 only",
                "leave the database out (redis://host:port), or name 0; a store of its "
                "own on a shared cluster is a key prefix (?prefix=...)")

    def lease_connection(self, key: str) -> Any:
        """The leases' connection to the node that holds ``key``'s slot (the server, when
        not a cluster): one a node, made on first use. Not thread-safe: the caller
        holds the leases' lock."""
        if not self.cluster:
            name, host, port = "", self.target.host, self.target.port
        else:
            node = self.client.get_node_from_key(key)
            name, host, port = node.name, node.host, node.port
        conn = self._leases.get(name)
        if conn is None:
            conn = self._leases[name] = self._redis.Redis(
                **{**self.target.options, "host": host, "port": port,
                   "db": self.target.db or 0},
                single_connection_client=True)
        return conn

    def cluster_nodes(self) -> tuple[str, ...]:
        """A cluster's nodes (``host:port``, as the cluster names them; primaries and
        replicas, so a failover does not change them): the same whichever node a URL
        named."""
        return tuple(sorted(node.name for node in self.client.get_nodes()))

    def client_of(self, key: str) -> Any:
        """The client of the node that holds ``key``'s slot (the server's)."""
        if not self.cluster:
            return self.client
        return self.client.get_redis_connection(self.client.get_node_from_key(key))

    def then_wait(self, key: str, queue: Callable[[Any], object], replicas: int,
                  timeout: float) -> tuple[Any, int]:
        """What ``queue`` puts in a pipeline, then ``WAIT replicas timeout``, on one
        connection to the primary that holds ``key``'s slot (``WAIT`` counts the
        replicas that have that connection's writes): the first command's reply, and
        how many replicas acknowledged; again once, after learning the slots anew, when
        the node says the slot moved."""
        for attempt in (1, 2):
            pipe = self.client_of(key).pipeline(transaction=False)
            queue(pipe)
            pipe.execute_command("WAIT", replicas, max(1, round(timeout * 1000)))
            try:
                reply, acked = pipe.execute()
            except self._redis.ResponseError as exc:
                if attempt == 2 or not moved(exc):
                    raise
                self.refresh()
                continue
            return reply, int(acked)
        raise AssertionError  # pragma: no cover - the loop returns or raises

    def pipelined(self, keys: Sequence[str], queue: Callable[[Any, int], object],
                  per: int) -> list[list[Any]]:
        """For each of ``keys``, the replies of the ``per`` commands ``queue(pipe, i)``
        puts in a pipeline: one pipeline a node (not a transaction), each with the
        commands of the keys its slots hold; again once, after learning the slots anew,
        when a node says a slot moved.

        One pipeline a node, not redis-py's cluster pipeline: it does not send scripts
        (before redis-py 8), and it is slower (10,000 headers read in 1.7 times as
        long).

        :raises redis.exceptions.NoScriptError: a script is not loaded on a node (the
            caller loads it and asks again).
        """
        try:
            return self._pipelined(keys, queue, per)
        except self._redis.ResponseError as exc:
            if not moved(exc):
                raise
        self.refresh()
        return self._pipelined(keys, queue, per)

    def _pipelined(self, keys: Sequence[str], queue: Callable[[Any, int], object],
                   per: int) -> list[list[Any]]:
        groups: dict[str, tuple[Any, list[int]]] = {}
        if not self.cluster:
            groups[""] = (self.client, list(range(len(keys))))
        else:
            for at, key in enumerate(keys):
                node = self.client.get_node_from_key(key)
                group = groups.get(node.name)
                if group is None:
                    group = groups[node.name] = (self.client.get_redis_connection(node), [])
                group[1].append(at)
        found: list[list[Any]] = [[] for _ in keys]
        for client, places in groups.values():
            pipe = client.pipeline(transaction=False)
            for at in places:
                queue(pipe, at)
            replies = pipe.execute()
            for n, at in enumerate(places):
                found[at] = replies[n * per:(n + 1) * per]
        return found

    def load_script(self, text: str) -> str:
        """Load a script on the server (every primary of a cluster); its SHA1."""
        if not self.cluster:
            return str(self.client.script_load(text))
        shas = {str(self.client.get_redis_connection(node).script_load(text))
                for node in self.client.get_primaries()}
        return shas.pop()

    def refresh(self) -> None:
        """Learn the cluster's slots again (after a ``MOVED``: a slot moved, a replica
        took over a primary's)."""
        if self.cluster:
            self.client.nodes_manager.initialize()

    def close_leases(self) -> None:
        """Close the leases' connections."""
        for conn in self._leases.values():
            conn.close()
        self._leases.clear()

    def close(self) -> None:
        self.close_leases()
        self.client.close()


def moved(exc: BaseException) -> bool:
    """Whether a node answered that another holds the key's slot now (``MOVED``, or
    ``ASK`` while it moves): a resharding, a replica that took over. redis-py 8 raises
    it as ``MovedError`` (an ``AskError``) whose text lacks the word; redis-py 5, from
    a plain client, as a ``ResponseError`` whose text has it."""
    import redis

    return isinstance(exc, redis.exceptions.AskError) or str(exc).startswith(
        ("MOVED ", "ASK "))


def unavailable(redis: Any, exc: BaseException) -> str | None:
    """What keeps a write from its node, when ``exc`` says the server or the cluster
    could not take it (gone, restarting, loading its data, failing over, out of
    memory); ``None`` for any other error (a script's, the backend's own)."""
    errors = redis.exceptions
    if isinstance(exc, errors.BusyLoadingError):
        return "the Redis server is loading its data (it was restarted)"
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return "the Redis server did not answer"
    # From a plain client (a lease's, a pipeline's), redis-py 5 raises the cluster's
    # answers as ResponseErrors whose text begins with the answer's word.
    if isinstance(exc, errors.ClusterError | errors.RedisClusterException
                  | errors.TryAgainError) or moved(exc) or str(exc).startswith(
                      ("CLUSTERDOWN ", "TRYAGAIN ", "MASTERDOWN ")):
        return "the Redis Cluster could not serve the session's slot"
    if isinstance(exc, errors.ReadOnlyError):
        return "the Redis node is a replica now (a failover)"
    if isinstance(exc, errors.OutOfMemoryError):
        return "the Redis server is out of memory (maxmemory)"
    return None
