"""The keys a Redis store keeps, and their names: the one place that spells them.

For a store of prefix ``P`` (``dsh:`` unless the URL sets ``?prefix=``) and a session
whose id, escaped, is ``T`` (``%``, ``{`` and ``}`` percent-escaped, so that the id
cannot end the hash tag early), a session's keys are, all under the hash tag ``{T}``
(so that a cluster keeps them in one slot, and one script can write them together):

=====================  ========  ===========================================================
key                    type      what it holds
=====================  ========  ===========================================================
``P{T}:log``           stream    the log: one entry per event, id ``<seq>-1``, its one
                                 field ``l`` the event's log line (as written, no ``\\n``)
``P{T}:head``          hash      ``h`` the header's JSON line; ``turns`` how many
                                 ``turn/start`` events the log holds; ``cuts`` how many
                                 times the log was cut back, and ``cut`` the seq the last
                                 cut kept last (for followers)
``P{T}:lease``         hash      the writer lease (expires): ``t`` its token, ``e`` its
                                 epoch, ``c`` the holder's connection id, ``h`` who
                                 holds it (host and process), for messages
``P{T}:epoch``         string    the last lease epoch given (a counter)
``P{T}:pmarks``        hash      each projection's mark (projection name -> bytes)
``P{T}:psums``         hash      each projection's summary row
``P{T}:prows:<name>``  hash      a projection's rows (row key -> bytes)
``P{T}:pkeys:<name>``  zset      the same row keys, every score 0: the keys in order,
                                 for ranges (``ZRANGE ... BYLEX``)
``P:sessions``         zset      the store's index: every session id, scored by its
                                 ``createdAt`` (what ``list`` reads); no hash tag: on a
                                 cluster, a key of its own slot, written beside a
                                 session's scripts (:mod:`.backend`)
=====================  ========  ===========================================================

The entry id's first part is the event's seq, so the server itself refuses an append
whose seq is not above the last one (``XADD`` with an id not above the stream's top).
"""

from __future__ import annotations

import dataclasses
from typing import Final

__all__ = ["INDEX", "SessionKeys", "entry_id", "escape_id", "seq_of"]

#: The index key's name after the prefix.
INDEX: Final = "sessions"
#: The second part of every entry id (``0-0`` is no valid id, so seq 0 is ``0-1``).
_ENTRY_SUFFIX: Final = "-1"


def escape_id(session_id: str) -> str:
    """The id as it stands in the hash tag: ``%``, ``{``, ``}`` percent-escaped; a lone
    surrogate as ``%uXXXX`` (no session holds such an id: ``check_id`` refuses it, but
    a look for one must find nothing rather than fail to spell the key)."""
    escaped = session_id.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    if escaped.isascii():
        return escaped
    try:
        escaped.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(f"%u{ord(c):04X}" if 0xD800 <= ord(c) <= 0xDFFF else c
                       for c in escaped)
    return escaped


def entry_id(seq: int) -> str:
    """The stream entry id of the event of ``seq``."""
    return f"{seq}{_ENTRY_SUFFIX}"


def seq_of(entry: bytes | str) -> int:
    """The seq of a stream entry id."""
    text = entry.decode() if isinstance(entry, bytes) else entry
    return int(text.partition("-")[0])


@dataclasses.dataclass(frozen=True, slots=True)
class SessionKeys:
    """The names of one session's keys (see the module)."""

    base: str

    @classmethod
    def of(cls, prefix: str, session_id: str) -> SessionKeys:
        return cls(f"{prefix}{{{escape_id(session_id)}}}:")

    @property
    def log(self) -> str:
        return self.base + "log"

    @property
    def head(self) -> str:
        return self.base + "head"

    @property
    def lease(self) -> str:
        return self.base + "lease"

    @property
    def epoch(self) -> str:
        return self.base + "epoch"

    @property
    def marks(self) -> str:
        return self.base + "pmarks"

    @property
    def summaries(self) -> str:
        return self.base + "psums"

    def rows(self, projection: str) -> str:
        return f"{self.base}prows:{projection}"

    def row_keys(self, projection: str) -> str:
        return f"{self.base}pkeys:{projection}"
