"""Searching a store: the scan every backend can fall back on, the JSONL backend's
parallel scan of its files, and the order and page of the answer.

A backend with a ``search(query)`` method of its own (SQLite's FTS5 index,
PostgreSQL's ``tsvector`` index, the JSONL scan) answers :func:`search_backend`;
any other is scanned through the :class:`~.base.Backend` protocol (each session
loaded). Every answer is checked line by line by :func:`~.._search.hit_of_line`, so
the same store gives the same hits on every backend (``tests/persistence/test_search.py``
copies one store into the others and compares).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Final

from .._registry import EventRegistry
from .._search import (
    SearchHit,
    SearchQuery,
    Sort,
    extract,
    hit_of,
    may_hold,
    order_hits,
    turn_change,
)
from .base import Backend, stored_lines

__all__ = ["PARALLEL_BYTES", "lines_hits", "scan_files", "search_backend", "search_page"]

#: From how many bytes of logs on a machine with several cores the JSONL scan runs in
#: worker processes: below it, starting them costs more than they save.
PARALLEL_BYTES: Final = 64 * 1024 * 1024
_TYPE_PREFIX: Final = b'{"type":"'


def lines_hits(session_id: str, lines: Iterable[bytes], query: SearchQuery
               ) -> list[SearchHit]:
    """The hits among one session's event lines (without their newline, oldest
    first), tracking the turn each event is written in. A line of a type the query
    cannot return, or whose bytes cannot hold the query's words, is skipped undecoded
    (the reference writes ``type`` first; a line that does not start so is decoded)."""
    searched = tuple(b'{"type":"%s"' % t.encode() for t in query.event_types())
    terms = query.ascii_terms()
    turn: int | None = None
    hits: list[SearchHit] = []
    for line in lines:
        if line.startswith(_TYPE_PREFIX):
            if line.startswith(b'{"type":"turn/'):
                change = turn_change(line)
                if change is not None:
                    turn = change[1]
                continue
            if not line.startswith(searched) or not may_hold(line, terms):
                continue
        else:
            change = turn_change(line)
            if change is not None:
                turn = change[1]
                continue
        extracted = extract(line)
        if extracted is None:
            continue
        hit = hit_of(session_id, extracted, turn, query)
        if hit is not None:
            hits.append(hit)
    return hits


def _file_hits(path: str, session_id: str, query: SearchQuery) -> list[SearchHit]:
    """The hits of one JSONL log: its complete lines after the header (a torn last
    line is not part of the session yet). A file gone meanwhile has none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not may_hold(data, query.ascii_terms()):
        return []  # the common case: no need to split the file into lines
    end = data.rfind(b"\n") + 1
    lines = data[:end].split(b"\n")[1:-1]  # the header line, and the empty last piece
    return lines_hits(session_id, lines, query)


def _files_hits(work: Sequence[tuple[str, str]], query: SearchQuery) -> list[SearchHit]:
    hits: list[SearchHit] = []
    for path, session_id in work:
        hits.extend(_file_hits(path, session_id, query))
    return hits


def scan_files(logs: Sequence[tuple[str, str]], query: SearchQuery, *,
               workers: int | None = None) -> list[SearchHit]:
    """Scan JSONL logs, ``(path, session id)`` each, for ``query``'s hits: with msgspec,
    line by line, skipping a whole file whose bytes cannot hold the query's words.

    :param workers: worker processes to spread the files over (``None``: one per core
        when the logs hold at least :data:`PARALLEL_BYTES`, else none; ``0``: none).
    """
    if workers is None:
        cores = os.cpu_count() or 1
        workers = 0
        if cores > 1 and len(logs) > 1:
            size = 0
            for path, _ in logs:
                try:
                    size += os.stat(path).st_size
                except OSError:
                    continue
                if size >= PARALLEL_BYTES:
                    workers = cores
                    break
    if workers <= 1 or len(logs) < 2:
        return _files_hits(logs, query)
    import concurrent.futures
    import multiprocessing

    # Spawned, not forked: the host process may hold threads (a store's worker, a
    # follower), and a forked child of a threaded process can deadlock.
    context = multiprocessing.get_context("spawn")
    chunks = [logs[i::workers * 4] for i in range(workers * 4)]
    hits: list[SearchHit] = []
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        for found in pool.map(_files_hits, [c for c in chunks if c],
                              [query] * len(chunks)):
            hits.extend(found)
    return hits


def _scan_backend(backend: Backend, query: SearchQuery) -> list[SearchHit]:
    """The protocol's scan: each session loaded, its lines checked."""
    registry = EventRegistry([])
    hits: list[SearchHit] = []
    for header in backend.list():
        if query.sessions and header.id not in query.sessions:
            continue
        stored = backend.load_stored(header.id, registry)
        if stored is None:  # removed since it was listed
            continue
        hits.extend(lines_hits(header.id, stored_lines(stored), query))
    return hits


def search_backend(backend: Backend, query: SearchQuery) -> list[SearchHit]:
    """Every hit of ``query`` in a backend's store, in no order: the backend's own
    ``search`` where it has one (an index), else the protocol's scan."""
    own: Any = getattr(backend, "search", None)
    if own is not None:
        found: list[SearchHit] = own(query)
        return found
    return _scan_backend(backend, query)


def search_page(hits: list[SearchHit], sort: Sort, limit: int | None, offset: int
                ) -> list[SearchHit]:
    """One page of hits, in the order ``sort`` gives."""
    ordered = order_hits(hits, sort)
    return ordered[offset:] if limit is None else ordered[offset:offset + limit]
