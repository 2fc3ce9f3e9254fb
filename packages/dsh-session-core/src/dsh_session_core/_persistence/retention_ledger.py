"""A store's retention ledger: one session of the store itself (id :data:`LEDGER_ID`)
whose events are its never-prune marks (``retention/mark``) and the record of every
session retention removed (``retention/removal``).

Kept as a session, it is held by every backend, a third party's too, with nothing more
than the Backend protocol; it is durable as any log is (flushed after each record);
``copy`` carries it to another store with the sessions; and only one writer at a time
appends to it (its writer lock), so two prunes or marks never interleave. Lists hide it
(``ls -a`` shows it), prune never removes it, and a mark names a session by id: a fork
is not marked for its parent's mark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .._names import RETENTION_LEDGER_ID
from ..errors import PersistenceError, SessionLockedError

if TYPE_CHECKING:
    from .._registry import EventRegistry
    from .._retention_events import RetentionRemoval
    from .._session import Session
    from .base import Backend
    from .store import DurableStore

__all__ = ["LEDGER_ID", "Ledger", "backend_marks", "ledger_events", "marks", "removals"]

#: The id of a store's retention ledger session.
LEDGER_ID: Final = RETENTION_LEDGER_ID


def ledger_events(store: DurableStore) -> list[Any]:
    """The ledger's events as stored (and, while this store writes it, as appended), or
    ``[]`` when the store has none yet."""
    live = store.get(LEDGER_ID)
    if live is not None:
        return list(live.events)
    try:
        return list(store.read(LEDGER_ID))
    except PersistenceError as exc:
        if str(exc) == f'session "{LEDGER_ID}" not found':
            return []
        raise


def backend_marks(backend: Backend, registry: EventRegistry) -> dict[str, bool]:
    """:func:`marks` read straight from a backend, without a store and without a lock
    (``ls`` and ``show`` read them so), or ``{}`` when it holds no ledger."""
    from .._decode import decode_lines
    from .capabilities import read_lines_of

    lines = read_lines_of(backend, LEDGER_ID, -1, None)
    return {} if lines is None else marks(decode_lines(registry, lines))


def marks(events: list[Any]) -> dict[str, bool]:
    """Each marked session's mark (the last one wins), from the ledger's events."""
    found: dict[str, bool] = {}
    for event in events:
        if event.type == "retention/mark":
            found[event.data.session_id] = event.data.retain
    return found


def removals(events: list[Any]) -> list[RetentionRemoval]:
    """The removal records, oldest first, from the ledger's events."""
    return [e for e in events if e.type == "retention/removal"]


class Ledger:
    """The ledger open for appending: ``with Ledger(store) as ledger: ledger.mark(...)``.
    Each record is flushed (durable) before the call returns; the ledger is released on
    the way out unless it was live in this store before.

    :raises SessionLockedError: another writer (another prune or mark, elsewhere) holds
        the ledger; its message says to try again once that one is done.
    """

    def __init__(self, store: DurableStore) -> None:
        self._store = store
        self._session: Session | None = None
        self._owned = False

    def __enter__(self) -> Ledger:
        store = self._store
        live = store.get(LEDGER_ID)
        if live is not None:
            self._session = live
            return self
        try:
            self._session = store.open_or_create(LEDGER_ID, cwd="/")
        except SessionLockedError as exc:
            raise SessionLockedError(
                LEDGER_ID, f"{exc.holder}: another prune or retain is writing this "
                           f"store's retention ledger; run again once it is done") from exc
        self._owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned and self._session is not None:
            self._store.release(self._session)
        self._session = None

    def _append(self, event_type: str, data: dict[str, Any]) -> None:
        assert self._session is not None, "use the ledger in a with block"
        self._session.append(event_type, data)
        self._store.flush(self._session)

    def mark(self, session_id: str, retain: bool, note: str | None) -> None:
        """Record a never-prune mark (``retain``) or its release."""
        data: dict[str, Any] = {"sessionId": session_id, "retain": retain}
        if note is not None:
            data["note"] = note
        self._append("retention/mark", data)

    def removal(self, data: dict[str, Any]) -> None:
        """Record a removal (the payload of ``retention/removal``, wire keys)."""
        self._append("retention/removal", data)
