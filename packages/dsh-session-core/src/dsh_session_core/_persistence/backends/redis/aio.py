"""The Redis backend's asyncio side, on redis-py's asyncio client (``redis.asyncio``).

Batches, listing, the tail, following (``XREAD`` blocks on the event loop) and closing,
so that an asyncio host's event loop runs while the server works. A mixin of
:class:`~.redis.backend.RedisBackend`, which owns the URL, the scripts, what a batch
sends (:meth:`~.redis.backend.RedisBackend._append_call`), what a refusal raises
(:func:`~.scripts.refusal`) and the synchronous twins of these methods (keep them in
step). Not native: taking a lease again when a batch finds it expired, and releasing
the leases at the close, run in a thread (the leases are held on one synchronous
connection, :mod:`.lease`); so does a batch that waits for replicas (the URL's
``wait``) and a session's first batch on a cluster (its index entry is written beside
the script, :mod:`.nodes`).

A ``redis.asyncio`` client belongs to the event loop it first ran on, so each loop has
its own (:meth:`RedisAsync._async_client` makes it, the one place), kept by loop. It
is closed on its loop: by :meth:`RedisAsync.aclose`; else when the loop shuts its
asynchronous generators down (``asyncio.run`` does, before it closes the loop), as one
of them, started with the client, closes it when it is closed; else, when the backend
is closed from elsewhere while the loop runs, by a task handed to the loop. A loop
closed without shutting its asynchronous generators down leaves its client's sockets
to the garbage collector (redis-py warns of them).
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ...._logformat.logfile import parse_header
from ...._schema.header import SessionHeader
from ....events import Event
from ...base import LogNews, LogTail
from . import scripts
from .keys import SessionKeys, seq_of
from .nodes import NOT_ON_A_CLUSTER, unavailable
from .reads import SessionState, block_ms, cut_note, cut_to, entry_lines, read_after

if TYPE_CHECKING:
    from ...rows import RowChanges
    from .lease import Leases
    from .url import RedisTarget

__all__ = ["RedisAsync"]

#: Guards every backend's table of loops (two threads' loops may make theirs at once).
_GUARD = threading.Lock()

#: The tasks :meth:`RedisAsync._close_loops` handed to loops, held until done (a loop
#: holds its tasks weakly).
_CLOSING: set[asyncio.Task[None]] = set()

T = TypeVar("T")


async def _server(call: Awaitable[T]) -> T:
    """Await ``call`` (a redis-py command, pipeline or script), and raise a cancellation
    of the running task that came while it ran and was lost on the way: redis-py waits
    on its socket writes with ``asyncio.wait_for``, which on Python 3.11 returns the
    result of a write done in the same moment, and the cancellation with it
    (CPython gh-86296). A follower that lost one would never end."""
    task = asyncio.current_task()
    asked = 0 if task is None else task.cancelling()
    result = await call
    if task is not None and task.cancelling() > asked:
        raise asyncio.CancelledError
    return result


class _LoopClient:
    """One event loop's client, its scripts, and the asynchronous generator whose end
    closes the client (:meth:`RedisAsync._keep`)."""

    __slots__ = ("client", "keeper", "scripts")

    def __init__(self, client: Any, texts: dict[str, str]) -> None:
        self.client = client
        self.scripts = {name: client.register_script(text) for name, text in texts.items()}
        self.keeper: AsyncGenerator[None, None] | None = None


class RedisAsync:
    """The asyncio methods (:class:`~.redis.backend.RedisBackend` sets what is declared
    here)."""

    target: RedisTarget
    cluster: bool
    _redis: Any
    _leases: Leases
    #: Each event loop's client (made at the loop's first awaited operation).
    _aloops: dict[asyncio.AbstractEventLoop, _LoopClient] | None = None

    if TYPE_CHECKING:
        _registered: dict[str, Any]

        @property
        def index_key(self) -> str: ...

        def keys(self, session_id: str) -> SessionKeys: ...

        def _append_call(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool, changes: Sequence[RowChanges]
                         ) -> tuple[builtins.list[str], builtins.list[Any], int,
                                    builtins.list[bytes]]: ...

        def close(self) -> None: ...

        def append_batch(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool) -> None: ...

    # --- the clients --------------------------------------------------------------------

    def _async_client(self) -> Any:
        """A new asyncio client on the store's server (``self.target``'s), for the
        running event loop: the one place one is made (a cluster's is made here)."""
        import redis.asyncio

        if self.cluster:
            options = {k: v for k, v in self.target.options.items()
                       if k not in NOT_ON_A_CLUSTER}
            return redis.asyncio.cluster.RedisCluster(
                host=self.target.host, port=self.target.port, **options)
        return redis.asyncio.Redis(**self.target.options)

    async def _aclient(self) -> _LoopClient:
        """The running event loop's client, made at its first use."""
        loop = asyncio.get_running_loop()
        with _GUARD:
            if self._aloops is None:
                self._aloops = {}
            found = self._aloops.get(loop)
            if found is not None:
                return found
            # Loops closed without shutting their generators down: nothing to close on.
            for gone in [other for other in self._aloops if other.is_closed()]:
                del self._aloops[gone]
            texts = {name: script.script for name, script in self._registered.items()}
            made = self._aloops[loop] = _LoopClient(self._async_client(), texts)
        made.keeper = self._keep(loop, made)
        await made.keeper.asend(None)  # runs to its yield: the loop now knows of it
        return made

    async def _keep(self, loop: asyncio.AbstractEventLoop, made: _LoopClient
                    ) -> AsyncGenerator[None, None]:
        """Waits, as an asynchronous generator of the loop's, until it is closed (by
        :meth:`aclose`, or by the loop shutting its generators down), then closes the
        loop's client, on the loop."""
        try:
            yield
        finally:
            with _GUARD:
                if self._aloops is not None and self._aloops.get(loop) is made:
                    del self._aloops[loop]
            await made.client.aclose()

    async def _ascript(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return await _server((await self._aclient()).scripts[name](keys=keys, args=args))

    # --- writing ------------------------------------------------------------------------

    async def aappend_batch(self, header: SessionHeader, events: Sequence[Event],
                            jsonl: bytes, materialized: bool) -> None:
        """:meth:`~.redis.backend.RedisBackend.append_batch` for asyncio hosts: the same
        script with the same arguments, awaited on the event loop; the same checks, the
        same refusals (a writer whose lease was taken over, a batch that does not follow
        the stored log: nothing lands). A lease found expired and free is taken again in
        a thread (its connection is synchronous), then the batch retried once.

        :raises SessionLockedError: another writer took the session's lease over.
        :raises PersistenceError: the stored log does not end right before the batch.
        """
        if not events:
            return
        if self.target.wait or (self.cluster and not materialized):
            # Waiting for replicas, or a cluster's index entry beside the script: the
            # synchronous path's, in a thread.
            await asyncio.to_thread(self.append_batch, header, events, jsonl, materialized)
            return
        try:
            await self._aappend(header, events, jsonl, materialized)
        except Exception as exc:
            why = unavailable(self._redis, exc)
            if why is None:
                raise
            failed = builtins.ConnectionError(f"{why} ({type(exc).__name__}: {exc})")
            failed.add_note("check that the server runs and can be reached; the batch may "
                            "have landed before the failure: flushing again finds it "
                            "stored and writes it once, never twice")
            raise failed from exc

    async def _aappend(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                       materialized: bool) -> None:
        call_keys, args, before, lines = self._append_call(header, events, jsonl,
                                                           materialized, ())
        lease = self._leases.held(header.id)
        for attempt in (1, 2):
            args[0] = "" if lease is None else lease.token
            got = await self._ascript("append", call_keys, args)
            why = got[0]
            if why == b"ok":
                return
            if why == b"lost" and lease is not None and attempt == 1:
                # As the synchronous append: take it again, retry; the seq check holds.
                await asyncio.to_thread(self._leases.retake, lease)
                continue
            break
        landed = scripts.landed_ids(got, before, len(lines))
        if landed is not None:
            # Already there? A retry of a batch whose reply was lost finds its own lines.
            client = (await self._aclient()).client
            stored = await _server(client.xrange(self.keys(header.id).log, *landed))
            if entry_lines(stored) == lines:
                return
        raise scripts.refusal(header.id, got, before)

    # --- reading ------------------------------------------------------------------------

    async def alist(self) -> builtins.list[SessionHeader]:
        """:meth:`~.redis.backend.RedisBackend.list` for asyncio hosts: the index, then
        the headers in pipelines, each awaited on the event loop."""
        client = (await self._aclient()).client
        ids = await _server(client.zrange(self.index_key, 0, -1))
        headers = []
        for chunk in range(0, len(ids), 1000):
            pipe = client.pipeline(transaction=False)
            for sid in ids[chunk:chunk + 1000]:
                pipe.hget(self.keys(sid.decode("utf-8", "surrogatepass")).head, "h")
            headers += [parse_header(h) for h in await _server(pipe.execute())
                        if h is not None]
        return headers

    async def atail_lines(self, session_id: str, count: int) -> LogTail | None:
        """:meth:`~.reads.RedisReads.tail_lines` for asyncio hosts: the session's state
        script (one snapshot), awaited on the event loop."""
        keys = self.keys(session_id)
        state = SessionState(await self._ascript("state", [keys.log, keys.head], [max(count, 1)]))
        if not state.head:
            return None
        return LogTail(state.lines[::-1] if count > 0 else [], state.top)

    async def _astate(self, keys: SessionKeys) -> tuple[bool, int, int, int]:
        """:meth:`~.reads.RedisReads._state`, awaited."""
        state = SessionState(await self._ascript("state", [keys.log, keys.head], [1]))
        return bool(state.head), state.cuts, state.cut, state.top

    async def afollow_lines(self, session_id: str, position: object, *,
                            timeout: float | None = None
                            ) -> AsyncGenerator[LogNews, None]:
        """:meth:`~.reads.RedisReads.follow_lines` for asyncio hosts: ``XREAD`` blocks
        on the event loop (at most :data:`~.reads.BLOCK_SECONDS` at a time, between
        which it looks for a cut back), a cut back reported with a note. Closing it, or
        cancelling its consumer, ends the read (redis-py drops a connection whose read
        was cancelled)."""
        if type(position) is not int:
            msg = f"a Redis position is a seq (int), got {position!r}"
            raise TypeError(msg)
        keys = self.keys(session_id)
        client = (await self._aclient()).client
        seen = position
        stored, cuts, _, _ = await self._astate(keys)
        quiet_since = time.monotonic()
        while True:
            got = await _server(client.xread({keys.log: read_after(seen)},
                                             block=block_ms(timeout, quiet_since)))
            now = await self._astate(keys)
            top = cut_to(seen, stored, cuts, now)
            stored, cuts = now[0], now[1]
            if top is not None:
                seen = top
                quiet_since = time.monotonic()
                yield LogNews([], top, cut_note(top))
                continue
            entries = got[0][1] if got else []
            if entries:
                seen = seq_of(entries[-1][0])
                quiet_since = time.monotonic()
                yield LogNews(entry_lines(entries), seen)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return

    # --- lifetime -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close this event loop's client, on the loop; then everything
        :meth:`~.redis.backend.RedisBackend.close` closes, in a thread (releasing the
        leases is a round trip each on their synchronous connection)."""
        loop = asyncio.get_running_loop()
        with _GUARD:
            made = None if self._aloops is None else self._aloops.get(loop)
        if made is not None and made.keeper is not None:
            await made.keeper.aclose()  # its finally closes the client
        await asyncio.to_thread(self.close)

    def _close_loops(self) -> None:
        """For :meth:`~.redis.backend.RedisBackend.close`: each loop's client still open
        is closed on its loop, by a task handed to it (from any thread, without waiting:
        this may be the loop's own thread). A loop that ends first closes it as it shuts
        its generators down."""
        with _GUARD:
            loops, self._aloops = self._aloops or {}, None
        for loop, made in loops.items():
            if loop.is_closed() or made.keeper is None:
                continue
            keeper = made.keeper

            async def shut(keeper: AsyncGenerator[None, None] = keeper) -> None:
                await keeper.aclose()  # its finally closes the client

            def close(loop: asyncio.AbstractEventLoop = loop,
                      shut: Callable[[], Coroutine[Any, Any, None]] = shut) -> None:
                task = loop.create_task(shut())
                _CLOSING.add(task)
                task.add_done_callback(_CLOSING.discard)

            try:
                loop.call_soon_threadsafe(close)
            except RuntimeError:  # closed meanwhile
                continue
