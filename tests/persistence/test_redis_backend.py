"""What the Redis backend adds to the contract suite (which it passes too): the lease that
keeps one writer per session across hosts, its fencing (a writer whose lease was taken
over is refused before anything lands), the seq checks, a follower blocked on XREAD,
the keys a cut back or a removal resets. Every test runs against a real server and a
real Redis Cluster (three primaries), started by the testing kit's fixtures, in a key
prefix of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
import redis
import redis.cluster
from persist_support import ONE_TURN, TE, TS, meta

from dsh_session_core import core_registry
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.coordinator import PersistencePlugin
from dsh_session_core.errors import PersistenceError, SessionLockedError
from redis_support import stored_wires, wire_events


@pytest.fixture(params=["redis_url", "redis_cluster_url"], ids=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """A store of the test's own on the run's server, then on the run's cluster."""
    found: str = request.getfixturevalue(request.param)
    return found


def _raw(url: str) -> Any:  # redis-py is typed loosely: its replies are bytes here
    """A client of the store's server, or of its cluster."""
    server = url.partition("?")[0]
    probe = redis.Redis.from_url(server)
    if not probe.info("cluster").get("cluster_enabled"):
        return probe
    probe.close()
    return redis.cluster.RedisCluster.from_url(server)


def _kill_client(raw: Any, key: str, client_id: bytes) -> None:
    """Close the connection ``client_id`` of the node that holds ``key`` (connection
    ids are a node's)."""
    command = ("CLIENT", "KILL", "ID", client_id.decode())
    cluster: Any = raw  # redis-py is typed loosely
    if isinstance(raw, redis.cluster.RedisCluster):
        cluster.execute_command(*command, target_nodes=cluster.get_node_from_key(key))
    else:
        raw.execute_command(*command)


def _keys(url: str, sid: str) -> SessionKeys:
    return SessionKeys.of(url.partition("prefix=")[2], sid)


# --- the lease ----------------------------------------------------------------------------


def test_a_second_writer_is_refused_and_named(url: str) -> None:
    first, second = RedisBackend(url), RedisBackend(url)
    try:
        lease = first.acquire(meta("one"))
        with pytest.raises(SessionLockedError, match=rf"lease held by .*:{os.getpid()} on the "
                                                     r"Redis server, epoch 1"):
            second.acquire(meta("one"))
        second.acquire(meta("two")).release()  # another session is free
        lease.release()
        second.acquire(meta("one")).release()  # released: free for the next writer
    finally:
        first.close()
        second.close()


def test_a_dead_writers_lease_is_taken_over_at_once(url: str) -> None:
    """The holder's connection is gone (the server killed it, as when its process dies):
    the lease is taken at once, long before it would expire."""
    first = RedisBackend(url + "&lease=600")
    first.acquire(meta("orphan"))
    raw = _raw(url)
    lease = _keys(url, "orphan").lease
    holder = raw.hget(lease, "c")
    assert holder is not None
    _kill_client(raw, lease, holder)
    second = RedisBackend(url)
    try:
        second.acquire(meta("orphan")).release()
    finally:
        second.close()
        first.close()
        raw.close()


_WRITER = textwrap.dedent("""
    import sys, time
    from dsh_session_core import open_store
    store = open_store(sys.argv[1])
    s = store.create("killed")
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                  "source": {"kind": "user"}}})
    store.flush(s)
    print("ready", flush=True)
    time.sleep(600)
""")


def test_a_writer_killed_by_sigkill_leaves_its_session_to_the_next_at_once(
    url: str,
) -> None:
    from dsh_session_core import open_store

    url = url + "&lease=600"  # nothing expires during the test
    child = subprocess.Popen([sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        with open_store(url) as store, pytest.raises(SessionLockedError):
            store.open("killed")
        child.send_signal(signal.SIGKILL)
        child.wait()
        with open_store(url) as store:
            s = store.open("killed")
            assert [e.type for e in s.events][:1] == ["turn/start"]
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


# --- fencing ------------------------------------------------------------------------------


def test_a_writer_whose_lease_was_taken_over_is_refused_and_writes_nothing(
    url: str,
) -> None:
    """The writer stalls past its lease (played by removing the lease key, as its expiry
    does); another takes the session. The stalled writer's next batch follows the stored
    log exactly, so the seq check alone would let it in: the lease check refuses it."""
    p = PersistencePlugin(RedisBackend(url), core_registry())
    p.create(meta("taken", "/w"))
    p.append("taken", ONE_TURN[:3])
    raw = _raw(url)
    raw.delete(_keys(url, "taken").lease)
    thief = RedisBackend(url)
    lease = thief.acquire(meta("taken"))
    try:
        for _ in range(2):
            with pytest.raises(SessionLockedError, match=r"lease was taken over .*epoch 2"):
                p.append("taken", ONE_TURN[3:])
        assert stored_wires(url, "taken") == ONE_TURN[:3]
        lease.release()  # the thief is gone: the writer takes its lease back and goes on
        p.append("taken", ONE_TURN[3:])
    finally:
        lease.release()
        thief.close()
        p.close()
        raw.close()
    assert stored_wires(url, "taken") == ONE_TURN


def test_a_writer_whose_lease_expired_untaken_takes_it_back(url: str) -> None:
    p = PersistencePlugin(RedisBackend(url), core_registry())
    p.create(meta("lapsed", "/w"))
    p.append("lapsed", ONE_TURN[:3])
    raw = _raw(url)
    raw.delete(_keys(url, "lapsed").lease)
    p.append("lapsed", ONE_TURN[3:])
    assert raw.hget(_keys(url, "lapsed").lease, "e") == b"2"  # a new lease, epoch 2
    p.close()
    raw.close()
    assert stored_wires(url, "lapsed") == ONE_TURN


# --- seq checks ---------------------------------------------------------------------------


def test_a_batch_that_does_not_follow_the_stored_log_writes_nothing(url: str) -> None:
    backend = RedisBackend(url)
    try:
        h = meta("gap", "/w")
        backend.append_batch(h, wire_events(ONE_TURN[:2]), b"", materialized=False)
        # No lease: a misbehaving writer. A gap and a duplicate are both refused.
        with pytest.raises(PersistenceError, match=r"ends at seq 1, but this batch starts at "
                                                   r"seq 3"):
            backend.append_batch(h, wire_events(ONE_TURN[3:]), b"", materialized=True)
        rewritten = [{**ONE_TURN[1], "time": 99}, ONE_TURN[2]]
        with pytest.raises(PersistenceError, match="written by another writer"):
            backend.append_batch(h, wire_events(rewritten), b"", materialized=True)
    finally:
        backend.close()
    assert stored_wires(url, "gap") == ONE_TURN[:2]


def test_the_server_refuses_an_entry_id_not_above_the_top(url: str) -> None:
    """The ids are the seqs: a client going around the script cannot add a duplicate."""
    backend = RedisBackend(url)
    raw = _raw(url)
    try:
        backend.append_batch(meta("ids"), wire_events(ONE_TURN), b"", materialized=False)
        log = _keys(url, "ids").log
        assert [i for i, _ in raw.xrange(log)] == [f"{s}-1".encode() for s in range(6)]
        with pytest.raises(redis.ResponseError, match="equal or smaller"):
            raw.xadd(log, {"l": b"{}"}, id="3-1")
    finally:
        backend.close()
        raw.close()


def test_a_retry_of_a_landed_batch_succeeds_without_duplicates(url: str) -> None:
    backend = RedisBackend(url)
    try:
        h = meta("retry", "/w")
        batch = wire_events(ONE_TURN)
        backend.append_batch(h, batch, b"", materialized=False)
        backend.append_batch(h, batch, b"", materialized=False)  # the reply was lost
    finally:
        backend.close()
    assert stored_wires(url, "retry") == ONE_TURN


def test_a_refused_first_batch_leaves_no_session(url: str) -> None:
    backend = RedisBackend(url)
    try:
        with pytest.raises(PersistenceError):
            backend.append_batch(meta("late", "/w"), wire_events(ONE_TURN[2:]), b"",
                                 materialized=False)
        assert backend.list() == []
    finally:
        backend.close()
    raw = _raw(url)
    assert raw.keys(url.partition("prefix=")[2] + "*") == []
    raw.close()


def test_racing_writers_never_leave_a_gap_or_a_duplicate(url: str) -> None:
    """Writers with no lease, each appending turns from where it believes the log ends."""
    h = meta("race", "/w")
    seed = RedisBackend(url)
    seed.append_batch(h, wire_events([TS(0, 1), TE(1, 1)]), b"", materialized=False)
    seed.close()

    def writer() -> None:
        backend = RedisBackend(url)
        try:
            for _ in range(40):
                tail = backend.tail_lines("race", 0)
                assert tail is not None
                top = int(tail.position)  # type: ignore[call-overload]
                turn = top // 2 + 1
                with contextlib.suppress(PersistenceError):  # lost: nothing written
                    backend.append_batch(
                        h, wire_events([TS(top + 1, turn), TE(top + 2, turn)]), b"", True)
        finally:
            backend.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [e["seq"] for e in stored_wires(url, "race")]
    assert seqs == list(range(len(seqs)))
    assert len(seqs) >= 2 + 2 * 40


# --- cut back, removed, made again --------------------------------------------------------


def test_a_cut_back_resets_the_stream_so_the_next_append_lands(url: str) -> None:
    backend = RedisBackend(url)
    try:
        h = meta("cut", "/w")
        backend.append_batch(h, wire_events(ONE_TURN), b"", materialized=False)
        closer = {**ONE_TURN[3], "time": 5000}
        backend.commit_repair(h, 3, wire_events([closer]), b"")
        assert stored_wires(url, "cut") == [*ONE_TURN[:3], closer]
        backend.append_batch(h, wire_events([{**ONE_TURN[4], "time": 5001}]), b"", True)
        summary = backend.summaries()[0]
        assert (summary.events, summary.turns, summary.last_activity) == (5, 1, 5001)
    finally:
        backend.close()


def test_a_session_made_again_after_rm_starts_at_seq_0(url: str) -> None:
    backend = RedisBackend(url)
    try:
        h = meta("again", "/w")
        backend.append_batch(h, wire_events(ONE_TURN), b"", materialized=False)
        assert backend.delete("again").deleted
        assert backend.list() == []
        backend.append_batch(h, wire_events(ONE_TURN[:2]), b"", materialized=False)
    finally:
        backend.close()
    assert stored_wires(url, "again") == ONE_TURN[:2]


# --- following ----------------------------------------------------------------------------


def test_a_follower_blocked_on_xread_gets_each_batch_and_a_cut(url: str) -> None:
    writer, reader = RedisBackend(url), RedisBackend(url)
    h = meta("live", "/w")
    writer.append_batch(h, wire_events(ONE_TURN[:2]), b"", materialized=False)
    tail = reader.tail_lines("live", 5)
    assert tail is not None
    assert len(tail.lines) == 2
    assert tail.position == 1
    news = reader.follow_lines("live", tail.position, timeout=30)
    try:
        writer.append_batch(h, wire_events(ONE_TURN[2:4]), b"", True)
        got = next(news)
        assert (len(got.lines), got.position, got.note) == (2, 3, None)
        writer.commit_repair(h, 2, wire_events([{**ONE_TURN[2], "time": 70}]), b"")
        got = next(news)
        assert (got.lines, got.position) == ([], 1)
        assert "cut back" in (got.note or "")
        got = next(news)
        assert (len(got.lines), got.position) == (1, 2)
    finally:
        news.close()  # type: ignore[attr-defined]
        writer.close()
        reader.close()


def test_the_url_picks_this_backend(url: str) -> None:
    backend = backend_for(url)
    try:
        assert isinstance(backend, RedisBackend)
        assert backend.location(meta("x")) == url
    finally:
        backend.close()
