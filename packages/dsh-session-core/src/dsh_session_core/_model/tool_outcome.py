"""What a tool call returns to the model: the text and error flag of its ``tool/result``.

Tools ported from the reference (``todo_write``, ``exit_plan_mode``...) return one, so a
harness logs every tool's result the same way.
"""

from __future__ import annotations

import dataclasses

from ..vocabulary import TextBlock

__all__ = ["ToolOutcome"]


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's model-facing result: the ``content`` and ``isError`` of its ``tool/result``.

    :param text: the result text; an error's text starts with ``Error: ``, as the
        reference's tool registry renders a tool's exception.
    :param is_error: whether the call failed.
    """

    text: str
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> ToolOutcome:
        """An error result for ``message``: text ``Error: <message>``."""
        return cls(text=f"Error: {message}", is_error=True)

    @property
    def content(self) -> tuple[TextBlock, ...]:
        """The result as content blocks (one text block)."""
        return (TextBlock(text=self.text),)
