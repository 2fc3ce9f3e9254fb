"""The viewer's refusal of a request: :class:`ViewError` (an HTTP status, and the one-line
message and hint the command line would print), and :func:`from_error`, the status it
gives each class of core's read-model errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_session_core.errors import InspectError

__all__ = ["ViewError", "from_error"]


class ViewError(Exception):
    """A request refused: the HTTP status, and the CLI's message and hint."""

    def __init__(self, status: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.message, "hint": self.hint, "status": self.status}


def from_error(exc: InspectError) -> ViewError:
    """The read model's refusal as an answer: asked wrongly (a bad id, a bad filter) is
    400, a session that is not there 404, a log or a store that does not read 422."""
    from dsh_session_core.errors import InspectUsageError, SessionNotFoundError

    status = (400 if isinstance(exc, InspectUsageError)
              else 404 if isinstance(exc, SessionNotFoundError) else 422)
    return ViewError(status, exc.message, exc.hint)
