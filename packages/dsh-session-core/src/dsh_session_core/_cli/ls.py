"""``dsh-session ls``: the sessions in a store, with their size and last activity.

Each row: id, cwd, created, events, turns, last activity (the time of the last event, or
the creation time when later: a fork's seed keeps its parent's times), parent. Nothing
is decoded into events, no session is written (a JSONL store's header cache may be
refreshed: ``_persistence/header_cache.py``), no lock is taken.

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
hook, from the header alone: the ADK adapter's state sessions) are left out unless
``-a``/``--all``; a row a plugin labels (``label_session``, from the first events of the
logs shown only) gets a NAME column and a ``label`` in ``--json``.

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

from .support import EXIT_OK, EXIT_USAGE, Failure

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._header import SessionHeader
    from .._persistence.base import Backend, SessionSummary

__all__ = ["run_ls"]

#: The sort keys of ``--sort``; each falls back to the id, so that an order is total.
SORTS = ("created", "activity", "events", "id")

_WHEN_HINT = ("WHEN is an ISO date or time (2026-01-01, 2026-01-01T09:00) or a duration "
              "back from now (7d, 12h, 90m)")


def _row(summary: SessionSummary) -> dict[str, Any]:
    from .describe import wire_of

    row: dict[str, Any] = wire_of(summary.header)
    del row["type"]
    row.update(events=summary.events, turns=summary.turns,
               lastActivity=summary.last_activity, torn=summary.torn)
    return row


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def _time(value: Any) -> float | None:
    """A stored time as epoch ms, ``None`` when it is no finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return float(value)


def parse_when(option: str, text: str) -> float:
    """``--since``/``--until``'s WHEN as epoch milliseconds.

    :raises Failure: neither an ISO date/time nor a DURATION (a usage error).
    """
    import datetime

    from .lifecycle import parse_duration

    if text and text[0].isdigit() and text[-1] in "smhdw":
        try:
            back = parse_duration(text)
        except Failure:
            pass
        else:
            now = datetime.datetime.now(datetime.UTC)
            try:
                return (now - back).timestamp() * 1000
            except OverflowError:
                msg = f"{option} {text} reaches back before any date"
                raise Failure(msg, EXIT_USAGE, hint=_WHEN_HINT) from None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        msg = f"{option} takes a date, a time or a duration, got {text!r}"
        raise Failure(msg, EXIT_USAGE, hint=_WHEN_HINT) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local, as ls prints times
    return moment.timestamp() * 1000


def _count(option: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"{option} takes a count (0 or more), got {text!r}"
        raise Failure(msg, EXIT_USAGE)
    return value


def _open(url: str, named: bool) -> Backend:
    """The backend of the store at ``url``; a store the user ``named`` (``--store``,
    ``$DSH_SESSION_STORE``) must exist, the default one lists nothing until written."""
    from .source import open_backend

    backend = open_backend(url)
    if named and not backend.exists():
        backend.close()
        msg = f"no store at {url}"
        from .._persistence.urls import url_for

        sqlite = url_for("sqlite", url)  # the path as given: relative stays relative
        hint = (f"a SQLite database is named by its URL: --store {sqlite}"
                if url.endswith(".db")
                else "check the path: a store is made by the first session written to it")
        raise Failure(msg, hint=hint)
    return backend


class _Query:
    """What ``ls`` was asked for, checked.

    :param newest_first: the order ``ls`` lists in: newest first (for ``--sort id``, from
        A to Z), which ``--reverse`` turns round; else (the viewer's) ascending, or
        descending with ``reverse``.
    """

    def __init__(self, args: argparse.Namespace, *, newest_first: bool = False) -> None:
        self.cwd: str | None = None
        if args.cwd is not None:
            if not args.cwd:
                msg = "--cwd takes a path, got ''"
                raise Failure(msg, EXIT_USAGE)
            self.cwd = os.path.abspath(args.cwd)
        if args.parent is not None and not args.parent:
            msg = "--parent takes a session id, got ''"
            raise Failure(msg, EXIT_USAGE)
        self.parent: str | None = args.parent
        self.since = None if args.since is None else parse_when("--since", args.since)
        self.until = None if args.until is None else parse_when("--until", args.until)
        if self.since is not None and self.until is not None and self.since > self.until:
            msg = f"--since {args.since} is after --until {args.until}: nothing can match"
            raise Failure(msg, EXIT_USAGE)
        self.limit = None if args.limit is None else _count("--limit", args.limit)
        self.offset = 0 if args.offset is None else _count("--offset", args.offset)
        self.sort: str = args.sort
        #: Whether the sessions plugins hide (``hide_session``) are listed too.
        self.all: bool = bool(getattr(args, "all", False))
        #: Whether the rows go from the largest key down.
        self.reverse: bool = (newest_first and self.sort != "id") != bool(args.reverse)

    @property
    def needs_counts(self) -> bool:
        """Whether picking the rows needs every session's counts."""
        return (self.sort in ("activity", "events") or self.since is not None
                or self.until is not None)

    def header_matches(self, header: SessionHeader) -> bool:
        from msgspec import UNSET

        if self.cwd is not None and (header.cwd is UNSET or header.cwd != self.cwd):
            return False
        return self.parent is None or header.parent_session == self.parent

    def summary_matches(self, s: SessionSummary) -> bool:
        if not self.header_matches(s.header):
            return False
        if self.since is None and self.until is None:
            return True
        when = _time(s.last_activity)
        if when is None:
            when = _time(s.header.created_at)
        if when is None:
            return False  # its age cannot be told: outside every window
        return ((self.since is None or when >= self.since)
                and (self.until is None or when < self.until))

    def page(self, items: list[Any], key: Callable[[Any], Any]) -> list[Any]:
        if self.limit is None:
            items.sort(key=key, reverse=self.reverse)
            return items[self.offset:]
        # The first offset + limit rows only: a heap, not a sort of every session (the
        # same rows: nsmallest/nlargest are sorted()[:n], and every key ends with the id).
        import heapq

        pick = heapq.nlargest if self.reverse else heapq.nsmallest
        return pick(self.offset + self.limit, items, key=key)[self.offset:]


def _header_key(sort: str) -> Callable[[SessionHeader], Any]:
    if sort == "id":
        return lambda h: h.id
    return lambda h: (_number(h.created_at), h.id)


def _summary_key(sort: str) -> Callable[[SessionSummary], Any]:
    if sort == "activity":
        return lambda s: (_time(s.last_activity) is not None, _number(s.last_activity),
                          s.header.id)
    if sort == "events":
        return lambda s: (s.events, s.header.id)
    by_header = _header_key(sort)
    return lambda s: by_header(s.header)


def _select(backend: Backend, query: _Query, ids_only: bool) -> list[SessionSummary]:
    """The summaries of the rows to show (:func:`_select_counted`'s)."""
    return _select_counted(backend, query, ids_only)[0]


def _select_counted(backend: Backend, query: _Query, ids_only: bool
                    ) -> tuple[list[SessionSummary], int]:
    """The summaries of the rows to show (for ``ids_only`` and no counting sort, with no
    counts: zeros), and how many sessions match in all. Without a counting sort or time
    filter, the page is picked from the headers alone (``Backend.list``) and only its
    rows are summarized (``Backend.summaries_of``: a JSONL store reads just those logs;
    SQLite and PostgreSQL run one query for the headers and one for the page)."""
    from .._persistence.base import SessionSummary
    from .._persistence.capabilities import summaries_of

    shown_to = _visible(query)
    if not query.needs_counts:
        key = _header_key(query.sort)
        headers = backend.list()
        if query.cwd is not None or query.parent is not None:
            headers = [h for h in headers if query.header_matches(h)]
        if shown_to is not None:
            headers = [h for h in headers if shown_to(h)]
        total = len(headers)
        shown = query.page(headers, key)
        if ids_only:
            return [SessionSummary(h, 0, 0) for h in shown], total
        return summaries_of(backend, shown), total
    found = [s for s in backend.summaries() if query.summary_matches(s)
             and (shown_to is None or shown_to(s.header))]
    return query.page(found, _summary_key(query.sort)), len(found)


def _visible(query: _Query) -> Callable[[SessionHeader], bool] | None:
    """Which headers are listed: those no plugin hides (``None``: every one, for
    ``--all`` or when no plugin implements ``hide_session``). Header-only: no log read."""
    if query.all:
        return None
    from .._listing import is_hidden
    from .support import plugin_manager

    pm = plugin_manager()
    if not pm.hook.hide_session.get_hookimpls():
        return None
    return lambda h: not is_hidden(h, plugins=pm)


def _labelled(backend: Backend, rows: list[dict[str, Any]],
              summaries: list[SessionSummary]) -> None:
    """Add each shown row's ``label`` (a plugin's ``label_session``), reading at most the
    first events of the logs shown, and only for a plugin that asks for them."""
    from .._listing import stored_label
    from .support import plugin_manager, registry

    pm = plugin_manager()
    if not pm.hook.label_session.get_hookimpls():
        return
    reg = registry()
    for row, s in zip(rows, summaries, strict=True):
        label = stored_label(backend, s.header, reg, plugins=pm)
        if label is not None:
            row["label"] = label


def run_ls(args: argparse.Namespace) -> int:
    from .describe import field, when
    from .source import out_json, out_text, store_url
    from .term import Style, printable, text_table

    query = _Query(args, newest_first=True)
    url = store_url(args)
    backend = _open(url, named=bool(args.store or os.environ.get("DSH_SESSION_STORE")))
    try:
        summaries, total = _select_counted(backend, query,
                                           ids_only=args.quiet and not args.json)
        rows = [_row(s) for s in summaries]
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
            out_text(f"no sessions in {url}\n" if _unfiltered(query)
                     else f"no sessions match in {url}\n")
        return EXIT_OK
    style = Style.for_stream(sys.stdout)
    # A NAME column only when a plugin labels a row shown (docker ps's NAMES).
    named = any("label" in r for r in rows)
    table = [["ID", *(["NAME"] if named else []), "CREATED", "LAST ACTIVITY", "EVENTS",
              "TURNS", "CWD", "PARENT"]]
    for r in rows:
        table.append([
            r["id"], *([r.get("label", "-")] if named else []),
            when(r.get("createdAt")), when(r["lastActivity"]),
            str(r["events"]) + (" +torn" if r["torn"] else ""), str(r["turns"]),
            field(r["cwd"]) if "cwd" in r else "-",
            field(r["parentSession"]) if "parentSession" in r else "-",
        ])
    lines = text_table([[printable(c) for c in row] for row in table],
                       right={4, 5} if named else {3, 4})
    lines[0] = style(lines[0], "bold")
    out_text("\n".join(lines) + "\n" + _footer(len(rows), total, query.offset, url))
    return EXIT_OK


def _footer(shown: int, total: int, offset: int, url: str) -> str:
    """The last line: how many sessions, and which of them a page shows (as ``search``
    says it of its hits)."""
    if shown == total:
        return f"{total} session(s) in {url}\n"
    more = f" (--offset {offset + shown} for more)" if offset + shown < total else ""
    return f"sessions {offset + 1}-{offset + shown} of {total} in {url}{more}\n"


def _unfiltered(query: _Query) -> bool:
    return (query.cwd is None and query.parent is None and query.since is None
            and query.until is None and query.offset == 0 and query.limit != 0)
