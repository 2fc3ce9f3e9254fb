"""The read model: what a store, a session or a log file holds, for a person to look at.

It reads without writing anything and without taking a lock, so looking at a live
session never disturbs its writer. ``dsh-session ls``, ``show``, ``search`` and the
viewer (``dsh-session view``) are views over it; an application may be one too:

- **listing**: a :class:`SessionQuery` (filters, order, page) picks sessions of a store
  (:func:`select_sessions`, a :class:`SessionPage` of typed summaries);
  :func:`session_row` is a row of ``ls --json``;
- **a SOURCE**: a :class:`SourceSpec` (a log file's path or a session id, and the store)
  is read by one rule (:func:`resolve_source`, :func:`load_source`) into a
  :class:`Source`: the header, the events, where they came from, the warnings; which
  stored session an id, a name (a plugin's ``name_session``) or an id prefix names is
  :func:`find_session`'s rule;
- **listing** rows and **the timeline** say whether the store marks a session never to
  be pruned (``retained``: its retention ledger's, read by the read model);
- **the timeline**: :func:`build_timeline`, turn by turn, as one JSON-ready document
  (``show --json``'s), :func:`render_timeline`, the same as text for people (``show``'s,
  the demo's), :func:`timeline_blocks`, which events each of its blocks holds (the rule
  alone, for a long log), and :func:`unanswered_calls`;
- **search**: a :class:`SearchQuery` over a store (:func:`search_store`) or one
  session's lines (:func:`search_lines`), a page of it (:func:`search_page`);
- **wire shapes**: :func:`wire_of` (a value as plain JSON builtins), :func:`wire_events`,
  :func:`encode_json`, :func:`event_line`, :func:`line_wire`.

What it cannot answer is an :class:`~dsh_session_core.errors.InspectError` carrying a
one-line message and a hint: :class:`~dsh_session_core.errors.InspectUsageError` (asked
wrongly), :class:`~dsh_session_core.errors.SessionNotFoundError`,
:class:`~dsh_session_core.errors.SourceReadError`. See docs/inspect.md.
"""

from __future__ import annotations

from ._inspect.describe import wire_events, wire_of
from ._inspect.listing import (
    SORTS,
    SessionPage,
    SessionQuery,
    open_listed_store,
    parse_when,
    select_sessions,
    session_row,
)
from ._inspect.lookup import find_session
from ._inspect.render import render_timeline
from ._inspect.sources import (
    Source,
    SourceSpec,
    check_session_id,
    is_log_file,
    load_source,
    not_found,
    resolve_source,
)
from ._inspect.stores import open_store, store_url
from ._inspect.text import one_line
from ._inspect.timeline import build_timeline, timeline_blocks
from ._inspect.wire import encode_json, event_line, line_wire
from ._model.unanswered import UnansweredCall, unanswered_calls
from ._persistence.search import lines_hits as search_lines
from ._persistence.search import search_backend as search_store
from ._persistence.search import search_page
from ._search import SearchHit, SearchQuery

__all__ = [
    "SORTS",
    "SearchHit",
    "SearchQuery",
    "SessionPage",
    "SessionQuery",
    "Source",
    "SourceSpec",
    "UnansweredCall",
    "build_timeline",
    "check_session_id",
    "encode_json",
    "event_line",
    "find_session",
    "is_log_file",
    "line_wire",
    "load_source",
    "not_found",
    "one_line",
    "open_listed_store",
    "open_store",
    "parse_when",
    "render_timeline",
    "resolve_source",
    "search_lines",
    "search_page",
    "search_store",
    "select_sessions",
    "session_row",
    "store_url",
    "timeline_blocks",
    "unanswered_calls",
    "wire_events",
    "wire_of",
]
