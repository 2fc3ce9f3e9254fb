"""Faults on the Redis backend, each against a ``redis-server`` the test starts itself
(durable: ``appendonly yes``, ``appendfsync always``, so a write it acknowledged
outlives a SIGKILL), as the other backends' fault suites inject theirs
(test_faults.py, test_write_faults.py, test_fault_regressions.py):

- **The server killed** between batches, and under a writer streaming appends: the
  flush fails, in a bounded time, as a :class:`StoreWriteError` naming the session and
  the store (never the driver's error); nothing reported durable is lost when the
  server starts again on its files; the writer goes on, or, killed with the server, a
  new writer after its lease. The command line says so in one line.
- **A connection dropped in the middle of a script**, by a TCP proxy between the
  client and the server (:class:`Proxy`): the server ran the batch and the reply was
  lost (the retry recognises it, and writes nothing twice), or the request never
  reached it (the retry writes it once), or every reply is lost (the flush fails; the
  next one writes the batch once). The same for a crash repair's closers and a
  removal. Where the client does not retry (redis-py 5), the flush fails clearly and
  the next one is the retry: both are accepted, nothing else.
- **A lease that expires during a batch**: the writer's process is stopped between
  building its batch and sending it (SIGSTOP), until its lease has expired (the test
  waits on the lease key) and another writer took the session; resumed, its batch is
  refused, and nothing of it lands.
- **A stream damaged by hand** (an entry that is no log line, one out of order): a load
  refuses it, naming the session, the seq and the entry, and changes nothing.

After each, the stored log is checked as a fresh process reads it: its seqs contiguous,
no problem in a strict validation, the header's counts (turns, bytes, events) those of
its lines, and, where the store keeps the contract projection, its rows the fold of the
log.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from projection_support import assert_rows_are_the_fold, plugins

from dsh_session_core import DurableStore, Session, core_registry, to_wire
from dsh_session_core._logformat.check import check_log
from dsh_session_core._persistence.backends.redis import scripts
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.backends.redis.faults import checked_events
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core._schema.codec import ENCODER
from dsh_session_core.errors import (
    LogFormatError,
    PersistenceError,
    SessionExistsError,
    SessionLockedError,
    StoreWriteError,
)
from dsh_session_core.testing import run_cli, session_header, user_turn
from dsh_session_core.testing.redis import RedisServer

PREFIX = "f:"
#: The longest a flush may take to give up on a server that is gone (redis-py retries a
#: command whose connection failed, a few seconds in all).
GIVE_UP = 60.0
#: The longest a test waits for a condition (a lease to expire, a process to stop).
PATIENCE = 60.0


def _sha(text: str) -> bytes:
    return hashlib.sha1(text.encode()).hexdigest().encode()


#: The scripts' SHA1s, as ``EVALSHA`` sends them: what the proxy watches for.
APPEND = _sha(scripts.APPEND)
REPLACE = _sha(scripts.REPLACE)


@pytest.fixture(params=[False, True], ids=["no-projection", "projecting"])
def projecting(request: pytest.FixtureRequest) -> bool:
    """Whether the store keeps the contract projection (its rows in the batch's script)."""
    return bool(request.param)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A durable ``redis-server`` of this test's own, on a free port."""
    srv = RedisServer(tmp_path / "redis", durable=True).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def raw(server: RedisServer) -> Iterator[Any]:
    """A plain client of the server (its replies bytes), every script loaded, so that
    the first ``EVALSHA`` of each runs it (not a ``NOSCRIPT`` reply)."""
    client: Any = redis.Redis(port=server.port)
    for text in (scripts.APPEND, scripts.REPLACE, scripts.LINES, scripts.ACQUIRE,
                 scripts.RENEW, scripts.RELEASE, scripts.WRITE_ROWS, scripts.ROWS,
                 scripts.DELETE):
        client.script_load(text)
    yield client
    client.close()


def _url(port: int, lease: float | None = None) -> str:
    extra = "" if lease is None else f"&lease={lease:g}"
    return f"redis://127.0.0.1:{port}/0?prefix={PREFIX}{extra}"


def _store(url: str, projecting: bool = False) -> DurableStore:
    return DurableStore(RedisBackend(url), plugins(projecting))


def _keys(sid: str) -> SessionKeys:
    return SessionKeys.of(PREFIX, sid)


def _wait(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds (polled), or fail saying ``what`` never came."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {PATIENCE} s"
        time.sleep(0.01)  # polling a condition, not waiting out a race


def _lines(url: str, sid: str) -> list[bytes]:
    """The session's log lines, as a fresh backend loads them."""
    backend = RedisBackend(url)
    try:
        stored = backend.load_stored(sid, core_registry())
        assert stored is not None
        assert stored.jsonl is not None
        return stored.jsonl.splitlines()
    finally:
        backend.close()


def _check(url: str, sid: str, want: list[bytes] | None = None,
           projecting: bool = False) -> list[dict[str, Any]]:
    """The stored session as a fresh store reads it: its lines ``want`` (when given),
    its seqs contiguous, valid by a strict check, the head's counts its lines', and its
    projection the fold of its log; its events (wire)."""
    store = _store(url, projecting)
    try:
        stored = store.backend.load_stored(sid, store.registry)
        assert stored is not None
        assert stored.jsonl is not None
        lines = stored.jsonl.splitlines()
        if want is not None:
            assert lines == want
        assert [e.seq for e in stored.events] == list(range(len(lines)))
        assert check_log(stored.events, store.registry, strict=True) == []
        client: Any = redis.Redis.from_url(url.partition("?")[0])
        try:
            keys = _keys(sid)
            turns, size = client.hmget(keys.head, "turns", "bytes")
            assert (int(turns), int(size)) == (
                sum(e.type == "turn/start" for e in stored.events), len(stored.jsonl))
            assert client.xlen(keys.log) == len(lines)
        finally:
            client.close()
        [summary] = [x for x in store.backend.summaries() if x.header.id == sid]
        assert (summary.events, summary.turns) == (len(lines), int(turns))
        if projecting:
            assert_rows_are_the_fold(store, sid, fresh=lambda: _store(url, True))
        return [to_wire(e) for e in stored.events]
    finally:
        store.close()


def _texts(events: list[dict[str, Any]]) -> list[str]:
    """The user messages' texts, in log order."""
    return [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]


# --- the proxy ------------------------------------------------------------------------------


class Proxy:
    """A TCP proxy on a free loopback port, in front of a Redis server, that drops
    connections where a test says: the reply to a request holding a given script's
    SHA1 (the server ran it, the client never hears), such a request itself (the
    server never sees it), or the next connections (refused: a server restarting).

    One thread accepts, two a connection pump its bytes; ``close`` ends them all. A
    request is recognised by the SHA1 in its first bytes (``EVALSHA <sha> ...``): a
    client sends one command at a time on a connection and waits for its reply, so
    the next bytes the server sends on it are that reply.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        #: How many more replies, or requests, of each script to drop.
        self.drop_reply: Counter[bytes] = Counter()
        self.drop_request: Counter[bytes] = Counter()
        #: How many more connections to refuse.
        self.refuse = 0
        #: The scripts every other reply of which is dropped, from the next: each
        #: command answered on its retry only.
        self.every_other: set[bytes] = set()
        self._parity: Counter[bytes] = Counter()
        #: The requests of each script that reached the server, and were dropped.
        self.sent: Counter[bytes] = Counter()
        self.dropped: Counter[bytes] = Counter()
        self.watch: tuple[bytes, ...] = (APPEND,)
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return _url(self.port)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self._sockets.append(client)
                if self.refuse > 0:
                    self.refuse -= 1
                    client.shutdown(socket.SHUT_RDWR)
                    continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:  # the server is down: the client sees its connection end
                client.shutdown(socket.SHUT_RDWR)
                continue
            doomed = threading.Event()  # the next reply on this connection is dropped
            with self._lock:
                self._sockets.append(upstream)
                for src, dst, up in ((client, upstream, True), (upstream, client, False)):
                    pump = threading.Thread(target=self._pump, args=(src, dst, up, doomed),
                                            daemon=True)
                    self._threads.append(pump)
                    pump.start()

    def _seen(self, data: bytes, doomed: threading.Event) -> bool:
        """Count a watched request; whether to drop it. Arms ``doomed`` when its reply
        is to be dropped (before the request is forwarded: the reply may come at once)."""
        with self._lock:
            for sha in self.watch:
                if sha not in data:
                    continue
                if self.drop_request[sha] > 0:
                    self.drop_request[sha] -= 1
                    self.dropped[sha] += 1
                    return True
                self.sent[sha] += 1
                drop = sha in self.every_other and self._parity[sha] % 2 == 0
                self._parity[sha] += 1
                if not drop and self.drop_reply[sha] > 0:
                    self.drop_reply[sha] -= 1
                    drop = True
                if drop:
                    self.dropped[sha] += 1
                    doomed.set()
        return False

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool,
              doomed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if up and self._seen(data, doomed):
                    break
                if not up and doomed.is_set():
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):  # one side ended: end both
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def heal(self) -> None:
        """Drop and refuse nothing more."""
        with self._lock:
            self.drop_reply.clear()
            self.drop_request.clear()
            self.every_other.clear()
            self.refuse = 0

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accepting thread (close does not)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join()
        for sock in self._sockets:
            sock.close()


@pytest.fixture
def proxy(server: RedisServer, raw: Any) -> Iterator[Proxy]:
    """A proxy in front of this test's server (its scripts loaded)."""
    px = Proxy(server.port)
    yield px
    px.close()


def _retries(store: DurableStore) -> int:
    """How many times the backend's client retries a command whose connection failed
    (redis-py 6 and later do, by default; 5 does not)."""
    policy = store.backend._client.get_retry()  # type: ignore[attr-defined]
    return 0 if policy is None else int(policy.get_retries())


def _flush_through(store: DurableStore, s: Session, proxy: Proxy, failures: int = 1) -> None:
    """Flush through ``failures`` connections dropped or refused in a row: within the
    client's retries, the flush succeeds; beyond them, it fails clearly, and the next
    flush, the fault over, is the retry."""
    if _retries(store) >= failures:
        store.flush(s)
        return
    with pytest.raises(StoreWriteError):
        store.flush(s)
    proxy.heal()
    store.flush(s)


# --- the server killed ----------------------------------------------------------------------


def test_a_flush_while_the_server_is_down_fails_clearly_and_the_next_writes_once(
    server: RedisServer, projecting: bool
) -> None:
    url = _url(server.port)
    store = _store(url, projecting)
    s = store.create("down", cwd="/w")
    user_turn(s, 1, "one")
    store.flush(s)
    durable = s.jsonl().splitlines()
    server.kill()
    user_turn(s, 2, "two")
    began = time.monotonic()
    with pytest.raises(StoreWriteError) as info:
        store.flush(s)
    assert time.monotonic() - began < GIVE_UP
    exc = info.value
    assert isinstance(exc, PersistenceError)
    assert isinstance(exc, OSError)
    assert not isinstance(exc.__cause__, redis.RedisError)  # ours, the driver's below it
    assert isinstance(exc.__cause__.__cause__, redis.ConnectionError)  # type: ignore[union-attr]
    assert (exc.session_id, exc.path) == ("down", url)
    message = str(exc)
    assert f'flushing session "down" at {url} failed: the Redis server did not answer' in message
    assert "writes it once, never twice" in message
    assert "flush again" in message
    server.start()  # on its port and its files
    _check(url, "down", durable, projecting)  # what was durable; nothing of the failed batch
    store.flush(s)  # the retry: once
    user_turn(s, 3, "three")
    store.flush(s)
    store.close()
    events = _check(url, "down", s.jsonl().splitlines(), projecting)
    assert _texts(events) == ["one", "two", "three"]


_STREAMER = textwrap.dedent("""
    import sys
    from dsh_session_core import DurableStore, create_plugin_manager
    from dsh_session_core._persistence.backends.redis.backend import RedisBackend
    from dsh_session_core.testing import user_turn

    store = DurableStore(RedisBackend(sys.argv[1]), create_plugin_manager(autoload=False))
    s = store.create("stream", cwd="/w")
    turn = 0
    while True:
        turn += 1
        user_turn(s, turn, f"q{turn} " + "x" * 2000)
        while True:
            try:
                store.flush(s)
                break
            except Exception as exc:
                print("failed", type(exc).__name__, flush=True)
                if sys.stdin.readline().strip() != "go":
                    sys.exit(1)
        print("durable", s.seq, flush=True)  # the log's length
""")


def test_a_writer_streaming_appends_loses_nothing_durable_when_the_server_is_killed(
    server: RedisServer,
) -> None:
    """The server is killed three times under a writer appending a turn a flush. Twice
    the writer's flush fails, the server starts again, and the writer goes on (its
    failed batch written once, whether it had landed or not); the third time the
    writer is killed too (its host lost), and a new writer takes the session after its
    lease. Every event reported durable is there each time."""
    url = _url(server.port, lease=1)
    writer = subprocess.Popen([sys.executable, "-c", _STREAMER, url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdin is not None
    assert writer.stdout is not None
    durable = 0  # the longest log a flush reported durable
    try:
        for round_ in range(3):
            for _ in range(3 + 2 * round_):  # the kill lands in the next turn
                word, length = writer.stdout.readline().split()
                assert word == "durable"
                durable = int(length)
            server.kill()
            while (line := writer.stdout.readline().split())[0] == "durable":
                durable = int(line[1])  # flushed before the kill
            assert line == ["failed", "StoreWriteError"]
            if round_ == 2:
                writer.kill()  # its host lost, and with it the process
                writer.wait()
            server.start()
            stored = _lines(url, "stream")
            assert len(stored) >= durable  # nothing reported durable is lost
            if round_ < 2:
                writer.stdin.write("go\n")  # flush again, and go on
                writer.stdin.flush()
        # The new writer waits out the dead writer's lease (1 s), then goes on.
        store = _store(url)

        def taken() -> bool:
            try:
                store.open("stream")
            except SessionLockedError:
                return False
            return True

        _wait(taken, "the dead writer's lease never ended")
        s = store.get("stream")
        assert s is not None
        assert s.seq >= durable
        turn = sum(e.type == "turn/start" for e in s.events) + 1
        user_turn(s, turn, "after")
        store.flush(s)
        store.close()
    finally:
        writer.kill()
        writer.wait()
        writer.stdin.close()
        writer.stdout.close()
    events = _check(url, "stream")
    texts = _texts(events)
    assert len(events) >= durable + 3
    # Each turn once, in order: a batch retried after a kill was not written twice.
    assert [t.split()[0] for t in texts[:-1]] == [f"q{n}" for n in range(1, len(texts))]
    assert texts[-1] == "after"


def test_cli_on_a_killed_server_says_so_in_one_line(server: RedisServer) -> None:
    url = _url(server.port)
    store = _store(url)
    user_turn(store.create("cli", cwd="/w"), 1)
    store.close()
    server.kill()
    code, out, err = run_cli("ls", "--store", url)
    assert (code, out) == (1, b"")
    assert err.startswith(f"dsh-session: cannot open the store {url}: ConnectionError: ")
    assert "check that the server runs" in err
    assert "internal error" not in err
    assert "Traceback" not in err


# --- a connection dropped in the middle of a script -----------------------------------------


@pytest.mark.parametrize("first", [True, False], ids=["first-write", "later-batch"])
def test_a_batch_whose_reply_is_lost_is_recognised_not_written_twice(
    proxy: Proxy, projecting: bool, first: bool
) -> None:
    """The server ran the batch (its rows too) and the connection dropped before its
    reply: the retry finds the batch stored, and succeeds without writing it again."""
    store = _store(proxy.url, projecting)
    s = store.create("lost", cwd="/w")
    user_turn(s, 1, "one")
    if not first:
        store.flush(s)
        user_turn(s, 2, "two")
    sent = proxy.sent[APPEND]
    proxy.drop_reply[APPEND] = 1
    _flush_through(store, s, proxy)
    assert proxy.dropped[APPEND] == 1
    # The server ran it twice: the batch, then the retry, refused and recognised.
    assert proxy.sent[APPEND] - sent == 2
    user_turn(s, 3, "three")
    store.flush(s)
    store.close()
    events = _check(proxy.url, "lost", s.jsonl().splitlines(), projecting)
    assert _texts(events) == (["one", "three"] if first else ["one", "two", "three"])


@pytest.mark.parametrize("outage", [0, 2], ids=["dropped", "dropped-then-refused"])
def test_a_batch_whose_request_is_lost_is_written_once(
    proxy: Proxy, projecting: bool, outage: int
) -> None:
    """The request never reaches the server (and, ``outage``, the next connections are
    refused, as by a server starting again): the retry writes the batch, once."""
    store = _store(proxy.url, projecting)
    s = store.create("unsent", cwd="/w")
    user_turn(s, 1, "one")
    store.flush(s)
    user_turn(s, 2, "two")
    sent = proxy.sent[APPEND]
    proxy.drop_request[APPEND] = 1
    proxy.refuse = outage
    _flush_through(store, s, proxy, 1 + outage)
    assert proxy.dropped[APPEND] == 1
    assert proxy.sent[APPEND] - sent == 1  # it reached the server once
    store.close()
    events = _check(proxy.url, "unsent", s.jsonl().splitlines(), projecting)
    assert _texts(events) == ["one", "two"]


@pytest.mark.parametrize("first", [True, False], ids=["first-write", "later-batch"])
def test_a_batch_whose_every_reply_is_lost_fails_clearly_and_is_written_once(
    proxy: Proxy, first: bool
) -> None:
    """The server runs the batch but no reply gets through, retry after retry: the
    flush fails as a write that failed (never as another writer's session, which a
    first write found stored would otherwise be taken for), and the next flush, the
    replies back, writes nothing twice. (The first write keeps the contract projection:
    its rows ride in the same script.)"""
    store = _store(proxy.url, projecting=first)
    s = store.create("mute", cwd="/w")
    user_turn(s, 1, "one")
    if not first:
        store.flush(s)
        user_turn(s, 2, "two")
    proxy.drop_reply[APPEND] = 1000
    with pytest.raises(StoreWriteError, match='flushing session "mute"') as info:
        store.flush(s)
    assert not isinstance(info.value, SessionExistsError)
    assert proxy.dropped[APPEND] >= 1
    proxy.heal()
    store.flush(s)
    user_turn(s, 3, "three")
    store.flush(s)
    store.close()
    events = _check(proxy.url, "mute", s.jsonl().splitlines(), projecting=first)
    assert _texts(events) == (["one", "three"] if first else ["one", "two", "three"])


def test_a_crash_repair_whose_reply_is_lost_adds_its_closers_once(
    proxy: Proxy, raw: Any
) -> None:
    """A writer died in a turn; the next one's repair closes it. The repair's reply is
    lost: the client's retry must not add the closers again (under seqs above their
    own: a log no one could load)."""
    crashed = _store(proxy.url)
    s = crashed.create("torn", cwd="/w")
    user_turn(s, 1, "one")
    user_turn(s, 2, "two", end=False)
    crashed.flush(s)
    crashed.persistence.backend.close()  # the process dies: its lease goes, its turn stays open
    # The closers go as an append, or (as they once did) by the repair's own script.
    proxy.watch = (APPEND, REPLACE)
    proxy.drop_reply.update({APPEND: 1, REPLACE: 1})
    store = _store(proxy.url)
    if _retries(store) < 1:  # the client gives up: the next open is the retry
        with pytest.raises(StoreWriteError, match="writing the crash repair of"):
            store.open("torn")
        proxy.heal()
    reopened = store.open("torn")
    assert proxy.dropped.total() == 1
    assert reopened.events[-1].type == "turn/end"
    store.close()
    events = _check(proxy.url, "torn")
    assert [e["type"] for e in events][-3:] == ["turn/start", "user/message", "turn/end"]
    assert events[-1]["data"]["reason"] == {"kind": "interrupted"}


@pytest.mark.parametrize("held", [False, True], ids=["delete", "delete-held"])
def test_a_removal_whose_reply_is_lost_reports_the_removal(
    proxy: Proxy, raw: Any, held: bool
) -> None:
    """Every reply of the removal's script is lost once, each command answered on its
    retry: the removal's retry finds the session gone with the lease it held, and says
    it removed it (not that its lease was taken over)."""
    store = _store(proxy.url)
    user_turn(store.create("gone", cwd="/w"), 1)
    store.close()
    delete = _sha(scripts.DELETE)
    proxy.watch = (delete,)
    proxy.every_other.add(delete)
    backend = RedisBackend(proxy.url)
    try:
        if _retries(store) < 1:
            pytest.skip("a client that does not retry: the removal fails, clearly")
        if held:
            removed = backend.delete_held("gone", backend.acquire(session_header("gone")))
        else:
            removed = backend.delete("gone")
    finally:
        backend.close()
    assert proxy.dropped[delete] >= 1
    assert raw.keys(PREFIX + "*") == []
    assert removed.header is not None
    assert (removed.status, removed.events, removed.header.id) == ("deleted", 3, "gone")


# --- a lease that expires during a batch ----------------------------------------------------

_STALLED = textwrap.dedent("""
    import os, signal, sys
    from dsh_session_core import DurableStore, create_plugin_manager
    from dsh_session_core._persistence.backends.redis.backend import RedisBackend
    from dsh_session_core.errors import DshSessionError, PersistenceError, SessionLockedError
    from dsh_session_core.testing import user_turn
    from dsh_session_core.testing.projection_contract import ContractPlugin

    class Stalling(RedisBackend):
        # Stops this process once the store built its batch, before the batch is sent:
        # a writer frozen mid-flush (a pause, a suspended host), past its lease.
        stall = False

        def _stop(self):
            if self.stall:
                self.stall = False
                os.kill(os.getpid(), signal.SIGSTOP)

        def append_batch(self, *args):
            self._stop()
            return super().append_batch(*args)

        def append_projected(self, *args):
            self._stop()
            return super().append_projected(*args)

    pm = create_plugin_manager(autoload=False)
    if sys.argv[2] == "1":
        pm.register(ContractPlugin(), "contract")
    backend = Stalling(sys.argv[1])
    store = DurableStore(backend, pm)
    s = store.create("fenced", cwd="/w")
    user_turn(s, 1, "mine")
    store.flush(s)
    print("ready", flush=True)
    user_turn(s, 2, "stalled")
    backend.stall = True
    try:
        store.flush(s)
        print("written", flush=True)
    except SessionLockedError as exc:
        print("locked", exc, flush=True)
    except PersistenceError as exc:
        print("refused", exc, flush=True)
    try:
        store.close()
    except* DshSessionError:  # its flush of what is buffered: refused again, if it was
        pass
""")

#: What the stalled writer's flush says, and whose texts the log then holds, by what
#: the second writer did while the first was stopped.
_STALLS = {
    "taken-and-written": ("locked", ["mine", "thief"]),
    "taken-and-held": ("locked", ["mine"]),
    "taken-written-released": ("refused", ["mine", "thief"]),
    "untaken": ("written", ["mine", "stalled"]),
}


@pytest.mark.parametrize("stall", list(_STALLS))
def test_a_writer_whose_lease_expires_during_a_batch_is_fenced_out(
    server: RedisServer, raw: Any, projecting: bool, stall: str
) -> None:
    url = _url(server.port, lease=1)
    lease = _keys("fenced").lease
    writer = subprocess.Popen([sys.executable, "-c", _STALLED, url, str(int(projecting))],
                              stdout=subprocess.PIPE, text=True)
    thief: DurableStore | None = None
    assert writer.stdout is not None
    try:
        assert writer.stdout.readline() == "ready\n"
        _, status = os.waitpid(writer.pid, os.WUNTRACED)  # it stopped itself, mid-flush
        assert os.WIFSTOPPED(status)
        # Its renewals stopped with it; its connection stays open: the lease expires.
        _wait(lambda: not raw.exists(lease), "the stopped writer's lease never expired")
        if stall != "untaken":
            thief = _store(url, projecting)
            t = thief.open("fenced")
            if stall != "taken-and-held":
                user_turn(t, 2, "thief")
                thief.flush(t)
            if stall == "taken-written-released":
                thief.close()
                thief = None
        os.kill(writer.pid, signal.SIGCONT)
        said = writer.stdout.readline()
        assert writer.wait(timeout=PATIENCE) == 0
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGCONT)
            writer.kill()
            writer.wait()
        writer.stdout.close()
        if thief is not None:
            thief.close()
    verdict, texts = _STALLS[stall]
    assert said.split()[0] == verdict, said
    if verdict == "locked":
        assert "lease was taken over" in said
        assert "nothing of it written" in said
    if verdict == "refused":
        assert "written by another writer" in said
    events = _check(url, "fenced", projecting=projecting)
    assert _texts(events) == texts


# --- a stream damaged by hand ---------------------------------------------------------------

_TS = (b'{"type":"turn/start","seq":%d,"time":1,"data":{"turn":3,"trigger":'
       b'{"kind":"message","source":{"kind":"user"}}}}')

#: An entry added after the six of two turns (seqs 0-5): its id, its fields, and what
#: the load's error says of it.
_DAMAGE = {
    "not-json": ("6-1", {"l": b"{not json"}, "unparsable committed event at seq 6", "6-1"),
    "invalid-utf8": ("6-1", {"l": (_TS % 6)[:-20] + b"\xff\xfe" + (_TS % 6)[-20:]},
                     "unparsable committed event at seq 6", "6-1"),
    "seq-gap": ("7-1", {"l": _TS % 7}, "seq gap in committed region (expected 6, got 7)",
                "7-1"),
    "seq-not-the-id": ("6-1", {"l": _TS % 9},
                       "seq gap in committed region (expected 6, got 9)", "6-1"),
    "seq-twice": ("5-2", {"l": _TS % 5}, "seq gap in committed region (expected 6, got 5)",
                  "5-2"),
    "another-field": ("6-1", {"x": b"1"},
                      "seq gap in committed region (expected 6, got no seq)", "6-1"),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_entry_is_refused_naming_the_session_and_the_seq(
    server: RedisServer, raw: Any, damage: str
) -> None:
    url = _url(server.port)
    with _store(url) as store:
        s = store.create("bad", cwd="/w")
        user_turn(s, 1)
        user_turn(s, 2)
    entry, fields, problem, named = _DAMAGE[damage]
    log = _keys("bad").log
    raw.xadd(log, fields, id=entry)
    before = (raw.xrange(log), raw.hgetall(_keys("bad").head))
    for how in ("open", "read_session"):
        with _store(url) as store, pytest.raises(LogFormatError) as info:
            getattr(store, how)("bad")
        message = str(info.value)
        assert message.startswith(f"corrupt session log: {problem}"), message
        assert f'session "bad", stream entry {named} of {log}' in message
        assert info.value.path == url
    assert (raw.xrange(log), raw.hgetall(_keys("bad").head)) == before  # nothing changed


_SEQS = st.one_of(st.integers(-2, 12), st.sampled_from([True, False, None, 1.0, "3", 2.5]))


@settings(max_examples=300, deadline=None)
@given(seqs=st.one_of(st.integers(0, 10).map(lambda n: list(range(n))),
                      st.lists(_SEQS, max_size=10)),
       bad=st.one_of(st.none(), st.integers(0, 9)))
def test_a_load_takes_a_stream_only_when_each_line_is_of_the_seq_of_its_place(
    seqs: list[Any], bad: int | None
) -> None:
    """The load's check, on lines of any seqs (or one line that is no JSON at ``bad``):
    it takes them exactly when each seq is its place's (an integer), else names the
    first place that is not."""
    lines = [b'{"type":"x/y","seq":%s,"time":1,"data":{}}' % ENCODER.encode(seq)
             for seq in seqs]
    if bad is not None and bad < len(lines):
        lines[bad] = b'{"type":'
    jsonl = b"".join(line + b"\n" for line in lines)
    named: list[int] = []

    def entry_at(at: int) -> str:
        named.append(at)
        return f"{at}-1 of log"

    places = [i for i, seq in enumerate(seqs)
              if i == bad or type(seq) is not int or seq != i]
    if not places:
        events = checked_events(core_registry(), jsonl, "s", "redis://h/0", entry_at)
        assert [e.seq for e in events] == seqs
        return
    with pytest.raises(LogFormatError) as info:
        checked_events(core_registry(), jsonl, "s", "redis://h/0", entry_at)
    first = places[0] if bad is None or bad >= len(lines) else min(bad, places[0])
    problem = ("unparsable committed event" if first == bad else "seq gap in committed region")
    assert str(info.value).startswith(f"corrupt session log: {problem}")
    assert named == [first]
    assert f'session "s", stream entry {first}-1 of log' in str(info.value)
    assert info.value.path == "redis://h/0"
