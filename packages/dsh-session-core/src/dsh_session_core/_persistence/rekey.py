"""Resealing an encrypted store's sessions under its current key (``dsh-session rekey``,
``DurableStore.rekey``): how keys are rotated out.

A session is opened as a writer would open it (its writer lock taken, a torn tail cut,
an interrupted turn closed), its records opened with whichever keys they name, then
written back sealed under the keyring's current key, every seq, type and time kept, in
one atomic rewrite of the backend's (:class:`~.capabilities.Rewritable`: a temp file
renamed over a JSONL log, one transaction in a database). A crash leaves the old records
or the new ones, both loadable while the old key is given.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import msgspec

from .._names import RETENTION_LEDGER_ID
from .._retention_events import RetentionMark
from ..errors import EncryptionError
from .capabilities import read_lines_of

if TYPE_CHECKING:
    from .store import DurableStore

__all__ = ["Rekeyed", "rekey"]


@dataclasses.dataclass(frozen=True, slots=True)
class Rekeyed:
    """A session resealed by :func:`rekey`.

    :ivar session_id: the session.
    :ivar records: how many records it holds, each sealed anew (the retention ledger,
        whose records are in the clear: how many notes it holds, each sealed anew).
    :ivar key_id: the key they are sealed under now.
    :ivar old_key_ids: the key ids its records named before, sorted.
    """

    session_id: str
    records: int
    key_id: str
    old_key_ids: tuple[str, ...]


class _Box(msgspec.Struct):
    kid: str


class _Data(msgspec.Struct):
    sealed: _Box


class _Line(msgspec.Struct):
    data: _Data


_KIDS = msgspec.json.Decoder(list[_Line])


def rekey(store: DurableStore, session_id: str) -> Rekeyed:
    """Reseal ``session_id``'s records under the store's current key (see the module's
    docstring). The session must not be live in ``store``; another writer's lock is
    refused, as an open is.

    :raises EncryptionError: the store was opened without keys, or its backend cannot
        rewrite a session; what an open raises (a missing key, a refused record...).
    :raises SessionLockedError: another writer holds the session.
    """
    from .sealed import SealedBackend

    backend = store.backend
    if not isinstance(backend, SealedBackend):
        msg = (f'rekey reseals an encrypted store\'s sessions: open the store with keys '
               f'(session "{session_id}")')
        raise EncryptionError(msg, session_id=session_id)
    raw = read_lines_of(backend.inner, session_id, -1, None) or []
    try:
        old = {line.data.sealed.kid for line in _KIDS.decode(b"[" + b",".join(raw) + b"]")}
    except msgspec.DecodeError:  # left to the open to refuse, naming the record
        old = set()
    session = store.open(session_id)
    try:
        store.flush(session)  # the closers of an interrupted turn, if any
        backend.rewrite(session.header, list(session.events), session.jsonl())
    finally:
        store.release(session)
    records = len(session.events)
    if session_id == RETENTION_LEDGER_ID:  # in the clear: only its notes are sealed
        notes = [e.data for e in session.events if isinstance(e, RetentionMark)
                 and (e.data.note is not None or e.data.sealed_note is not None)]
        old |= {n.sealed_note.kid for n in notes if n.sealed_note is not None}
        records = len(notes)
    return Rekeyed(session_id, records, backend.sealer.keyring.current, tuple(sorted(old)))
