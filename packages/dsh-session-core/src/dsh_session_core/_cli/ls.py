"""``dsh-session ls``: the sessions in a store, with their size and last activity.

A view over the read model's listing (:mod:`.._inspect.listing`): the options become a
:class:`~.._inspect.listing.SessionQuery`, the rows it picks are printed.

Each row: id, cwd, created, events, turns, last activity (the time of the last event, or
the creation time when later: a fork's seed keeps its parent's times), parent, and
whether the store marks it never to be pruned (a RETAINED column when one shown is: the
read model's ``retained``). Nothing
is decoded into events, no session is written (a JSONL store's header cache may be
refreshed: ``_persistence/backends/jsonl/header_cache.py``), no lock is taken.

Selecting: ``--cwd PATH`` (that working directory), ``--parent ID`` (the forks of a
session), ``--since WHEN`` / ``--until WHEN`` (last activity at or after / before; a
session with no event counts its creation time; WHEN is an ISO date or time, local
unless it names its zone, or a DURATION back from now: ``7d``, ``12h``). Ordering:
``--sort created|activity|events|id`` (default ``created``, then id): newest (or most
events) first, as ``llm logs`` and ``git log`` list, ids from A to Z (as ``ls -t``, ``ls -S``
and plain ``ls`` order); ``--reverse`` the other way round (oldest first).
Paging: ``--offset N`` rows skipped, then ``--limit N`` rows shown; the last line says
which rows of how many are shown. ``-q`` prints the ids only, ``--json`` the rows
(``--offset``/``--limit`` apply to both). Sessions a plugin hides (its ``hide_session``
hook, from the header alone: the ADK adapter's state sessions), and those its
``name_session`` says are deleted (from summary rows: a deleted ADK session), are left
out unless ``-a``/``--all``, which marks a deleted one so; a row a plugin names
(``name_session``) or labels (``label_session``, from the first events of the logs
shown only) gets a NAME column (the name, else the label), and ``name`` (``deleted``)
and ``label`` in ``--json``.

What each costs:

- The rows shown always need their counts: JSONL reads those logs whole (without parsing
  JSON), SQLite and PostgreSQL answer them in their aggregate query.
- ``--sort activity`` or ``events``, ``--since``, ``--until`` need every session's
  counts, to pick the rows: the backend's
  :meth:`~.._persistence.base.Backend.summaries` (JSONL: every log read once, O(store
  size); SQLite and PostgreSQL: one aggregate query).
- Otherwise (``created`` or ``id``, filtered by ``--cwd`` and ``--parent`` only) a JSONL
  store takes each log's header from its header cache (a ``stat`` per log; the first
  line of a log new or changed since the last listing), picks the page from the
  headers, then reads just the logs of the rows shown; ``-q`` reads no log past its
  header. O(sessions) ``stat`` calls plus O(rows shown) logs. SQLite and PostgreSQL run
  their one query either way.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from .._inspect.describe import field, when
from .._inspect.listing import (
    SessionQuery,
    open_listed_store,
    parse_count,
    select_sessions,
    session_row,
)
from .._inspect.listing import parse_when as parse
from .._persistence.listing import stored_label
from .source import out_json, out_text, store_url
from .support import EXIT_OK, Failure, plugin_manager, registry
from .term import Style, printable, text_table

if TYPE_CHECKING:
    from .._persistence.base import Backend, SessionSummary

__all__ = ["run_ls"]


def parse_when(option: str, text: str) -> float:
    """``--since``/``--until``'s WHEN as epoch milliseconds
    (:func:`~.._inspect.listing.parse_when`).

    :raises InspectUsageError: neither an ISO date/time nor a DURATION (main shows it).
    """
    return parse(option, text)


def _count(option: str, text: str) -> int:
    return parse_count(option, text)


def _open(url: str, named: bool) -> Backend:
    """The backend of the store at ``url``
    (:func:`~.._inspect.listing.open_listed_store`)."""
    return open_listed_store(url, named=named)


def _query(args: argparse.Namespace, *, newest_first: bool = False) -> SessionQuery:
    """What ``ls`` was asked for, checked: the read model's query of its options.

    :param newest_first: the order ``ls`` lists in: newest first (for ``--sort id``, from
        A to Z), which ``--reverse`` turns round.
    :raises InspectUsageError: an option that does not read (main shows it).
    """
    return SessionQuery.parse(cwd=args.cwd, parent=args.parent, since=args.since,
                              until=args.until, limit=args.limit, offset=args.offset,
                              sort=args.sort, reverse=bool(args.reverse),
                              newest_first=newest_first, all=bool(getattr(args, "all", False)))


def _labelled(backend: Backend, rows: list[dict[str, Any]],
              summaries: list[SessionSummary]) -> None:
    """Add each shown row's ``label`` (a plugin's ``label_session``), reading at most the
    first events of the logs shown, and only for a plugin that asks for them."""
    pm = plugin_manager()
    if not pm.hook.label_session.get_hookimpls():
        return
    reg = registry()
    for row, s in zip(rows, summaries, strict=True):
        label = stored_label(backend, s.header, reg, plugins=pm)
        if label is not None:
            row["label"] = label


def run_ls(args: argparse.Namespace) -> int:
    query = _query(args, newest_first=True)
    url = store_url(args)
    backend = _open(url, named=bool(args.store or os.environ.get("DSH_SESSION_STORE")))
    from .._persistence.urls import printable_url

    url = printable_url(url)  # shown from here on: never with its password
    try:
        picked = select_sessions(backend, query, ids_only=args.quiet and not args.json,
                                 plugins=plugin_manager(), registry=registry())
        summaries, total = picked.summaries, picked.total
        rows = [session_row(s, picked.names.get(s.header.id)) for s in summaries]
        if not (args.quiet and not args.json):
            _labelled(backend, rows, summaries)
    except OSError as exc:
        msg = f"cannot list the store {url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    if args.quiet and not args.json:
        out_text("".join(f"{printable(s.header.id)}\n" for s in summaries))
        return EXIT_OK
    if args.json:
        out_json(rows)
        return EXIT_OK
    if not rows:
        if total and query.offset:
            out_text(f"no sessions past the first {query.offset} of {total} in {url}\n")
        else:
            out_text(f"no sessions in {url}\n" if query.unfiltered
                     else f"no sessions match in {url}\n")
        return EXIT_OK
    style = Style.for_stream(sys.stdout)
    # A NAME column only when a plugin names or labels a row shown (docker ps's NAMES):
    # the name one types for it (show, rm...), else the label.
    named = any("label" in r or "name" in r for r in rows)
    kept = any("retained" in r for r in rows)  # a RETAINED column only when one is
    table = [["ID", *(["NAME"] if named else []), "CREATED", "LAST ACTIVITY", "EVENTS",
              "TURNS", "CWD", "PARENT", *(["RETAINED"] if kept else [])]]
    for r in rows:
        table.append([
            r["id"], *([_name(r)] if named else []),
            when(r.get("createdAt")), when(r["lastActivity"]),
            str(r["events"]) + (" +torn" if r["torn"] else ""), str(r["turns"]),
            field(r["cwd"]) if "cwd" in r else "-",
            field(r["parentSession"]) if "parentSession" in r else "-",
            *(["yes" if r.get("retained") else "-"] if kept else []),
        ])
    lines = text_table([[printable(c) for c in row] for row in table],
                       right={4, 5} if named else {3, 4})
    lines[0] = style(lines[0], "bold")
    out_text("\n".join(lines) + "\n" + _footer(len(rows), total, query.offset, url))
    return EXIT_OK


def _name(row: dict[str, Any]) -> str:
    """The NAME column: the session's name (``(deleted)`` when its framework deleted
    it: ``ls --all`` shows it), else its label, else ``-``."""
    if "name" in row:
        return str(row["name"]) + (" (deleted)" if row.get("deleted") else "")
    return str(row.get("label", "-"))


def _footer(shown: int, total: int, offset: int, url: str) -> str:
    """The last line: how many sessions, and which of them a page shows (as ``search``
    says it of its hits)."""
    if shown == total:
        return f"{total} session(s) in {url}\n"
    more = f" (--offset {offset + shown} for more)" if offset + shown < total else ""
    return f"sessions {offset + 1}-{offset + shown} of {total} in {url}{more}\n"
