"""What tests share to reach behind a Redis store's back (as others edit a JSONL file or
a database row): a session's stream entry read and rewritten, every key of a store's
prefix read."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dsh_session_core._persistence.opening import backend_for


@contextlib.contextmanager
def redis_backend(url: str) -> Iterator[Any]:
    """The store's Redis backend (its client, its keys' names), closed after."""
    backend: Any = backend_for(url)
    try:
        yield backend
    finally:
        backend.close()


def entry_line(url: str, sid: str, seq: int) -> bytes:
    """The stored log line of record ``seq`` of session ``sid``."""
    with redis_backend(url) as backend:
        [(_, fields)] = backend._client.xrange(backend.keys(sid).log, f"{seq}-1", f"{seq}-1")
    line: bytes = fields[b"l"]
    return line


def rewrite_entry(url: str, sid: str, seq: int, line: bytes) -> None:
    """Record ``seq`` of ``sid`` stored as ``line``: the stream written anew (an entry
    cannot be rewritten in place), its ids kept, in one transaction."""
    with redis_backend(url) as backend:
        client, log = backend._client, backend.keys(sid).log
        entries = client.xrange(log)
        pipe = client.pipeline(transaction=True)
        pipe.delete(log)
        for entry, fields in entries:
            at = int(entry.decode().partition("-")[0])
            pipe.xadd(log, {"l": line if at == seq else fields[b"l"]}, id=entry)
        pipe.execute()


def stored_values(url: str, *, locks: bool = False) -> bytes:
    """Every key of the store's prefix and its values, as bytes; not the writer leases'
    keys (a lease and its epoch counter: lock state, as a JSONL store's lock files)
    unless ``locks``."""
    with redis_backend(url) as backend:
        client = backend._client
        prefix = backend.index_key.removesuffix("sessions")
        readers: dict[bytes, Any] = {
            b"stream": client.xrange, b"hash": client.hgetall,
            b"zset": lambda k: client.zrange(k, 0, -1), b"string": client.get}
        out = []
        for key in sorted(client.scan_iter(match=prefix + "*", count=1000)):
            if not locks and key.endswith((b":lease", b":epoch")):
                continue
            out.append(key + b"=" + repr(readers[client.type(key)](key)).encode())
        return b"".join(out)


@contextlib.contextmanager
def acl_store(folder: Any, password: str, prefix: str) -> Iterator[str]:
    """A store on a server of its own whose only user is ``agent``, with ``password``:
    its URL (the password in it), the server stopped after."""
    from dsh_session_core.testing.redis import RedisServer

    server = RedisServer(folder, args=(
        "--user", "default", "off", "--user", "agent", "on", f">{password}", "~*", "&*",
        "+@all")).start()
    try:
        yield f"redis://agent:{password}@127.0.0.1:{server.port}/0?prefix={prefix}"
    finally:
        server.stop()


def stored_wires(url: str, sid: str) -> list[dict[str, Any]]:
    """Session ``sid`` of the Redis store at ``url`` as a fresh backend loads it, each
    event as its wire dict (``[]``: not stored)."""
    from dsh_session_core import core_registry, to_wire
    from dsh_session_core._persistence.backends.redis.backend import RedisBackend

    backend = RedisBackend(url)
    try:
        stored = backend.load_stored(sid, core_registry())
        return [] if stored is None else [to_wire(e) for e in stored.events]
    finally:
        backend.close()


def wire_events(wires: list[dict[str, Any]]) -> list[Any]:
    """Wire dicts decoded into core's events."""
    from dsh_session_core import core_registry
    from dsh_session_core._schema.decode import decode_wire

    registry = core_registry()
    return [decode_wire(registry, w) for w in wires]
