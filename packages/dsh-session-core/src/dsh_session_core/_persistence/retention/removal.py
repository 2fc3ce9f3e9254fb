"""One removal of a session, recorded: the one door every removal of a log goes through.

Every door that removes a session's log for good (``DurableStore.delete``,
``dsh-session rm``, ``prune`` in each form, an integration's delete) goes through
:func:`remove`, whose record says which door it was (``rule``).

Record first: the session's writer lock is taken (a refusal writes nothing), then the
removal is announced in the retention ledger (``retention/removing``, flushed), the log
is deleted under the lock, and its outcome recorded after (``retention/removal``, or
``retention/abandoned`` when the delete failed and the session is still there). A kill
at any point therefore leaves the session either still there (killed before the delete:
the announcement, if made, is settled as not done) or recorded as removed (killed after
it: the announcement of a session that is gone counts as its removal). The next ledger
writer records which (``retention/ledger.py``: ``Ledger``); readers tell it meanwhile by looking
for the session (its ``createdAt`` tells it from a session made anew under the same id).

A removal takes the session's never-prune mark with it: a later session of the same id
starts unmarked, and the record says the mark went (``retained``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import DshSessionError

if TYPE_CHECKING:
    from ..base import Deleted
    from ..store.durable import DurableStore
    from .ledger import Ledger

__all__ = ["DOORS", "epoch_ms", "reason_of", "remove"]

#: What each door that is not a retention policy says in a record's ``policy``.
DOORS = {"rm": "dsh-session rm", "api-delete": "DurableStore.delete"}


def remove(store: DurableStore, ledger: Ledger, planned: Deleted, *, rule: str,
           policy: str | None = None, archived_to: str | None = None,
           last_activity: int | float | None = None) -> Deleted:
    """Remove ``planned.session_id`` (what a dry-run delete said of it: ``planned``) from
    ``store``, recorded in ``ledger`` (held by the caller).

    :param rule: what removed it (a policy's rule, or the door: ``rm``, ``api-delete``...).
    :param policy: the policy, as text (default: the door's name).
    :param archived_to: the store it was archived into first.
    :param last_activity: when it was last active, where the caller measured it.
    :returns: what the delete removed.
    :raises SessionLockedError: a writer took it since the dry run (nothing is
        recorded; with a backend that cannot delete under a held lock, recorded as
        abandoned); what the delete raises otherwise (recorded as abandoned when the
        session is still there).
    """
    session_id = planned.session_id
    header = planned.header
    made = epoch_ms(header.created_at) if header is not None else None
    when = epoch_ms(last_activity if last_activity is not None else planned.last_activity)
    data: dict[str, Any] = {
        "sessionId": session_id, "rule": rule,
        "policy": policy if policy is not None else DOORS.get(rule, rule),
        "location": planned.location, "bytes": planned.bytes, "events": planned.events,
        "lastActivity": None if when is None else int(when), "archivedTo": archived_to,
        "createdAt": made, "retained": ledger.marked(session_id)}
    persistence = store.persistence
    # Locked before it is announced: a delete refused because a writer holds the session
    # writes nothing (a writer that takes and lets go of the lock in a loop would
    # otherwise grow the ledger by two records a refusal).
    lock = None if header is None else persistence.hold_for_delete(header)
    try:
        ledger.removing(data)
        try:
            gone = (persistence.delete(session_id) if lock is None
                    else persistence.delete_held(session_id, lock))
        except (DshSessionError, OSError) as exc:
            stored = _stored(store, session_id)
            if stored:
                ledger.abandoned(session_id, reason_of(exc))
            elif stored is not None:  # it went, though the delete failed after (its lock)
                ledger.removal(data)
            raise  # (it cannot be told: the next ledger writer settles it)
    finally:
        if lock is not None:
            lock.release()
    ledger.removal({**data, "location": gone.location or planned.location,
                    "bytes": gone.bytes, "events": gone.events})
    return gone


def epoch_ms(value: object) -> int | float | None:
    """An event's or a header's time as epoch milliseconds, or ``None`` when it is no
    finite number (a log written by hand may hold anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return value


def _stored(store: DurableStore, session_id: str) -> bool | None:
    """Whether the session is still stored (``None``: it cannot be told)."""
    try:
        return store.backend.tail_lines(session_id, 0) is not None
    except Exception:  # a look that fails tells nothing
        return None


def reason_of(exc: BaseException) -> str:
    """Why a session was left, one line, for people (an OSError names its kind)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and not isinstance(exc, DshSessionError):
        text = f"{type(exc).__name__}: {text}"
    return text
