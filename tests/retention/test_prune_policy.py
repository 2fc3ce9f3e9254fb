"""``store.prune(RetentionPolicy(...))`` on every kind of store, for real: each rule
removes what it names and reports why; a marked session and one a writer holds stay; a
quota removes the oldest first; an archive is written and checked before a delete, and a
failed archive leaves its session; every removal is recorded, durably, in the store's
retention ledger, which lists hide and prune never removes."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from dsh_session_core import (
    DurableStore,
    Event,
    RetentionPolicy,
    SessionHeader,
    create_plugin_manager,
    hookimpl,
    is_hidden,
    open_store,
)
from dsh_session_core.errors import PersistenceError, SessionLockedError, StoreFolderError
from lifecycle_support import Clock, exported, held_by_another_process, opened, snapshot, write

UTC = datetime.UTC
T0 = 1_700_000_000_000
DAY = 86_400_000
LEDGER = "dsh-session.retention"


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=ms)


def _ids(store: DurableStore) -> set[str]:
    return {h.id for h in store.stored()} - {LEDGER}


def _reopen(store_url: str, store: DurableStore) -> DurableStore:
    """The same store anew, as another process opens it (a memory store is only itself)."""
    return store if store_url == "memory:" else opened(store_url)


def test_each_rule_removes_what_it_names_and_each_removal_is_recorded(
        store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "p-old", cwd="/p", at=T0)
        write(store, clock, "p-older", cwd="/p", at=T0 - DAY)
        write(store, clock, "q-old", cwd="/q", at=T0 - DAY)
        write(store, clock, "p-new", cwd="/p", at=T0 + 9 * DAY)
        sizes = {i: store.delete(i, dry_run=True).bytes or 0 for i in _ids(store)}
        policy = RetentionPolicy(older_than=datetime.timedelta(days=2), keep_latest=1,
                                 per=("cwd",), name="team")
        clock.now = T0 + 10 * DAY
        report = store.prune(policy, now=_at(T0 + 10 * DAY))
        assert [(d.session_id, d.rule, d.status) for d in report.decisions] == [
            ("p-older", "older-than", "deleted"), ("q-old", "keep-latest", "kept"),
            ("p-old", "older-than", "deleted"), ("p-new", "keep-latest", "kept")]
        assert report.bytes_freed == sizes["p-older"] + sizes["p-old"]
        assert report.total_bytes == sum(sizes.values())
        assert _ids(store) == {"q-old", "p-new"}
        again = _reopen(store_url, store)
        records = [(r.data.session_id, r.data.rule, r.data.bytes, r.data.events, r.time)
                   for r in again.removals()]
        assert records == [("p-older", "older-than", sizes["p-older"], 3, T0 + 10 * DAY),
                           ("p-old", "older-than", sizes["p-old"], 3, T0 + 10 * DAY)]
        assert {r.data.policy for r in again.removals()} == {
            "team: older than 2d, keep latest 1 per cwd"}
        ledger = next(h for h in again.stored() if h.id == LEDGER)
        assert is_hidden(ledger, plugins=create_plugin_manager(autoload=False))
        # The ledger is never pruned, whatever the policy says.
        everything = again.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                                 now=_at(T0 + 99 * DAY))
        assert {d.session_id for d in everything.removed} == {"q-old", "p-new"}
        assert LEDGER in {h.id for h in again.stored()}
        assert len(again.removals()) == 4
        if again is not store:
            again.close()


def test_a_dry_run_changes_nothing(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i in range(3):
            write(store, clock, f"s{i}", at=T0 + i)
        before = snapshot(store)
        report = store.prune(RetentionPolicy(max_total_bytes=0), dry_run=True,
                             now=_at(T0 + DAY))
        assert [(d.session_id, d.status, d.rule) for d in report.decisions] == [
            (f"s{i}", "would-delete", "max-total-bytes") for i in range(3)]
        assert report.dry_run
        assert report.bytes_freed == report.total_bytes > 0
        assert snapshot(store) == before  # nor was a ledger made
        assert store.removals() == []


def test_a_marked_session_is_never_pruned_and_its_mark_lasts(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "keep-me", at=T0)
        write(store, clock, "other", at=T0)
        assert store.retain("keep-me", note="the demo")
        assert not store.retain("keep-me")  # already marked: nothing recorded
        with pytest.raises(PersistenceError, match='session "absent" not found'):
            store.retain("absent")
        with pytest.raises(ValueError, match="the retention ledger itself"):
            store.retain(LEDGER)
        again = _reopen(store_url, store)
        assert again.retained() == ["keep-me"]
        old_form = again.prune(datetime.timedelta(0), now=_at(T0 + DAY), dry_run=True)
        assert [d.session_id for d in old_form] == ["other"]  # the old form honours it
        report = again.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                             now=_at(T0 + DAY))
        assert {(d.session_id, d.rule) for d in report.decisions} == {
            ("keep-me", "retained"), ("other", "older-than")}
        assert _ids(again) == {"keep-me"}
        assert again.retain("keep-me", False)  # released: it may go now
        assert again.retained() == []
        assert [d.session_id for d in again.prune(
            RetentionPolicy(older_than=datetime.timedelta(0)), now=_at(T0 + DAY)).removed
        ] == ["keep-me"]
        if again is not store:
            again.close()


@pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")
def test_a_session_a_writer_holds_is_kept_and_can_be_marked(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "held", at=T0)
        write(store, clock, "free", at=T0)
        live = store.open("free")  # live in this store: held too
        with held_by_another_process(store_url, "held"):
            report = store.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                                 now=_at(T0 + DAY))
            assert {(d.session_id, d.rule, d.status) for d in report.decisions} == {
                ("held", "locked", "kept"), ("free", "locked", "kept")}
            assert store.retain("held")  # the mark is the ledger's: no lock on "held"
        store.release(live)
        assert _ids(store) == {"held", "free"}
        assert store.retained() == ["held"]


def test_a_quota_removes_the_oldest_first_until_the_rest_fits(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i, text in enumerate(["a" * 50, "b" * 900, "c" * 10, "d" * 400]):
            write(store, clock, f"s{i}", at=T0 + i * DAY, text=text)
        size = {i: store.delete(i, dry_run=True).bytes or 0 for i in _ids(store)}
        quota = size["s0"] + size["s3"]
        store.retain("s0")  # marked: the oldest free ones go, s1 then s2, until it fits
        report = store.prune(RetentionPolicy(max_total_bytes=quota), now=_at(T0 + 9 * DAY))
        assert [d.session_id for d in report.removed] == ["s1", "s2"]
        assert {d.rule for d in report.removed} == {"max-total-bytes"}
        assert _ids(store) == {"s0", "s3"}
        assert not report.over_quota
        assert report.bytes_freed == size["s1"] + size["s2"]


def test_a_quota_the_protected_sessions_break_is_reported(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "marked", at=T0)
        write(store, clock, "free", at=T0 + 1)
        store.retain("marked")
        report = store.prune(RetentionPolicy(max_total_bytes=1), now=_at(T0 + DAY))
        assert [d.session_id for d in report.removed] == ["free"]
        assert report.over_quota  # what is left is marked: it stays, and is over


def test_archive_before_delete_writes_and_checks_each_session(store_url: str,
                                                               tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    archive = f"jsonl+zstd:///{tmp_path / 'archive'}"
    (tmp_path / "archive").mkdir()
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0, turns=3)
        write(store, clock, "b", at=T0 + 1)
        write(store, clock, "new", at=T0 + 5 * DAY)
        before = {i: exported(store, i) for i in ("a", "b")}
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(days=1),
                                             archive_to=archive), now=_at(T0 + 5 * DAY))
        assert [(d.session_id, d.status, d.archived_to) for d in report.removed] == [
            ("a", "deleted", archive), ("b", "deleted", archive)]
        assert [r.data.archived_to for r in store.removals()] == [archive, archive]
    with opened(archive) as kept:
        assert {h.id for h in kept.stored()} == {"a", "b"}
        for i, data in before.items():
            assert exported(kept, i) == data  # byte for byte


def test_a_failed_archive_leaves_its_session_and_records_nothing(store_url: str,
                                                                  tmp_path: Path) -> None:
    archive_url = str(tmp_path / "archive")  # a JSONL folder
    clock = Clock()
    with opened(archive_url, clock) as archive:
        write(archive, clock, "a", at=T0, text="something else")  # diverged from ours
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        write(store, clock, "b", at=T0 + 1)
        mine = exported(store, "a")
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(0),
                                             archive_to=archive_url), now=_at(T0 + DAY))
        failed = report.failed
        assert [(d.session_id, d.status) for d in failed] == [("a", "failed")]
        assert failed[0].reason is not None
        assert failed[0].reason.startswith("not archived (diverged)")
        assert [d.session_id for d in report.removed] == ["b"]
        assert exported(store, "a") == mine
        assert [r.data.session_id for r in store.removals()] == ["b"]


def test_an_archive_that_cannot_be_opened_stops_before_anything(store_url: str,
                                                                 tmp_path: Path) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        before = snapshot(store)
        with pytest.raises(StoreFolderError, match="does not exist"):
            store.prune(RetentionPolicy(older_than=datetime.timedelta(0),
                                        archive_to=str(tmp_path / "no" / "such")),
                        now=_at(T0 + DAY))
        if store_url != "memory:":
            with pytest.raises(ValueError, match="archive into the store it prunes"):
                store.prune(RetentionPolicy(older_than=datetime.timedelta(0),
                                            archive_to=store_url), now=_at(T0 + DAY))
        assert snapshot(store) == before


class _Owners:
    """A plugin naming each session's user: the id's first part (``ada-1`` is ada's)."""

    @hookimpl
    def session_labels(self, header: SessionHeader,
                       first_events: Callable[[int], Sequence[Event]]) -> dict[str, str]:
        return {"user": header.id.split("-")[0]}


def test_keep_latest_per_user_keeps_each_users_newest(store_url: str) -> None:
    pm = create_plugin_manager(autoload=False)
    pm.register(_Owners())
    clock = Clock()
    with open_store(store_url, plugin_manager=pm, clock=clock) as store:
        for i, sid in enumerate(["ada-1", "bob-1", "ada-2", "ada-3", "bob-2", "cy-1"]):
            write(store, clock, sid, at=T0 + i)
        report = store.prune(RetentionPolicy(keep_latest=1, per=("user",)),
                             now=_at(T0 + DAY))
        assert {d.session_id: (d.rule, d.group) for d in report.removed} == {
            "ada-1": ("keep-latest", ("ada",)), "ada-2": ("keep-latest", ("ada",)),
            "bob-1": ("keep-latest", ("bob",))}
        assert _ids(store) == {"ada-3", "bob-2", "cy-1"}
        by_label = store.prune(RetentionPolicy(keep_latest=0, per=("label:user",)),
                               now=_at(T0 + DAY), dry_run=True)
        assert len(by_label.removed) == 3


def test_a_policy_takes_no_cwd_or_keep_beside_it(tmp_path: Path) -> None:
    with opened(str(tmp_path)) as store:
        policy = RetentionPolicy(keep_latest=1)
        with pytest.raises(ValueError, match="give cwd and keep_latest in the policy"):
            store.prune(policy, cwd="/p")  # type: ignore[call-overload]
        with pytest.raises(ValueError, match="give cwd and keep_latest in the policy"):
            store.prune(policy, keep=2)  # type: ignore[call-overload]


def test_the_asyncio_twins(tmp_path: Path) -> None:
    clock = Clock()

    async def run(store: DurableStore) -> None:
        assert await store.aretain("a")
        report = await store.aprune(RetentionPolicy(older_than=datetime.timedelta(0)),
                                    now=_at(T0 + DAY))
        assert [(d.session_id, d.rule) for d in report.decisions] == [
            ("a", "retained"), ("b", "older-than")]

    with opened(str(tmp_path), clock) as store:
        write(store, clock, "a", at=T0)
        write(store, clock, "b", at=T0 + 1)
        asyncio.run(run(store))
        assert _ids(store) == {"a"}


@pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")
def test_a_ledger_another_writer_holds_stops_a_mark_and_a_prune_before_anything(
        store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        store.retain("a")  # the ledger exists
        store.retain("a", False)
        before = snapshot(store)
        with held_by_another_process(store_url, LEDGER):
            with pytest.raises(SessionLockedError, match="another prune, rm or retain"):
                store.retain("a")
            with pytest.raises(SessionLockedError, match="another prune, rm or retain"):
                store.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                            now=_at(T0 + DAY))
            assert snapshot(store) == before
        assert store.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                           now=_at(T0 + DAY)).removed[0].session_id == "a"


def test_lists_hide_the_ledger_with_no_plugin_hiding_anything(store_url: str) -> None:
    from dsh_session_core.inspect import SessionQuery, select_sessions

    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        store.retain("a")
        bare = create_plugin_manager(autoload=False)
        assert not bare.hook.hide_session.get_hookimpls()
        page = select_sessions(store.backend, SessionQuery(), plugins=bare)
        assert [s.header.id for s in page.summaries] == ["a"]
        every = select_sessions(store.backend, SessionQuery(all=True), plugins=bare)
        assert {s.header.id for s in every.summaries} == {"a", LEDGER}


def test_a_session_already_in_the_archive_is_removed_as_archived(store_url: str,
                                                                 tmp_path: Path) -> None:
    from dsh_session_core import copy_sessions

    archive_url = str(tmp_path / "archive")  # a JSONL folder
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        with opened(archive_url) as archive:  # an earlier run archived it, then stopped
            assert copy_sessions(store.backend, archive.backend).ok
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(0),
                                             archive_to=archive_url), now=_at(T0 + DAY))
        assert [(d.session_id, d.status, d.archived_to) for d in report.decisions] == [
            ("a", "deleted", archive_url)]
