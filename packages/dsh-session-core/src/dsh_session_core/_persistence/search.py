"""Searching a store: the fallback scan, the shared line scan, and the answer's order and page.

The scan every backend can fall back on, the line scan the backends share
(:func:`scan_hits`; the JSONL backend's scan of its files is
:mod:`~.backends.jsonl.scan`), and the order and page of the answer.

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

from collections.abc import Iterable

from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from .._search import (
    SearchHit,
    SearchQuery,
    SearchResults,
    Sort,
    UnreadableSession,
    hit_of,
    order_hits,
    record_seq,
    walk,
)
from .base import Backend, stored_lines
from .capabilities import Capabilities, capabilities_of

__all__ = [
    "lines_hits",
    "scan_hits",
    "search_backend",
    "search_page",
    "where_damaged",
]

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


def where_damaged(line: bytes, number: int | None = None) -> str:
    """Where a damaged line is, for a person: its file line ``number`` when it has one,
    and the seq its bytes still show."""
    seq = record_seq(line)
    at = [] if number is None else [f"line {number}"]
    if seq is not None:
        at.append(f"seq {seq}")
    return ", ".join(at) or "a record"


def _asked(backend: Backend, query: SearchQuery) -> list[SessionHeader]:
    """The headers of the sessions ``query`` searches (its ``sessions``, else all)."""
    headers = backend.list()
    if query.sessions:
        return [h for h in headers if h.id in query.sessions]
    return headers


def _scan_backend(backend: Backend, headers: list[SessionHeader], query: SearchQuery
                  ) -> SearchResults:
    """The protocol's scan: each session of ``headers`` read, its lines checked. A
    backend that reads a session's lines as stored (:class:`~.capabilities.LineReads`:
    Redis) gives them undecoded, so a damaged line costs its own hits only (the session
    is named among the unreadable, the rest of it searched, as the JSONL scan and the
    SQL indexes do); any other backend's session is loaded, and a session whose load is
    refused (a record that does not read, or fails its authentication, a key not in the
    keyring...) is unreadable whole, the others searched."""
    from .._search import damaged_records
    from ..errors import EncryptionError, LogFormatError

    registry = EventRegistry([])
    hits: list[SearchHit] = []
    unreadable: list[UnreadableSession] = []
    line_reads = capabilities_of(backend).line_reads
    for header in headers:
        try:
            if line_reads is not None:
                lines = line_reads.read_lines(header.id, -1, None)
            else:
                stored = backend.load_stored(header.id, registry)
                lines = None if stored is None else stored_lines(stored)
        except (EncryptionError, LogFormatError) as exc:
            unreadable.append(UnreadableSession(header.id, exc))
            continue
        if lines is None:  # removed since it was listed
            continue
        damaged: list[bytes] = []
        hits.extend(scan_hits(header.id, lines, None, query, damaged))
        if damaged:
            unreadable.append(UnreadableSession(header.id, damaged_records(
                header.id, [where_damaged(line) for line in damaged])))
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
