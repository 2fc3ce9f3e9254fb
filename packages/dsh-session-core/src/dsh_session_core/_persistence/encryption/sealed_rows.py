"""An encrypted store's projection rows: each row and summary sealed alone.

The :class:`~..capabilities.Projecting` side of :class:`~.sealed.SealedBackend` (a
mixin): a row is sealed under the session's current key (``Sealer.seal_field``), bound
to where it is stored (the session, the projection and the key), so a row moved to
another key, projection or session fails to open. Keys and marks stay in the clear:
a projection's keys hold only ids and seqs, and a mark only what every event's envelope
shows (a seq, a type, a time).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from ..._schema.header import SessionHeader
from ..capabilities import Capabilities, Projecting
from ..rows import RowChanges, RowQuery

if TYPE_CHECKING:
    from .sealing import Sealer

__all__ = ["SealedRows"]

_BOX: Final = msgspec.msgpack.Decoder(tuple[str, str, str, str])
_ENCODE: Final = msgspec.msgpack.Encoder().encode
#: The context of a summary row: no row key is empty of this form.
_SUMMARY: Final = "\x00summary"


class SealedRows:
    """The projection methods of :class:`~.sealed.SealedBackend`."""

    inner_capabilities: Capabilities
    sealer: Sealer
    #: The header as the inner backend stores it (SealedBackend's).
    down: Callable[[SessionHeader], SessionHeader]

    def _projecting(self) -> Projecting:
        found = self.inner_capabilities.projecting
        if found is None:  # never in its record then (a Wrapper): called by hand
            msg = f"the {self.inner_capabilities.backend.name} backend keeps no projection rows"
            raise TypeError(msg)
        return found

    def _seal(self, sid: str, name: str, key: str, plain: bytes | None) -> bytes | None:
        if plain is None:
            return None
        return _ENCODE(self.sealer.seal_field(sid, (sid, "projection", name, key), plain))

    def _unseal(self, sid: str, name: str, key: str, sealed: bytes) -> bytes:
        return self.sealer.open_field(sid, (sid, "projection", name, key), _BOX.decode(sealed))

    def sealed_changes(self, sid: str, changes: Sequence[RowChanges]) -> list[RowChanges]:
        """``changes`` with every row and summary sealed."""
        out = []
        for c in changes:
            rows = {k: self._seal(sid, c.name, k, v) for k, v in c.rows.items()}
            out.append(RowChanges(c.name, c.mark, c.rebuild, c.clear, rows, c.summary_set,
                                  self._seal(sid, c.name, _SUMMARY, c.summary)))
        return out

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        self._projecting().write_rows(self.down(header),
                                      self.sealed_changes(header.id, changes))

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        return self._projecting().projection_marks(session_id)

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        found = self._projecting().projection_rows(session_id, name, query)
        return [(k, self._unseal(session_id, name, k, v)) for k, v in found]

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        found = self._projecting().projection_summaries(name, session_ids)
        return [(sid, mark, self._unseal(sid, name, _SUMMARY, data))
                for sid, mark, data in found]

    def drop_projections(self, session_id: str | None) -> None:
        self._projecting().drop_projections(session_id)
