"""The two event types of a store's retention ledger (``retention/mark`` and
``retention/removal``): the session in which a store keeps its never-prune marks and the
record of every session retention removed (``_persistence/retention_ledger.py`` reads and
writes it). They are core's, registered by core's plugin, and not the reference's: only
the ledger session holds them.
"""

from __future__ import annotations

from msgspec import Struct

from .events import Event

__all__ = ["RetentionMark", "RetentionMarkData", "RetentionRemoval", "RetentionRemovalData"]


class RetentionMarkData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                        forbid_unknown_fields=True):
    """The payload of ``retention/mark``.

    :ivar session_id: the session marked.
    :ivar retain: ``True``: never pruned from now on; ``False``: the mark is released.
    :ivar note: why, for people (``dsh-session retain --note``).
    """

    session_id: str
    retain: bool
    note: str | None = None


class RetentionMark(Event, tag="retention/mark", frozen=True):
    """A never-prune mark set on a stored session, or released: the last mark of a session
    in the retention ledger wins, and prune never removes a session marked retained.
    """

    data: RetentionMarkData


class RetentionRemovalData(Struct, frozen=True, gc=False, kw_only=True, rename="camel",
                           forbid_unknown_fields=True):
    """The payload of ``retention/removal``.

    :ivar session_id: the session removed.
    :ivar rule: the rule that removed it (``older-than``, ``max-total-bytes``,
        ``keep-latest``: see :class:`~dsh_session_core.PruneDecision`).
    :ivar policy: the policy that ran, as text (:meth:`RetentionPolicy.describe`).
    :ivar location: where its log lived.
    :ivar bytes: the bytes freed, where known.
    :ivar events: the events it held, where known.
    :ivar last_activity: when it was last active (epoch ms), where known.
    :ivar archived_to: the store it was copied into first, or ``None``.
    """

    session_id: str
    rule: str
    policy: str
    location: str
    bytes: int | None = None
    events: int | None = None
    last_activity: int | None = None
    archived_to: str | None = None


class RetentionRemoval(Event, tag="retention/removal", frozen=True):
    """A session removed by a retention policy: what, why, by which policy, how big, and
    where it was archived first (the event's time is when).
    """

    data: RetentionRemovalData
