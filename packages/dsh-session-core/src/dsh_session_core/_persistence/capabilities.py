"""The optional capabilities of a backend, beside the :class:`~.base.Backend` protocol.

Each a small protocol of its own, and the record of which ones a backend has.

:class:`~.base.Backend` is what every backend does. A backend may do more, cheaper or
natively: search an index, summarize some sessions only, read lines by type, delete,
or run an operation on asyncio. Each such capability is one protocol here, so that a
backend author sees what they may add and type checkers check it; the built-in backends
implement them structurally (none subclasses anything).

What a backend has is found once, when it is taken into use (a store's coordinator
built on it, a command opening it: :meth:`Capabilities.of`), by ``isinstance`` against
these runtime-checkable protocols, and kept in a frozen :class:`Capabilities`; every
caller then asks that record, never the backend (no ``getattr`` probe: the architecture
test refuses one). A backend that wraps another (:class:`Wrapper`: an encrypted store's
sealing one) defines each method it may pass on, and has a capability only where the
backend it wraps has it: its record is its own, cut down to the wrapped one's. The
helpers at the end take either the record or a bare backend, whose record is made then.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import AsyncGenerator, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._schema.header import SessionHeader
from ..events import Event
from .base import (
    Backend,
    Deleted,
    LogNews,
    LogTail,
    SessionSummary,
    WriterLock,
    keep_types,
)
from .rows import RowChanges, RowQuery

if TYPE_CHECKING:
    from .._search import SearchHit, SearchQuery

__all__ = [
    "AsyncAppend",
    "AsyncClose",
    "AsyncFollow",
    "AsyncList",
    "AsyncTail",
    "Capabilities",
    "Deletable",
    "HeldDeletable",
    "LineReads",
    "Projecting",
    "Resumable",
    "Rewritable",
    "Scrubbable",
    "Searchable",
    "SelectiveSummaries",
    "TypedLineReads",
    "Wrapper",
    "capabilities_of",
    "lines_of_types_of",
    "lines_since_of",
    "read_lines_of",
    "summaries_of",
]


# --- reading ------------------------------------------------------------------------------


@runtime_checkable
class Searchable(Protocol):
    """A backend that answers a search itself (an index: SQLite's FTS5, PostgreSQL's
    ``tsvector``; JSONL's parallel scan of its files). Without it, each session is
    loaded and its lines matched (``DurableStore.search`` gives the same hits)."""

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query`` in the store, in no order. A
        :class:`~dsh_session_core.SearchResults` may say which sessions it could not
        read (its ``unreadable``): their hits are missing."""
        ...


@runtime_checkable
class SelectiveSummaries(Protocol):
    """A backend that summarizes the sessions of some headers only (JSONL reads just
    those logs; the databases run one query for those ids). Without it,
    :meth:`~.base.Backend.summaries` is filtered."""

    def summaries_of(self, headers: Sequence[SessionHeader]
                     ) -> builtins.list[SessionSummary]:
        """The summaries of ``headers``' sessions, in their order; one gone since is
        left out."""
        ...


@runtime_checkable
class LineReads(Protocol):
    """A backend that reads a page of a session's lines (:meth:`~.base.Backend.read_lines`)
    without loading it. A backend that subclasses :class:`~.base.Backend` inherits the
    default, which loads the session; one that does not is given that default."""

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The lines of the events after seq ``after``, at most ``limit``."""
        ...


@runtime_checkable
class TypedLineReads(Protocol):
    """A backend that reads the lines of some event types only (JSONL searches the
    file's bytes; the databases select by the ``type`` column). Without it, every line
    is read and those are kept."""

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """The lines of the stored events of ``types`` (see :func:`lines_of_types_of`)."""
        ...


@runtime_checkable
class Resumable(Protocol):
    """A backend that reads a log from a writer's last event on
    (:meth:`~.base.Backend.lines_since`), to take a released session back. Without it,
    the session is loaded (the protocol's default)."""

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """The lines stored after ``last``, when the log still holds it."""
        ...


# --- projections --------------------------------------------------------------------------


@runtime_checkable
class Projecting(Protocol):
    """A backend that keeps projection rows beside the log (:mod:`.rows`): in the same
    transaction as the events (SQLite, PostgreSQL, memory), or in a sidecar written
    just after them (JSONL). Without it, every read of a projection folds the log.

    Rows, summaries and marks are opaque bytes to the backend; the store checks a mark
    against the log before it trusts the rows. A backend removes a session's rows with
    the session (``delete``), and never returns rows of another session or projection.
    """

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        """:meth:`~.base.Backend.append_batch`, and the rows' ``changes`` with it (in its
        transaction; or, where the log is a file, just after it: a failure to write
        them leaves the appended log as it is, its rows behind it)."""
        ...

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        """Apply ``changes`` to the session's rows alone (a rebuild, a catch-up); the
        caller holds the session's writer lock."""
        ...

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        """The stored mark of each projection the session has rows of."""
        ...

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order."""
        ...

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        """``(session id, mark, summary)`` of the sessions with a summary row of
        ``name`` (of ``session_ids`` only, when given), in no order."""
        ...

    def drop_projections(self, session_id: str | None) -> None:
        """Remove every row, summary and mark of the session (``None``: of every
        session): they are rebuilt from the log."""
        ...


# --- removing -----------------------------------------------------------------------------


@runtime_checkable
class Deletable(Protocol):
    """A backend that removes a session whole (:meth:`~.base.Backend.delete`). One that
    subclasses :class:`~.base.Backend` without overriding ``delete`` does not have it
    (the inherited default only says so): ``store.delete`` and ``prune`` refuse."""

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session (or, ``dry_run``, say what would go)."""
        ...


@runtime_checkable
class HeldDeletable(Protocol):
    """A backend that removes a session whose writer lock the caller already holds (one
    :meth:`~.base.Backend.acquire` gave), so that a recorded removal is announced only
    once the lock is taken (``retention/removal.py``): a delete refused because a writer
    holds the session then writes nothing. Without it, the lock is taken by ``delete``
    itself, after the announcement (a refusal is then recorded as abandoned)."""

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """Remove the session as :meth:`~.base.Backend.delete` does, under ``lock``,
        which stays held: the caller releases it."""
        ...


@runtime_checkable
class Scrubbable(Protocol):
    """A backend that can make what its deletes left behind unreadable, for
    ``store.forget`` (docs/erasing.md): freed database pages and write-ahead logs
    (SQLite, a JSONL store's projection sidecar), dead rows (PostgreSQL's VACUUM), caches
    of headers, a Redis server's append-only file and snapshot. Without it, forget is
    the delete alone, and its record says so."""

    def scrub(self) -> str:
        """Make what earlier deletes left unreadable, store-wide; the caller holds no
        transaction. Returns, for people, what it did and what it could not reach (a
        server's own retention: its WAL, replicas, backups); raises, saying what it did
        and what it could not do, when part of it failed or was refused (forget puts
        that in ``Forgotten.left``)."""
        ...


@runtime_checkable
class Rewritable(Protocol):
    """A backend that replaces a session's stored events at once (``dsh-session rekey``
    reseals a session in place). Without it, a session cannot be rewritten."""

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace every stored event of the session with ``events`` (``jsonl`` their
        lines), and its header with ``header`` (a plaintext session sealed in place is
        marked sealed so), atomically: after a crash the old log or the new one is
        stored, whole. The caller holds the session's writer lock; the seqs are the
        stored ones."""
        ...


# --- asyncio: native twins of synchronous hooks --------------------------------------------


@runtime_checkable
class AsyncAppend(Protocol):
    """:meth:`~.base.Backend.append_batch` on asyncio (``DurableStore.aflush`` awaits
    it on the loop). Without it, a flush runs in a thread."""

    async def aappend_batch(self, header: SessionHeader, events: Sequence[Event],
                            jsonl: bytes, materialized: bool) -> None:
        """Durably append a contiguous batch, as ``append_batch``."""
        ...


@runtime_checkable
class AsyncList(Protocol):
    """:meth:`~.base.Backend.list` on asyncio (``DurableStore.astored``). Without it,
    the store's worker thread lists."""

    async def alist(self) -> builtins.list[SessionHeader]:
        """Every materialized session's header."""
        ...


@runtime_checkable
class AsyncTail(Protocol):
    """:meth:`~.base.Backend.tail_lines` on asyncio (``DurableStore.afollow``'s start).
    Without it, a thread reads."""

    async def atail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` lines and where following them starts."""
        ...


@runtime_checkable
class AsyncFollow(Protocol):
    """:meth:`~.base.Backend.follow_lines` on asyncio (PostgreSQL waits on NOTIFY, Redis
    on ``XREAD``).
    Without it, the loop polls, each poll a short call in a thread."""

    def afollow_lines(self, session_id: str, position: object, *,
                      timeout: float | None = None) -> AsyncGenerator[LogNews, None]:
        """The news from ``position`` on, as an async generator (an ``async def`` with
        ``yield``): the follower closes it (``aclose``) when it stops."""
        ...


@runtime_checkable
class AsyncClose(Protocol):
    """:meth:`~.base.Backend.close` on asyncio (``DurableStore.aclose``). Without it,
    the store's worker thread closes."""

    async def aclose(self) -> None:
        """Release what the backend holds."""
        ...


# --- wrapping -----------------------------------------------------------------------------


@runtime_checkable
class Wrapper(Protocol):
    """A backend that wraps another and passes its capabilities on (an encrypted
    store's :class:`~.encryption.sealed.SealedBackend` seals what goes down, opens what
    comes up): it defines every method it may pass on, and has each capability only
    where the backend it wraps has it. :meth:`Capabilities.of` cuts its record down to
    :attr:`inner_capabilities`, so that a capability the wrapped backend lacks is absent
    here too and the store takes its way without it, rather than calling a method that
    can only refuse."""

    #: The record of the backend it wraps (:meth:`Capabilities.of` of it).
    inner_capabilities: Capabilities


@dataclasses.dataclass(frozen=True, slots=True)
class Capabilities:
    """What one backend has beyond :class:`~.base.Backend`: each field is the backend
    itself, typed as the capability, or ``None`` when it lacks it. Made once, by
    :meth:`of`, when the backend is taken into use.

    :ivar backend: the backend.
    """

    backend: Backend
    searchable: Searchable | None = None
    selective_summaries: SelectiveSummaries | None = None
    line_reads: LineReads | None = None
    projecting: Projecting | None = None
    typed_line_reads: TypedLineReads | None = None
    resumable: Resumable | None = None
    deletable: Deletable | None = None
    held_deletable: HeldDeletable | None = None
    rewritable: Rewritable | None = None
    scrubbable: Scrubbable | None = None
    async_append: AsyncAppend | None = None
    async_list: AsyncList | None = None
    async_tail: AsyncTail | None = None
    async_follow: AsyncFollow | None = None
    async_close: AsyncClose | None = None

    @classmethod
    def of(cls, backend: Backend) -> Capabilities:
        """The capabilities ``backend`` has: the one place that looks at it. A
        :class:`Wrapper` has those of its own that the backend it wraps has too."""
        own = cls._own(backend)
        if isinstance(backend, Wrapper):
            return own._within(backend.inner_capabilities)
        return own

    @classmethod
    def _own(cls, backend: Backend) -> Capabilities:
        """The capabilities whose methods ``backend`` defines."""
        deletable = isinstance(backend, Deletable) and _own_delete(backend)
        return cls(
            backend,
            searchable=backend if isinstance(backend, Searchable) else None,
            selective_summaries=(backend if isinstance(backend, SelectiveSummaries)
                                 else None),
            line_reads=backend if isinstance(backend, LineReads) else None,
            projecting=backend if isinstance(backend, Projecting) else None,
            typed_line_reads=backend if isinstance(backend, TypedLineReads) else None,
            resumable=backend if isinstance(backend, Resumable) else None,
            deletable=backend if deletable else None,
            held_deletable=(backend if deletable and isinstance(backend, HeldDeletable)
                            else None),
            rewritable=backend if isinstance(backend, Rewritable) else None,
            scrubbable=backend if isinstance(backend, Scrubbable) else None,
            async_append=backend if isinstance(backend, AsyncAppend) else None,
            async_list=backend if isinstance(backend, AsyncList) else None,
            async_tail=backend if isinstance(backend, AsyncTail) else None,
            async_follow=backend if isinstance(backend, AsyncFollow) else None,
            async_close=backend if isinstance(backend, AsyncClose) else None,
        )

    def _within(self, inner: Capabilities) -> Capabilities:
        """This record without the capabilities ``inner`` lacks (each field by its name:
        one added to the record is cut down too)."""
        lacking: dict[str, Any] = {
            name: None for name in _CAPABILITIES if getattr(inner, name) is None}
        return dataclasses.replace(self, **lacking)


#: The names of :class:`Capabilities`' capability fields (all but the backend).
_CAPABILITIES = tuple(f.name for f in dataclasses.fields(Capabilities)
                      if f.name != "backend")


def _own_delete(backend: Backend) -> bool:
    """Whether ``backend``'s ``delete`` is its own: an inherited :meth:`Backend.delete
    <.base.Backend.delete>` is the protocol's "cannot delete", not a capability. (A
    backend that does not subclass :class:`~.base.Backend`, a wrapper delegating its
    attributes, has only a delete of its own.)"""
    for klass in type(backend).__mro__:
        if klass is Backend:
            return False
        if "delete" in vars(klass):
            return True
    return True


def capabilities_of(backend: Backend | Capabilities) -> Capabilities:
    """``backend``'s record: itself when it is one, else made now (a reader that holds a
    bare backend: a command, :func:`~dsh_session_core.stored_label`)."""
    return backend if isinstance(backend, Capabilities) else Capabilities.of(backend)


def summaries_of(backend: Backend | Capabilities, headers: Sequence[SessionHeader]
                 ) -> builtins.list[SessionSummary]:
    """The summaries of the sessions of ``headers`` (as ``backend.list()`` gave them), in
    their order; a session gone since is left out: what ``ls`` shows of a page it picked
    from the headers alone. A backend with :class:`SelectiveSummaries` answers; for any
    other, :meth:`~.base.Backend.summaries` is filtered."""
    caps = capabilities_of(backend)
    if caps.selective_summaries is not None:
        return list(caps.selective_summaries.summaries_of(headers))
    by_id = {s.header.id: s for s in caps.backend.summaries()}
    return [by_id[h.id] for h in headers if h.id in by_id]


def read_lines_of(backend: Backend | Capabilities, session_id: str, after: int,
                  limit: int | None) -> builtins.list[bytes] | None:
    """:meth:`~.base.Backend.read_lines` of any backend: its own (:class:`LineReads`),
    or (a backend that does not subclass :class:`~.base.Backend`) the default, which
    loads the session."""
    caps = capabilities_of(backend)
    if caps.line_reads is not None:
        return caps.line_reads.read_lines(session_id, after, limit)
    return Backend.read_lines(caps.backend, session_id, after, limit)


def lines_since_of(backend: Backend | Capabilities, header: SessionHeader, last: Event
                   ) -> builtins.list[bytes] | None:
    """:meth:`~.base.Backend.lines_since` of any backend: its own (:class:`Resumable`),
    or (a backend that does not subclass :class:`~.base.Backend`) the default, which
    loads the session."""
    caps = capabilities_of(backend)
    if caps.resumable is not None:
        return caps.resumable.lines_since(header, last)
    return Backend.lines_since(caps.backend, header, last)


def lines_of_types_of(backend: Backend | Capabilities, session_id: str,
                      types: Collection[str]) -> builtins.list[bytes] | None:
    """The log lines of the stored events whose type is one of ``types``, oldest first
    (a torn tail left out); ``None`` when the session is not stored. Nothing is written
    and no lock is taken. A line whose type cannot be told without parsing it (not
    written ``{"type":"<type>"`` first, as every writer does) is returned too: the
    caller decodes it, and its type decides.

    A backend with :class:`TypedLineReads` answers (JSONL searches the file's bytes for
    those lines); for any other, every line is read (:func:`read_lines_of`) and those
    are kept (:func:`~.base.keep_types`).
    """
    caps = capabilities_of(backend)
    if caps.typed_line_reads is not None:
        return caps.typed_line_reads.lines_of_types(session_id, types)
    lines = read_lines_of(caps, session_id, -1, None)
    return None if lines is None else keep_types(lines, types)
