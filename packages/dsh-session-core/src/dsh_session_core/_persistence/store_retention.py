"""Removing sessions from a durable store: :meth:`~StoreRetention.delete` one, and
:meth:`~StoreRetention.prune` those past an age (retention), with their asyncio twins.
A backend deletes only with the :class:`~.capabilities.Deletable` capability.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DshSessionError, PersistenceError, SessionLockedError
from .base import Deleted, SessionSummary, cannot_delete, not_found
from .store_base import StoreBase

if TYPE_CHECKING:
    import datetime

__all__ = ["StoreRetention"]


class StoreRetention(StoreBase):
    """The deleting part of :class:`~.store.DurableStore` (see the module's docstring)."""

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove a stored session whole, physically: its log (the JSONL file, or its
        rows in one transaction) and its lock file. The session's writer lock, the one
        :meth:`open` takes, is taken first without waiting, so a session that a live
        writer holds (a live session of this store, another store, another process or
        host) is refused and left intact. Nothing but this session is touched.

        A fork holds a copy of its parent's events (its header names the parent), so
        deleting a parent leaves its children whole; their ``parent_session`` then names
        a session that is gone.

        :param dry_run: change nothing; say what would be removed (the lock is tested).
        :returns: what was removed (:class:`~.base.Deleted`: paths or rows, bytes freed).
        :raises SessionLockedError: a writer holds the session (release it first).
        :raises PersistenceError: no session is stored under this id (``not found``), or
            the backend cannot delete sessions.
        """
        if self.get(session_id) is not None:
            raise SessionLockedError(session_id, "a live session of this store: release "
                                                 "it first (store.release)")
        return self.persistence.delete(session_id, dry_run=dry_run)

    def prune(
        self,
        older_than: datetime.timedelta,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted]:
        """Retention: delete the sessions whose last activity (the time of their last
        stored event; the header's ``created_at`` when that cannot be read) is older
        than ``now - older_than``, as :meth:`delete` deletes each.

        Of the sessions that match (old enough, and under ``cwd`` when given), the
        ``keep`` newest are kept (ties: by id). A session that a writer holds is never
        touched: it is reported with status ``"locked"``, and one that cannot be removed
        (a misplaced file, an I/O error) with ``"failed"`` and the reason; neither is an
        error, and the others are still removed. A session deleted meanwhile by someone
        else is left out. A session whose age cannot be told is never removed.

        :param older_than: the age past which a session goes (not negative).
        :param cwd: only sessions whose header's cwd is exactly this one.
        :param keep: how many of the matching sessions to keep, newest first.
        :param dry_run: remove nothing; report ``"would-delete"`` for each.
        :param now: the moment ages are measured from (default: the current time; a
            naive datetime is local time).
        :returns: one :class:`~.base.Deleted` per session removed (or that would be),
            locked or failed, oldest first.
        :raises ValueError: a negative ``older_than`` or ``keep``.
        :raises OSError: the store cannot be listed.
        :raises PersistenceError: the backend cannot delete sessions.
        """
        import datetime

        if older_than < datetime.timedelta(0):
            msg = f"older_than must not be negative, got {older_than}"
            raise ValueError(msg)
        if type(keep) is not int or keep < 0:
            msg = f"keep takes a count of sessions (0 or more), got {keep!r}"
            raise ValueError(msg)
        moment = now if now is not None else datetime.datetime.now(datetime.UTC)
        if moment.tzinfo is None:
            moment = moment.astimezone()
        # In microseconds since the epoch, exactly (event times are integers of ms).
        cutoff = (moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - older_than
                  ) // datetime.timedelta(microseconds=1)
        matching: list[tuple[int | float, str, SessionSummary]] = []
        for summary in self.backend.summaries():
            header = summary.header
            if cwd is not None and header.cwd != cwd:
                continue
            when = _epoch_ms(summary.last_activity)
            if when is None:
                when = _epoch_ms(header.created_at)
            if when is None:
                continue  # its age cannot be told: never removed
            if when * 1000 < cutoff:
                matching.append((when, header.id, summary))
        matching.sort(key=lambda m: (m[0], m[1]), reverse=True)  # newest first
        doomed = sorted(matching[keep:], key=lambda m: (m[0], m[1]))
        if doomed and self.capabilities.deletable is None:
            raise cannot_delete(self.backend, doomed[0][1])  # before anything is done
        done: list[Deleted] = []
        for when, session_id, summary in doomed:
            try:
                done.append(self.delete(session_id, dry_run=dry_run))
            except SessionLockedError as exc:
                done.append(self._left(summary, when, "locked", exc))
            except PersistenceError as exc:
                if str(exc) != str(not_found(session_id)):  # else: deleted meanwhile
                    done.append(self._left(summary, when, "failed", exc))
            except (DshSessionError, OSError) as exc:
                done.append(self._left(summary, when, "failed", exc))
        return done

    def _left(self, summary: SessionSummary, when: int | float, status: Any,
              exc: BaseException) -> Deleted:
        """A session prune had to leave as it is, and why."""
        header = summary.header
        try:
            where = self.backend.location(header)
        except Exception:  # only for the report
            where = ""
        reason = " ".join(str(exc).split())
        if isinstance(exc, OSError) and not isinstance(exc, DshSessionError):
            reason = f"{type(exc).__name__}: {reason}"
        return Deleted(header.id, status, where, (), None, summary.events, header, when,
                       reason)

    async def adelete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """:meth:`delete` for asyncio hosts, in the store's worker thread (taking the
        writer lock is synchronous; on PostgreSQL, a connect)."""
        return await self._worker().run(self.delete, session_id, dry_run=dry_run)

    async def aprune(
        self,
        older_than: datetime.timedelta,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted]:
        """:meth:`prune` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.prune, older_than, cwd=cwd, keep=keep,
                                        dry_run=dry_run, now=now)


def _epoch_ms(value: object) -> int | float | None:
    """An event's or a header's time as epoch milliseconds, or ``None`` when it is no
    finite number (a log written by hand may hold anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return value
