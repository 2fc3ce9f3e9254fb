"""A copy keeps every event's bytes: a log copied through every ordered pair of kinds of
store (JSONL, compact JSONL, SQLite, PostgreSQL, Redis, memory; a kind to itself too, between
two stores) is stored, byte for byte, as it was written, at every step, and ``export``
prints the same log from each. Over the reference's own logs and over random logs: in
the reference's spelling (crash-repair closers with ``surfaceOp`` before
``sourceEventSeqs``) and in others a log may hold (keys in any order, spaces, ``\\u``
escapes, numbers spelt otherwise, keys no column holds, lone surrogates)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persist_support import meta

from conftest import upstream_dir
from dsh_session_core import (
    JsonlBackend,
    MemoryBackend,
    PostgresBackend,
    SqliteBackend,
    core_registry,
)
from dsh_session_core._logformat.logfile import dump_log, parse_header
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.base import Backend
from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._schema.codec import ENCODER
from dsh_session_core.errors import DshSessionError

REG = core_registry()
KINDS = ("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis", "memory")


def every_pair(kinds: tuple[str, ...]) -> list[str]:
    """The kinds in an order that steps from each kind to each kind (itself too) exactly
    once: a de Bruijn sequence of order 2 over them, closed where it began. It starts
    and ends with the first kind."""
    k = len(kinds)
    order: list[int] = []
    a = [0] * (2 * k)

    def walk(t: int, p: int) -> None:
        if t > 2:
            if 2 % p == 0:
                order.extend(a[1:p + 1])
            return
        a[t] = a[t - p]
        walk(t + 1, p)
        for j in range(a[t - p] + 1, k):
            a[t] = j
            walk(t + 1, t)

    walk(1, 1)
    return [kinds[i] for i in (*order, order[0])]


class Stores:
    """The stores of one test, opened in the order of a walk (each a new one: a folder,
    a database file, a PostgreSQL database, a memory backend), closed at the end."""

    def __init__(self, tmp: Path, databases: Callable[[], Any],
                 redis_server: Callable[[], str]) -> None:
        self.tmp = tmp
        self._databases = databases
        self._redis_server = redis_server
        self._made: list[str] = []
        self._prefixes: list[str] = []
        self.opened: list[Backend] = []

    def open(self, kind: str) -> Backend:
        at = self.tmp / f"{len(self.opened)}-{kind.replace('+', '-')}"
        backend: Backend
        if kind == "jsonl":
            backend = JsonlBackend(at)
        elif kind == "jsonl+zstd":
            backend = JsonlZstdBackend(at)
        elif kind == "sqlite":
            backend = SqliteBackend(f"{at}.db")
        elif kind == "postgresql":
            self._made.append(self._databases().create("bytes"))
            backend = PostgresBackend(self._made[-1])
        elif kind == "redis":  # a key prefix of its own on the run's server
            self._prefixes.append(f"b{uuid.uuid4().hex[:12]}:")
            backend = RedisBackend(f"{self._redis_server()}?prefix={self._prefixes[-1]}")
        else:
            backend = MemoryBackend()
        self.opened.append(backend)
        return backend

    def close(self) -> None:
        for backend in self.opened:
            backend.close()
        for url in self._made:
            self._databases().drop(url)
        if self._prefixes:
            client = redis.Redis.from_url(self._redis_server())
            try:
                for prefix in self._prefixes:
                    keys = list(client.scan_iter(match=prefix + "*", count=1000))
                    if keys:
                        client.delete(*keys)
            finally:
                client.close()


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    pytest.importorskip("zstandard")
    made = Stores(tmp_path, lambda: request.getfixturevalue("postgresql_databases"),
                  lambda: str(request.getfixturevalue("redis_server")))
    try:
        yield made
    finally:
        made.close()


def _write_log(store: JsonlBackend, header_line: bytes, lines: bytes) -> None:
    """A log file as some writer left it, in a JSONL store."""
    header = parse_header(header_line)
    path = Path(log_path(store.root, header.cwd if isinstance(header.cwd, str) else None,
                         header.id))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header_line + b"\n" + lines)


def _stored(backend: Backend, session_id: str) -> tuple[bytes, bytes]:
    """A stored session's bytes (its header line and its lines, as stored), and what
    ``export`` prints of it (its events written back)."""
    stored = backend.load_stored(session_id, REG)
    assert stored is not None, session_id
    assert stored.jsonl is not None
    return (ENCODER.encode(stored.header) + b"\n" + stored.jsonl,
            dump_log(stored.header, stored.events))


def _through_every_pair(stores: Stores, first: Backend, ids: list[str]) -> None:
    """Copy the sessions ``ids`` from ``first`` (a JSONL store) through a walk of new
    stores that steps from each kind to each, checking at every step that each session
    is stored as ``first`` holds it, byte for byte, and exports the same."""
    expected = {sid: _stored(first, sid) for sid in ids}
    walk = [first]
    for kind in every_pair(KINDS)[1:]:
        destination = stores.open(kind)
        report = copy_sessions(walk[-1], destination, ids, registry=REG)
        assert [(s.session_id, s.status, s.verified, s.error) for s in report.sessions] == [
            (sid, "copied", True, None) for sid in ids], (walk[-1].name, kind)
        for sid in ids:
            assert _stored(destination, sid) == expected[sid], (sid, kind)
        walk.append(destination)


# --- the reference's logs -----------------------------------------------------------------


def _closers(path: Path) -> list[bytes]:
    """The lines the reference's store appends to the log ``path`` when it opens it (its
    crash repair, from the golden ``.full.json``), as the reference writes them: keys in
    its order, ``surfaceOp`` before ``sourceEventSeqs`` in a tool result's."""
    upstream = upstream_dir()
    golden = upstream / "goldens" / path.relative_to(upstream).with_suffix(".full.json")
    if not golden.is_file():
        return []
    closers = msgspec.json.decode(golden.read_bytes()).get("closers") or []
    return [ENCODER.encode(closer) for closer in closers]


def _reference_logs() -> list[tuple[str, bytes]]:
    """Every reference log that is a store's session (a header with a version), under
    an id of its own (their ids repeat), as ``(id, header line + the rest of its file)``;
    and each log the reference's store repairs when it opens it, as it leaves it (its
    valid prefix, then the closers), under an id ending in ``-repaired``."""
    found = []
    for i, path in enumerate(sorted(upstream_dir().rglob("*.jsonl"))):
        data = path.read_bytes()
        end = data.index(b"\n")
        try:
            header = parse_header(data[:end])
        except DshSessionError:
            continue  # the reference's own scanner refuses these too
        if header.version is msgspec.UNSET:
            continue
        renamed = msgspec.structs.replace(header, id=f"ref-{i:03}-{path.parent.name}"[:60])
        found.append((renamed.id, ENCODER.encode(renamed) + data[end:]))
        closers = _closers(path)
        if closers:
            repaired = msgspec.structs.replace(renamed, id=renamed.id + "-repaired")
            lines = data[end + 1:data.rindex(b"\n") + 1]  # no torn tail
            found.append((repaired.id, ENCODER.encode(repaired) + b"\n" + lines
                          + b"".join(line + b"\n" for line in closers)))
    return found


OPS_FIRST = b'"surfaceOp":"append","sourceEventSeqs":'


def test_every_reference_log_goes_through_every_pair_of_stores_byte_for_byte(
    stores: Stores,
) -> None:
    walk = every_pair(KINDS)
    assert sorted(itertools.pairwise(walk)) == sorted(itertools.product(KINDS, KINDS))
    assert (walk[0], walk[-1], len(walk)) == ("jsonl", "jsonl", 37)  # 6 * 6 steps
    first = stores.open("jsonl")
    assert isinstance(first, JsonlBackend)
    logs = _reference_logs()
    for _, data in logs:
        end = data.index(b"\n")
        _write_log(first, data[:end], data[end + 1:])
    held = {sid: _stored(first, sid) for sid, _ in logs if first.load_stored(sid, REG)}
    with_events = [sid for sid, (stored, _) in held.items() if stored.count(b"\n") > 1]
    # 344 logs with a version: 9 hold no event (a session is stored from its first
    # event on), one is torn (its valid prefix is what a store holds, and what is
    # copied); 112 more as the reference's store leaves them once it repaired them,
    # 5 of them with a closer for a tool call that was logged (surfaceOp first).
    assert (len(logs), len(with_events)) == (344 + 112, 335 + 112)
    for sid, data in logs:
        if sid in with_events:
            stored, exported = held[sid]
            assert stored == data or sid.endswith("synthetic")
            assert data.startswith(stored)
            assert exported == stored  # the reference's spelling is ours: export is it
    ops_first = [sid for sid in with_events if OPS_FIRST in held[sid][0]]
    assert len(ops_first) == 5
    # The reference's recorded logs (not its 300 random ones, which hold nothing the
    # recorded ones do not), repaired or not, and the logs with such closers through
    # every pair of stores...
    recorded = [sid for sid in with_events if "random" not in sid]
    _through_every_pair(stores, first, recorded + ops_first)
    # ...and every log through every kind of store, one after another.
    source: Backend = first
    for kind in ("jsonl+zstd", "sqlite", "postgresql", "memory", "jsonl"):
        destination = stores.open(kind)
        assert copy_sessions(source, destination, with_events, registry=REG).ok
        for sid in with_events:
            assert _stored(destination, sid) == held[sid], (sid, kind)
        source = destination
    # The last store is a folder of logs: the same files as the first, whole.
    assert isinstance(source, JsonlBackend)
    for sid in with_events:
        header = parse_header(held[sid][0].split(b"\n", 1)[0])
        path = log_path(source.root, header.cwd if isinstance(header.cwd, str) else None, sid)
        assert Path(path).read_bytes() == held[sid][0]


# --- random logs ----------------------------------------------------------------------------


def _string(text: str, escape: bool) -> str:
    """``text`` as a JSON string: what must be escaped is (a lone surrogate as ``\\udxxx``),
    and with ``escape`` every other character past ASCII too (as ``\\uxxxx``, a pair of
    them past the BMP)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        elif escape and code > 0x7F:
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json(value: Any, spaces: bool, escape: bool) -> str:
    """``value`` as JSON text, keys in their order, spelt as asked."""
    comma, colon = (", ", ": ") if spaces else (",", ":")
    if isinstance(value, dict):
        return "{" + comma.join(_string(k, escape) + colon + _json(v, spaces, escape)
                                for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + comma.join(_json(v, spaces, escape) for v in value) + "]"
    if isinstance(value, str):
        return _string(value, escape)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)  # an int, or a finite float (1e+16, -0.0, 0.1: all JSON)


_texts = st.text(st.characters(codec="utf-8") | st.sampled_from("é😀\u2028\x00\n\"\\"),
                 max_size=6)
_surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1,
                      max_size=2)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | _texts | _surrogates,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=4), inner, max_size=3),
    max_leaves=8,
)
_USER = {"kind": "user"}
# Payloads that fit the core's schemas (so the events decode as typed ones, whose
# encoding need not be their line), and any JSON.
_payloads = st.one_of(
    st.builds(lambda n: ("turn/start", {"turn": n, "trigger": {"kind": "message",
                                                                "source": _USER}}),
              st.integers(1, 9)),
    st.builds(lambda t: ("user/message", {"content": [{"type": "text", "text": t}],
                                          "source": _USER}), _texts),
    st.builds(lambda n, t: ("assistant/message", {"turn": n, "step": 1, "content": [
        {"type": "text", "text": t}]}), st.integers(1, 9), _texts),
    st.builds(lambda n: ("tool/result", {"turn": n, "step": 1, "callId": "call-1", "content": [
        {"type": "text", "text": "Tool call interrupted by a crash; no result was recorded."}],
        "isError": True, "error": {"name": "InterruptedError", "code": "interrupted"}}),
        st.integers(1, 9)),
    st.builds(lambda n: ("step/start", {"turn": n, "step": 1}), st.integers(1, 9)),
    st.tuples(st.sampled_from(["x/note", "turn/end", "tool/call", "user/message"]), _values),
)


@st.composite
def _lines(draw: st.DrawFn, seq: int) -> bytes:
    """One event line: a payload, maybe the surface keys and a key no column holds, the
    keys in any order (the reference's own order most often), spelt in any way."""
    event_type, data = draw(_payloads)
    if isinstance(data, dict) and draw(st.booleans()):
        keys = draw(st.permutations(list(data)))
        data = {k: data[k] for k in keys}
    wire: dict[str, Any] = {"type": event_type, "seq": seq,
                            "time": draw(st.integers(0, 2**53)), "data": data}
    op = draw(st.sampled_from([None, "append", {"op": "replace", "start": 0, "end": 1}]))
    if op is not None:
        if draw(st.booleans()):
            wire["surfaceOp"] = op  # the reference's crash repair: surfaceOp first
            wire["sourceEventSeqs"] = [max(seq - 1, 0)]
        else:
            wire["sourceEventSeqs"] = [max(seq - 1, 0)]
            wire["surfaceOp"] = op
    if draw(st.integers(0, 9)) == 0:
        wire["note"] = draw(_values)
    if draw(st.integers(0, 3)) == 0:
        wire = {k: wire[k] for k in draw(st.permutations(list(wire)))}
    spelt = draw(st.sampled_from([(False, False)] * 3 + [(True, False), (False, True),
                                                         (True, True)]))
    return _json(wire, *spelt).encode("utf-8", "surrogatepass")


@st.composite
def random_logs(draw: st.DrawFn) -> list[bytes]:
    count = draw(st.integers(1, 6))
    return [draw(_lines(seq)) for seq in range(count)]


_counter = itertools.count()


@pytest.fixture
def walk_of_stores(stores: Stores) -> list[Backend]:
    """A JSONL store to write logs into, then the stores of a walk through every ordered
    pair of kinds: opened once, for every example of a test."""
    return [stores.open(kind) for kind in every_pair(KINDS)]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=random_logs())
def test_a_random_log_goes_through_every_pair_of_stores_byte_for_byte(
    walk_of_stores: list[Backend], lines: list[bytes]
) -> None:
    sid = f"rand-{next(_counter)}"
    header_line = ENCODER.encode(meta(sid, "/w"))
    first = walk_of_stores[0]
    assert isinstance(first, JsonlBackend)
    _write_log(first, header_line, b"".join(line + b"\n" for line in lines))
    written = header_line + b"\n" + b"".join(line + b"\n" for line in lines)
    stored, exported = _stored(first, sid)
    assert stored == written
    for source, destination in itertools.pairwise(walk_of_stores):
        report = copy_sessions(source, destination, [sid], registry=REG)
        (result,) = report.sessions
        assert (result.status, result.verified, result.error) == ("copied", True, None)
        assert _stored(destination, sid) == (written, exported), destination.name
    last = walk_of_stores[-1]
    assert isinstance(last, JsonlBackend)
    assert Path(last.location(meta(sid, "/w"))).read_bytes() == written
