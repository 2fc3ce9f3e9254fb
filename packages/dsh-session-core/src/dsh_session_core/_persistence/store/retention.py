"""Removing sessions from a durable store: delete, prune, and the never-prune marks.

:meth:`~StoreRetention.delete` one, and :meth:`~StoreRetention.prune` those past an age
or under a :class:`~.policy.RetentionPolicy` (retention), with their asyncio twins; and
the never-prune marks (:meth:`~StoreRetention.retain`) and removal records the retention
ledger keeps. A backend deletes only with the :class:`~.capabilities.Deletable`
capability.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

from ...errors import DshSessionError, SessionLockedError, SessionNotStoredError
from ..base import Deleted, SessionSummary, cannot_delete, not_found
from ..retention.policy import RetentionPolicy
from ..retention.removal import epoch_ms as _epoch_ms
from ..retention.removal import reason_of
from .base import StoreBase

if TYPE_CHECKING:
    import datetime

    from ..._schema.retention_events import RetentionRemoval
    from ..retention.ledger import Ledger
    from ..retention.plan import PruneReport
    from .durable import DurableStore

__all__ = ["StoreRetention"]


class StoreRetention(StoreBase):
    """The deleting part of :class:`~.durable.DurableStore` (see the module's docstring)."""

    def delete(self, session_id: str, *, dry_run: bool = False,
               rule: str | None = "api-delete") -> Deleted:
        """Remove a stored session whole, physically: its log (the JSONL file, or its
        rows in one transaction) and its lock file. The session's writer lock, the one
        :meth:`open` takes, is taken first without waiting, so a session that a live
        writer holds (a live session of this store, another store, another process or
        host) is refused and left intact. Nothing but this session is touched, and the
        store's retention ledger, which records the removal (:meth:`removals`): it is
        announced before the delete and recorded after it, so that a crash leaves the
        session either there or recorded as removed. A never-prune mark of the session
        goes with it (the record says so).

        A fork holds a copy of its parent's events (its header names the parent), so
        deleting a parent leaves its children whole; their ``parent_session`` then names
        a session that is gone.

        :param dry_run: change nothing; say what would be removed (the lock is tested).
        :param rule: what the record names as the door the removal came through
            (``api-delete``; ``dsh-session rm`` says ``rm``, an integration its own
            name). ``None``: no record, and the mark stays, for a log removed only to be
            written anew at once under the same id (an integration's rewrite).
        :returns: what was removed (:class:`~.base.Deleted`: paths or rows, bytes freed).
        :raises SessionLockedError: a writer holds the session (release it first), or
            another prune, rm or retain is writing the retention ledger (run again).
        :raises SessionNotStoredError: no session is stored under this id.
        :raises PersistenceError: the backend cannot delete sessions.
        :raises EncryptionError: the retention ledger was sealed by an earlier release
            and the store was opened without keys (nothing is removed).
        """
        from ..retention.ledger import LEDGER_ID, Ledger
        from ..retention.removal import remove

        if self.get(session_id) is not None:
            raise SessionLockedError(session_id, "a live session of this store: release "
                                                 "it first (store.release)")
        self.persistence.idle.end_elsewhere(session_id)  # (this store's: dropped below)
        if dry_run or rule is None or session_id == LEDGER_ID:
            return self.persistence.delete(session_id, dry_run=dry_run)
        planned = self.persistence.delete(session_id, dry_run=True)  # refused: untouched
        with Ledger(cast("DurableStore", self)) as ledger:
            return remove(cast("DurableStore", self), ledger, planned, rule=rule)

    @overload
    def prune(self, older_than: datetime.timedelta, *, cwd: str | None = None,
              keep: int = 0, dry_run: bool = False, now: datetime.datetime | None = None,
              ) -> list[Deleted]: ...

    @overload
    def prune(self, older_than: RetentionPolicy, *, dry_run: bool = False,
              now: datetime.datetime | None = None) -> PruneReport: ...

    def prune(
        self,
        older_than: datetime.timedelta | RetentionPolicy,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted] | PruneReport:
        """Retention. Given a :class:`~.policy.RetentionPolicy`, apply it
        (docs/retention.md): every session in its scope gets a
        :class:`~.plan.PruneDecision` (kept or removed, by which rule, the
        bytes), sessions marked retained (:meth:`retain`) and those a writer holds are
        never removed, a session is archived and checked first when the policy says so
        (a failure leaves it), and each removal is recorded in the store's retention
        ledger (:meth:`removals`). Returns a :class:`~.plan.PruneReport`;
        ``cwd`` and ``keep`` belong in the policy then.

        Given a duration (the first form), delete the sessions whose last activity (the
        time of their last stored event; the header's ``created_at`` when that cannot be
        read) is older than ``now - older_than``, as :meth:`delete` deletes each.

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
            locked or failed, oldest first; a session marked retained and the ledger are
            left out.
        :raises ValueError: a negative ``older_than`` or ``keep``; ``cwd`` or ``keep``
            with a policy.
        :raises OSError: the store cannot be listed.
        :raises PersistenceError: the backend cannot delete sessions; the policy's
            archive cannot be opened.
        :raises SessionLockedError: another prune or retain is writing the ledger.
        """
        import datetime

        from ..retention.ledger import LEDGER_ID, ledger_state

        if isinstance(older_than, RetentionPolicy):
            if cwd is not None or keep != 0:
                msg = "with a RetentionPolicy, give cwd and keep_latest in the policy"
                raise ValueError(msg)
            from ..retention.run import run_policy

            return run_policy(cast("DurableStore", self), older_than, dry_run=dry_run,
                              now=now)

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
        marked = ledger_state(cast("DurableStore", self)).readable().retained()
        matching: list[tuple[int | float, str, SessionSummary]] = []
        for summary in self.backend.summaries():
            header = summary.header
            if (cwd is not None and header.cwd != cwd) or header.id == LEDGER_ID \
                    or marked.get(header.id, False):
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
        if dry_run or not doomed:
            return [d for _, _, s in doomed if (d := self._one(s, "", None)) is not None]
        policy = RetentionPolicy(older_than=older_than, cwd=cwd).describe()
        if keep:
            policy += f", keep the {keep} newest"
        from ..retention.ledger import Ledger

        with Ledger(cast("DurableStore", self)) as ledger:
            return [d for _, _, s in doomed if (d := self._one(s, policy, ledger)) is not None]

    def _one(self, summary: SessionSummary, policy: str, ledger: Ledger | None
             ) -> Deleted | None:
        """prune's first form on one session: removed and recorded in ``ledger`` (``None``:
        a dry run), or left (locked, failed), or ``None`` when it is gone meanwhile."""
        from ..retention.removal import remove

        header = summary.header
        when = _epoch_ms(summary.last_activity)
        if when is None:
            when = _epoch_ms(header.created_at)
        assert when is not None
        try:
            if ledger is not None and ledger.marked(header.id):
                return None  # marked since the list was read
            planned = self.persistence.delete(header.id, dry_run=True)
            if ledger is None:
                return planned
            return remove(cast("DurableStore", self), ledger, planned, rule="older-than",
                          policy=policy, last_activity=when)
        except SessionLockedError as exc:
            return self._left(summary, when, "locked", exc)
        except SessionNotStoredError as exc:
            if exc.session_id == header.id:  # deleted meanwhile
                return None
            return self._left(summary, when, "failed", exc)
        except (DshSessionError, OSError) as exc:
            return self._left(summary, when, "failed", exc)

    def _left(self, summary: SessionSummary, when: int | float, status: Any,
              exc: BaseException) -> Deleted:
        """A session prune had to leave as it is, and why."""
        header = summary.header
        try:
            where = self.backend.location(header)
        except Exception:  # only for the report
            where = ""
        return Deleted(header.id, status, where, (), None, summary.events, header, when,
                       reason_of(exc))

    async def adelete(self, session_id: str, *, dry_run: bool = False,
                      rule: str | None = "api-delete") -> Deleted:
        """:meth:`delete` for asyncio hosts, in the store's worker thread (taking the
        writer lock is synchronous; on PostgreSQL, a connect)."""
        return await self._worker().run(self.delete, session_id, dry_run=dry_run, rule=rule)

    @overload
    async def aprune(self, older_than: datetime.timedelta, *, cwd: str | None = None,
                     keep: int = 0, dry_run: bool = False,
                     now: datetime.datetime | None = None) -> list[Deleted]: ...

    @overload
    async def aprune(self, older_than: RetentionPolicy, *, dry_run: bool = False,
                     now: datetime.datetime | None = None) -> PruneReport: ...

    async def aprune(
        self,
        older_than: datetime.timedelta | RetentionPolicy,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted] | PruneReport:
        """:meth:`prune` for asyncio hosts, in the store's worker thread."""
        prune: Any = self.prune  # the overloads make one function: it is called as given
        found: list[Deleted] | PruneReport = await self._worker().run(
            prune, older_than, cwd=cwd, keep=keep, dry_run=dry_run, now=now)
        return found

    # --- the never-prune marks and the removal records (the retention ledger) ---------

    def retain(self, session_id: str, retain: bool = True, *, note: str | None = None
               ) -> bool:
        """Mark a stored session never to be pruned (``retain=False``: release the
        mark). The mark is durable, in the store's retention ledger (a session of the
        store, which ``copy`` carries along); it names the session by id, so a fork of
        it is not marked. A session a writer holds can be marked.

        :returns: whether the mark changed (marking a marked session changes nothing,
            and records nothing).
        :raises SessionNotStoredError: no session is stored under this id.
        :raises SessionLockedError: another prune, rm or retain is writing the ledger.
        :raises EncryptionError: a note, on an encrypted session, from a store opened
            without keys (a note is content: it is sealed with the keys); the ledger was
            sealed by an earlier release, without keys.
        """
        from ..retention.ledger import LEDGER_ID, Ledger, ledger_state

        store = cast("DurableStore", self)
        if session_id == LEDGER_ID:
            msg = f'"{LEDGER_ID}" is the retention ledger itself: it is never pruned'
            raise ValueError(msg)
        if self.get(session_id) is None and self.backend.tail_lines(session_id, 0) is None:
            raise not_found(session_id)
        if note is not None:
            self._check_note(session_id)
        if ledger_state(store).readable().retained().get(session_id, False) == retain:
            return False  # (the ledger is not taken for nothing)
        with Ledger(store) as ledger:
            if ledger.marked(session_id) == retain:
                return False
            ledger.mark(session_id, retain, note)
        return True

    def _check_note(self, session_id: str) -> None:
        """Refuse a note on an encrypted session from a store opened without keys: it
        would lie in the clear."""
        from ..._schema.header import SEALED_FORMAT_VERSION
        from ..encryption.sealed import SealedBackend

        if isinstance(self.backend, SealedBackend):
            return  # sealed with the keys
        if any(h.id == session_id and h.version == SEALED_FORMAT_VERSION
               for h in self.backend.list()):
            from ..._errors.crypt import HOW_TO_OPEN
            from ...errors import EncryptionError

            msg = (f'session "{session_id}" is encrypted at rest, and a note is content: it '
                   f"is sealed with the store's keys, which were not given, so nothing was "
                   f"marked. Mark it without --note, or {HOW_TO_OPEN}")
            raise EncryptionError(msg, session_id=session_id)

    def retained(self) -> list[str]:
        """The ids of the sessions marked never to be pruned, sorted (a session removed
        through the library takes its mark with it; one deleted by hand, outside it,
        is still listed).

        :raises EncryptionError: the ledger holds records an earlier release sealed, and
            the store was opened without keys.
        """
        from ..retention.ledger import ledger_state

        marks = ledger_state(cast("DurableStore", self)).readable().retained()
        return sorted(i for i, m in marks.items() if m)

    def removals(self) -> list[RetentionRemoval]:
        """What was removed from this store, oldest first: one ``retention/removal``
        event per session removed, by any door (its ``time`` is when; ``data``: the id,
        the rule or door, the policy, bytes, where it was archived). A removal a killed
        run announced is listed when its session is gone."""
        from ..retention.ledger import ledger_state

        return ledger_state(cast("DurableStore", self)).removals

    async def aretain(self, session_id: str, retain: bool = True, *,
                      note: str | None = None) -> bool:
        """:meth:`retain` for asyncio hosts, in the store's worker thread."""
        changed: bool = await self._worker().run(self.retain, session_id, retain, note=note)
        return changed

