"""The errors of encrypted stores: missing keys, and records that fail authentication.

A session sealed at rest read without its keys, a key that is not there (never given,
or deleted: crypto-shredding), and a record that fails its authentication (moved,
altered, truncated in place, or plaintext where only sealed records belong).

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import publish
from .store import PersistenceError

__all__ = [
    "EncryptedSessionError",
    "EncryptionError",
    "KeyUnavailableError",
    "SealedRecordError",
]

#: What a reader without keys is told to do.
HOW_TO_OPEN = (
    "open the store with keys: open_store(url, keys=Keyring.from_env()) with "
    "DSH_SESSION_KEYS set (kid:base64key,...), or a Keyring of your own; from the command "
    "line, set DSH_SESSION_KEYS or name the variable with --key-env"
)


class EncryptionError(PersistenceError):
    """An encrypted store refused to read or write (the base of the errors below).

    :ivar session_id: the session concerned (``""`` when none is).
    :ivar seq: the record concerned, when one is.
    """

    def __init__(self, message: str, *, session_id: str, seq: int | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.seq = seq


class EncryptedSessionError(EncryptionError):
    """A session sealed at rest, read by a store opened without keys: nothing of it is
    read as data. The message says how to pass the keys."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f'session "{session_id}" is encrypted at rest and this store was opened '
            f"without keys: {HOW_TO_OPEN}",
            session_id=session_id,
        )


class KeyUnavailableError(EncryptionError):
    """The key a record (or a new write) needs is not in the keyring: never given, or
    deleted (a session whose keys are gone is unreadable for good: crypto-shredding).

    :ivar key_id: the key id the record names.
    """

    def __init__(self, session_id: str, key_id: str, seq: int | None = None) -> None:
        at = "" if seq is None else f" (record seq {seq})"
        super().__init__(
            f'no key "{key_id}" for session "{session_id}"{at}: give the keyring that key '
            f"(DSH_SESSION_KEYS=...,{key_id}:<base64 key>, or your key callable); if it "
            f"was deleted, the session cannot be read again",
            session_id=session_id, seq=seq,
        )
        self.key_id = key_id


#: What to do about a record that was changed after it was written.
RESTORE = ("Restore the log from a backup, or cut the session back before it (dsh-session "
           "repair does not change committed records)")


class SealedRecordError(EncryptionError):
    """A record of an encrypted store that is refused, never read as data: its
    ciphertext fails authentication (the key given under its key id is not the one that
    sealed it, or it was moved to another seq, session or type, altered, or cut short in
    place), it is plaintext where only sealed records belong, or it is of a sealing
    format this build does not read. Nothing was changed.

    :ivar event_type: the record's type, as its envelope says.
    :ivar problem: what is wrong with it.
    :ivar key_id: the key id of a record that failed authentication (``None`` for the
        other refusals).
    """

    def __init__(self, session_id: str, seq: int | None, event_type: object,
                 problem: str, *, key_id: str | None = None,
                 advice: str = RESTORE) -> None:
        """:param advice: what to do, the message's last sentence (default: restore
            the log from a backup)."""
        super().__init__(
            f'refused record seq {seq} ({event_type!r}) of encrypted session '
            f'"{session_id}": {problem}; it is not read as data. {advice}',
            session_id=session_id, seq=seq,
        )
        self.event_type = event_type
        self.problem = problem
        self.key_id = key_id


publish(globals(), __all__)
