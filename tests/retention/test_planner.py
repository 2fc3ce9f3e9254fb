"""The retention planner against a model of its rules written another way (ranks and
sets rather than one pass): on generated sessions (times, sizes, groups, marks, locks),
the plan removes exactly what the model says, never a marked, locked or ageless session,
and ends under the quota whenever what it may not remove fits."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import RetentionPolicy
from dsh_session_core._persistence.retention.plan import Candidate, plan

NOW = 1_700_000_000_000
HOUR = 3_600_000


@st.composite
def candidates(draw: Any) -> list[Candidate]:
    count = draw(st.integers(0, 14))
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=count,
                        max_size=count, unique=True))
    found = []
    for sid in ids:
        when = draw(st.one_of(st.none(), st.integers(NOW - 60 * HOUR, NOW + HOUR)))
        found.append(Candidate(
            sid, when, draw(st.one_of(st.none(), st.integers(0, 5000))), 1,
            (draw(st.sampled_from(["u1", "u2", None])),),
            retained=draw(st.integers(0, 3)) == 0,
            hidden=draw(st.integers(0, 7)) == 0,
            locked=draw(st.integers(0, 5)) == 0,
            unmeasured="gone" if draw(st.integers(0, 9)) == 0 else None))
    return found


@st.composite
def policies(draw: Any) -> RetentionPolicy:
    older = draw(st.one_of(st.none(), st.integers(0, 50).map(
        lambda h: datetime.timedelta(hours=h))))
    keep = draw(st.one_of(st.none(), st.integers(0, 4)))
    quota = draw(st.one_of(st.none(), st.integers(0, 30000)))
    if older is None and keep is None and quota is None:
        keep = 1
    return RetentionPolicy(older_than=older, keep_latest=keep,
                           per=("user",) if keep is not None and draw(st.booleans()) else (),
                           max_total_bytes=quota)


def model(policy: RetentionPolicy, cs: list[Candidate]) -> dict[str, str]:
    """The rules as the docs state them, session by session: id -> removing rule."""
    exempt = {c.session_id for c in cs if c.retained or c.hidden or c.locked
              or c.unmeasured or c.last_activity is None}
    free = [c for c in cs if c.session_id not in exempt]

    def newer_in_group(c: Candidate) -> int:  # how many free sessions of its group are newer
        return sum(1 for o in free if o.group == c.group and
                   (o.last_activity or 0, o.session_id) > (c.last_activity or 0, c.session_id))

    latest = ({c.session_id for c in free if newer_in_group(c) < policy.keep_latest}
              if policy.keep_latest is not None else set())
    gone: dict[str, str] = {}
    if policy.keep_latest is not None and policy.older_than is None \
            and policy.max_total_bytes is None:
        gone = {c.session_id: "keep-latest" for c in free if c.session_id not in latest}
    if policy.older_than is not None:
        limit_ms = NOW - policy.older_than / datetime.timedelta(milliseconds=1)
        gone |= {c.session_id: "older-than" for c in free
                 if c.session_id not in latest and (c.last_activity or 0) < limit_ms}
    if policy.max_total_bytes is not None:
        size = {c.session_id: c.bytes or 0 for c in cs}
        total = sum(size[i] for i in size if i not in gone)
        for c in sorted(free, key=lambda c: (c.last_activity or 0, c.session_id)):
            if total <= policy.max_total_bytes:
                break
            if c.session_id not in latest and c.session_id not in gone:
                gone[c.session_id] = "max-total-bytes"
                total -= size[c.session_id]
    return gone


@settings(max_examples=400, deadline=None)
@given(policies(), candidates())
def test_the_plan_removes_exactly_what_the_model_says(policy: RetentionPolicy,
                                                      cs: list[Candidate]) -> None:
    decisions, over = plan(policy, cs, NOW)
    assert sorted(d.session_id for d in decisions) == sorted(c.session_id for c in cs)
    removed = {d.session_id: d.rule for d in decisions if d.remove}
    assert removed == model(policy, cs)
    for d in decisions:
        assert d.status == ("would-delete" if d.remove else "kept")
    by_id = {c.session_id: c for c in cs}
    for sid in removed:  # never a marked, locked, unmeasured or ageless session
        c = by_id[sid]
        assert not c.retained
        assert not c.hidden
        assert not c.locked
        assert c.unmeasured is None
        assert c.last_activity is not None
    if policy.max_total_bytes is not None:
        left = sum(c.bytes or 0 for c in cs if c.session_id not in removed)
        assert over == (left > policy.max_total_bytes)
        untouchable = sum(c.bytes or 0 for c in cs
                          if c.retained or c.hidden or c.locked or c.unmeasured
                          or c.last_activity is None)
        if policy.keep_latest is None and untouchable <= policy.max_total_bytes:
            assert not over  # it fits whenever what it may not remove fits
    else:
        assert not over


@given(candidates())
def test_decisions_come_oldest_first_ageless_last(cs: list[Candidate]) -> None:
    decisions, _ = plan(RetentionPolicy(keep_latest=2), cs, NOW)
    ages = [d.last_activity for d in decisions]
    known = [a for a in ages if a is not None]
    assert ages == known + [None] * (len(ages) - len(known))
    assert known == sorted(known)


def test_rules_named_on_a_small_store() -> None:
    cs = [Candidate("old", NOW - 50 * HOUR, 100, group=("u1",)),
          Candidate("old-kept", NOW - 40 * HOUR, 100, group=("u2",)),
          Candidate("marked", NOW - 50 * HOUR, 100, group=("u1",), retained=True),
          Candidate("held", NOW - 50 * HOUR, 100, group=("u1",), locked=True),
          Candidate("state", NOW - 50 * HOUR, 100, group=(None,), hidden=True),
          Candidate("big", NOW - HOUR * 2, 900, group=("u1",)),
          Candidate("new", NOW - HOUR, 100, group=("u1",)),
          Candidate("ageless", None, 100, group=("u1",))]
    policy = RetentionPolicy(older_than=datetime.timedelta(days=1), keep_latest=1,
                             per=("user",), max_total_bytes=600)
    decisions, over = plan(policy, cs, NOW)
    assert {d.session_id: (d.remove, d.rule) for d in decisions} == {
        "old": (True, "older-than"), "old-kept": (False, "keep-latest"),
        "marked": (False, "retained"), "held": (False, "locked"),
        "state": (False, "hidden"),
        "big": (True, "max-total-bytes"), "new": (False, "keep-latest"),
        "ageless": (False, "age-unknown")}
    assert not over  # 100 * 6 left
