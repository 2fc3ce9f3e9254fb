"""Where an encrypted store's keys come from: the :class:`Keyring`, and the AEAD classes.

The :class:`Keyring` holds the keys by id, or a lookup of your own; which one seals new
records; the ``DSH_SESSION_KEYS`` form. The AEAD classes of ``cryptography`` are
imported only when a store with keys is made.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from ...errors import MissingExtraError

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "KEYS_VARIABLE",
    "KeyDrop",
    "KeyLookup",
    "Keyring",
    "aead_classes",
    "check_key",
]

#: The environment variable :meth:`Keyring.from_env` reads by default.
KEYS_VARIABLE: Final = "DSH_SESSION_KEYS"
#: The AEADs a record may name, each with a 256-bit key and a 96-bit nonce.
ALGORITHMS: Final = ("aes-256-gcm", "chacha20-poly1305")
#: What new records are sealed with unless the keyring says otherwise.
DEFAULT_ALGORITHM: Final = "aes-256-gcm"
_KEY_BYTES: Final = 32

#: ``(session_id, key_id) -> key``: a key of 32 bytes, or ``None`` when there is none
#: (never given, or deleted: the session is then unreadable).
KeyLookup = Callable[[str, str], "bytes | None"]

#: ``(session_id) -> None``: drop every key of this session where you keep them, for
#: good (crypto-shredding: ``store.forget`` calls it). It raises when it could not.
KeyDrop = Callable[[str], None]


class Keyring:
    """Where an encrypted store's keys come from, and which key seals new records.

    Keys are given here, never read from the log: a mapping of key ids to 32-byte keys
    (the same keys for every session), or a callable ``(session_id, key_id) -> bytes |
    None`` (keys of your own keeping, one per session if you like: deleting a session's
    key makes it unreadable for good, see docs/encryption.md).

    With one key per session, give ``drop`` too: ``store.forget(id)`` (and ``dsh-session
    forget``) calls ``drop(session_id)`` after removing the session, so that its key
    goes where you keep it and every copy left elsewhere (backups, replicas, an
    archive) stays ciphertext for good: crypto-shredding. Keys shared by every session
    (a mapping, ``DSH_SESSION_KEYS``) cannot be dropped for one session: forget is then
    a physical removal only, and says so.

    :param keys: the keys by id, or the lookup callable.
    :param current: the key id that seals new records (default: a mapping's first id;
        required with a callable). Records sealed under other ids still open while
        their keys are given: that is how keys are rotated.
    :param algorithm: the AEAD new records are sealed with (:data:`ALGORITHMS`).
    :param drop: with a callable, how to drop one session's keys (:data:`KeyDrop`).
    :raises ValueError: no key, a key that is not 32 bytes, an unknown algorithm, no
        ``current`` for a callable, or ``drop`` with a mapping (its keys are shared by
        every session: dropping one would shred them all).
    """

    def __init__(self, keys: Mapping[str, bytes] | KeyLookup, *, current: str | None = None,
                 algorithm: str = DEFAULT_ALGORITHM, drop: KeyDrop | None = None) -> None:
        if algorithm not in ALGORITHMS:
            msg = f"unknown algorithm {algorithm!r}: one of {', '.join(ALGORITHMS)}"
            raise ValueError(msg)
        if callable(keys):
            if current is None:
                msg = "a Keyring made with a key callable needs current= (the key id to seal with)"
                raise ValueError(msg)
            self._lookup: KeyLookup = keys
        else:
            if drop is not None:
                msg = ("drop= is for a key callable with one key per session: a mapping's "
                       "keys are shared by every session, and dropping one would shred them all")
                raise ValueError(msg)
            table = dict(keys)
            if not table:
                msg = "a Keyring needs at least one key"
                raise ValueError(msg)
            for kid, key in table.items():
                check_key(kid, key)
            current = next(iter(table)) if current is None else current
            if current not in table:
                msg = f"the current key id {current!r} is not among the keys ({', '.join(table)})"
                raise ValueError(msg)
            self._lookup = lambda _session_id, kid: table.get(kid)
        if not current:
            msg = "a key id is a non-empty string"
            raise ValueError(msg)
        self.current = current
        self.algorithm = algorithm
        self._drop = drop

    @property
    def shreds(self) -> bool:
        """Whether this keyring can drop one session's keys (it was given ``drop``)."""
        return self._drop is not None

    @classmethod
    def parse(cls, text: str, *, algorithm: str = DEFAULT_ALGORITHM) -> Keyring:
        """A keyring from ``kid:base64key,kid:base64key...``: the first is the current
        key (the others open older records).

        :raises ValueError: an entry without ``:``, a key that is not base64 of 32 bytes,
            a key id given twice (which of its keys is meant cannot be told: records
            sealed under the one left out would no longer open).
        """
        keys: dict[str, bytes] = {}
        for entry in text.split(","):
            kid, sep, b64 = entry.strip().partition(":")
            if not sep or not kid:
                msg = f"a key entry is kid:base64key, got {entry.strip()[:20]!r}..."
                raise ValueError(msg)
            if kid in keys:
                msg = (f"the key id {kid!r} is given twice: a key id names one key (a "
                       f"record names the id it was sealed with); give each key its own id")
                raise ValueError(msg)
            try:
                keys[kid] = binascii.a2b_base64(b64.strip().encode("ascii"), strict_mode=True)
            except (binascii.Error, UnicodeEncodeError):
                msg = f"the key of {kid!r} is not base64"
                raise ValueError(msg) from None
        return cls(keys, algorithm=algorithm)

    @classmethod
    def from_env(cls, name: str = KEYS_VARIABLE, *, algorithm: str = DEFAULT_ALGORITHM
                 ) -> Keyring:
        """The keyring the environment variable ``name`` holds (:meth:`parse`'s form).

        :raises ValueError: the variable is not set, or not of that form.
        """
        text = os.environ.get(name)
        if not text:
            msg = f"the environment variable {name} is not set (kid:base64key,...)"
            raise ValueError(msg)
        try:
            return cls.parse(text, algorithm=algorithm)
        except ValueError as exc:
            msg = f"{name}: {exc}"
            raise ValueError(msg) from None

    def key(self, session_id: str, key_id: str) -> bytes | None:
        """The key ``key_id`` of ``session_id``, or ``None`` when there is none."""
        return self._lookup(session_id, key_id)

    def drop(self, session_id: str) -> bool:
        """Drop the keys of ``session_id`` through the ``drop`` hook (crypto-shredding).

        :returns: whether there was a hook to ask (``False``: shared keys, nothing done).
        :raises Exception: what the hook raises (the key may still be there).
        """
        if self._drop is None:
            return False
        self._drop(session_id)
        return True


def check_key(kid: object, key: object) -> None:
    if not isinstance(kid, str) or not kid:
        msg = f"a key id is a non-empty string, got {kid!r}"
        raise ValueError(msg)
    if not isinstance(key, bytes) or len(key) != _KEY_BYTES:
        size = len(key) if isinstance(key, bytes) else type(key).__name__
        msg = f"key {kid!r} must be {_KEY_BYTES} bytes (256 bits), got {size}"
        raise ValueError(msg)


def aead_classes() -> tuple[dict[str, Any], type[Exception]]:
    """The AEAD classes by algorithm, and the error a failed authentication raises."""
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    except ImportError as exc:
        msg = "an encrypted store (keys=...)"
        raise MissingExtraError(msg, "cryptography",
                                "dsh-session-core[encryption]") from exc
    return {"aes-256-gcm": AESGCM, "chacha20-poly1305": ChaCha20Poly1305}, InvalidTag
