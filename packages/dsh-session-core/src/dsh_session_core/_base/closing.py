"""What an object closed at the end of a ``with`` block shares.

Entering it gives the object, leaving it (however) calls its ``close``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["ClosesOnExit"]


class ClosesOnExit:
    """A context manager that is its own resource: ``with x:`` yields ``x`` and calls
    ``x.close()`` on the way out, an error or not (the error still propagates)."""

    def close(self) -> None:
        raise NotImplementedError  # every subclass says what closing it means

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
