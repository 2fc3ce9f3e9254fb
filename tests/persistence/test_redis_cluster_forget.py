"""``forget`` on a Redis Cluster: each primary keeps the append-only files of its own
slots, so the scrub rewrites them on each; after it, no file of any node of the run's
cluster holds the forgotten session's marker (its slot's primary wrote it), and the
store no longer shows it."""

from __future__ import annotations

import secrets
from typing import Any

from dsh_session_core import open_store
from erasing_support import files_holding


def test_a_forget_on_a_cluster_scrubs_every_primary(redis_cluster: Any,
                                                    redis_cluster_url: str) -> None:
    marker = f"zq{secrets.token_hex(6)}"
    sid = f"ada-{marker}"
    with open_store(redis_cluster_url) as store:
        s = store.create(sid, cwd=f"/home/{marker}")
        with s.turn() as turn:
            turn.user(f"my name is {marker}")
        store.release(s)
        assert files_holding(redis_cluster.folder, marker)  # the AOF of its slot's primary
        done = store.forget(sid)
        assert done.complete, done.left
        assert done.scrubbed is not None
        assert done.scrubbed.count("the primary ") == 3  # each one's files rewritten
        assert sid not in [h.id for h in store.stored()]
        assert list(store.search(marker)) == []
    assert files_holding(redis_cluster.folder, marker) == []
