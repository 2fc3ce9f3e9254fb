"""A store's retention ledger: one session of the store itself, of marks and removals.

Its id is :data:`LEDGER_ID`; its events are the store's never-prune marks
(``retention/mark``) and the record of every session removed from it
(``retention/removing``, then ``retention/removal`` or ``retention/abandoned``:
:mod:`.retention.removal`), and of every session forgotten (``retention/forgetting``
before, ``retention/forgotten`` after: :mod:`.retention.forget`), named there by a
digest only (:func:`digest_of`): a forget also takes every earlier record of the session
out of the ledger (:meth:`Ledger.purge`).

Kept as a session, it is held by every backend, a third party's too, with nothing more
than the Backend protocol; it is durable as any log is (flushed after each record);
``copy`` carries it to another store with the sessions; and only one writer at a time
appends to it (its writer lock), so two prunes or marks never interleave. Lists hide it
(``ls -a`` shows it), prune never removes it, and a mark names a session by id: a fork
is not marked for its parent's mark; a removal of the session takes its mark with it.

It holds no content, so it is never sealed, even on an encrypted store
(``encryption/ledger.py``): a cleanup job without keys writes it, and every reader, with
keys or without, reads it. What it cannot read (a record an earlier release sealed, read
without keys; a record that is not of its types) is counted, never guessed: prune then
refuses, for it cannot tell which sessions are marked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..._base.names import RETENTION_LEDGER_ID
from ..._schema.retention_events import (
    RetentionAbandoned,
    RetentionForgetting,
    RetentionForgotten,
    RetentionMark,
    RetentionRemoval,
    RetentionRemoving,
)
from ...errors import (
    EncryptedSessionError,
    EncryptionError,
    PersistenceError,
    SessionLockedError,
    SessionNotStoredError,
)

if TYPE_CHECKING:
    from ..._model.session import Session
    from ..._schema.header import SessionHeader
    from ..._schema.registry import EventRegistry
    from ..._schema.retention_events import RetentionMarkData
    from ..base import Backend
    from ..store.durable import DurableStore

__all__ = [
    "LEDGER_ID",
    "Ledger",
    "LedgerState",
    "backend_marks",
    "backend_state",
    "digest_of",
    "fold",
    "ledger_events",
    "ledger_state",
    "lister",
    "names",
    "note_of",
    "sealed_by_an_earlier_release",
]

#: The id of a store's retention ledger session.
LEDGER_ID: Final = RETENTION_LEDGER_ID

#: What a forget's digest is made of: this prefix, then the id (UTF-8).
_DIGEST_PREFIX: Final = b"dsh-session.forget:"


def digest_of(session_id: str) -> str:
    """How ``retention/forgotten`` names a session: ``sha256:`` and the hex SHA-256 of
    a fixed prefix and the id. Whoever holds the id can check it was forgotten; a
    reader who does not learns nothing from it but what guessing ids would tell."""
    import hashlib

    raw = _DIGEST_PREFIX + session_id.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def names(event: object) -> str | None:
    """The id of the session a ledger record names in the clear (a mark, an
    announcement, a removal, an abandonment), or ``None``."""
    if isinstance(event, RetentionMark | RetentionRemoving | RetentionRemoval
                  | RetentionAbandoned):
        return event.data.session_id
    return None


#: Whether a session is stored now: its header, or ``None``.
Present = Callable[[str], "SessionHeader | None"]


def sealed_by_an_earlier_release(count: int) -> EncryptionError:
    """The refusal of a ledger whose records an earlier release sealed, read without
    keys: its marks cannot be told."""
    return EncryptionError(
        f'the retention ledger "{LEDGER_ID}" holds {count} record(s) sealed by an earlier '
        f"release, which cannot be read without the store's keys, so its never-prune marks "
        f"are not known. Run `dsh-session rekey {LEDGER_ID}` once with the keys "
        f"(DSH_SESSION_KEYS, or --key-env): the ledger is rewritten in the clear (a note "
        f"stays sealed), and then prune, rm and retain work without keys",
        session_id=LEDGER_ID)


@dataclasses.dataclass(slots=True)
class LedgerState:
    """What a ledger says, folded from its events in order (:func:`fold`).

    :ivar marks: each session's last mark, unless a removal of it came after (a removal
        takes the mark with it); a released mark is kept with ``retain`` false.
    :ivar removals: the removals, oldest first: the ``retention/removal`` records, and
        each unsettled announcement (``retention/removing``) whose session is gone.
    :ivar unsettled: the announcements no outcome follows (their run was killed), each
        with whether its session is gone.
    :ivar unreadable: the seqs of the ledger's records that could not be read, and
        whether each is sealed (an earlier release's record, read without keys).
    :ivar forgotten: the ``retention/forgotten`` records, oldest first.
    :ivar forgetting: the digests of the forgets begun (``retention/forgetting``) that no
        ``retention/forgotten`` settled (their run was killed): the same forget again
        finishes them.
    """

    marks: dict[str, RetentionMarkData] = dataclasses.field(default_factory=dict)
    removals: list[RetentionRemoval] = dataclasses.field(default_factory=list)
    unsettled: list[tuple[RetentionRemoving, bool]] = dataclasses.field(default_factory=list)
    unreadable: list[tuple[object, bool]] = dataclasses.field(default_factory=list)
    forgotten: list[RetentionForgotten] = dataclasses.field(default_factory=list)
    forgetting: set[str] = dataclasses.field(default_factory=set)

    def retained(self) -> dict[str, bool]:
        """Each marked session's mark: ``True`` retained, ``False`` released."""
        return {sid: m.retain for sid, m in self.marks.items()}

    def readable(self) -> LedgerState:
        """This state, once it is sure every record was read (prune needs every mark).

        :raises EncryptionError: records an earlier release sealed, read without keys.
        :raises PersistenceError: a record that is not of the ledger's types.
        """
        sealed = sum(1 for _, s in self.unreadable if s)
        if sealed:
            raise sealed_by_an_earlier_release(sealed)
        if self.unreadable:
            seq = self.unreadable[0][0]
            msg = (f'record seq {seq} of the retention ledger "{LEDGER_ID}" is not a '
                   f"retention record of this build (written by hand, or by a newer "
                   f"release), so the never-prune marks cannot all be told: nothing is "
                   f"pruned. `dsh-session show {LEDGER_ID}` shows it")
            raise PersistenceError(msg, session_id=LEDGER_ID)
        return self


def _gone(intent: RetentionRemoving, header: SessionHeader | None) -> bool:
    """Whether the session an announcement names is gone: not stored, or stored as
    another session (another ``createdAt``: made anew since under the same id)."""
    if header is None:
        return True
    made = intent.data.created_at
    return made is not None and header.created_at != made


def fold(events: Sequence[Any], present: Present | None = None) -> LedgerState:
    """What ``events`` (the ledger's, in order) say. An announcement no outcome follows
    is settled by ``present``: the session gone, it was removed; still there, it was
    not (without ``present``, it counts as not removed)."""
    pending: dict[str, int] = {}
    for i, event in enumerate(events):
        if isinstance(event, RetentionRemoving):
            pending[event.data.session_id] = i
        elif isinstance(event, RetentionRemoval | RetentionAbandoned):
            pending.pop(event.data.session_id, None)
    state = LedgerState()
    removed: set[int] = set()
    for i in sorted(pending.values()):
        intent = events[i]
        gone = present is not None and _gone(intent, present(intent.data.session_id))
        state.unsettled.append((intent, gone))
        if gone:
            removed.add(i)
    for i, event in enumerate(events):
        if isinstance(event, RetentionMark):
            state.marks[event.data.session_id] = event.data
        elif isinstance(event, RetentionRemoval):
            state.removals.append(event)
            state.marks.pop(event.data.session_id, None)
        elif isinstance(event, RetentionRemoving):
            if i in removed:
                state.removals.append(RetentionRemoval(seq=event.seq, time=event.time,
                                                       data=event.data))
                state.marks.pop(event.data.session_id, None)
        elif isinstance(event, RetentionForgetting):
            state.forgetting.add(event.data.digest)
        elif isinstance(event, RetentionForgotten):
            state.forgotten.append(event)
            state.forgetting.discard(event.data.digest)
            # A forget takes the session's mark with it (the ledger is purged of its
            # records too, where the backend rewrites: this is for one that cannot).
            for sid in [s for s in state.marks if digest_of(s) == event.data.digest]:
                del state.marks[sid]
        elif not isinstance(event, RetentionAbandoned) and _ledger_type(event.type):
            data = getattr(event, "data", None)
            state.unreadable.append((event.seq, isinstance(data, Mapping) and "sealed" in data))
    return state


def _ledger_type(event_type: object) -> bool:
    return isinstance(event_type, str) and event_type.startswith("retention/")


def lister(backend: Backend) -> Present:
    """:data:`Present` of ``backend``'s sessions, listed once, at the first look."""
    found: dict[str, SessionHeader] | None = None

    def present(session_id: str) -> SessionHeader | None:
        nonlocal found
        if found is None:
            found = {h.id: h for h in backend.list()}
        return found.get(session_id)

    return present


def ledger_events(store: DurableStore) -> list[Any]:
    """The ledger's events as stored (and, while this store writes it, as appended), or
    ``[]`` when the store has none yet."""
    live = store.get(LEDGER_ID)
    if live is not None:
        return list(live.events)
    try:
        return list(store.read(LEDGER_ID))
    except SessionNotStoredError as exc:
        if exc.session_id == LEDGER_ID:
            return []
        raise


def ledger_state(store: DurableStore) -> LedgerState:
    """:func:`fold` of ``store``'s ledger, its unsettled announcements settled by what
    the store holds now."""
    return fold(ledger_events(store), lister(store.backend))


def backend_marks(backend: Backend, registry: EventRegistry) -> dict[str, bool]:
    """Each marked session's mark, read straight from a backend, without a store and
    without a lock (``ls`` and ``show`` read them so), or ``{}`` when it holds no
    ledger. A record it cannot read (sealed by an earlier release, read without keys)
    is left out."""
    return backend_state(backend, registry).retained()


def backend_state(backend: Backend, registry: EventRegistry) -> LedgerState:
    """:func:`ledger_state`, read straight from a backend (see :func:`backend_marks`)."""
    from ..._schema.decode import decode_lines
    from ..capabilities import read_lines_of

    lines = read_lines_of(backend, LEDGER_ID, -1, None)
    if lines is None:
        return LedgerState()
    return fold(decode_lines(registry, lines), lister(backend))


def note_of(backend: Backend, mark: RetentionMarkData) -> str | None:
    """The note of ``mark`` as people read it: its text (a sealed one opened with the
    keys of ``backend``); what stands in for one that cannot be read; ``None`` when the
    mark has none."""
    from ..encryption.ledger import open_note
    from ..encryption.sealed import SealedBackend

    if mark.note is not None or mark.sealed_note is None:
        return mark.note
    if not isinstance(backend, SealedBackend):
        return "(sealed: pass the store's keys to read it)"
    try:
        return open_note(backend.sealer, mark.session_id, mark.sealed_note)
    except EncryptionError as exc:
        return f"(sealed, and it cannot be opened: {exc})"


class Ledger:
    """The ledger open for appending: ``with Ledger(store) as ledger: ledger.mark(...)``.
    Each record is flushed (durable) before the call returns; the ledger is released on
    the way out unless it was live in this store before.

    On the way in, a ledger an earlier release sealed is rewritten in the clear (with
    keys; without them it is refused), and the announcements a killed run left
    unsettled are settled: a ``retention/removal`` for each whose session is gone, a
    ``retention/abandoned`` for each whose session is still there.

    :raises SessionLockedError: another writer (another prune, rm or mark, elsewhere)
        holds the ledger; its message says to try again once that one is done.
    :raises EncryptionError: the ledger was sealed by an earlier release, and the store
        has no keys.
    """

    def __init__(self, store: DurableStore) -> None:
        self._store = store
        self._session: Session | None = None
        self._owned = False
        self._marks: dict[str, bool] | None = None

    def __enter__(self) -> Ledger:
        store = self._store
        live = store.get(LEDGER_ID)
        if live is not None:
            self._session = live
            return self
        self._session = self._open()
        self._owned = True
        try:
            if self._stale():
                self._unseal()
            self._settle()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _open(self) -> Session:
        try:
            return self._store.open_or_create(LEDGER_ID, cwd="/")
        except SessionLockedError as exc:
            raise SessionLockedError(
                LEDGER_ID, f"{exc.holder}: another prune, rm or retain is writing this "
                           f"store's retention ledger; run again once it is done") from exc
        except EncryptedSessionError as exc:
            raise sealed_by_an_earlier_release(1) from exc

    def _stale(self) -> bool:
        """Whether the ledger must be rewritten before it is written: on an encrypted
        store, its records sealed by an earlier release, or a note in the clear (one
        copied from a plaintext store)."""
        from ..capabilities import read_lines_of
        from ..encryption.ledger import is_sealed_line
        from ..encryption.sealed import SealedBackend

        backend = self._store.backend
        if not isinstance(backend, SealedBackend):
            return False
        first = read_lines_of(backend.inner, LEDGER_ID, -1, 1) or []
        return any(is_sealed_line(line) for line in first) or any(
            isinstance(e, RetentionMark) and e.data.note is not None for e in self.events)

    def _unseal(self) -> None:
        """Rewrite the ledger in the clear, its notes sealed (``dsh-session rekey`` of
        the ledger does the same), and take it anew."""
        from ..encryption.sealed import SealedBackend

        store, session = self._store, self._session
        assert session is not None
        assert isinstance(store.backend, SealedBackend)
        store.backend.rewrite(session.header, list(session.events), session.jsonl())
        store.release(session)
        self._session = None
        self._session = self._open()

    def _settle(self) -> None:
        for intent, gone in fold(self.events, lister(self._store.backend)).unsettled:
            if gone:
                self.removal(_wire(intent.data))
            else:
                self.abandoned(intent.data.session_id,
                               "its run ended after announcing it, before the delete "
                               "(killed, or the machine stopped): the session is still there")

    def __exit__(self, *exc: object) -> None:
        if self._owned and self._session is not None:
            self._store.release(self._session)
        self._session = None

    @property
    def events(self) -> list[Any]:
        """The ledger's events, as written so far."""
        assert self._session is not None, "use the ledger in a with block"
        return list(self._session.events)

    def state(self) -> LedgerState:
        """:func:`fold` of the ledger as written so far (every announcement settled)."""
        return fold(self.events)

    def marked(self, session_id: str) -> bool:
        """Whether ``session_id`` is marked never to be pruned, as the ledger says now."""
        if self._marks is None:
            self._marks = self.state().retained()
        return self._marks.get(session_id, False)

    def _append(self, event_type: str, data: dict[str, Any]) -> None:
        assert self._session is not None, "use the ledger in a with block"
        self._session.append(event_type, data)
        self._store.flush(self._session)

    def mark(self, session_id: str, retain: bool, note: str | None) -> None:
        """Record a never-prune mark (``retain``) or its release (on an encrypted store,
        the backend seals the note)."""
        data: dict[str, Any] = {"sessionId": session_id, "retain": retain}
        if note is not None:
            data["note"] = note
        self._append("retention/mark", data)
        if self._marks is not None:
            self._marks[session_id] = retain

    def removing(self, data: dict[str, Any]) -> None:
        """Announce a removal, before the delete (the payload of ``retention/removing``,
        wire keys)."""
        self._append("retention/removing", data)

    def removal(self, data: dict[str, Any]) -> None:
        """Record a removal (the payload of ``retention/removal``, wire keys): it takes
        the session's mark with it."""
        self._append("retention/removal", data)
        if self._marks is not None:
            self._marks.pop(data["sessionId"], None)

    def forgetting(self, records: Sequence[dict[str, Any]]) -> None:
        """Announce forgets, before anything is removed (payloads of
        ``retention/forgetting``, wire keys: a digest, never the id), in one flush."""
        assert self._session is not None, "use the ledger in a with block"
        for data in records:
            self._session.append("retention/forgetting", data)
        self._store.flush(self._session)

    def forgotten(self, data: dict[str, Any]) -> None:
        """Record a forget (the payload of ``retention/forgotten``, wire keys: a digest,
        never the id); it takes the session's mark with it."""
        self._append("retention/forgotten", data)
        self._marks = None

    def purge(self, session_ids: Collection[str]) -> int | None:
        """Take every record naming one of ``session_ids`` in the clear (marks, their
        notes, announcements, removals) out of the ledger: the ledger is rewritten
        without them, its records numbered anew, in one atomic rewrite (as ``rekey``
        rewrites a session), and taken anew.

        :returns: how many records went; ``None`` when the backend cannot rewrite a
            session (:class:`~..capabilities.Rewritable`): they stay.
        """
        from ..._schema.codec import encode_events
        from ..capabilities import capabilities_of

        store, session = self._store, self._session
        assert session is not None, "use the ledger in a with block"
        wanted = set(session_ids)
        events = list(session.events)
        kept = [e for e in events if names(e) not in wanted]
        if len(kept) == len(events):
            return 0
        if capabilities_of(store.backend).rewritable is None or not self._owned:
            return None
        renumbered = [_numbered(e, seq) for seq, e in enumerate(kept)]
        cast_backend: Any = store.backend  # (Rewritable: checked just above)
        cast_backend.rewrite(session.header, renumbered, encode_events(renumbered))
        store.release(session)
        self._session = None
        self._session = self._open()
        self._marks = None
        return len(events) - len(kept)

    def abandoned(self, session_id: str, reason: str) -> None:
        """Record that the removal announced last for ``session_id`` did not happen."""
        self._append("retention/abandoned", {"sessionId": session_id, "reason": reason})


def _numbered(event: Any, seq: int) -> Any:
    """``event`` at ``seq`` (an opaque one's verbatim line too)."""
    import msgspec

    from ..._base.json_values import JsonObject
    from ...events import OpaqueEvent

    if event.seq == seq:
        return event
    if type(event) is OpaqueEvent:
        return msgspec.structs.replace(event, seq=seq,
                                       wire=JsonObject({**event.wire, "seq": seq}))
    return msgspec.structs.replace(event, seq=seq)


def _wire(data: Any) -> dict[str, Any]:
    """A payload struct as its wire dict."""
    import msgspec

    wire: dict[str, Any] = msgspec.to_builtins(data)
    return wire
