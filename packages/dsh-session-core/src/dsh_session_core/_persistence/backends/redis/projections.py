"""The Redis backend's projection rows: kept beside the log, written in the append's
script (:mod:`.scripts`), read by key ranges.

A session's rows of one projection are a hash (key -> row) and a sorted set of the same
keys, every score 0, so that a range of keys is a ``ZRANGE ... BYLEX`` (UTF-8's byte
order is the code points' order, the order :class:`~.rows.RowTable` keeps); its marks
and summaries are a hash each (:mod:`.keys`). A mixin of
:class:`~.redis.backend.RedisBackend`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...rows import RowChanges, RowQuery
from .keys import SessionKeys

if TYPE_CHECKING:
    from ...._schema.header import SessionHeader
    from .nodes import Reach

__all__ = ["RedisProjections", "change_args"]


def change_args(keys: SessionKeys, changes: Sequence[RowChanges]
                ) -> tuple[list[str], list[Any]]:
    """The keys and the arguments the scripts take the rows' ``changes`` as (their count
    first, then each change: name, mark, rebuild, clear, the summary's op and value, the
    count of rows, then key, op, row for each)."""
    if not changes:
        return [], [0]
    names: list[str] = []
    args: list[Any] = [len(changes)]
    for change in changes:
        names += [keys.rows(change.name), keys.row_keys(change.name)]
        summary_op = "" if not change.summary_set else (
            "d" if change.summary is None else "s")
        args += [change.name, change.mark, "1" if change.rebuild else "0",
                 "1" if change.clear else "0", summary_op, change.summary or b"",
                 len(change.rows)]
        for key, row in change.rows.items():
            args += [key, "d" if row is None else "s", b"" if row is None else row]
    return names, args


class RedisProjections:
    """The rows (:class:`~.redis.backend.RedisBackend` sets what is declared here)."""

    _client: Any
    _reach: Reach

    if TYPE_CHECKING:
        @property
        def index_key(self) -> str: ...

        def keys(self, session_id: str) -> SessionKeys: ...

        def script(self, name: str) -> Any: ...

        def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]
                       ) -> None: ...

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        """Every mark of the session's projections."""
        found = self._client.hgetall(self.keys(session_id).marks)
        return {name.decode(): mark for name, mark in found.items()}

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order: the keys it names (``HMGET``), or
        a range of keys (one script: the keys, then their rows)."""
        keys = self.keys(session_id)
        if query.keys is not None:
            wanted = sorted(set(query.keys))
            if not wanted:
                return []
            rows = self._client.hmget(keys.rows(name), wanted)
            found = [(k, r) for k, r in zip(wanted, rows, strict=True) if r is not None]
            if query.newest_first:
                found.reverse()
            return found if query.limit is None else found[:max(query.limit, 0)]
        if query.limit is not None and query.limit <= 0:
            return []
        if query.start is None and query.stop is None and query.limit is None:
            # Every row: the hash alone, one command the server answers from C (the
            # script's calls cost more than the rows), sorted here. Byte order is the
            # keys' order: UTF-8 keeps the code points' order.
            every = self._client.hgetall(keys.rows(name))
            return [(k.decode(), every[k])
                    for k in sorted(every, reverse=query.newest_first)]
        low = "-" if query.start is None else "[" + query.start
        high = "+" if query.stop is None else "(" + query.stop
        flat = self.script("rows")(
            keys=[keys.row_keys(name), keys.rows(name)],
            args=[low, high, "1" if query.newest_first else "0",
                  -1 if query.limit is None else query.limit])
        return [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        """``(id, mark, summary)`` of the sessions with a summary of ``name``: the
        index's sessions (or those given), their summary and mark read in pipelines."""
        ids = ([s.decode() for s in self._client.zrange(self.index_key, 0, -1)]
               if session_ids is None else builtins.list(session_ids))
        found = []
        for at in range(0, len(ids), 1000):
            chunk = ids[at:at + 1000]
            keys = [self.keys(sid) for sid in chunk]

            def queue(pipe: Any, i: int, keys: list[SessionKeys] = keys) -> None:
                pipe.hget(keys[i].summaries, name)
                pipe.hget(keys[i].marks, name)

            got = self._reach.pipelined([k.summaries for k in keys], queue, 2)
            for sid, (summary, mark) in zip(chunk, got, strict=True):
                if summary is not None and mark is not None:
                    found.append((sid, mark, summary))
        return found

    def drop_projections(self, session_id: str | None) -> None:
        """Remove the session's rows, summaries and marks (``None``: every session's)."""
        ids = ([s.decode() for s in self._client.zrange(self.index_key, 0, -1)]
               if session_id is None else [session_id])
        for sid in ids:
            keys = self.keys(sid)
            self.script("drop_rows")(keys=[keys.marks, keys.summaries], args=[keys.base])
