"""The Redis backend's reads that never write, and its follower.

Listing with counts, a session's lines by seq range or by type, its tail, and
following it: a follower blocks on ``XREAD`` (the server answers the moment an entry is
added), never polls the log. A cut back (a repair) adds no entry above the follower's
position, so the follower also reads the session's count of cuts each time ``XREAD``
returns or a bounded block ends (:data:`BLOCK_SECONDS`), and reports a cut back when it
changed. A mixin of :class:`~.redis.backend.RedisBackend`.

A session's counts and last entries are one script's reply (:data:`~.scripts.STATE`),
so each is read in one snapshot, on a server or a cluster alike; a listing sends one
for each session, in pipelines (on a cluster, redis-py splits them among the nodes).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...._logformat.logfile import line_wire, parse_header
from ...base import LogNews, LogTail, SessionSummary, continued, keep_types
from .keys import SessionKeys, seq_of

if TYPE_CHECKING:
    from ...._schema.header import SessionHeader
    from ....events import Event
    from .nodes import Reach

__all__ = ["BLOCK_SECONDS", "RedisReads", "SessionState", "block_ms", "cut_note", "cut_to",
           "entry_lines", "read_after", "time_of"]

#: The longest a follower's ``XREAD`` blocks before it looks for a cut back.
BLOCK_SECONDS: Final = 2.0
#: Sessions per pipeline when listing.
_CHUNK: Final = 500


def time_of(line: bytes) -> Any:
    """The ``time`` of a log line (``None`` when it has none)."""
    wire = line_wire(line)
    return None if wire is None else wire.get("time")


def cut_note(top: int) -> str:
    """What a follower tells people when a repair cut the session back to seq ``top``."""
    return f"the session was cut back to seq {top} (a repair?); following from there"


def entry_lines(entries: Sequence[Any]) -> builtins.list[bytes]:
    """The log lines of stream entries (``XRANGE``'s, ``XREAD``'s)."""
    return [fields[b"l"] for _, fields in entries]


class SessionState:
    """A :data:`~.scripts.STATE` reply: a session's counts, its last entries."""

    __slots__ = ("count", "cut", "cuts", "head", "lines", "top", "turns")

    def __init__(self, reply: Sequence[Any]) -> None:
        #: The header's line (``b''``: the session is not stored).
        self.head: bytes = reply[0]
        self.turns, self.cuts, self.cut = int(reply[1]), int(reply[2]), int(reply[3])
        self.count = int(reply[4])
        #: The last stored seq (``-1``: none, or no entry asked for).
        self.top = seq_of(reply[5]) if len(reply) > 5 else -1
        #: The last entries' lines, newest first.
        self.lines: builtins.list[bytes] = builtins.list(reply[6::2])


def block_ms(timeout: float | None, quiet_since: float) -> int | None:
    """How long a follower's next ``XREAD`` blocks, in milliseconds: at most
    :data:`BLOCK_SECONDS`, and not past its ``timeout`` (counted from ``quiet_since``,
    a ``time.monotonic()``); ``None`` past it: one read that does not wait."""
    wait = BLOCK_SECONDS
    if timeout is not None:
        wait = min(wait, timeout - (time.monotonic() - quiet_since))
    return max(1, round(wait * 1000)) if wait > 0 else None


def read_after(seen: int) -> str:
    """The id a follower at seq ``seen`` reads after (``XREAD``'s)."""
    return f"{seen}-1" if seen >= 0 else "0-0"


def cut_to(seen: int, stored: bool, cuts: int, now: tuple[bool, int, int, int]
           ) -> int | None:
    """Where a follower at seq ``seen``, which last found the session ``stored`` and
    cut back ``cuts`` times, follows from, when the session's state ``now``
    (:meth:`RedisReads._state`'s) says it was cut back (a repair), removed (the cut
    count of a session made again starts again), or is shorter than the position (cut
    before this follower started): what was read may be of the old log, so from the
    cut. ``None``: none of these."""
    now_stored, now_cuts, cut, last = now
    if now_cuts == cuts and not (stored and not now_stored) and last >= seen:
        return None
    return min(seen, cut if now_cuts != cuts else seen, last if now_stored else -1)


class RedisReads:
    """The reads (:class:`~.redis.backend.RedisBackend` sets what is declared here)."""

    _client: Any
    _redis: Any
    _reach: Reach

    if TYPE_CHECKING:
        @property
        def index_key(self) -> str: ...

        @property
        def location_url(self) -> str: ...

        def keys(self, session_id: str) -> SessionKeys: ...

        def script(self, name: str) -> Any: ...

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every session of the index with its counts: per session, the header and the
        count of turns (kept by every write), the stream's length and its last entry
        (for the last activity), in pipelines; no line but the last is read."""
        ids = [sid.decode() for sid in self._client.zrange(self.index_key, 0, -1)]
        return self._summaries(ids)

    def summaries_of(self, headers: Sequence[SessionHeader]
                     ) -> builtins.list[SessionSummary]:
        """:meth:`summaries` of just these sessions, in their order."""
        return self._summaries([h.id for h in headers])

    def _summaries(self, ids: Sequence[str]) -> builtins.list[SessionSummary]:
        found = []
        for at in range(0, len(ids), _CHUNK):
            for state in self._states(ids[at:at + _CHUNK], 1):
                if not state.head:
                    continue  # removed since it was listed (or an index entry left)
                found.append(SessionSummary(
                    parse_header(state.head), state.count, state.turns,
                    time_of(state.lines[0]) if state.lines else None))
        return found

    def _states(self, ids: Sequence[str], last: int) -> builtins.list[SessionState]:
        """Each session's :data:`~.scripts.STATE` with its ``last`` entries, in one
        pipeline a node (not a transaction: each reply is one snapshot already)."""
        script = self.script("state")
        keys = [self.keys(sid) for sid in ids]

        def queue(pipe: Any, at: int) -> None:
            pipe.evalsha(script.sha, 2, keys[at].log, keys[at].head, last)

        try:
            found = self._reach.pipelined([k.head for k in keys], queue, 1)
        except self._redis.exceptions.NoScriptError:
            # Not loaded on a node yet (or lost with its restart).
            script.sha = self._reach.load_script(script.script)
            found = self._reach.pipelined([k.head for k in keys], queue, 1)
        return [SessionState(reply) for (reply,) in found]

    def _state_of(self, keys: SessionKeys, last: int) -> SessionState:
        return SessionState(self.script("state")(keys=[keys.log, keys.head], args=[last]))

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` entries' lines; the position is the last stored seq
        (``-1`` when none is), from the same read."""
        state = self._state_of(self.keys(session_id), max(count, 1))
        if not state.head:
            return None
        return LogTail(state.lines[::-1] if count > 0 else [], state.top)

    def tail(self, session_id: str, count: int) -> builtins.list[bytes] | None:
        """The last ``count`` events' log lines, oldest first; ``None`` when the session
        is not stored."""
        tail = self.tail_lines(session_id, count)
        return None if tail is None else tail.lines

    def lines_in(self, session_id: str, first: str, last: str, count: int | None
                 ) -> tuple[bytes, builtins.list[bytes]] | None:
        """The header and the lines of the entries from id ``first`` to ``last`` (at most
        ``count``), in one script's reply; ``None`` when the session is not stored."""
        keys = self.keys(session_id)
        got = self.script("lines")(keys=[keys.log, keys.head],
                                   args=[first, last, -1 if count is None else count])
        if not got[0]:
            return None
        blob = got[2]
        return got[1], blob.split(b"\n") if int(got[3]) else []

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The entries after seq ``after`` (at most ``limit``): an id range."""
        if limit is not None and limit <= 0:
            return [] if self._client.exists(self.keys(session_id).head) else None
        found = self.lines_in(session_id, f"{max(after + 1, 0)}-0", "+", limit)
        return None if found is None else found[1]

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since`: the entries from ``last``'s seq on."""
        lines = self.read_lines(header.id, last.seq - 1, None)
        return None if lines is None else continued(lines, last)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """:func:`~.capabilities.lines_of_types_of`: every line read, those kept."""
        lines = self.read_lines(session_id, -1, None)
        return None if lines is None else keep_types(lines, types)

    def _state(self, keys: SessionKeys) -> tuple[bool, int, int, int]:
        """Whether the session is stored, how many times it was cut back, the seq the
        last cut kept last, and its last stored seq (``-1``: none), in one read."""
        state = self._state_of(keys, 1)
        return bool(state.head), state.cuts, state.cut, state.top

    def follow_lines(self, session_id: str, position: object, *,
                     timeout: float | None = None) -> Iterator[LogNews]:
        """Follow a session from ``position`` (a seq): blocks on ``XREAD`` for entries
        above it, and reports a cut back (a repair, or the session removed) with a
        note. It ends after ``timeout`` seconds without news (``None``: never)."""
        if type(position) is not int:
            msg = f"a Redis position is a seq (int), got {position!r}"
            raise TypeError(msg)
        keys = self.keys(session_id)
        seen = position
        stored, cuts, _, _ = self._state(keys)
        quiet_since = time.monotonic()
        while True:
            # Blocks while it may; past the timeout, one read that does not wait.
            got = self._client.xread({keys.log: read_after(seen)},
                                     block=block_ms(timeout, quiet_since))
            now = self._state(keys)
            top = cut_to(seen, stored, cuts, now)
            stored, cuts = now[0], now[1]
            if top is not None:
                seen = top
                quiet_since = time.monotonic()
                yield LogNews([], top, cut_note(top))
                continue
            entries = got[0][1] if got else []
            if entries:
                seen = seq_of(entries[-1][0])
                quiet_since = time.monotonic()
                yield LogNews(entry_lines(entries), seen)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
