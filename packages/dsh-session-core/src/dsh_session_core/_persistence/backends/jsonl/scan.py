"""The JSONL backend's scan of its log files for a search.

Each file is read once, skipped whole when its bytes cannot hold the query's words, its
lines checked by the scan every backend shares
(:func:`~dsh_session_core._persistence.search.scan_hits`); in worker processes for a
large store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Final

from ...._search import (
    SearchHit,
    SearchQuery,
    SearchResults,
    UnreadableSession,
    damaged_records,
    may_hold,
)
from ...search import scan_hits, where_damaged

__all__ = ["PARALLEL_FILES", "Damaged", "log_files", "scan_files"]

#: From how many log files on a machine with several cores the JSONL scan runs in
#: worker processes: below it, starting them and sending their hits back costs more
#: than they save.
PARALLEL_FILES: Final = 5_000


#: A JSONL log's damaged lines a scan read: ``(session id, path, the first one's line
#: number in the file, where each is)``; plain values, sent back by a worker process.
Damaged = tuple[str, str, int, list[str]]



def _file_hits(root: str, path: str, query: SearchQuery, terms: list[bytes],
               read: Callable[[str], bytes]
               ) -> tuple[list[SearchHit], tuple[str, str] | None, Damaged | None]:
    """The hits of one JSONL log (its complete lines after the header: a torn last line
    is not part of the session yet), and, for a log a listing leaves out (its first line
    is not a header, or the header is for another file), ``(path, why)`` instead; last,
    the damaged lines the scan read (:data:`Damaged`), if any. The file is read once;
    its header is decoded only when its bytes may hold a hit, so a log without the
    query's words costs a read and a byte search. A file gone meanwhile has nothing."""
    from ...._logformat.logfile import durable_header
    from ....errors import LogFormatError, MisplacedLogError
    from .buckets import check_placed

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
    from ...._logformat.end import durable_end

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

        from ....errors import SkippedLogWarning

        for path, why in sorted(skipped):
            warnings.warn(SkippedLogWarning(path, why), stacklevel=3)
    return SearchResults(hits, [
        UnreadableSession(sid, damaged_records(sid, where, path=path, line=line))
        for sid, path, line, where in damaged])
