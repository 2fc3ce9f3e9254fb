"""Resealing an encrypted store's sessions under its current key: how keys are rotated out.

What ``dsh-session rekey`` and ``DurableStore.rekey`` run.

A session is opened as a writer would open it (its writer lock taken, a torn tail cut,
an interrupted turn closed), its records opened with whichever keys they name, then
written back sealed under the keyring's current key, every seq, type and time kept, in
one atomic rewrite of the backend's (:class:`~.capabilities.Rewritable`: a temp file
renamed over a JSONL log, one transaction in a database). A crash leaves the old records
or the new ones, both loadable while the old key is given.

A plaintext session (the reference format, in a store that is now opened with keys) is
sealed in place the same way, for the first time: it is read as plaintext under its
writer lock, its torn tail cut and an interrupted turn closed as an open would, and
written back sealed, its header marked sealed, in the same one rewrite. What a store
opened with keys refuses to read (``dsh-session rekey ID``, its advice) it so seals.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import msgspec

from ..._base.names import RETENTION_LEDGER_ID
from ..._schema.retention_events import RetentionMark
from ...errors import EncryptionError, SessionLockedError
from ..capabilities import read_lines_of

if TYPE_CHECKING:
    from ..store.durable import DurableStore
    from .sealed import SealedBackend

__all__ = ["Rekeyed", "rekey"]


@dataclasses.dataclass(frozen=True, slots=True)
class Rekeyed:
    """A session resealed by :func:`rekey`.

    :ivar session_id: the session.
    :ivar records: how many records it holds, each sealed anew (the retention ledger,
        whose records are in the clear: how many notes it holds, each sealed anew).
    :ivar key_id: the key they are sealed under now.
    :ivar old_key_ids: the key ids its records named before, sorted.
    :ivar plaintext: whether it was a plaintext session, sealed now for the first time.
    """

    session_id: str
    records: int
    key_id: str
    old_key_ids: tuple[str, ...]
    plaintext: bool = False


class _Box(msgspec.Struct):
    kid: str


class _Data(msgspec.Struct):
    sealed: _Box


class _Line(msgspec.Struct):
    data: _Data


_KIDS = msgspec.json.Decoder(list[_Line])


def rekey(store: DurableStore, session_id: str) -> Rekeyed:
    """Reseal ``session_id``'s records under the store's current key, or seal a
    plaintext session in place (see the module's docstring). The session must not be
    live in ``store``; another writer's lock is refused, as an open is.

    :raises EncryptionError: the store was opened without keys, or its backend cannot
        rewrite a session (refused before anything is read or written); what an open
        raises (a missing key, a refused record...).
    :raises SessionLockedError: another writer holds the session.
    """
    from ..projections.rebuild import rebuild_rows
    from .sealed import SealedBackend, cannot_reseal

    backend = store.backend
    if not isinstance(backend, SealedBackend):
        msg = (f'rekey reseals an encrypted store\'s sessions: open the store with keys '
               f'(session "{session_id}")')
        raise EncryptionError(msg, session_id=session_id)
    if store.capabilities.rewritable is None:  # before an open writes a turn's closers
        raise cannot_reseal(backend.inner, session_id)
    raw = read_lines_of(backend.inner, session_id, -1, None) or []
    try:
        old = {line.data.sealed.kid for line in _KIDS.decode(b"[" + b",".join(raw) + b"]")}
    except msgspec.DecodeError:  # unsealed lines: a plaintext session, or a bad record
        # The retention ledger is in the clear by design (only its notes are sealed).
        sealed = (None if session_id == RETENTION_LEDGER_ID
                  else _seal_in_place(store, backend, session_id))
        if sealed is not None:
            return sealed
        old = set()  # left to the open to refuse, naming the record
    session = store.open(session_id)
    try:
        store.flush(session)  # the closers of an interrupted turn, if any
        backend.rewrite(session.header, list(session.events), session.jsonl())
        # The rewrite dropped the session's projection rows: sealed anew, here.
        rebuild_rows(store.capabilities, store.registry, session.header,
                     list(session.events))
    finally:
        store.release(session)
    records = len(session.events)
    if session_id == RETENTION_LEDGER_ID:  # in the clear: only its notes are sealed
        notes = [e.data for e in session.events if isinstance(e, RetentionMark)
                 and (e.data.note is not None or e.data.sealed_note is not None)]
        old |= {n.sealed_note.kid for n in notes if n.sealed_note is not None}
        records = len(notes)
    return Rekeyed(session_id, records, backend.sealer.keyring.current, tuple(sorted(old)))


def _seal_in_place(store: DurableStore, backend: SealedBackend, session_id: str
                   ) -> Rekeyed | None:
    """Seal the plaintext session ``session_id`` in place, under its writer lock: its
    events as stored (a torn tail cut, the closers of an interrupted turn added, as an
    open would), sealed under the current key with its header marked sealed, in one
    rewrite. ``None`` when it is not a plaintext session (a sealed one with a bad
    record, none at all): the caller's open says what it is.

    :raises SessionLockedError: a writer holds it (this store's live session too).
    :raises EncryptionError: the backend cannot rewrite a session.
    """
    from ..._model.repair import interrupted_turn_closers
    from ..._schema.codec import encode_events
    from ..._schema.header import SESSION_FORMAT_VERSION
    from ..projections.rebuild import rebuild_rows

    inner = backend.inner
    # Read once for its header (its bucket, where its lock lives), then again under the
    # lock: what is sealed is what is stored when the lock is held.
    found = inner.load_stored(session_id, store.registry)
    if found is None or found.header.version != SESSION_FORMAT_VERSION:
        return None
    if store.get(session_id) is not None:
        raise SessionLockedError(session_id, "a live session of this store: release it "
                                             "first (store.release)")
    lock = inner.acquire(found.header)
    try:
        stored = inner.load_stored(session_id, store.registry)
        if stored is None or stored.header.version != SESSION_FORMAT_VERSION:
            return None  # removed, or sealed by another rekey, meanwhile
        closers = interrupted_turn_closers(stored.events)
        events = [*stored.events, *closers]
        jsonl = stored.jsonl if stored.jsonl is not None else encode_events(stored.events)
        backend.rewrite(stored.header, events, jsonl + encode_events(closers))
        rebuild_rows(store.capabilities, store.registry, stored.header, events)
    finally:
        lock.release()
    return Rekeyed(session_id, len(events), backend.sealer.keyring.current, (),
                   plaintext=True)
