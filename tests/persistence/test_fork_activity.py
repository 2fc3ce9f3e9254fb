"""A fork's last activity is when it was made, on every kind of store: its seed keeps its
parent's (older) event times, its header the fork's time, and ``ls``, ``ls --since``,
``prune`` and ``rm`` go by the later of the two."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import pytest

from dsh_session_core._persistence.capabilities import summaries_of
from dsh_session_core.testing import run_cli
from lifecycle_support import KINDS, Clock, opened, store_url, write

OLD = 1_700_000_000_000  # 2023-11-14: the parent's only turn
MINUTE = 60_000
DAY = 86_400_000
ALL_KINDS = (*KINDS, "jsonl+zstd", "memory")


def _fork_at(store: object, clock: Clock, when: int) -> None:
    """Fork "parent" (one turn at OLD) into "child" at ``when``; flush and release it."""
    clock.now = when
    parent = store.open("parent")  # type: ignore[attr-defined]
    child = store.fork(parent, None, "child")  # type: ignore[attr-defined]
    store.release(child)  # type: ignore[attr-defined]
    store.release(parent)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_fork_was_last_active_when_it_was_made(kind: str, request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    forked = OLD + 40 * DAY
    clock = Clock(OLD)
    with opened(store_url(kind, request, tmp_path), clock) as store:
        write(store, clock, "parent", at=OLD)
        _fork_at(store, clock, forked)
        by_id = {s.header.id: s for s in store.backend.summaries()}
        assert by_id["parent"].last_activity == OLD
        assert by_id["child"].header.created_at == forked
        assert by_id["child"].events == 3  # the seed, with the parent's times
        assert by_id["child"].last_activity == forked
        # A page of the listing says the same as the whole listing.
        page = summaries_of(store.backend, store.stored())
        assert {s.header.id: s.last_activity for s in page} == {"parent": OLD,
                                                               "child": forked}
        # Thirty days after the parent's turn, a minute after the fork: only the parent
        # is older than 30 days.
        now = datetime.datetime.fromtimestamp((forked + MINUTE) / 1000, datetime.UTC)
        doomed = store.prune(datetime.timedelta(days=30), dry_run=True, now=now)
        assert [(d.session_id, d.last_activity) for d in doomed] == [("parent", OLD)]
        removed = store.prune(datetime.timedelta(days=30), now=now)
        assert [d.session_id for d in removed] == ["parent"]
        assert [h.id for h in store.stored()
                if h.id != "dsh-session.retention"] == ["child"]  # (the removal's record)


@pytest.mark.parametrize("kind", KINDS)
def test_the_commands_see_a_fork_made_a_minute_ago(kind: str, request: pytest.FixtureRequest,
                                                   tmp_path: Path) -> None:
    url = store_url(kind, request, tmp_path)
    clock = Clock(OLD)
    now = int(time.time() * 1000)
    with opened(url, clock) as store:
        write(store, clock, "parent", at=OLD)
        _fork_at(store, clock, now - MINUTE)
    code, out, err = run_cli("ls", "--store", url, "--since", "1h", "--json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert [(r["id"], r["lastActivity"]) for r in rows] == [("child", now - MINUTE)]
    code, out, err = run_cli("ls", "--store", url, "--sort", "activity", "-q")
    assert (code, err) == (0, "")
    assert out.decode().split() == ["child", "parent"]  # the most recently active first
    code, out, err = run_cli("prune", "--store", url, "--older-than", "30d", "--yes")
    assert (code, err) == (0, ""), err
    assert "removed parent" in out.decode()
    assert "child" not in out.decode()
    code, out, err = run_cli("rm", "child", "--store", url, "--yes", "--json")
    assert code == 0, err
    assert [(r["id"], r["lastActivity"]) for r in json.loads(out)["removed"]] == [
        ("child", now - MINUTE)]
