"""Running a :class:`~.policy.RetentionPolicy` on a store: measure, plan, archive, remove.

What each session is (its age, size, group, mark and lock, as the backend reports
them), the plan (:mod:`.retention.plan`), then each removal in order, oldest first:
archived and checked when the policy says so, then removed and recorded in the
retention ledger (:mod:`.retention.removal`: announced, deleted under its writer lock,
recorded) before the next one starts.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...errors import (
    DshSessionError,
    SessionLockedError,
    SessionNotStoredError,
    StoreNotFoundError,
)
from ..base import cannot_delete
from .ledger import LEDGER_ID, Ledger, ledger_state
from .plan import Candidate, PruneDecision, PruneReport, plan
from .removal import epoch_ms, reason_of, remove

if TYPE_CHECKING:
    from ..._schema.header import SessionHeader
    from ..base import Backend, SessionSummary
    from ..store.durable import DurableStore
    from .policy import RetentionPolicy

__all__ = ["moment_ms", "run_policy"]


def moment_ms(now: datetime.datetime | None) -> int:
    """``now`` (default: the current time; a naive datetime is local time) in epoch ms."""
    moment = now if now is not None else datetime.datetime.now(datetime.UTC)
    if moment.tzinfo is None:
        moment = moment.astimezone()
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (moment - epoch) // datetime.timedelta(milliseconds=1)


def run_policy(store: DurableStore, policy: RetentionPolicy, *, dry_run: bool,
               now: datetime.datetime | None) -> PruneReport:
    """``store.prune(policy)``: see :meth:`~.store.retention.StoreRetention.prune`."""
    at = moment_ms(now)
    candidates = _candidates(store, policy, ledger_state(store).readable().retained())
    decisions, over = plan(policy, candidates, at)
    total = sum(c.bytes or 0 for c in candidates)
    doomed = [d for d in decisions if d.remove]
    if doomed and store.capabilities.deletable is None:  # a dry run too, as prune's
        raise cannot_delete(store.backend, doomed[0].session_id)  # first form: at once
    if dry_run or not doomed:
        if policy.archive_to is not None:  # refused as the run would refuse it
            _check_archive(store, policy.archive_to)
        return PruneReport(policy, dry_run, at, tuple(decisions), total, over)
    archive = _archive(store, policy.archive_to) if policy.archive_to is not None else None
    done: dict[str, PruneDecision] = {}
    try:
        with Ledger(store) as ledger:
            for d in doomed:
                done[d.session_id] = _remove(store, policy, d, archive, ledger)
    finally:
        if archive is not None:
            archive.close()
    final = tuple(done.get(d.session_id, d) for d in decisions)
    left = sum(d.bytes or 0 for d in final if d.status != "deleted")
    if policy.max_total_bytes is not None:
        over = left > policy.max_total_bytes
    return PruneReport(policy, dry_run, at, final, total, over)


def _candidates(store: DurableStore, policy: RetentionPolicy, marked: dict[str, bool]
                ) -> list[Candidate]:
    """What the planner needs of each session in the policy's scope. Its size and lock
    come from a dry-run delete (the backend's own measure, the writer lock tested)."""
    from ..listing import is_hidden

    group_of = _grouper(store, policy.per)
    plugins = store.plugin_manager
    found = []

    def hidden(header: SessionHeader) -> bool:
        return is_hidden(header, plugins=plugins)

    for summary in store.backend.summaries():
        header = summary.header
        if header.id == LEDGER_ID or (policy.cwd is not None and header.cwd != policy.cwd):
            continue
        when = epoch_ms(summary.last_activity)
        if when is None:
            when = epoch_ms(header.created_at)
        measured = _measure(store, summary)
        if measured is None:
            continue  # deleted meanwhile
        size, locked, problem, where = measured
        group, unknown = group_of(header)
        found.append(Candidate(header.id, when, size, summary.events, group,
                               marked.get(header.id, False), hidden(header), locked,
                               problem or unknown, where))
    return found


def _measure(store: DurableStore, summary: SessionSummary
             ) -> tuple[int | None, bool, str | None, str] | None:
    """(bytes, locked, why it cannot be looked at, location), or ``None`` when the
    session is gone."""
    header = summary.header
    if store.get(header.id) is not None:  # live here: delete would refuse it
        return None, True, None, _location(store.backend, header)
    if store.capabilities.deletable is None:  # no delete: no measure; nothing can go
        return None, False, None, _location(store.backend, header)
    try:
        seen = store.persistence.delete(header.id, dry_run=True)
    except SessionLockedError:
        return None, True, None, _location(store.backend, header)
    except SessionNotStoredError as exc:
        if exc.session_id == header.id:
            return None
        return None, False, reason_of(exc), _location(store.backend, header)
    except (DshSessionError, OSError) as exc:
        return None, False, reason_of(exc), _location(store.backend, header)
    return seen.bytes, False, None, seen.location


def _grouper(store: DurableStore, per: Sequence[str]
             ) -> Callable[[SessionHeader], tuple[tuple[str | None, ...], str | None]]:
    """Each session's group (its value for each grouping of ``per``), and why its group
    cannot be told when a plugin asked for its first events and none could be read (an
    encrypted session without keys, a key not in the keyring, a damaged record): such a
    session is kept (``unmeasured``), never put in the group of those without the label."""
    if not per:
        return lambda header: ((), None)
    from ..listing import StoredEvents, label_of, labels_of

    plugins = store.plugin_manager
    registry = store.registry

    def group(header: SessionHeader) -> tuple[tuple[str | None, ...], str | None]:
        values: list[str | None] = []
        named: dict[str, str] | None = None
        events = StoredEvents(store.backend, header, registry)
        for grouping in per:
            if grouping == "cwd":
                values.append(header.cwd if isinstance(header.cwd, str) else None)
            elif grouping == "label":
                values.append(label_of(header, events, plugins=plugins))
            else:
                if named is None:
                    named = labels_of(header, events, plugins=plugins)
                values.append(named.get(grouping.removeprefix("label:")))
        if events.problem is None:
            return tuple(values), None
        return tuple(values), f"its group cannot be read: {reason_of(events.problem)}"

    return group


def _remove(store: DurableStore, policy: RetentionPolicy, d: PruneDecision,
            archive: Backend | None, ledger: Ledger) -> PruneDecision:
    """Archive (when asked), then remove and record one session; a failure leaves it."""
    import dataclasses

    if ledger.marked(d.session_id):  # marked since the plan was made: it stays
        return dataclasses.replace(d, remove=False, rule="retained", status="kept")
    archived_to = None
    if archive is not None:
        problem = _archive_one(store, archive, d)
        if problem is not None:
            return dataclasses.replace(d, status="failed", reason=problem)
        archived_to = policy.archive_to
    try:
        planned = store.persistence.delete(d.session_id, dry_run=True)
        gone = remove(store, ledger, planned, rule=d.rule, policy=policy.describe(),
                      archived_to=archived_to, last_activity=d.last_activity)
    except SessionLockedError as exc:
        return dataclasses.replace(d, status="failed", archived_to=archived_to,
                                   reason=f"a writer took it meanwhile ({exc.holder})")
    except (DshSessionError, OSError) as exc:
        return dataclasses.replace(d, status="failed", archived_to=archived_to,
                                   reason=reason_of(exc))
    return dataclasses.replace(d, status="deleted", bytes=gone.bytes, events=gone.events,
                               location=gone.location, archived_to=archived_to)


def _archive_one(store: DurableStore, archive: Backend, d: PruneDecision) -> str | None:
    """Copy one session into the archive and check it landed whole (the copy loads it
    back; here, the event count is the one measured): ``None``, else why not."""
    from ..copy import copy_sessions

    try:
        report = copy_sessions(store.backend, archive, [d.session_id],
                               registry=store.registry, verify=True)
    except (DshSessionError, OSError, ValueError) as exc:
        return f"not archived: {reason_of(exc)}"
    copy = report.sessions[0]
    if not copy.ok or not copy.verified:
        return f"not archived ({copy.status}): {copy.error or 'the copy does not check out'}"
    if d.events is not None and copy.events != d.events:
        return (f"not archived: it holds {copy.events} event(s) now, {d.events} when "
                f"planned (a writer appended meanwhile): run prune again")
    return None


def _archive(store: DurableStore, url: str) -> Backend:
    """The archive's backend (created when it does not exist, in a folder that does).
    An encrypted store's archive is sealed with the store's own keys: archiving never
    writes plaintext that was encrypted at rest (docs/encryption.md).

    :raises ValueError: it is the store being pruned.
    """
    from ..backends.url_backends import backend_for
    from ..copy import same_store
    from ..encryption.sealed import SealedBackend

    archive = backend_for(url, create=True, plugins=lambda: store.plugin_manager)
    if same_store(store.backend, archive):
        archive.close()
        msg = f"cannot archive into the store it prunes ({url}): name another store"
        raise ValueError(msg)
    if isinstance(store.backend, SealedBackend):
        return SealedBackend(archive, store.backend.sealer)
    return archive


def _check_archive(store: DurableStore, url: str) -> None:
    """What :func:`_archive` checks of the archive, without creating it (a dry run, or a
    run that removes nothing): the URL (its scheme, its form), the folder it would be
    created in, and that it is not the store being pruned.

    :raises ValueError: an unknown scheme; it is the store being pruned.
    :raises StoreUrlError: a URL that names no store.
    :raises StoreFolderError: the folder it would be created in is missing, or a file.
    """
    from ..backends.url_backends import backend_for
    from ..copy import same_store
    from ..urls import check_folder, local_store

    local = local_store(url)
    if local is not None and local[1] != ":memory:":
        check_folder(os.path.abspath(local[1]))
    try:
        archive = backend_for(url, create=False, plugins=lambda: store.plugin_manager)
    except StoreNotFoundError:
        return  # made by the run: a new store is not the one pruned
    try:
        if same_store(store.backend, archive):  # as _archive refuses it
            msg = f"cannot archive into the store it prunes ({url}): name another store"
            raise ValueError(msg)
    finally:
        archive.close()


def _location(backend: Backend, header: SessionHeader) -> str:
    try:
        return backend.location(header)
    except Exception:  # only for the report
        return ""
