"""The sessions of a store, listed.

Which ones (a :class:`SessionQuery`), in which order, which page of them, and each as a
row (``dsh-session ls --json``'s shape).

Selecting: ``cwd`` (that working directory), ``parent`` (the forks of a session),
``since`` / ``until`` (last activity at or after / before, epoch ms; a session with no
event counts its creation time). Ordering: ``sort`` ``created|activity|events|id``, each
falling back to the id so that an order is total, ascending unless ``descending``.
Paging: ``offset`` rows skipped, then ``limit`` rows. Sessions a plugin hides (its
``hide_session`` hook, from the header alone), and those a plugin's ``name_session``
says their framework deleted (the ADK adapter's, from summary rows), are left out
unless ``all``; each row a plugin names carries its name.

What each costs:

- The rows picked always need their counts: JSONL reads those logs whole (without
  parsing JSON), SQLite and PostgreSQL answer them in their aggregate query.
- ``sort`` ``activity`` or ``events``, ``since``, ``until`` need every session's counts,
  to pick the rows: the backend's :meth:`~.._persistence.base.Backend.summaries`.
- Otherwise a JSONL store takes each log's header from its header cache, picks the page
  from the headers, then reads just the logs of the rows picked; ``ids_only`` reads no
  log past its header. SQLite and PostgreSQL run their one query either way.
- Whether a row is ``retained`` (never pruned) is the store's retention ledger's, read
  once for the page (not with ``ids_only``).

Nothing is decoded into events, no session is written, no lock is taken.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..errors import InspectUsageError, SourceReadError

if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable

    from .._persistence.base import Backend, SessionSummary
    from .._persistence.listing import SessionName
    from .._plugins.manager import PluginManager
    from .._schema.header import SessionHeader
    from .._schema.registry import EventRegistry

__all__ = [
    "SORTS",
    "SessionPage",
    "SessionQuery",
    "open_listed_store",
    "parse_count",
    "parse_when",
    "select_sessions",
    "session_row",
]

#: The sort keys; each falls back to the id, so that an order is total.
SORTS: Final = ("created", "activity", "events", "id")

_WHEN_HINT = ("WHEN is an ISO date or time (2026-01-01, 2026-01-01T09:00) or a duration "
              "back from now (7d, 12h, 90m)")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _back(text: str) -> datetime.timedelta | None:
    """A DURATION (``7d``, ``12h``, ``1d12h``), or ``None`` when ``text`` is none (or one
    longer than any date can be)."""
    import datetime
    import re

    parts = re.findall(r"(\d+)([smhdw])", text)
    if not text or "".join(n + u for n, u in parts) != text:
        return None
    try:
        return datetime.timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))
    except OverflowError:
        return None


def parse_when(option: str, text: str) -> float:
    """A WHEN (``--since``/``--until``) as epoch milliseconds: an ISO date or time, local
    unless it names its zone, or a DURATION back from now (``7d``, ``12h``).

    :param option: what the text was given as, for the message.
    :raises InspectUsageError: neither.
    """
    import datetime

    if text and text[0].isdigit() and text[-1] in "smhdw":
        back = _back(text)
        if back is not None:
            now = datetime.datetime.now(datetime.UTC)
            try:
                return (now - back).timestamp() * 1000
            except OverflowError:
                msg = f"{option} {text} reaches back before any date"
                raise InspectUsageError(msg, hint=_WHEN_HINT) from None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        msg = f"{option} takes a date, a time or a duration, got {text!r}"
        raise InspectUsageError(msg, hint=_WHEN_HINT) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local, as ls prints times
    return moment.timestamp() * 1000


def parse_count(option: str, text: str) -> int:
    """A count (0 or more) given as text.

    :raises InspectUsageError: anything else.
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"{option} takes a count (0 or more), got {text!r}"
        raise InspectUsageError(msg)
    return value


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


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """Which sessions to list, in which order, which page of them.

    :ivar cwd: only the sessions of this working directory (an absolute path).
    :ivar parent: only the forks of this session.
    :ivar since: only the sessions last active at or after this time (epoch ms).
    :ivar until: only the sessions last active before this time (epoch ms).
    :ivar limit: at most this many rows (``None``: all).
    :ivar offset: rows skipped first.
    :ivar sort: one of :data:`SORTS`.
    :ivar descending: from the largest key down (newest, most events, Z to A).
    :ivar all: the sessions plugins hide (``hide_session``) too.
    :raises InspectUsageError: an unknown sort, a count below 0, ``since`` after ``until``.
    """

    cwd: str | None = None
    parent: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int | None = None
    offset: int = 0
    sort: str = "created"
    descending: bool = False
    all: bool = False

    def __post_init__(self) -> None:
        if self.sort not in SORTS:
            msg = f"sort takes one of {', '.join(SORTS)}, got {self.sort!r}"
            raise InspectUsageError(msg)
        for name in ("limit", "offset"):
            value = getattr(self, name)
            if value is not None and value < 0:
                msg = f"{name} takes a count (0 or more), got {value!r}"
                raise InspectUsageError(msg)
        if self.since is not None and self.until is not None and self.since > self.until:
            msg = "since is after until: nothing can match"
            raise InspectUsageError(msg)

    @classmethod
    def parse(cls, *, cwd: str | None = None, parent: str | None = None,
              since: str | None = None, until: str | None = None,
              limit: str | None = None, offset: str | None = None, sort: str = "created",
              reverse: bool = False, newest_first: bool = False,
              all: bool = False) -> SessionQuery:
        """The query a person typed (``ls``'s options, the viewer's URL parameters), each
        value as text; ``None`` leaves it out. A relative ``cwd`` is made absolute.

        :param newest_first: ``ls``'s order: newest (or most events) first, ids from A
            to Z; else ascending. ``reverse`` turns either round.
        :raises InspectUsageError: a value that does not read (the message names the
            ``ls`` option).
        """
        if cwd is not None and not cwd:
            msg = "--cwd takes a path, got ''"
            raise InspectUsageError(msg)
        if parent is not None and not parent:
            msg = "--parent takes a session id, got ''"
            raise InspectUsageError(msg)
        after = None if since is None else parse_when("--since", since)
        before = None if until is None else parse_when("--until", until)
        if after is not None and before is not None and after > before:
            msg = f"--since {since} is after --until {until}: nothing can match"
            raise InspectUsageError(msg)
        return cls(cwd=None if cwd is None else os.path.abspath(cwd), parent=parent,
                   since=after, until=before,
                   limit=None if limit is None else parse_count("--limit", limit),
                   offset=0 if offset is None else parse_count("--offset", offset),
                   sort=sort, descending=(newest_first and sort != "id") != reverse,
                   all=all)

    @property
    def needs_counts(self) -> bool:
        """Whether picking the rows needs every session's counts."""
        return (self.sort in ("activity", "events") or self.since is not None
                or self.until is not None)

    @property
    def unfiltered(self) -> bool:
        """Whether every session is asked for (no filter, no page)."""
        return (self.cwd is None and self.parent is None and self.since is None
                and self.until is None and self.offset == 0 and self.limit != 0)

    def header_matches(self, header: SessionHeader) -> bool:
        """Whether the session's header passes ``cwd`` and ``parent``."""
        from msgspec import UNSET

        if self.cwd is not None and (header.cwd is UNSET or header.cwd != self.cwd):
            return False
        return self.parent is None or header.parent_session == self.parent

    def summary_matches(self, s: SessionSummary) -> bool:
        """Whether the session passes every filter."""
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
        """The page of ``items``, in the query's order by ``key``."""
        if self.limit is None:
            items.sort(key=key, reverse=self.descending)
            return items[self.offset:]
        # The first offset + limit rows only: a heap, not a sort of every session (the
        # same rows: nsmallest/nlargest are sorted()[:n], and every key ends with the id).
        import heapq

        pick = heapq.nlargest if self.descending else heapq.nsmallest
        return pick(self.offset + self.limit, items, key=key)[self.offset:]


@dataclass(frozen=True, slots=True)
class SessionPage:
    """The sessions a query picked.

    :ivar summaries: the rows, in order (with ``ids_only``, counts are zeros).
    :ivar total: how many sessions match in all (the page aside).
    :ivar names: the names plugins give the sessions picked, by id (``name_session``).
    """

    summaries: list[SessionSummary]
    total: int
    names: dict[str, SessionName] = field(default_factory=dict)


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


def select_sessions(backend: Backend, query: SessionQuery, *, ids_only: bool = False,
                    plugins: PluginManager | None = None,
                    registry: EventRegistry | None = None) -> SessionPage:
    """The sessions of the store ``query`` picks. Without a counting sort or time
    filter, the page is picked from the headers alone (``Backend.list``) and only its
    rows are summarized (``Backend.summaries_of``).

    Each row says whether the store marks it never to be pruned (``retained``: the
    store's retention ledger, read once; a ledger that does not read marks none).

    :param ids_only: the counts are not needed (zeros), unless the query needs them, nor
        the marks (none read).
    :param plugins: the plugins that hide and name sessions (default: the installed
        ones).
    :param registry: the event registry the names' summary rows are read with
        (default: the plugins').
    :raises OSError: the store cannot be read.
    """
    from .._persistence.base import SessionSummary
    from .._persistence.capabilities import summaries_of

    shown_to = _visible(query, plugins)
    if not query.needs_counts:
        key = _header_key(query.sort)
        headers = backend.list()
        if query.cwd is not None or query.parent is not None:
            headers = [h for h in headers if query.header_matches(h)]
        if shown_to is not None:
            headers = [h for h in headers if shown_to(h)]
        names = _names(backend, headers, query, plugins, registry)
        headers = [h for h in headers if h.id not in names.gone]
        total = len(headers)
        shown = query.page(headers, key)
        if ids_only:
            return SessionPage([SessionSummary(h, 0, 0) for h in shown], total,
                               names.of(shown))
        return SessionPage(_marked(backend, summaries_of(backend, shown)), total,
                           names.of(shown))
    found = [s for s in backend.summaries() if query.summary_matches(s)
             and (shown_to is None or shown_to(s.header))]
    names = _names(backend, [s.header for s in found], query, plugins, registry)
    found = [s for s in found if s.header.id not in names.gone]
    picked = query.page(found, _summary_key(query.sort))
    return SessionPage(_marked(backend, picked), len(found),
                       names.of([s.header for s in picked]))


class _Names:
    """The names of the sessions a listing picks from, and those deleted that it leaves
    out (none, for ``all``)."""

    def __init__(self, names: dict[str, SessionName], show_deleted: bool) -> None:
        self.names = names
        self.gone = frozenset() if show_deleted else frozenset(
            sid for sid, n in names.items() if n.deleted)

    def of(self, headers: list[SessionHeader]) -> dict[str, SessionName]:
        return {h.id: self.names[h.id] for h in headers if h.id in self.names}


def _names(backend: Backend, headers: list[SessionHeader], query: SessionQuery,
           plugins: PluginManager | None, registry: EventRegistry | None) -> _Names:
    """The names plugins give ``headers``' sessions (``name_session``: summary rows, no
    log), read only when a plugin names sessions."""
    from .._persistence.projections.naming import stored_names
    from .stores import installed_plugins

    pm = plugins if plugins is not None else installed_plugins()
    if not pm.hook.name_session.get_hookimpls():
        return _Names({}, query.all)
    if registry is None:
        from .._plugins.manager import PluginHooks

        registry = PluginHooks(pm).build_registry()
    return _Names(stored_names(backend, headers, registry, plugins=pm), query.all)


def _marked(backend: Backend, summaries: list[SessionSummary]) -> list[SessionSummary]:
    """``summaries``, those the store marks never to be pruned saying so."""
    if not summaries:
        return summaries
    import dataclasses

    from .marks import retained_ids

    kept = retained_ids(backend)
    return [dataclasses.replace(s, retained=True) if s.header.id in kept else s
            for s in summaries]


def _visible(query: SessionQuery, plugins: PluginManager | None
             ) -> Callable[[SessionHeader], bool] | None:
    """Which headers are listed: those neither core (its retention ledger) nor a plugin
    hides (``None``: every one, for ``all``). Header-only: no log read."""
    if query.all:
        return None
    from .._base.names import RETENTION_LEDGER_ID
    from .._persistence.listing import is_hidden
    from .stores import installed_plugins

    pm = plugins if plugins is not None else installed_plugins()
    if not pm.hook.hide_session.get_hookimpls():
        return lambda h: h.id != RETENTION_LEDGER_ID
    return lambda h: not is_hidden(h, plugins=pm)


def session_row(summary: SessionSummary, name: SessionName | None = None
                ) -> dict[str, Any]:
    """A session as a row of ``dsh-session ls --json``: its header's wire fields (without
    ``type``), ``events``, ``turns``, ``lastActivity``, ``torn``, ``retained: true``
    when the store marks it never to be pruned, and its ``name`` (a plugin's, with
    ``deleted: true`` when its framework deleted it) when it has one."""
    from .describe import wire_of

    row: dict[str, Any] = wire_of(summary.header)
    del row["type"]
    row.update(events=summary.events, turns=summary.turns,
               lastActivity=summary.last_activity, torn=summary.torn)
    if summary.retained:
        row["retained"] = True
    if name is not None:
        row["name"] = name.name
        if name.deleted:
            row["deleted"] = True
    return row


def open_listed_store(url: str, *, named: bool) -> Backend:
    """The backend of the store at ``url``, to list; a store the user ``named``
    (``--store``, ``$DSH_SESSION_STORE``) must exist, the default one lists nothing until
    written.

    :raises InspectError: what :func:`~.stores.open_store` refuses, or a named store
        that does not exist (:class:`~..errors.SourceReadError`).
    """
    from .stores import open_store

    backend = open_store(url)  # a path naming a database is refused there, with its URL
    if named and not backend.exists():
        backend.close()
        msg = f"no store at {url}"
        hint = "check the path: a store is made by the first session written to it"
        raise SourceReadError(msg, hint=hint)
    return backend
