"""The retention planner: which sessions a policy removes and why, as a pure function.

Which sessions a :class:`~.policy.RetentionPolicy` removes and why, as a pure function
of what is known of each session (its age, size, group, mark, lock), so that it can be
checked against a model of the rules on any input. What it returns,
:class:`PruneDecision` per session in a :class:`PruneReport`, is also what a run
reports, once each removal was tried (:mod:`.retention.run`).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

if TYPE_CHECKING:
    from .policy import RetentionPolicy

__all__ = ["Candidate", "PruneDecision", "PruneReport", "PruneRule", "PruneStatus", "plan"]

#: Why a session is kept or removed, in the order the rules are applied:
#:
#: - ``retained``: it is marked never to be pruned (kept);
#: - ``hidden``: a plugin's bookkeeping session, which lists hide (``hide_session``: the
#:   ADK adapter's app and user state): not a conversation, kept;
#: - ``locked``: a live writer holds it (kept);
#: - ``unmeasured``: it could not be looked at (kept; the reason says why);
#: - ``age-unknown``: its log says no time it was active (kept);
#: - ``keep-latest``: one of the ``keep_latest`` newest of its group (kept), or, when
#:   ``keep_latest`` is the policy's only rule, not one of them (removed);
#: - ``older-than``: idle for longer than ``older_than`` (removed);
#: - ``max-total-bytes``: among the oldest that had to go for the sessions left to fit
#:   ``max_total_bytes`` (removed);
#: - ``within-policy``: no rule removes it (kept).
PruneRule: TypeAlias = Literal["retained", "hidden", "locked", "unmeasured", "age-unknown",
                               "keep-latest", "older-than", "max-total-bytes",
                               "within-policy"]

#: What became of a session: ``kept``; ``would-delete`` (a dry run); ``deleted``;
#: ``failed`` (it was to go but is still there: ``reason`` says why).
PruneStatus: TypeAlias = Literal["kept", "would-delete", "deleted", "failed"]

_MICROSECOND: Final = datetime.timedelta(microseconds=1)


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """What the planner knows of one session.

    :ivar session_id: the session.
    :ivar last_activity: when it was last active, epoch ms (``None``: cannot be told).
    :ivar bytes: what it occupies (``None``: not known, counted as 0).
    :ivar events: how many events it holds, where known.
    :ivar group: its value for each grouping of the policy's ``per``.
    :ivar retained: marked never to be pruned.
    :ivar hidden: a session lists hide (a plugin's bookkeeping).
    :ivar locked: a live writer holds it.
    :ivar unmeasured: why it could not be looked at, or ``None``.
    :ivar location: where its log lives.
    """

    session_id: str
    last_activity: int | float | None
    bytes: int | None = None
    events: int | None = None
    group: tuple[str | None, ...] = ()
    retained: bool = False
    hidden: bool = False
    locked: bool = False
    unmeasured: str | None = None
    location: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class PruneDecision:
    """One session's fate under a policy.

    :ivar session_id: the session.
    :ivar remove: whether the policy removes it.
    :ivar rule: the rule that decided (see :data:`PruneRule`).
    :ivar status: what became of it (see :data:`PruneStatus`).
    :ivar last_activity: when it was last active (epoch ms), where known.
    :ivar bytes: what it occupies (removed: the bytes freed), where known.
    :ivar events: how many events it holds, where known.
    :ivar group: its group for ``keep_latest`` (the values of ``per``).
    :ivar location: where its log lives (or lived).
    :ivar archived_to: the store it was copied into before it was removed.
    :ivar reason: why it failed, or could not be looked at, for people.
    """

    session_id: str
    remove: bool
    rule: PruneRule
    status: PruneStatus
    last_activity: int | float | None = None
    bytes: int | None = None
    events: int | None = None
    group: tuple[str | None, ...] = ()
    location: str = ""
    archived_to: str | None = None
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready row (camelCase keys), as ``dsh-session prune --json`` prints."""
        row: dict[str, Any] = {
            "id": self.session_id, "action": "remove" if self.remove else "keep",
            "rule": self.rule, "status": self.status, "lastActivity": self.last_activity,
            "bytes": self.bytes, "events": self.events, "location": self.location}
        if self.group:
            row["group"] = list(self.group)
        if self.archived_to is not None:
            row["archivedTo"] = self.archived_to
        if self.reason is not None:
            row["reason"] = self.reason
        return row


@dataclasses.dataclass(frozen=True, slots=True)
class PruneReport:
    """What a policy did to a store (or, in a dry run, would do).

    :ivar policy: the policy.
    :ivar dry_run: nothing was changed.
    :ivar now: the moment ages were measured from (epoch ms).
    :ivar decisions: one per session in the policy's scope, oldest first (those whose
        age cannot be told last).
    :ivar total_bytes: what the sessions in scope occupied before.
    :ivar over_quota: the sessions left still occupy more than ``max_total_bytes``
        (the rest is protected, or failed to go).
    """

    policy: RetentionPolicy
    dry_run: bool
    now: int
    decisions: tuple[PruneDecision, ...]
    total_bytes: int
    over_quota: bool = False

    @property
    def removed(self) -> tuple[PruneDecision, ...]:
        """The sessions removed (or, in a dry run, that would be)."""
        return tuple(d for d in self.decisions if d.status in ("deleted", "would-delete"))

    @property
    def failed(self) -> tuple[PruneDecision, ...]:
        """The sessions that were to go and are still there."""
        return tuple(d for d in self.decisions if d.status == "failed")

    @property
    def kept(self) -> tuple[PruneDecision, ...]:
        """The sessions the policy keeps."""
        return tuple(d for d in self.decisions if not d.remove)

    @property
    def bytes_freed(self) -> int:
        """The bytes the removals freed (or would free)."""
        return sum(d.bytes or 0 for d in self.removed)

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready document (camelCase keys), as ``dsh-session prune --json``
        prints."""
        return {"policy": self.policy.describe(), "dryRun": self.dry_run, "now": self.now,
                "totalBytes": self.total_bytes, "bytesFreed": self.bytes_freed,
                "removed": len(self.removed), "failed": len(self.failed),
                "overQuota": self.over_quota,
                "sessions": [d.to_wire() for d in self.decisions]}


def plan(policy: RetentionPolicy, candidates: Sequence[Candidate], now: int
         ) -> tuple[list[PruneDecision], bool]:
    """The decisions of ``policy`` on ``candidates`` at ``now`` (epoch ms), oldest first,
    each ``kept`` or ``would-delete``; and whether the sessions left are still over the
    quota. The rules and their order are :class:`~.policy.RetentionPolicy`'s.
    """
    rules: dict[str, tuple[bool, PruneRule]] = {}
    free: list[Candidate] = []
    for c in candidates:
        if c.retained:
            rules[c.session_id] = (False, "retained")
        elif c.hidden:
            rules[c.session_id] = (False, "hidden")
        elif c.locked:
            rules[c.session_id] = (False, "locked")
        elif c.unmeasured is not None:
            rules[c.session_id] = (False, "unmeasured")
        elif c.last_activity is None:
            rules[c.session_id] = (False, "age-unknown")
        else:
            free.append(c)
    free.sort(key=_age)  # oldest first
    if policy.keep_latest is not None:
        alone = policy.older_than is None and policy.max_total_bytes is None
        groups: dict[tuple[str | None, ...], list[Candidate]] = {}
        for c in free:
            groups.setdefault(c.group, []).append(c)
        for members in groups.values():
            cut = len(members) - policy.keep_latest
            for i, c in enumerate(members):  # oldest first: the last keep_latest stay
                if i >= cut:
                    rules[c.session_id] = (False, "keep-latest")
                elif alone:
                    rules[c.session_id] = (True, "keep-latest")
    if policy.older_than is not None:
        # In microseconds, exactly: event times are integers of ms.
        cutoff = now * 1000 - policy.older_than // _MICROSECOND
        for c in free:
            if c.session_id not in rules and c.last_activity is not None \
                    and c.last_activity * 1000 < cutoff:
                rules[c.session_id] = (True, "older-than")
    over = False
    if policy.max_total_bytes is not None:
        left = sum(c.bytes or 0 for c in candidates
                   if not rules.get(c.session_id, (False,))[0])
        for c in free:
            if left <= policy.max_total_bytes:
                break
            if c.session_id not in rules:
                rules[c.session_id] = (True, "max-total-bytes")
                left -= c.bytes or 0
        over = left > policy.max_total_bytes
    decisions = []
    for c in sorted(candidates, key=_age):
        remove, rule = rules.get(c.session_id, (False, "within-policy"))
        decisions.append(PruneDecision(
            c.session_id, remove, rule, "would-delete" if remove else "kept",
            c.last_activity, c.bytes, c.events, c.group, c.location,
            reason=c.unmeasured))
    return decisions, over


def _age(c: Candidate) -> tuple[bool, int | float, str]:
    """Oldest first, ties by id; sessions of unknown age last."""
    return (c.last_activity is None, c.last_activity or 0, c.session_id)
