"""A read-only session: what ``DurableStore.read_session`` returns.

It is a :class:`~dsh_session_core.Session` in every way a reader needs (its events, the
derived messages, the providers' converters, forking it into a store), built from a
stored log without taking the session's writer lock. Every way to write it (``append``,
and the builders ``turn`` and ``inject``, which append) is refused with
:class:`~dsh_session_core.errors.ReadOnlySessionError` before anything changes, so a
reader can never write a log another process is writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ReadOnlySessionError
from .session import Session

if TYPE_CHECKING:
    from ..events import Event, SurfaceOp
    from ..vocabulary import MessageSource, TurnTrigger
    from .builders import Content
    from .turn import Turn

__all__ = ["ReadOnlySession"]


class ReadOnlySession(Session):
    """A :class:`Session` whose appends are refused (see the module docstring)."""

    __slots__ = ()

    @property
    def read_only(self) -> bool:
        """Always ``True``: appends are refused."""
        return True

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Iterable[int] | None = None,
    ) -> Event:
        """Refused: the session was read without its writer lock.

        :raises ReadOnlySessionError: always; nothing changes.
        """
        raise ReadOnlySessionError(self.id, type if isinstance(type, str) else repr(type))

    def turn(
        self, trigger: TurnTrigger | Mapping[str, Any] | None = None, *, number: int | None = None
    ) -> Turn:
        """Refused, as :meth:`append` is.

        :raises ReadOnlySessionError: always; nothing changes.
        """
        raise ReadOnlySessionError(self.id)

    def inject(
        self,
        content: Content,
        *,
        source: MessageSource | Mapping[str, Any] | None = None,
        number: int | None = None,
    ) -> Event:
        """Refused, as :meth:`append` is.

        :raises ReadOnlySessionError: always; nothing changes.
        """
        raise ReadOnlySessionError(self.id, "context/message")

