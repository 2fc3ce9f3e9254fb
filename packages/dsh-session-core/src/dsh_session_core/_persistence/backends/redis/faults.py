"""What the Redis backend raises when its server fails a write.

A server that cannot be reached, or that died in the middle of a command (redis-py
retries it first, as its retry policy says): a write raises a :class:`ConnectionError`
(an :class:`OSError`), which the store names as a
:class:`~dsh_session_core.errors.StoreWriteError` (the session, the store's URL, and
that a retry writes the batch once), as it names a failed write of a file. A driver's
error would pass as it is, and a first write whose reply was lost would read as another
writer's session (the store takes a write's error that is no ``OSError`` for a
refusal).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["reaching"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def reaching(method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[Any, _P], _R]:
    """A write of the backend whose server could not be reached raises a
    :class:`ConnectionError` (an :class:`OSError`, the driver's error its cause)."""

    @functools.wraps(method)
    def write(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except (self._redis.ConnectionError, self._redis.TimeoutError) as exc:
            error = ConnectionError(f"the Redis server did not answer ({exc})")
            error.add_note("check that it runs and can be reached; a batch whose reply was "
                           "lost is recognised when it is written again, not written twice")
            raise error from exc

    return write
