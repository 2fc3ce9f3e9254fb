"""Searching a store: the scan every backend can fall back on, the JSONL backend's
parallel scan of its files, and the order and page of the answer.

A backend with a ``search(query)`` of its own (:class:`~.capabilities.Searchable`:
SQLite's FTS5 index, PostgreSQL's ``tsvector`` index, the JSONL scan) answers
:func:`search_backend`;
any other is scanned through the :class:`~.base.Backend` protocol (each session
loaded). Every answer is checked line by line by :func:`~.._search.hit_of_line`, so
the same store gives the same hits on every backend (``tests/persistence/test_search_backends.py``
copies one store into the others and compares).

A session the search cannot read takes nothing else down: the answer is a
:class:`~.._search.SearchResults`, the other sessions' hits with each such session named
in its ``unreadable`` (a damaged line the search read, a load refused: a record that
fails its authentication, a key not in the keyring; an encrypted session searched
without keys).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from .._search import (
    SearchHit,
    SearchQuery,
    SearchResults,
    Sort,
    UnreadableSession,
    damaged_records,
    hit_of,
    may_hold,
    order_hits,
    record_seq,
    walk,
)
from .base import Backend, stored_lines
from .capabilities import Capabilities, capabilities_of

__all__ = [
    "PARALLEL_FILES",
    "lines_hits",
    "log_files",
    "scan_files",
    "scan_hits",
    "search_backend",
    "search_page",
    "where_damaged",
]

#: From how many log files on a machine with several cores the JSONL scan runs in
#: worker processes: below it, starting them and sending their hits back costs more
#: than they save.
PARALLEL_FILES: Final = 5_000


def scan_hits(session_id: str, lines: Iterable[bytes], turn: int | None,
              query: SearchQuery, damaged: list[bytes] | None = None) -> list[SearchHit]:
    """The hits among a session's consecutive event lines (without their newline, oldest
    first), starting with ``turn`` open (:func:`~.._search.walk`: a line of a type the
    query cannot return, or whose bytes cannot hold its words, is skipped undecoded).

    :param damaged: given, each line read that is damaged (not a JSON object) is
        appended to it.
    """
    prefixes = tuple(b'{"type":"%s"' % t.encode() for t in query.event_types())
    hits: list[SearchHit] = []
    for extracted, open_turn, _ in walk(lines, turn, prefixes=prefixes,
                                        terms=query.ascii_terms(), damaged_lines=damaged):
        if extracted is not None:
            hit = hit_of(session_id, extracted, open_turn, query)
            if hit is not None:
                hits.append(hit)
    return hits


def lines_hits(session_id: str, lines: Iterable[bytes], query: SearchQuery
               ) -> list[SearchHit]:
    """The hits among one session's event lines, from its first (no turn open)."""
    return scan_hits(session_id, lines, None, query)


#: A JSONL log's damaged lines a scan read: ``(session id, path, the first one's line
#: number in the file, where each is)``; plain values, sent back by a worker process.
Damaged = tuple[str, str, int, list[str]]


def where_damaged(line: bytes, number: int | None = None) -> str:
    """Where a damaged line is, for a person: its file line ``number`` when it has one,
    and the seq its bytes still show."""
    seq = record_seq(line)
    at = [] if number is None else [f"line {number}"]
    if seq is not None:
        at.append(f"seq {seq}")
    return ", ".join(at) or "a record"


def _file_hits(root: str, path: str, query: SearchQuery, terms: list[bytes],
               read: Callable[[str], bytes]
               ) -> tuple[list[SearchHit], tuple[str, str] | None, Damaged | None]:
    """The hits of one JSONL log (its complete lines after the header: a torn last line
    is not part of the session yet), and, for a log a listing leaves out (its first line
    is not a header, or the header is for another file), ``(path, why)`` instead; last,
    the damaged lines the scan read (:data:`Damaged`), if any. The file is read once;
    its header is decoded only when its bytes may hold a hit, so a log without the
    query's words costs a read and a byte search. A file gone meanwhile has nothing."""
    from .._logformat.logfile import durable_header
    from ..errors import LogFormatError, MisplacedLogError
    from .backends.jsonl.buckets import check_placed

    try:
        data = read(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return [], None, None
    except LogFormatError as exc:  # its durable-end mark is unreadable (.endmark)
        return [], (path, str(exc)), None
    first = data.find(b"\n")
    if first < 0 or not may_hold(data, terms):
        return [], None, None  # no complete header line (listing skips it), or no hit
    try:
        header = durable_header(data[:first], path=path)
        check_placed(root, path, header)
    except LogFormatError as exc:
        why = str(exc)
        if not isinstance(exc, MisplacedLogError):
            why += "; `dsh-session validate FILE` says more, or remove the file from the store"
        return [], (path, why), None
    if query.sessions and header.id not in query.sessions:
        return [], None, None
    end = data.rfind(b"\n") + 1
    lines = data[first + 1:end].split(b"\n")[:-1]
    bad: list[bytes] = []
    hits = scan_hits(header.id, lines, None, query, bad)
    if not bad:
        return hits, None, None
    # The rare path: each damaged line's number in the file (the header is line 1); the
    # lines themselves were collected, by identity, not by value (two may be alike).
    seen = {id(line) for line in bad}
    where = [(i + 2, line) for i, line in enumerate(lines) if id(line) in seen]
    return hits, None, (header.id, path, where[0][0],
                        [where_damaged(line, n) for n, line in where])


def _read(path: str) -> bytes:
    """A whole file, in as few system calls as it takes: most logs are read by one
    ``read`` of their size (plus one, to see a file that grew meanwhile). Nothing after
    its durable-end mark (:mod:`.endmark`, read first) is history: it is left out."""
    from .._logformat.end import durable_end

    end = durable_end(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) > size:
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data if end is None else data[:end]


def _paths_hits(root: str, paths: Sequence[str], query: SearchQuery,
                read: Callable[[str], bytes]
                ) -> tuple[list[SearchHit], list[tuple[str, str]], list[Damaged]]:
    hits: list[SearchHit] = []
    skipped: list[tuple[str, str]] = []
    damaged: list[Damaged] = []
    terms = query.ascii_terms()
    for path in paths:
        found, left_out, bad = _file_hits(root, path, query, terms, read)
        hits.extend(found)
        if left_out is not None:
            skipped.append(left_out)
        if bad is not None:
            damaged.append(bad)
    return hits, skipped, damaged


def log_files(root: str, suffix: str = ".jsonl") -> list[str]:
    """Every ``*.jsonl`` file in a store's buckets (every ``*<suffix>`` one: a compact
    store's ``*.jsonl.zst``); no file is opened."""
    try:
        buckets = os.scandir(root)
    except FileNotFoundError:
        return []
    paths: list[str] = []
    with buckets:
        for bucket in buckets:
            if not bucket.is_dir(follow_symlinks=False):
                continue
            try:
                entries = os.scandir(bucket.path)
            except (FileNotFoundError, NotADirectoryError):  # removed meanwhile
                continue
            with entries:
                paths.extend(e.path for e in entries
                             if e.name.endswith(suffix) and e.is_file(follow_symlinks=False))
    return paths


def _may_fork() -> bool:
    """Whether worker processes may be forked: on Linux (elsewhere a fork can break the
    system's libraries), from a process with no thread but this one (a forked child of a
    threaded process can deadlock on a lock another thread held)."""
    import sys
    import threading

    return sys.platform == "linux" and threading.active_count() == 1


def scan_files(root: str, paths: Sequence[str], query: SearchQuery, *,
               workers: int | None = None, read: Callable[[str], bytes] = _read
               ) -> SearchResults:
    """Scan a JSONL store's logs for ``query``'s hits: each file read once, skipped
    whole when its bytes cannot hold the query's words, else checked line by line with
    msgspec. A log that listing leaves out (misplaced, or not a log) is left out here
    too, with the same :class:`~dsh_session_core.errors.SkippedLogWarning`. A log with
    damaged lines the scan read (not JSON) is in the answer's ``unreadable``, its other
    lines searched.

    :param paths: the log files (:func:`log_files`, or the files of chosen sessions).
    :param read: a log file's bytes (a compact log's decoded ones), by path: a module's
        function (the workers are handed it by name).
    :param workers: worker processes to spread the files over (``None``: one per core
        for at least :data:`PARALLEL_FILES` files; ``0`` or ``1``: none). Workers are
        forked, so only on Linux and from a process without other threads (the
        command line is one); elsewhere the scan runs in this process.
    """
    if workers is None:
        workers = (os.cpu_count() or 1) if len(paths) >= PARALLEL_FILES else 0
    if workers <= 1 or len(paths) < 2 or not _may_fork():
        hits, skipped, damaged = _paths_hits(root, paths, query, read)
    else:
        import concurrent.futures
        import multiprocessing

        # Forked, never spawned: a spawned worker imports the host's __main__ again (a
        # script without a main guard would run twice). Forking is safe only in a
        # process without other threads (_may_fork): else the scan runs here.
        context = multiprocessing.get_context("fork")
        parts = workers * 4  # smaller parts even out the workers' loads
        chunks = [paths[i::parts] for i in range(parts) if paths[i::parts]]
        hits, skipped, damaged = [], [], []
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            for found, left_out, bad in pool.map(_paths_hits, [root] * len(chunks), chunks,
                                                 [query] * len(chunks),
                                                 [read] * len(chunks)):
                hits.extend(found)
                skipped.extend(left_out)
                damaged.extend(bad)
    if skipped:
        import warnings

        from ..errors import SkippedLogWarning

        for path, why in sorted(skipped):
            warnings.warn(SkippedLogWarning(path, why), stacklevel=3)
    return SearchResults(hits, [
        UnreadableSession(sid, damaged_records(sid, where, path=path, line=line))
        for sid, path, line, where in damaged])


def _asked(backend: Backend, query: SearchQuery) -> list[SessionHeader]:
    """The headers of the sessions ``query`` searches (its ``sessions``, else all)."""
    headers = backend.list()
    if query.sessions:
        return [h for h in headers if h.id in query.sessions]
    return headers


def _scan_backend(backend: Backend, headers: list[SessionHeader], query: SearchQuery
                  ) -> SearchResults:
    """The protocol's scan: each session of ``headers`` loaded, its lines checked; a
    session whose load is refused (a record that does not read, or fails its
    authentication, a key not in the keyring...) is unreadable, the others searched."""
    from ..errors import EncryptionError, LogFormatError

    registry = EventRegistry([])
    hits: list[SearchHit] = []
    unreadable: list[UnreadableSession] = []
    for header in headers:
        try:
            stored = backend.load_stored(header.id, registry)
        except (EncryptionError, LogFormatError) as exc:
            unreadable.append(UnreadableSession(header.id, exc))
            continue
        if stored is None:  # removed since it was listed
            continue
        hits.extend(lines_hits(header.id, stored_lines(stored), query))
    return SearchResults(hits, unreadable)


def _sealed(headers: list[SessionHeader]) -> list[UnreadableSession]:
    """The encrypted sessions among ``headers`` read without keys: a store opened with
    keys lists its sealed sessions as of the format they hold, so a sealed header seen
    here is one read without them (its records are ciphertext: no search of them finds
    a word, and saying "no hits" of them would be a lie)."""
    from .._schema.header import SEALED_FORMAT_VERSION
    from ..errors import EncryptedSessionError

    return [UnreadableSession(h.id, EncryptedSessionError(h.id)) for h in headers
            if h.version == SEALED_FORMAT_VERSION]


def search_backend(backend: Backend | Capabilities, query: SearchQuery) -> SearchResults:
    """Every hit of ``query`` in a backend's store, in no order, and the sessions it
    could not read (:class:`~.._search.SearchResults`): the backend's own search where
    it has one (:class:`~.capabilities.Searchable`: an index), else the protocol's scan
    (of the one listing the look for sealed sessions below reads too).

    An encrypted session read without keys (the store was opened without them) is
    not searched: it is among the ``unreadable``, with an
    :class:`~dsh_session_core.errors.EncryptedSessionError` saying how to pass the keys.
    """
    caps = capabilities_of(backend)
    headers = _asked(caps.backend, query)
    sealed = _sealed(headers)
    if caps.searchable is not None:
        found = caps.searchable.search(query)
        more = found.unreadable if isinstance(found, SearchResults) else ()
        return SearchResults(found, [*sealed, *more])
    if sealed:
        out = {u.session_id for u in sealed}
        headers = [h for h in headers if h.id not in out]
    found = _scan_backend(caps.backend, headers, query)
    return SearchResults(found, [*sealed, *found.unreadable])


def search_page(hits: list[SearchHit], sort: Sort, limit: int | None, offset: int
                ) -> SearchResults:
    """One page of hits, in the order ``sort`` gives, with the sessions the search could
    not read (``hits``'s, when it is a :class:`~.._search.SearchResults`)."""
    ordered = order_hits(hits, sort)
    page = ordered[offset:] if limit is None else ordered[offset:offset + limit]
    return SearchResults(page, hits.unreadable if isinstance(hits, SearchResults) else ())
