"""The Redis persistence backend: sessions as streams on one Redis server or a Redis
Cluster, shared by many hosts.

This module is the backend class, its loads and its writes; the key names are
:mod:`.keys`', the scripts :mod:`.scripts`', the lease :mod:`.lease`'s, the server or
the cluster's nodes :mod:`.nodes`', the reads that never write :mod:`.reads`' (the
``XREAD`` follower among them), the projections' rows :mod:`.projections`' and the
scrub after a forget :mod:`.scrub`'s.

Many hosts, one session, one writer:

- **The lease** (:mod:`.lease`): a key beside the log, taken without waiting, renewed
  by its holder, taken over at once when the holder's connection is gone, else when it
  expires.
- **Fencing.** Every batch is one script that checks, atomically, that the writer
  still holds the lease (its token) and that the stored log ends right before the
  batch; then it adds the batch's entries (their ids the seqs: the server refuses one
  not above the stream's top), the header and counts, and the projection rows. A
  writer whose lease was taken over is refused (:class:`SessionLockedError`) and
  nothing lands; a batch that finds another writer's events is refused
  (:class:`PersistenceError`). A retry of a batch that did land (its reply lost: the
  client retries a command whose connection dropped) is recognised and succeeds
  without writing twice.

Loading reads the header and the whole stream in one script (one snapshot), and
decodes the lines in one msgspec call, as the memory backend does.

**On a Redis Cluster** every script's keys are one session's, in its slot (the hash
tag), on one node. The index that listing reads (``P:sessions``) is a key of its own,
in a slot of its own, so no script can write it with a session's keys: a session's
first append adds it to the index (``ZADD NX``) *before* the script that stores it, and
``rm`` takes it out after the script that removes it. So the index never misses a
stored session; what a crash between the two steps leaves is an entry with no session,
which listing skips (and a refused first batch takes back the entry it added).
A write that cannot reach its node (gone, restarting, failing over) raises an
:class:`OSError`, which the store raises as a :class:`~.errors.StoreWriteError`: its
events stay buffered, and flushing again writes them once (a batch that did land
before the failure is recognised).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import threading
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Final

from ...._logformat.logfile import parse_header
from ...._schema.codec import ENCODER, encode_events
from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....errors import MissingExtraError, PersistenceError, SessionLockedError
from ....events import Event
from ...base import Deleted, StoredLog, WriterLock, check_common_id, not_found
from ...rows import RowChanges
from . import scripts
from .aio import RedisAsync
from .faults import checked_events
from .keys import INDEX, SessionKeys
from .lease import Lease, Leases
from .nodes import Reach, unavailable
from .projections import RedisProjections, change_args
from .reads import RedisReads, time_of
from .url import RedisTarget, parse_redis_url

__all__ = ["RedisBackend"]

#: How a log line of a ``turn/start`` begins (every writer writes ``type`` first).
_TURN: Final = b'{"type":"turn/start",'
#: What flushing again does after a write that could not reach its node.
_AGAIN: Final = ("check that the server runs and can be reached; the batch may have landed "
                 "before the failure: flushing again finds it stored and writes it once, "
                 "never twice")


def _score(header: SessionHeader) -> int | float:
    """The session's score in the index: its ``createdAt`` (0 when it has none)."""
    return header.created_at if isinstance(header.created_at, int | float) else 0


def _lines(jsonl: bytes, events: Sequence[Event]) -> tuple[bytes, list[bytes]]:
    """The batch's block of lines and its lines, encoded from ``events`` when ``jsonl``
    does not hold one line per event (a caller that gave none)."""
    lines = jsonl.split(b"\n")[:-1] if jsonl else []
    if len(lines) != len(events):
        jsonl = encode_events(events)
        lines = jsonl.split(b"\n")[:-1]
    return jsonl, lines


class RedisBackend(RedisReads, RedisProjections, RedisAsync):
    """Sessions on one Redis server (a database of it, keys under a prefix) or a Redis
    Cluster (keys under a prefix), shared by every host that connects to it.

    :param url: a ``redis://`` or ``rediss://`` URL (:mod:`.url`), naming a server or
        any node of a cluster (:mod:`.nodes`).
    :param create: unused: a Redis store needs nothing made (a prefix with no key holds
        no session).
    :raises StoreUrlError: the URL is not one (:func:`parse_redis_url`), or it names a
        database other than 0 of a cluster.
    :raises MissingExtraError: redis-py is not installed.
    :raises PersistenceError: the server is older than Redis 7.0.
    :raises redis.ConnectionError: the server cannot be reached.
    """

    name = "session-persistence-redis"

    def __init__(self, url: str, *, create: bool = True) -> None:
        try:
            import redis
        except ImportError as exc:
            msg = "the Redis backend"
            raise MissingExtraError(msg, "redis",
                                    "dsh-session-core[redis]") from exc
        self.target: RedisTarget = parse_redis_url(url)
        self.prefix = self.target.prefix
        self._redis = redis
        self._reach = Reach(redis, self.target)
        #: Whether the store is on a Redis Cluster.
        self.cluster: bool = self._reach.cluster
        self._client: Any = self._reach.client
        self._registered = {name: self._client.register_script(text) for name, text in (
            ("append", scripts.APPEND), ("write_rows", scripts.WRITE_ROWS),
            ("replace", scripts.REPLACE), ("delete", scripts.DELETE),
            ("acquire", scripts.ACQUIRE), ("renew", scripts.RENEW),
            ("release", scripts.RELEASE), ("drop_rows", scripts.DROP_ROWS),
            ("rows", scripts.ROWS), ("lines", scripts.LINES), ("state", scripts.STATE))}
        self._leases = Leases(self._reach, self._registered.__getitem__, self.keys,
                              self.target.lease)
        self._closed = threading.Event()

    @contextlib.contextmanager
    def _reaching(self, again: str) -> Iterator[None]:
        """Raise a write's failure to reach its node as an :class:`OSError` (the store
        names the session, and keeps the batch buffered), noting ``again``: what doing
        it again does; any other error as it is."""
        try:
            yield
        except Exception as exc:
            why = unavailable(self._redis, exc)
            if why is None:
                raise
            failed = builtins.ConnectionError(f"{why} ({type(exc).__name__}: {exc})")
            failed.add_note(again)
            raise failed from exc

    @property
    def location_url(self) -> str:
        """The URL without its password."""
        return self.target.shown

    def keys(self, session_id: str) -> SessionKeys:
        """The names of a session's keys."""
        return SessionKeys.of(self.prefix, session_id)

    @property
    def index_key(self) -> str:
        return self.prefix + INDEX

    def script(self, name: str) -> Any:
        return self._registered[name]

    # --- reading ------------------------------------------------------------------------

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session, or ``None``: its header and every line, in one script's reply
        (:data:`~.scripts.LINES`), decoded in one msgspec call."""
        found = self.lines_in(session_id, "-", "+", None)
        if found is None:
            return None
        head, lines = found
        header = parse_header(head, path=self.location_url)
        jsonl = b"".join(line + b"\n" for line in lines)
        log = self.keys(session_id).log

        def entry_at(at: int) -> str:  # only for a damaged stream's error
            return f"{self._client.xrange(log, count=at + 1)[-1][0].decode()} of {log}"

        events = checked_events(registry, jsonl, session_id, self.location_url, entry_at)
        return StoredLog(header, events, None, jsonl)

    def load_live(self, session_id: str, cwd: str | None, registry: EventRegistry
                  ) -> StoredLog | None:
        """Same as :meth:`load_stored`: ids are global in a store."""
        return self.load_stored(session_id, registry)

    def list(self) -> builtins.list[SessionHeader]:
        """Every session's header, oldest first (the index, by ``createdAt``)."""
        heads = [self.keys(sid.decode("utf-8", "surrogatepass")).head
                 for sid in self._client.zrange(self.index_key, 0, -1)]
        headers = []
        for chunk in range(0, len(heads), 1000):
            some = heads[chunk:chunk + 1000]

            def queue(pipe: Any, at: int, some: list[str] = some) -> None:
                pipe.hget(some[at], "h")

            found = self._reach.pipelined(some, queue, 1)
            # An entry with no session (see the module) has no header: left out.
            headers += [parse_header(h) for (h,) in found if h is not None]
        return headers

    def location(self, header: SessionHeader) -> str:
        """The store's URL (without password); ids are global in it."""
        return self.location_url

    def check_id(self, session_id: str) -> None:
        """The common rule (:func:`~.base.check_common_id`): a Redis key holds any bytes."""
        check_common_id(session_id, self.name)

    def exists(self) -> bool:
        """Always: a Redis store needs nothing made."""
        return True

    def store_identity(self) -> Hashable | None:
        """The server, the database and the prefix, whatever else the URL says; on a
        cluster, its nodes and the prefix, whichever node the URL names."""
        if self.cluster:
            return ("redis-cluster", *self._reach.cluster_nodes(), self.prefix)
        return self.target.identity()

    # --- writing ------------------------------------------------------------------------

    def append_batch(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     materialized: bool) -> None:
        """Append a contiguous batch: one script, which checks the lease and the stored
        log's last seq first (see the module).

        :raises SessionLockedError: another writer took the session's lease over.
        :raises PersistenceError: the stored log does not end right before the batch.
        :raises ConnectionError: the server could not be reached (:meth:`_reaching`).
        """
        self._append(header, events, jsonl, materialized, ())

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        """:meth:`append_batch`, and the rows' ``changes`` in the same script."""
        self._append(header, events, jsonl, materialized, changes)

    def _append(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                materialized: bool, changes: Sequence[RowChanges]) -> None:
        if not events:
            if changes:
                self.write_rows(header, changes)
            return
        with self._reaching(_AGAIN):
            if self.cluster and not materialized:
                self._append_indexed(header, events, jsonl, changes)
            else:
                self._append_script(header, events, jsonl, materialized, changes)

    def _append_indexed(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                        changes: Sequence[RowChanges]) -> None:
        """A session's first append on a cluster: its index entry first (a key of its
        own slot: no script can write both), then the session; a refused batch takes
        back the entry it added (see the module)."""
        score = _score(header)
        if self.target.wait:  # a failover must not lose the entry of a session it keeps
            added, acked = self._reach.then_wait(
                self.index_key, lambda pipe: pipe.zadd(self.index_key, {header.id: score},
                                                       nx=True),
                self.target.wait, self.target.wait_timeout)
            self._replicated(header.id, acked, "its index entry")
        else:
            added = self._client.zadd(self.index_key, {header.id: score}, nx=True)
        try:
            self._append_script(header, events, jsonl, False, changes)
        except (PersistenceError, SessionLockedError):
            if added and not self._client.exists(self.keys(header.id).head):
                self._client.zrem(self.index_key, header.id)
            raise
        if not added:  # an entry left before (a retry's, a crash's): this one's score
            self._client.zadd(self.index_key, {header.id: score}, xx=True)

    def _append_script(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                       materialized: bool, changes: Sequence[RowChanges]) -> None:
        call_keys, args, before, lines = self._append_call(header, events, jsonl,
                                                           materialized, changes)
        lease = self._leases.held(header.id)
        for attempt in (1, 2):
            args[0] = "" if lease is None else lease.token
            got, acked = self._eval("append", call_keys, args)
            why = got[0]
            if why == b"ok":
                self._replicated(header.id, acked, "the batch")
                return
            if why == b"lost" and lease is not None and attempt == 1:
                # Expired or released, and nobody holds it: take it again and retry;
                # the script's seq check keeps the retry from skipping anyone's events.
                self._leases.retake(lease)
                continue
            break
        self._refused(header.id, got, self.keys(header.id), before, lines)
        # A retry that found its batch stored (its reply was lost): waited for too.
        self._replicated(header.id, acked, "the batch")

    def _eval(self, name: str, keys: Sequence[Any], args: Sequence[Any]
              ) -> tuple[Any, int | None]:
        """Script ``name``'s reply, and, with the URL's ``wait``, how many replicas had
        its writes after it (``WAIT`` on its connection; ``None``: no waiting)."""
        script = self.script(name)
        if not self.target.wait:
            return script(keys=keys, args=args), None
        for attempt in (1, 2):
            try:
                got, acked = self._reach.then_wait(
                    keys[0], lambda pipe: pipe.evalsha(script.sha, len(keys), *keys, *args),
                    self.target.wait, self.target.wait_timeout)
                return got, acked
            except self._redis.exceptions.NoScriptError:
                if attempt == 2:
                    raise
                script.sha = self._reach.client_of(keys[0]).script_load(script.script)
        raise AssertionError  # pragma: no cover - the loop returns or raises

    def _replicated(self, session_id: str, acked: int | None, what: str) -> None:
        """Refuse to report durable what fewer replicas have than the URL's ``wait``
        asks (an :class:`OSError`: the store keeps the batch buffered)."""
        if acked is None or acked >= self.target.wait:
            return
        failed = builtins.ConnectionError(
            f"{what} of session {session_id!r} is on the Redis primary, but {acked} of the "
            f"{self.target.wait} replicas the URL waits for (wait={self.target.wait}) had "
            f"it after {self.target.wait_timeout:g} s; not reported durable: a failover "
            f"now could lose it")
        failed.add_note("flushing again finds the batch stored and waits for the "
                        "replicas again")
        raise failed

    def _append_call(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     materialized: bool, changes: Sequence[RowChanges]
                     ) -> tuple[builtins.list[str], builtins.list[Any], int,
                                builtins.list[bytes]]:
        """The append script's keys and arguments for a batch (the first argument, the
        lease's token, is the caller's to set at each attempt), the seq the stored log
        must end at, and the batch's lines: what :meth:`_append_script` and its asyncio
        twin (:meth:`~.aio.RedisAsync.aappend_batch`) send."""
        keys = self.keys(header.id)
        jsonl, lines = _lines(jsonl, events)
        before = events[0].seq - 1
        head = b"" if materialized else ENCODER.encode(header)
        # On a cluster the index is not in the session's slot: the script is given the
        # head in its place, and no score (it adds no entry; _append_indexed does).
        index, score = ((keys.head, "") if self.cluster
                        else (self.index_key, repr(_score(header))))
        extra_keys, extra_args = change_args(keys, changes)
        turns = sum(line.startswith(_TURN) for line in lines)
        return ([keys.log, keys.head, keys.lease, keys.marks, keys.summaries, index,
                 *extra_keys],
                ["", self._leases.ttl_ms, before, head, header.id, score, turns,
                 len(jsonl), len(lines), *lines, *extra_args],
                before, lines)

    def _refused(self, session_id: str, got: Sequence[Any], keys: SessionKeys,
                 before: int, lines: Sequence[bytes]) -> None:
        landed = scripts.landed_ids(got, before, len(lines))
        if landed is not None:
            # Already there? A retry of a batch whose reply was lost finds its own lines.
            stored = self._client.xrange(keys.log, *landed)
            if [fields[b"l"] for _, fields in stored] == list(lines):
                return
        raise scripts.refusal(session_id, got, before)

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        """Apply ``changes`` to the session's rows alone, in one script."""
        if not changes:
            return
        keys = self.keys(header.id)
        extra_keys, extra_args = change_args(keys, changes)
        with self._reaching("writing the rows again writes the same rows"):
            self.script("write_rows")(keys=[keys.marks, keys.summaries, *extra_keys],
                                      args=extra_args)

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        """Cut the entries from seq ``torn`` on (iff it is not ``None``: the stream's top
        goes back with them, so the closers' ids are above it), then add the
        ``closers``; one script. A batch is one script, so nothing is ever torn: a cut
        is asked for only by a caller that knows better."""
        if torn is not None and type(torn) is not int:
            msg = f"a Redis torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        if torn is None:
            # Nothing to cut: the closers are a batch after the stored log, appended as
            # one (its seq checked), so that the client's retry of one that landed (its
            # reply lost) is recognised, not added twice under seqs above their own.
            self._append(header, closers, jsonl, True, ())
            return
        self._replace(header, "repair", str(torn), b"", closers, jsonl)

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the stream with ``events`` and the header with ``header``, and drop
        the projections' rows, in one script (the old log or the new one, whole)."""
        self._replace(header, "rewrite", "", ENCODER.encode(header), events, jsonl)

    def _replace(self, header: SessionHeader, mode: str, torn: str, head: bytes,
                 events: Sequence[Event], jsonl: bytes) -> None:
        keys = self.keys(header.id)
        jsonl, lines = _lines(jsonl, events)
        turns = sum(line.startswith(_TURN) for line in lines)
        with self._reaching(f"the {mode} may have landed before the failure: the session's "
                            f"next load shows which"):
            got = self.script("replace")(
                keys=[keys.log, keys.head, keys.lease, keys.marks, keys.summaries],
                args=[self._leases.token_of(header.id), self._leases.ttl_ms, mode, torn,
                      head, keys.base, turns, len(jsonl), len(lines), *lines])
        if got[0] == b"missing":
            raise not_found(header.id, self.location_url)
        if got[0] != b"ok":
            self._refused(header.id, got, keys, -2, [])

    # --- the lease ----------------------------------------------------------------------

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lease (:mod:`.lease`), without waiting.

        :raises SessionLockedError: another writer, on any host, holds it.
        """
        with self._reaching("the lease may have been taken before the failure: taking it "
                            "again finds this process's lease gone with its connection"):
            lease: WriterLock = self._leases.take(header.id)
        return lease

    # --- deleting -----------------------------------------------------------------------

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove every key of the session (its log, header, lease, projections' rows)
        and its index entry in one script, holding its lease (taken and released here).

        :raises SessionLockedError: a writer, on any host, holds the session.
        :raises SessionNotStoredError: no session of this id.
        """
        keys = self.keys(session_id)
        if not self._client.exists(keys.head):
            raise not_found(session_id, self.location_url)
        lease = self._leases.take(session_id)
        try:
            return self._remove(session_id, lease, dry_run=dry_run)
        finally:
            lease.release()

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, under the lease the caller took (:meth:`acquire`) and
        releases."""
        if not isinstance(lock, Lease):
            return self.delete(session_id)
        return self._remove(session_id, lock, dry_run=False)

    def _remove(self, session_id: str, lease: Lease, *, dry_run: bool) -> Deleted:
        keys = self.keys(session_id)
        # Measured first: the client retries a removal whose reply was lost, and the
        # retry finds the session gone with the lease it held; what it removed is this.
        measured = None if dry_run else self._remove(session_id, lease, dry_run=True)
        got = self.script("delete")(
            keys=[keys.log, keys.head, keys.lease, keys.epoch, keys.marks, keys.summaries,
                  keys.head if self.cluster else self.index_key],
            args=[lease.token, "1" if dry_run else "0", keys.base, session_id])
        # On a cluster the index is not in the session's slot: its entry goes after the
        # script (a crash between leaves an entry with no session, which listing skips).
        if (got[0] != b"ok" and measured is not None
                and not self._client.exists(keys.head, keys.lease)):
            if self.cluster:
                self._client.zrem(self.index_key, session_id)
            return dataclasses.replace(measured, status="deleted")
        if got[0] == b"missing":
            raise not_found(session_id, self.location_url)
        if got[0] != b"ok":
            self._refused(session_id, got, keys, -2, [])
        if self.cluster and not dry_run:
            self._client.zrem(self.index_key, session_id)
        header = parse_header(got[1])
        events, size, last = int(got[2]), int(got[3]), got[4]
        where = self.location_url
        return Deleted(
            session_id, "would-delete" if dry_run else "deleted", where,
            (f"{where}: the keys of {session_id!r} ({events} stream entries)",),
            len(ENCODER.encode(header)) + 1 + size, events, header,
            time_of(last) if last else None)

    def scrub(self) -> str:
        """Make what deletes left in the server's files unreadable
        (:class:`~..capabilities.Scrubbable`, :func:`~.scrub.scrub_server`): its
        append-only file rewritten and its snapshot saved anew, as far as it keeps them,
        each waited for (on a cluster, on each primary); what the server keeps beyond
        them is said.

        :raises PersistenceError: the server refused a step, or a step failed: the
            message says what was done and what was not.
        """
        from .scrub import scrub_server

        if not self.cluster:
            return scrub_server(self._client, self.location_url)
        # A cluster: each primary keeps the files of its own slots.
        done, failed = [], []
        for node in self._client.get_primaries():
            try:
                done.append(scrub_server(self._client.get_redis_connection(node),
                                         f"the primary {node.name}"))
            except PersistenceError as exc:
                failed.append(str(exc))
        if failed:
            raise PersistenceError("; ".join([*failed, *done]), session_id="")
        return "; ".join(done)

    # --- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Release every lease still held, and close the connections (each event loop's
        asyncio client on its loop: :meth:`~.aio.RedisAsync.aclose` closes the running
        loop's at once)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._leases.close()
        self._reach.close()
        self._close_loops()
