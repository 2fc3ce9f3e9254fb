"""The Redis backend from asyncio on a Redis Cluster: the loop's client is a cluster's
(it follows each session's slot to its primary), a session's first batch takes the
synchronous path (its index entry is written beside the script), every later batch,
the listing, the tail and a follower are awaited on the loop; the synchronous twins of
those are spied on and never called."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from test_redis_async import SYNC_TWINS, _spy

from dsh_session_core import DurableStore, core_registry, create_plugin_manager
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core.testing import user_turn


def test_a_cluster_store_is_written_listed_and_followed_from_asyncio(
        redis_cluster_url: str) -> None:
    backend = RedisBackend(redis_cluster_url)
    assert backend.cluster
    spies = _spy(backend, "aappend_batch", "alist", "atail_lines", *SYNC_TWINS)
    ids = [f"s{i}" for i in range(12)]  # over the cluster's three primaries

    async def main() -> list[int]:
        store = DurableStore(backend, create_plugin_manager(autoload=False))
        sessions: dict[str, Any] = {}
        for sid in ids:
            s = sessions[sid] = await store.acreate(sid, cwd="/w")
            user_turn(s, 1, f"hi from {sid}")
            await store.aflush(s)  # the first batch: the synchronous path, in a thread
        first_batches = spies["append_batch"].calls
        for sid in ids:
            user_turn(sessions[sid], 2, "again")
            await store.aflush(sessions[sid])  # on the loop
        assert spies["append_batch"].calls == first_batches
        assert sorted(h.id for h in await store.astored()) == sorted(ids)
        got: list[int] = []
        async with contextlib.aclosing(store.afollow("s3", last=2)) as events:
            got += [(await anext(events)).seq, (await anext(events)).seq]
            user_turn(sessions["s3"], 3, "once more")
            await store.aflush(sessions["s3"])
            async for event in events:
                got.append(event.seq)
                if event.seq == 8:
                    break
        await store.aclose()
        return got

    got = asyncio.run(main())
    assert got == [4, 5, 6, 7, 8]
    assert spies["append_batch"].calls == len(ids)  # each session's first batch alone
    assert spies["aappend_batch"].calls == 2 * len(ids) + 1
    assert spies["alist"].calls >= 1
    for name in ("list", "follow_lines", "append_projected"):
        assert spies[name].calls == 0, name
    check = RedisBackend(redis_cluster_url)
    try:
        assert sorted(h.id for h in check.list()) == sorted(ids)
        stored = check.load_stored("s3", core_registry())
        assert stored is not None
        assert len(stored.events) == 9
    finally:
        check.close()
