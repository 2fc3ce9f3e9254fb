"""The event types of a store's retention ledger: its marks and its removal records.

The ledger is the session in which a store keeps its never-prune marks
(``retention/mark``) and the record of every session removed from it
(``retention/removing`` before the delete, then ``retention/removal``, or
``retention/abandoned`` when the delete did not happen), and of every session forgotten
(``retention/forgotten``: a digest of its id, never the id).
``_persistence/retention/ledger.py`` reads and writes it. They are core's, registered by
core's plugin, and not the reference's: only the ledger session holds them.

The ledger holds no content of the sessions it names (ids, rules, times, sizes, where a
log lived or was archived to), so it is never sealed: a cleanup job without an encrypted
store's keys writes it, and every reader reads it. The one piece of content it may hold,
the note of a mark, is sealed on an encrypted store (:class:`SealedNote`).
"""

from __future__ import annotations

from msgspec import Struct

from ..events import Event

__all__ = [
    "RetentionAbandoned",
    "RetentionAbandonedData",
    "RetentionForgetting",
    "RetentionForgettingData",
    "RetentionForgotten",
    "RetentionForgottenData",
    "RetentionMark",
    "RetentionMarkData",
    "RetentionRemoval",
    "RetentionRemovalData",
    "RetentionRemoving",
    "SealedNote",
]


class SealedNote(Struct, frozen=True, gc=False, kw_only=True, forbid_unknown_fields=True):
    """The note of a mark on an encrypted store, sealed with the store's keys (the key of
    the marked session, as the keyring gives it): an AEAD box whose associated data binds
    it to the ledger and to the marked session, so it cannot be moved to another mark of
    another session unnoticed.

    :ivar kid: the key id it is sealed under.
    :ivar alg: the AEAD (``aes-256-gcm``, ``chacha20-poly1305``).
    :ivar nonce: the nonce, base64.
    :ivar ct: the ciphertext and its tag, base64.
    """

    kid: str
    alg: str
    nonce: str
    ct: str


class RetentionMarkData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                        forbid_unknown_fields=True):
    """The payload of ``retention/mark``.

    :ivar session_id: the session marked.
    :ivar retain: ``True``: never pruned from now on; ``False``: the mark is released.
    :ivar note: why, for people (``dsh-session retain --note``), on a plaintext store.
    :ivar sealed_note: the note on an encrypted store, sealed (read with the keys).
    """

    session_id: str
    retain: bool
    note: str | None = None
    sealed_note: SealedNote | None = None


class RetentionMark(Event, tag="retention/mark", frozen=True):
    """A never-prune mark set on a stored session, or released: the last mark of a session
    in the retention ledger wins, a removal of the session takes its mark with it, and
    prune never removes a session marked retained.
    """

    data: RetentionMarkData


class RetentionRemovalData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                           forbid_unknown_fields=True):
    """The payload of ``retention/removing`` and ``retention/removal``.

    :ivar session_id: the session removed.
    :ivar rule: what removed it: a retention rule (``older-than``, ``max-total-bytes``,
        ``keep-latest``: see :class:`~dsh_session_core.PruneDecision`), or the door a
        removal came through (``rm``, ``api-delete``, ``pydantic-ai-delete``...).
    :ivar policy: the policy that ran, as text (:meth:`RetentionPolicy.describe`), or
        what removed it, for people.
    :ivar location: where its log lived.
    :ivar bytes: the bytes freed, where known.
    :ivar events: the events it held, where known.
    :ivar last_activity: when it was last active (epoch ms), where known.
    :ivar archived_to: the store it was copied into first, or ``None``.
    :ivar created_at: its header's ``createdAt``, which tells it from a later session of
        the same id (absent from the records of earlier releases).
    :ivar retained: it was marked never to be pruned, and its mark went with it (an
        ``rm`` or a delete of a marked session).
    """

    session_id: str
    rule: str
    policy: str
    location: str
    bytes: int | None = None
    events: int | None = None
    last_activity: int | None = None
    archived_to: str | None = None
    created_at: int | float | None = None
    retained: bool = False


class RetentionRemoving(Event, tag="retention/removing", frozen=True):
    """A removal about to happen, recorded (and flushed) before the session's log is
    deleted: what a crash between the delete and its ``retention/removal`` leaves, so
    that no removal goes unrecorded. It is settled by the next record of the same
    session, ``retention/removal`` or ``retention/abandoned``; one left unsettled (the
    run was killed) counts as a removal when the session is gone, and as none when it is
    still there (the next ledger writer records which).
    """

    data: RetentionRemovalData


class RetentionRemoval(Event, tag="retention/removal", frozen=True):
    """A session removed from the store: what, why, by which policy or door, how big,
    and where it was archived first (the event's time is when).
    """

    data: RetentionRemovalData


class RetentionAbandonedData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                             forbid_unknown_fields=True):
    """The payload of ``retention/abandoned``.

    :ivar session_id: the session whose removal did not happen.
    :ivar reason: why, for people.
    """

    session_id: str
    reason: str


class RetentionAbandoned(Event, tag="retention/abandoned", frozen=True):
    """A removal announced by ``retention/removing`` that did not happen: the delete was
    refused or failed (the session is left as it was), or the run was killed before it.
    """

    data: RetentionAbandonedData


class RetentionForgettingData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                              forbid_unknown_fields=True):
    """The payload of ``retention/forgetting``: a forget is under way, without a word of
    the session (its digest, as :class:`RetentionForgottenData` names it).

    :ivar digest: as :attr:`RetentionForgottenData.digest`.
    :ivar rule: as :attr:`RetentionForgottenData.rule`.
    """

    digest: str
    rule: str


class RetentionForgetting(Event, tag="retention/forgetting", frozen=True):
    """A forget announced, before anything of the session is removed: what a run killed
    midway leaves, so the same forget again finishes it (the session may then be stored
    nowhere, but the ledger says a forget of it was begun). ``retention/forgotten`` of the
    same digest settles it.
    """

    data: RetentionForgettingData


class RetentionForgottenData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                             forbid_unknown_fields=True):
    """The payload of ``retention/forgotten``: that a session was forgotten, without a
    word of it. Its id is not here, only :attr:`digest` (a SHA-256 of it, with a fixed
    prefix: whoever holds the id can check that it was forgotten; it names no one to a
    reader who does not).

    :ivar digest: ``sha256:`` and the hex of SHA-256 of ``dsh-session.forget:`` and the
        id (:func:`~dsh_session_core._persistence.retention.forget.digest_of`).
    :ivar rule: the door it came through: ``forget`` (``store.forget``), ``forget-cli``
        (``dsh-session forget``), or an integration's (``adk-forget-user``...).
    :ivar stored: it was stored here (else only its archives, or its key, held it).
    :ivar archives: how many archives it was forgotten in too.
    :ivar key_dropped: the keyring's drop hook dropped its keys (crypto-shredding);
        ``False``: shared keys (or none), a physical removal only.
    """

    digest: str
    rule: str
    stored: bool = True
    archives: int = 0
    key_dropped: bool = False


class RetentionForgotten(Event, tag="retention/forgotten", frozen=True):
    """A session forgotten (``store.forget``, ``dsh-session forget``): its log, rows,
    index entries and archived copies removed for good, and every earlier record of it
    in this ledger taken out. The event's time is when; the session is named by a digest
    only.
    """

    data: RetentionForgottenData
