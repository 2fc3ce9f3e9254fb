"""The Redis backend's writer lease: one writer per session, across hosts.

A lease is a hash key beside the session's log (:mod:`.keys`) that expires: its token
(random), its epoch (a counter of the session's leases), the connection id of its
holder, and who the holder is. Every append presents the token, and the append script
(:mod:`.scripts`) refuses a batch whose token is not the lease's: a writer whose lease
was taken over is fenced out before anything lands.

Taking one (:meth:`Leases.take`) is one script: it is given only when no lease is held.
A lease whose holder died is taken over at once when the server says the holder's
connection is gone (``CLIENT LIST ID``: a process killed, even by SIGKILL, closes its
sockets, and the server drops its connection); a holder that vanished without closing
its connection (a host lost) holds it until it expires. The holder renews its leases
from a thread, every third of their time to live, on the connection whose id the lease
names; a lease found taken over at a renewal is marked lost. The lease's time to live
is the URL's ``lease`` option.

A process holds its leases on one connection of its own (``single_connection_client``),
so that its id names every lease the process holds; on a Redis Cluster, one to each
node that holds a leased session's slot (:meth:`~.nodes.Reach.lease_connection`: a
connection id is a node's). A lease's scripts go to its node; one that answers
``MOVED`` (the slot moved, a replica took over) has them sent again once to the node
that holds it now.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ....errors import SessionLockedError
from .keys import SessionKeys
from .nodes import moved

_T = TypeVar("_T")

__all__ = ["Lease", "Leases", "holder_text"]


def holder_text(holder: bytes | str, epoch: bytes | str | int) -> str:
    """A lease's holder, for a :class:`SessionLockedError`."""
    who = holder.decode(errors="replace") if isinstance(holder, bytes) else holder
    when = epoch.decode(errors="replace") if isinstance(epoch, bytes) else str(epoch)
    return f"lease held by {who or 'a writer'} on the Redis server, epoch {when or '?'}"


class Lease:
    """One session's lease, as its holder keeps it (a :class:`~.base.WriterLock`)."""

    __slots__ = ("_leases", "epoch", "keys", "lost", "session_id", "token")

    def __init__(self, leases: Leases, session_id: str, keys: SessionKeys, token: str,
                 epoch: int) -> None:
        self._leases = leases
        self.session_id = session_id
        self.keys = keys
        self.token = token
        self.epoch = epoch
        #: Whether a renewal found it taken over (or expired, and taken again since).
        self.lost = False

    def release(self) -> None:
        self._leases.release(self)


class Nodes(Protocol):
    """Where leases are held (:class:`~.nodes.Reach`)."""

    def lease_connection(self, key: str) -> Any: ...

    def refresh(self) -> None: ...

    def close_leases(self) -> None: ...


class Leases:
    """The leases one backend holds, the connections they are held on, their renewal.

    :param nodes: the connections the leases are held on (one a node).
    :param scripts: the backend's registered scripts, by name.
    :param ttl: the leases' time to live, in seconds.
    """

    def __init__(self, nodes: Nodes, scripts: Callable[[str], Any],
                 keys_of: Callable[[str], SessionKeys], ttl: float) -> None:
        self._nodes = nodes
        self._scripts = scripts
        self._keys_of = keys_of
        self.ttl_ms = max(1000, round(ttl * 1000))
        self._lock = threading.Lock()
        self._held: dict[str, Lease] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.holder = f"{socket.gethostname()}:{os.getpid()}"

    def _on_node(self, keys: SessionKeys, call: Callable[[Any], _T]) -> _T:
        """``call(connection)`` on the connection to the node of the session's slot;
        again once on the node that holds it now, when that node answered ``MOVED``.
        The caller holds the lock."""
        import redis

        try:
            return call(self._nodes.lease_connection(keys.lease))
        except redis.ResponseError as exc:
            if not moved(exc):
                raise
        self._nodes.refresh()
        return call(self._nodes.lease_connection(keys.lease))

    def token_of(self, session_id: str) -> str:
        """The token of the lease held on the session, ``''`` when none is."""
        lease = self._held.get(session_id)
        return "" if lease is None else lease.token

    def held(self, session_id: str) -> Lease | None:
        return self._held.get(session_id)

    def take(self, session_id: str) -> Lease:
        """Take the session's lease, without waiting.

        :raises SessionLockedError: another writer holds it (its connection alive, or
            its lease not expired yet).
        """
        keys = self._keys_of(session_id)
        token = secrets.token_hex(16)

        def acquire(conn: Any) -> Any:
            gone = ""
            for _ in range(2):  # a second time only to take over a dead holder's lease
                me = str(conn.client_id())
                got = self._scripts("acquire")(
                    keys=[keys.lease, keys.epoch],
                    args=[token, me, self.holder, self.ttl_ms, gone], client=conn)
                if int(got[0]) == 1:
                    return got
                if gone or not got[1] or not self._gone(conn, got[1]):
                    raise SessionLockedError(session_id, holder_text(got[2], got[3]))
                gone = got[1].decode() if isinstance(got[1], bytes) else str(got[1])
            raise AssertionError  # pragma: no cover - the loop returns or raises

        with self._lock:
            got = self._on_node(keys, acquire)
            lease = Lease(self, session_id, keys, token, int(got[1]))
            self._held[session_id] = lease
            self._start()
        return lease

    def retake(self, lease: Lease) -> None:
        """Take a lease found lost (expired, or released) again, under a new token."""
        fresh = self.take(lease.session_id)
        lease.token, lease.epoch, lease.lost = fresh.token, fresh.epoch, False
        with self._lock:
            self._held[lease.session_id] = lease

    @staticmethod
    def _gone(conn: Any, client: bytes | str) -> bool:
        """Whether the server no longer has the connection of id ``client`` (its holder
        died). ``False`` when it cannot tell (``CLIENT LIST`` refused to this user)."""
        import redis

        try:
            # The id as a string: redis-py 5 joins the ids it is given as text.
            return not conn.client_list(client_id=[str(int(client))])
        except (redis.ResponseError, ValueError):
            return False

    def release(self, lease: Lease) -> None:
        """Give the lease up (when it is still this holder's)."""
        with self._lock:
            if self._held.get(lease.session_id) is lease:
                del self._held[lease.session_id]
            import redis

            with contextlib.suppress(redis.RedisError):
                self._on_node(lease.keys, lambda conn: self._scripts("release")(
                    keys=[lease.keys.lease], args=[lease.token], client=conn))

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._renew, name="dsh-session lease",
                                            daemon=True)
            self._thread.start()

    def _renew(self) -> None:
        """Renew every lease held, every third of their time to live."""
        import redis

        while not self._stop.wait(self.ttl_ms / 3000):
            with self._lock:
                ids: dict[int, str] = {}  # each connection's id, asked once a round
                for lease in list(self._held.values()):
                    try:
                        lease.lost = not self._on_node(lease.keys, functools.partial(
                            self._renew_one, lease, ids))
                    except redis.RedisError:
                        # Its node is down (restarting, failing over): the next round
                        # tries again, and the others' leases are renewed meanwhile; an
                        # append retakes it or is refused.
                        continue

    def _renew_one(self, lease: Lease, ids: dict[int, str], conn: Any) -> bool:
        me = ids.get(id(conn))
        if me is None:
            me = ids[id(conn)] = str(conn.client_id())
        return bool(self._scripts("renew")(keys=[lease.keys.lease],
                                           args=[lease.token, me, self.ttl_ms], client=conn))

    def close(self) -> None:
        """Release every lease held, stop renewing, close the connections."""
        for lease in list(self._held.values()):
            lease.release()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._nodes.close_leases()
