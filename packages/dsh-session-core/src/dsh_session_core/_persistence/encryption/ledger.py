"""The retention ledger of an encrypted store: never sealed, its notes sealed alone.

The ledger (:mod:`.retention.ledger`) holds no content of the sessions it names: ids,
rules, times, sizes, where a log lived and was archived to. So it stays in the clear on
an encrypted store, and a cleanup job that has no keys may write it (``prune``, ``rm``,
``retain`` without a note) while every reader, with keys or without, reads it as the
ledger it is. :class:`~.sealed.SealedBackend` passes it through unsealed, both ways, with
two exceptions made here:

- the note of a mark (``retain --note``) is content: on its way down, a plaintext note
  is sealed alone, into the mark's ``sealedNote`` (:data:`NOTE_CONTEXT` binds it to the
  ledger and to the marked session), under the key of the marked session (a key
  callable that keeps one key per session shreds the note with the session); a rewrite
  (``rekey``) reseals the notes under the current key, and leaves one whose key is gone
  as it is;
- a ledger sealed whole by an earlier release (its records sealed as any session's)
  still reads with keys: each sealed record is opened, each plaintext one taken as it is.
  The first writer with keys rewrites it in the clear (:class:`~.retention.ledger.Ledger`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from ..._base.names import RETENTION_LEDGER_ID
from ..._schema.retention_events import RetentionMark, SealedNote
from ...errors import EncryptionError

if TYPE_CHECKING:
    from ...events import Event
    from .sealing import Sealer

__all__ = ["is_sealed_line", "note_context", "open_lines", "open_note", "seal_notes"]

#: What the ledger's lines are opened and sealed under.
LEDGER_ID: Final = RETENTION_LEDGER_ID

#: A sealed record begins its payload so (``sealing.py``'s shape, written by this
#: library only: a plaintext record's payload is an object of other keys, and a string
#: holding these bytes would hold them escaped).
_SEALED: Final = b'"data":{"sealed":{'


def is_sealed_line(line: bytes) -> bool:
    """Whether a ledger line is a sealed record (one an earlier release sealed)."""
    return _SEALED in line


def open_lines(sealer: Sealer, lines: Sequence[bytes]) -> list[bytes]:
    """The ledger's ``lines`` as plaintext: a sealed record opened, any other as it is.

    :raises SealedRecordError: a sealed record fails authentication.
    :raises KeyUnavailableError: its key is not given.
    """
    return [sealer.open_line(LEDGER_ID, line) if is_sealed_line(line) else line
            for line in lines]


@functools.lru_cache(maxsize=256)
def note_context(session_id: str) -> tuple[str, str, str]:
    """What the note of ``session_id``'s mark is bound to."""
    return ("retention/mark note", LEDGER_ID, session_id)


def open_note(sealer: Sealer, session_id: str, box: SealedNote) -> str:
    """The text of a sealed note of ``session_id``'s mark.

    :raises KeyUnavailableError: its key is not given.
    :raises EncryptionError: it fails authentication (moved from another mark, altered).
    """
    plain = sealer.open_field(session_id, note_context(session_id),
                              (box.kid, box.alg, box.nonce, box.ct))
    return plain.decode("utf-8", "surrogatepass")


def _sealed(sealer: Sealer, session_id: str, text: str) -> SealedNote:
    kid, alg, nonce, ct = sealer.seal_field(
        session_id, note_context(session_id), text.encode("utf-8", "surrogatepass"))
    return SealedNote(kid=kid, alg=alg, nonce=nonce, ct=ct)


def seal_notes(sealer: Sealer, events: Sequence[Event], jsonl: bytes, *, reseal: bool
               ) -> tuple[Sequence[Event], bytes]:
    """``events`` (their lines ``jsonl``) as the ledger stores them on an encrypted
    store: each mark's plaintext note sealed; with ``reseal``, each sealed note under
    another key than the current one sealed again under it (one whose key is not given,
    or that fails authentication, is left as it is: it cannot be read again either way).
    The lines of the events unchanged are kept as they are."""
    from ..._schema.codec import encode_events

    changed: dict[int, Event] = {}
    current = sealer.keyring.current
    for i, event in enumerate(events):
        if not isinstance(event, RetentionMark):
            continue
        data = event.data
        box = data.sealed_note
        if data.note is not None:
            box = _sealed(sealer, data.session_id, data.note)
        elif box is not None and reseal and box.kid != current:
            try:
                box = _sealed(sealer, data.session_id, open_note(sealer, data.session_id, box))
            except EncryptionError:
                continue  # its key is gone (shredded), or it was altered: left as it is
        else:
            continue
        changed[i] = msgspec.structs.replace(
            event, data=msgspec.structs.replace(data, note=None, sealed_note=box))
    if not changed:
        return events, jsonl
    lines = jsonl.split(b"\n")
    out = list(events)
    for i, event in changed.items():
        out[i] = event
        lines[i] = encode_events([event]).rstrip(b"\n")
    return out, b"\n".join(lines)
