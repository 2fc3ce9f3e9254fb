"""Terminal styling for the demo's output: ANSI colour, only where it helps.

Colour is on when the output is a terminal and ``NO_COLOR`` is unset or empty (any
non-empty value turns it off: https://no-color.org; the other commands read it the same
way). Piped or captured output stays plain text, for scripts and tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

__all__ = ["Style", "wants_color"]

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def wants_color(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what is written to ``stream``: a TTY, and ``NO_COLOR`` unset or
    empty."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


class Style:
    """Wraps text in ANSI codes when enabled; returns it unchanged otherwise.

    :param enabled: whether to emit escape codes at all.
    """

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *names: str) -> str:
        """``text`` in the named styles (``"bold"``, ``"red"``...), e.g.
        ``style("failed", "bold", "red")``."""
        if not self.enabled or not names or not text:
            return text
        codes = ";".join(_CODES[name] for name in names)
        return f"\x1b[{codes}m{text}\x1b[0m"
