"""Reading what a durable store holds without writing it.

A page of a session, its tail, the lines of some event types, a search over every
session, and following one from asyncio. Nothing here writes, takes a writer lock or
repairs a crash; a backend's cheaper ways (:mod:`.capabilities`) answer where it has
them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Collection, Iterable
from typing import TYPE_CHECKING

from ...events import Event
from ..base import not_found
from .base import StoreBase

if TYPE_CHECKING:
    import datetime

    from ..._search import SearchResults, Sort

__all__ = ["StoredReads"]


class StoredReads(StoreBase):
    """The reading part of :class:`~.durable.DurableStore` (see the module's docstring)."""

    def read(self, session_id: str, *, after: int = -1, limit: int | None = None
             ) -> list[Event]:
        """The stored events whose seq is greater than ``after``, at most ``limit`` of them,
        oldest first, decoded with this store's event types: a page of a session, read
        without loading the rest (JSONL: a binary search over the log; SQLite and
        PostgreSQL: a key range). Only what is stored is read (a live session's appends
        once flushed); nothing is written, no lock is taken, no crash is repaired.

        :param after: the seq the page starts after (``-1``: from the first event).
        :param limit: at most this many events (``None``: every one after ``after``).
        :raises SessionNotStoredError: nothing is stored under this id.
        :raises ValueError: a negative ``limit``.
        """
        from ..._schema.decode import decode_lines
        from ..capabilities import read_lines_of

        if limit is not None and (type(limit) is not int or limit < 0):
            msg = f"limit takes a count of events (0 or more) or None, got {limit!r}"
            raise ValueError(msg)
        lines = read_lines_of(self.capabilities, session_id, int(after), limit)
        if lines is None:
            raise not_found(session_id)
        return decode_lines(self.registry, lines)

    def tail(self, session_id: str, count: int) -> list[Event]:
        """The last ``count`` stored events, oldest first, read from the end of the log
        (JSONL: backwards in blocks; SQLite and PostgreSQL: the last keys), decoded with
        this store's event types. A torn last line is left out. Nothing is written.

        :raises SessionNotStoredError: nothing is stored under this id.
        :raises ValueError: a negative ``count``.
        """
        from ..._schema.decode import decode_lines

        if type(count) is not int or count < 0:
            msg = f"count takes a number of events (0 or more), got {count!r}"
            raise ValueError(msg)
        found = self.backend.tail_lines(session_id, count)
        if found is None:
            raise not_found(session_id)
        return decode_lines(self.registry, found.lines)

    def read_lines(self, session_id: str, *, types: Collection[str]) -> list[bytes]:
        """The stored log lines of the events whose type is one of ``types``, oldest
        first, undecoded: for a reader that decodes them into types of its own, in one
        call, and needs no other event (JSONL: one read of the file and a search of its
        bytes, the other lines never split out). A line whose type cannot be told
        without parsing it (written by hand, ``type`` not first) is among them: the
        reader's decoding decides. Only what is stored is read; nothing is written, no
        lock is taken, no crash is repaired (a torn last line is left out).

        :raises SessionNotStoredError: nothing is stored under this id.
        """
        from ..capabilities import lines_of_types_of

        lines = lines_of_types_of(self.capabilities, session_id, types)
        if lines is None:
            raise not_found(session_id)
        return lines

    async def aread_lines(self, session_id: str, *, types: Collection[str]) -> list[bytes]:
        """:meth:`read_lines` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.read_lines, session_id, types=types)

    async def aread(self, session_id: str, *, after: int = -1, limit: int | None = None
                    ) -> list[Event]:
        """:meth:`read` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.read, session_id, after=after, limit=limit)

    async def atail(self, session_id: str, count: int) -> list[Event]:
        """:meth:`tail` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.tail, session_id, count)

    def afollow(
        self,
        session_id: str,
        *,
        last: int = 0,
        timeout: float | None = None,
        on_note: Callable[[str], object] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Follow a stored session from asyncio: ``async for event in
        store.afollow(id)`` gives its ``last`` stored events, then each event as it is
        committed (by this store or any other writer), decoded with this store's event
        types: what ``dsh-session tail -n LAST -f`` prints, as events.

        PostgreSQL waits on the session's NOTIFY channel natively, Redis on ``XREAD``;
        the other backends are polled every :data:`~.base.POLL_SECONDS`, each poll a
        short call in a thread (nothing waits in a thread, so a cancelled follower
        leaves nothing running).

        It ends after ``timeout`` seconds without news (``None``: never), or when its
        consumer is cancelled, closing what it opened (PostgreSQL: its listening
        connection). After a ``break``, close it at once with
        ``contextlib.aclosing(store.afollow(...))`` rather than leave that to the
        garbage collector.

        :param last: how many stored events to give first (``0``: only new ones).
        :param on_note: called with a note for people when the log was cut back under
            the follower (a crash repair): the events that follow continue from the seq
            it was cut back to.
        :raises SessionNotStoredError: nothing is stored under this id (a session is
            stored from its first flushed event on).
        :raises LogFormatError: a stored line is not JSON.
        """
        from ..aio import follow_events

        return follow_events(self.backend, self.persistence, session_id, last, timeout,
                             on_note)

    # --- full-text search ---------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        types: Iterable[str] = (),
        roles: Iterable[str] = (),
        sessions: Iterable[str] = (),
        since: datetime.datetime | int | float | None = None,
        until: datetime.datetime | int | float | None = None,
        sort: Sort = "newest",
        limit: int | None = None,
        offset: int = 0,
    ) -> SearchResults:
        """Search the stored sessions' messages, tool calls and tool results.

        ``query`` is words that must all be in an event (caseless, whole words;
        ``word*`` for a prefix, ``"two words"`` for a phrase); what is searched and how
        words are told apart is in docs/search.md. Only what is stored is searched: a
        live session's appends are found once flushed. SQLite and PostgreSQL answer
        from an index kept in step with the log; JSONL scans the logs. Every backend
        gives the same hits for the same sessions.

        A session that cannot be read takes nothing else down: the other sessions are
        searched, and it is named in the answer's ``unreadable``, with why (a damaged
        record, an encrypted record that fails its authentication, a key not in the
        keyring: a crypto-shredded session; an encrypted session, in a store opened
        without keys). Check it where a missing hit matters (docs/search.md).

        :param types: only these event types (``tool/result``...).
        :param roles: only these roles: ``user``, ``assistant``, ``tool``.
        :param sessions: only these sessions.
        :param since: only events at or after this moment (a datetime, or epoch ms).
        :param until: only events before this moment.
        :param sort: ``"newest"`` first, or most ``"relevance"`` first.
        :param limit: at most this many hits (``None``: all).
        :param offset: skip this many hits first (paging).
        :returns: the hits (:class:`~dsh_session_core.SearchHit`), in ``sort`` order:
            a list (:class:`~dsh_session_core.SearchResults`) whose ``unreadable`` names
            the sessions the search could not read (:class:`~dsh_session_core.
            UnreadableSession`: the session's id and the error).
        :raises ValueError: a query without words, an unknown type or role, a negative
            limit or offset.
        """
        from ..._search import SearchQuery
        from ..search import search_backend, search_page

        if limit is not None and (type(limit) is not int or limit < 0):
            msg = f"limit takes a count of hits (0 or more) or None, got {limit!r}"
            raise ValueError(msg)
        if type(offset) is not int or offset < 0:
            msg = f"offset takes a count of hits (0 or more), got {offset!r}"
            raise ValueError(msg)
        if sort not in ("newest", "relevance"):
            msg = f"sort is 'newest' or 'relevance', got {sort!r}"
            raise ValueError(msg)
        parsed = SearchQuery.parse(query, types=types, roles=roles, sessions=sessions,
                                   since=_moment(since, "since"),
                                   until=_moment(until, "until"))
        return search_page(search_backend(self.capabilities, parsed), sort, limit, offset)

    async def asearch(
        self,
        query: str,
        *,
        types: Iterable[str] = (),
        roles: Iterable[str] = (),
        sessions: Iterable[str] = (),
        since: datetime.datetime | int | float | None = None,
        until: datetime.datetime | int | float | None = None,
        sort: Sort = "newest",
        limit: int | None = None,
        offset: int = 0,
    ) -> SearchResults:
        """:meth:`search` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(
            self.search, query, types=tuple(types), roles=tuple(roles),
            sessions=tuple(sessions), since=since, until=until, sort=sort, limit=limit,
            offset=offset)


def _moment(value: object, name: str) -> int | float | None:
    """A search bound as epoch ms: a datetime (naive: local time), or a number."""
    import datetime

    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return value.timestamp() * 1000
    if type(value) in (int, float):
        return value  # type: ignore[return-value]
    msg = f"{name} takes a datetime or epoch milliseconds, got {value!r}"
    raise TypeError(msg)
