"""Forgetting sessions: their content removed for good, everywhere the store put it.

``store.forget(id)`` (and ``dsh-session forget``) goes further than a delete
(docs/erasing.md): the session is removed under its writer lock (its log, projection
rows and summaries, search index entries: the backend's delete), and also from every
archive a ``prune --archive`` copied it into (the ledger's removal records name them)
and every archive given; then the backend makes what its deletes left unreadable (its
:class:`~..capabilities.Scrubbable` scrub: SQLite's freed pages and WAL, a JSONL
store's sidecar and header cache, PostgreSQL's VACUUM, a Redis server's append-only
file rewritten and snapshot saved anew); with a keyring that drops one
session's keys (``Keyring(..., drop=)``), its keys are dropped (crypto-shredding). The
retention ledger records that a forget happened (``retention/forgotten``: a digest of
the id, the door, what was done), and every earlier record naming the session in the
clear (its marks and their notes, its removal records) is taken out of it.

Record-first, as a removal is, without naming the session: ``retention/forgetting``
(the digest) is durable before anything is removed. A forget killed midway leaves the
session partly removed and its announcement unsettled; the same forget again finishes
it, though the session may then be stored nowhere. So does a forget of a session an
earlier delete removed (``rm``, prune, an integration's delete): the ledger's records
naming it are taken out and what the delete left is scrubbed. An id that no store
holds and the ledger never named is refused (:class:`SessionNotStoredError`: a typo
must not pass for a forget).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import DshSessionError, SessionLockedError, SessionNotStoredError
from ..base import Deleted
from .ledger import LEDGER_ID, Ledger, digest_of, fold, ledger_events, names
from .removal import reason_of

if TYPE_CHECKING:
    from ..base import Backend
    from ..store.durable import DurableStore

__all__ = ["ArchiveStore", "Forgotten", "archives_of", "forget", "matching", "named_by_ledger",
           "wire"]


@dataclasses.dataclass(frozen=True, slots=True)
class Forgotten:
    """What :meth:`DurableStore.forget <dsh_session_core.DurableStore.forget>` did of
    one session.

    :ivar session_id: the session.
    :ivar digest: how the ledger names it (``sha256:...``).
    :ivar deleted: what the store's delete removed, or ``None`` when the store did not
        hold it (only archives did).
    :ivar archives: the archives (URLs) it was removed from.
    :ivar key_dropped: the keyring's ``drop`` hook dropped its keys (crypto-shredding).
    :ivar scrubbed: what the backend's scrub did (for people), or ``None`` when it has
        none (its delete alone) or when part of it failed (:attr:`left` then says what
        it did and what it could not).
    :ivar ledger_records: the earlier ledger records of it taken out (``None``: the
        backend cannot rewrite the ledger, and they stay).
    :ivar left: what could not be done, one line each (an archive that cannot be
        opened, a scrub or a key drop that failed): empty when it is forgotten
        everywhere the library can reach.
    """

    session_id: str
    digest: str
    deleted: Deleted | None
    archives: tuple[str, ...] = ()
    key_dropped: bool = False
    scrubbed: str | None = None
    ledger_records: int | None = 0
    left: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether nothing was left (:attr:`left` is empty)."""
        return not self.left


def archives_of(store: DurableStore, session_ids: Collection[str] | None) -> list[str]:
    """The archives the ledger's removal records say ``session_ids`` (``None``: any
    session) were copied into (``prune --archive``), in the order first named."""
    from ..._schema.retention_events import RetentionRemoval, RetentionRemoving

    wanted = None if session_ids is None else set(session_ids)
    found: dict[str, None] = {}
    for event in ledger_events(store):
        if isinstance(event, RetentionRemoval | RetentionRemoving) and (
                wanted is None or event.data.session_id in wanted) and event.data.archived_to:
            found[event.data.archived_to] = None
    return list(found)


def matching(store: DurableStore, labels: Mapping[str, str]) -> list[str]:
    """The ids of the stored sessions whose named labels hold every pair of ``labels``
    (``session_labels``: the ADK adapter's ``app`` and ``user``); the key ``label`` is
    the label a plugin shows (``label_session``), as ``prune --per label`` reads it.
    Hidden sessions are looked at too (an ADK user's state); the ledger never."""
    from ..listing import named_labels, stored_label

    if not labels:
        msg = "forget by labels needs at least one NAME=VALUE"
        raise ValueError(msg)
    found = []
    for header in store.backend.list():
        if header.id == LEDGER_ID:
            continue
        named = dict(named_labels(store.backend, header, store.registry,
                                  plugins=store.plugin_manager))
        if "label" in labels:
            shown = stored_label(store.backend, header, store.registry,
                                 plugins=store.plugin_manager)
            if shown is not None:
                named["label"] = shown
        if all(named.get(k) == v for k, v in labels.items()):
            found.append(header.id)
    return sorted(found)


#: A durable store on an archive's backend (the store room makes it: this room is
#: below it), closed by the caller.
ArchiveStore = Callable[["Backend"], "DurableStore"]


def forget(store: DurableStore, session_ids: Sequence[str], *, rule: str,
           archive_store: ArchiveStore, archives: Sequence[str] = (),
           keys: bool = True) -> list[Forgotten]:
    """Forget ``session_ids`` in ``store`` and its archives (see the module's docstring).

    :param rule: the door, as the record names it (``forget``, ``forget-cli``...).
    :param archive_store: makes the store of an archive, to forget in it.
    :param archives: archive URLs to forget them in, beside those the ledger names.
    :param keys: drop their keys through the keyring's hook (an archive's forget
        leaves that to the store's).
    :raises ValueError: the ledger's id.
    :raises SessionLockedError: a live session of this store, or a writer elsewhere,
        holds one (nothing is removed); another prune, rm, retain or forget writes the
        ledger.
    :raises SessionNotStoredError: an id neither the store nor an archive holds, and
        the ledger never named (nothing is removed).
    """
    ids = list(dict.fromkeys(session_ids))
    for sid in ids:
        if sid == LEDGER_ID:
            msg = f'"{LEDGER_ID}" is the retention ledger itself: it holds no content'
            raise ValueError(msg)
        if store.get(sid) is not None:
            raise SessionLockedError(sid, "a live session of this store: release it "
                                          "first (store.release)")
    persistence = store.persistence
    urls = list(dict.fromkeys([*archives, *archives_of(store, ids)]))
    opened, missed = _open_archives(store, urls)
    try:
        planned: dict[str, Deleted | None] = {}
        named = named_by_ledger(store)
        for sid in ids:  # first, what is where: a refusal changes nothing
            persistence.idle.end_elsewhere(sid)
            try:
                planned[sid] = persistence.delete(sid, dry_run=True)
            except SessionNotStoredError as exc:
                if exc.session_id != sid:
                    raise
                planned[sid] = None
                if not any(_holds(a, sid) for _, a in opened) and not missed and (
                        not named(sid)):
                    raise
        archived: dict[str, list[str]] = {sid: [] for sid in ids}
        left: dict[str, list[str]] = {sid: [] for sid in ids}
        failure: BaseException | None = None
        with Ledger(store) as ledger:
            ledger.forgetting([{"digest": digest_of(sid), "rule": rule} for sid in ids])
            done: dict[str, Deleted | None] = {}
            for sid, plan in planned.items():
                try:
                    done[sid] = _delete(store, sid, plan)
                except (DshSessionError, OSError) as exc:  # a writer won the race
                    failure = exc
                    break
            ids = list(done)  # what was removed is recorded; the rest is left as it was
            while opened:
                url, archive = opened.pop(0)
                _in_archive(archive_store, url, archive, ids, rule, archived, left)
            for url, why in missed:
                for sid in ids:
                    left[sid].append(f"the archive {url} could not be opened ({why}): "
                                     f"forget it there (dsh-session forget --store URL)")
            dropped = {sid: _drop_key(store, sid, left[sid]) if keys else False
                       for sid in ids}
            for sid in ids:
                ledger.forgotten({"digest": digest_of(sid), "rule": rule,
                                  "stored": done[sid] is not None,
                                  "archives": len(archived[sid]),
                                  "keyDropped": dropped[sid]})
            purged = ledger.purge(ids)
    finally:
        for _, archive in opened:
            archive.close()
    # Last, once the ledger's old records are rewritten away (deleted rows too).
    scrub = store.capabilities.scrubbable
    scrubbed: str | None = None
    if scrub is None:
        for sid in ids:
            left[sid].append(f"the {store.backend.name} backend cannot scrub what its "
                             f"delete leaves: its delete alone was done")
    else:
        try:
            scrubbed = scrub.scrub()
        except Exception as exc:  # reported
            for sid in ids:
                left[sid].append(f"what its delete left could not be scrubbed: "
                                 f"{reason_of(exc)}")
    if failure is not None:
        raise failure
    return [Forgotten(sid, digest_of(sid), done[sid], tuple(archived[sid]), dropped[sid],
                      scrubbed, purged, tuple(left[sid])) for sid in ids]


def named_by_ledger(store: DurableStore) -> Callable[[str], bool]:
    """Whether the ledger names a session: a record of it in the clear (a mark, a
    removal: an earlier delete's), or a forget of it begun and never finished. The
    ledger is read at the first look."""
    seen: tuple[set[str], set[str]] | None = None

    def named(session_id: str) -> bool:
        nonlocal seen
        if seen is None:
            events = ledger_events(store)
            seen = ({n for n in map(names, events) if n is not None},
                    fold(events).forgetting)
        return session_id in seen[0] or digest_of(session_id) in seen[1]

    return named


def _delete(store: DurableStore, session_id: str, planned: Deleted | None
            ) -> Deleted | None:
    """The store's delete of one session, under its writer lock (no removal record:
    the forget's record is the one)."""
    if planned is None:
        return None
    persistence = store.persistence
    lock = None if planned.header is None else persistence.hold_for_delete(planned.header)
    try:
        return (persistence.delete(session_id) if lock is None
                else persistence.delete_held(session_id, lock))
    finally:
        if lock is not None:
            lock.release()


def _holds(archive: Backend, session_id: str) -> bool:
    try:
        return archive.tail_lines(session_id, 0) is not None
    except Exception:  # a look that fails: the forget there says why
        return True


def _open_archives(store: DurableStore, urls: Sequence[str]
                   ) -> tuple[list[tuple[str, Backend]], list[tuple[str, str]]]:
    """The archives' backends (never created: a missing one is reported), and those
    that could not be opened, with why. An encrypted store's archive is wrapped as
    prune wraps it."""
    from ..backends.url_backends import backend_for
    from ..copy import same_store
    from ..encryption.sealed import SealedBackend

    opened: list[tuple[str, Backend]] = []
    missed: list[tuple[str, str]] = []
    for url in urls:
        try:
            backend = backend_for(url, create=False, plugins=lambda: store.plugin_manager)
        except Exception as exc:  # reported: the forget goes on elsewhere
            missed.append((url, reason_of(exc)))
            continue
        if same_store(store.backend, backend):
            backend.close()
            continue
        if isinstance(store.backend, SealedBackend):
            backend = SealedBackend(backend, store.backend.sealer)
        opened.append((url, backend))
    return opened, missed


def _in_archive(archive_store: ArchiveStore, url: str, archive: Backend,
                ids: Sequence[str], rule: str, archived: dict[str, list[str]],
                left: dict[str, list[str]]) -> None:
    """Forget those of ``ids`` that an archive holds, in it (its own ledger records it,
    and the archives it names are looked at in turn); the archive is closed after."""
    held = [sid for sid in ids if _holds(archive, sid)]
    if not held:
        archive.close()
        return
    inner = archive_store(archive)  # it closes the archive's backend
    try:
        for done in forget(inner, held, rule=rule, archive_store=archive_store,
                           keys=False):
            archived[done.session_id].append(url)
            left[done.session_id].extend(f"in the archive {url}: {line}"
                                         for line in done.left)
    except (DshSessionError, OSError) as exc:
        for sid in held:
            left[sid].append(f"not forgotten in the archive {url}: {reason_of(exc)}")
    finally:
        inner.close()


def _drop_key(store: DurableStore, session_id: str, left: list[str]) -> bool:
    """Ask the keyring's ``drop`` hook to drop the session's keys; whether it did (a
    failure is added to ``left``)."""
    from ..encryption.sealed import SealedBackend

    backend = store.backend
    if not isinstance(backend, SealedBackend):
        return False
    try:
        return backend.sealer.keyring.drop(session_id)
    except Exception as exc:  # the user's hook: whatever it raises is reported
        left.append(f"its key could not be dropped: {reason_of(exc)}")
        return False


def wire(forgotten: Forgotten) -> dict[str, Any]:
    """``forgotten`` as ``forget --json`` prints it."""
    d = forgotten.deleted
    return {"id": forgotten.session_id, "digest": forgotten.digest,
            "stored": d is not None, "bytes": None if d is None else d.bytes,
            "events": None if d is None else d.events,
            "archives": list(forgotten.archives), "keyDropped": forgotten.key_dropped,
            "scrubbed": forgotten.scrubbed, "ledgerRecords": forgotten.ledger_records,
            "left": list(forgotten.left)}
