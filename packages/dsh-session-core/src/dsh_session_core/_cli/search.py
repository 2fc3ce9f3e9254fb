"""``dsh-session search``: full-text search over a store.

Over a store's messages, tool calls and tool results (the query syntax and what is
searched: ``_search/`` and docs/search.md).

Each hit prints its session, seq, turn, event type and time, then a one-line snippet
with the matched words highlighted (bold on a terminal, ``**word**`` otherwise);
``--json`` prints the hits as one JSON array. Newest first, or ``--sort relevance``.
SQLite and PostgreSQL answer from their index, a JSONL store is scanned.

A session that could not be read (a damaged record, a key not in the keyring, an
encrypted session searched without keys) takes nothing else down: the other sessions'
hits are printed, each such session is named on stderr with what to do, and the exit
status is 3 (``EXIT_PARTIAL``).

Ctrl-C says what was printed (exit 130): nothing, while searching; while printing, how
many hits of how many, and the ``--offset`` that prints the rest. Each hit is flushed as
it is printed, so that the count is what reached stdout (one more may have: the interrupt
can come between a write and its count).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .support import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, Failure

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .._persistence.base import Backend
    from .._search import SearchHit, SearchResults
    from .term import Style

# What the commands run is imported in the functions that run it: `dsh-session search --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands"]

#: Hits shown when ``--limit`` is not given.
DEFAULT_LIMIT = 20


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .commands import HELP
    from .source import add_key_argument

    search = sub.add_parser("search", help=HELP["search"])
    search.add_argument("query", nargs="+", metavar="QUERY",
                        help='words that must all be in an event (caseless, whole words; '
                             'word* for a prefix, "two words" for a phrase)')
    search.add_argument("--store", metavar="URL",
                        help="a folder, sqlite:///path.db or postgresql://host/dbname "
                             "(default: $DSH_SESSION_STORE, else the user's data folder)")
    add_key_argument(search)
    search.add_argument("--type", dest="types", action="append", default=[],
                        metavar="TYPE", help="only events of this type (repeatable): "
                        "user/message, assistant/message, tool/call, tool/result...")
    search.add_argument("--role", dest="roles", action="append", default=[],
                        choices=("user", "assistant", "tool"),
                        help="only what this role said (repeatable)")
    search.add_argument("--session", dest="sessions", action="append", default=[],
                        metavar="ID", help="only this session: its id, its name or an "
                        "unambiguous id prefix (repeatable)")
    search.add_argument("--since", metavar="WHEN",
                        help="only events at or after WHEN: an ISO date or time, or a "
                             "duration back from now (7d, 12h)")
    search.add_argument("--until", metavar="WHEN", help="only events before WHEN")
    search.add_argument("--sort", choices=("newest", "relevance"), default="newest",
                        help="the order of the hits (default: newest)")
    search.add_argument("--limit", metavar="N",
                        help=f"show at most N hits (default {DEFAULT_LIMIT}; 0: all)")
    search.add_argument("--offset", metavar="N", help="skip the first N hits")
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.set_defaults(run=run_search)


def run_search(args: argparse.Namespace) -> int:
    from .._persistence.search import search_backend, search_page
    from .._persistence.urls import printable_url
    from .._search import SearchQuery
    from .ls import _count, _open, parse_when
    from .source import find_stored, out_json, out_text, store_url

    since = None if args.since is None else parse_when("--since", args.since)
    until = None if args.until is None else parse_when("--until", args.until)
    if since is not None and until is not None and since > until:
        msg = f"--since {args.since} is after --until {args.until}: nothing can match"
        raise Failure(msg, EXIT_USAGE)
    for sid in args.sessions:
        if not sid:
            msg = "--session takes a session id, got ''"
            raise Failure(msg, EXIT_USAGE)
    limit = DEFAULT_LIMIT if args.limit is None else _count("--limit", args.limit)
    offset = 0 if args.offset is None else _count("--offset", args.offset)
    text = " ".join(args.query)
    # A query that does not read is the read model's usage error: main shows it.
    SearchQuery.parse(text, types=args.types, roles=args.roles, sessions=args.sessions,
                      since=since, until=until)
    url = store_url(args)
    shown = printable_url(url)  # in every line printed: never its password
    backend = _open(url, named=bool(args.store or os.environ.get("DSH_SESSION_STORE")))
    try:
        # Each --session is a session's id, its name, or an unambiguous id prefix.
        sessions = [find_stored(backend, sid, shown, prefixes=True) for sid in args.sessions]
        query = SearchQuery.parse(text, types=args.types, roles=args.roles,
                                  sessions=sessions, since=since, until=until)
        found = search_backend(backend, query)
        page = search_page(found, args.sort, limit or None, offset)
        names = _names(backend, page)
    except OSError as exc:
        msg = f"cannot search the store {shown}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    except KeyboardInterrupt:
        msg = f"interrupted while searching {shown}: no hit was printed"
        raise Failure(msg, hint="search only reads: run it again (--session, --since or "
                                "--type search less)") from None
    finally:
        backend.close()
    if args.json:
        try:
            out_json([_with_name(hit.to_dict(), names) for hit in page])
            sys.stdout.flush()
        except KeyboardInterrupt:
            msg = f"interrupted: the JSON array of the {len(page)} hit(s) is cut short"
            raise Failure(msg, hint="run it again (search only reads)") from None
        return _unreadable(found)
    if not page:
        out_text((f"no hits for {text!r} in {shown}" if not found else
                  f"no hits past the first {offset} of {len(found)} in {shown}")
                 + _missing(found) + "\n")
        return _unreadable(found)
    printed = 0
    try:
        for lines in _rendered(page, sys.stdout, names):
            out_text(lines)
            sys.stdout.flush()
            printed += 1
    except KeyboardInterrupt:
        # Counted once written: the interrupt may come between the write and the count.
        msg = (f"interrupted after printing {printed} of {len(page)} hit(s) (and perhaps "
               f"the next, whole or in part): the output above is partial")
        raise Failure(msg, hint=f"--offset {offset + printed} (with the same query) prints "
                                f"the rest") from None
    out_text(_footer(len(page), len(found), offset, shown, _missing(found)))
    return _unreadable(found)


def _missing(found: SearchResults) -> str:
    """What the last line adds when sessions could not be read."""
    count = len(found.unreadable)
    return f" ({count} session(s) could not be read, named on stderr)" if count else ""


def _unreadable(found: SearchResults) -> int:
    """Name each session the search could not read on stderr, one line each (the error
    says what to do); the exit status: :data:`EXIT_PARTIAL` when there is one."""
    from .support import warn

    for missed in found.unreadable:
        reason = " ".join(missed.reason.split())
        warn(f'hits of session "{missed.session_id}" may be missing: {reason}')
    return EXIT_PARTIAL if found.unreadable else EXIT_OK


def _names(backend: Backend, page: list[SearchHit]) -> dict[str, str]:
    """The names plugins give the sessions of the hits shown (``name_session``), by id."""
    from .._persistence.projections.naming import stored_names
    from .support import plugin_manager, registry

    ids = {hit.session_id for hit in page}
    headers = [h for h in backend.list() if h.id in ids] if ids else []
    named = stored_names(backend, headers, registry(), plugins=plugin_manager())
    return {sid: n.name for sid, n in named.items()}


def _with_name(row: dict[str, object], names: dict[str, str]) -> dict[str, object]:
    """A hit of ``--json``, with ``sessionName`` when its session has a name."""
    name = names.get(str(row["session"]))
    return row if name is None else {**row, "sessionName": name}


def _rendered(hits: list[SearchHit], stream: object, names: dict[str, str]
              ) -> Iterator[str]:
    """Each hit's two lines (its session's name after its id, when it has one)."""
    from .._inspect.describe import when
    from .term import Style, printable

    style = Style.for_stream(stream)
    for hit in hits:
        turn = "-" if hit.turn is None else str(hit.turn)
        name = names.get(hit.session_id)
        who = printable(hit.session_id) + ("" if name is None else f" ({printable(name)})")
        head = f"{who}  #{hit.seq}  turn {turn}  {hit.type}  {when(hit.time)}"
        yield style(head, "bold") + "\n" + "    " + _highlight(hit, style) + "\n"


def _highlight(hit: SearchHit, style: Style) -> str:
    """The snippet, its matched words in bold on a terminal, else between ``**``."""
    from .term import printable

    text = hit.snippet
    pieces = []
    at = 0
    for start, end in hit.highlights:
        word = printable(text[start:end])
        pieces.append(printable(text[at:start]))
        pieces.append(style(word, "bold", "yellow") if style.enabled else f"**{word}**")
        at = end
    pieces.append(printable(text[at:]))
    return "".join(pieces)


def _footer(shown: int, total: int, offset: int, url: str, missing: str) -> str:
    if shown == total:
        return f"{total} hit(s) in {url}{missing}\n"
    return (f"hits {offset + 1}-{offset + shown} of {total} in {url} "
            f"(--offset {offset + shown} for more){missing}\n")
