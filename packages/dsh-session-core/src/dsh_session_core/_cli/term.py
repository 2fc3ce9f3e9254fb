"""Terminal output for people: colour on a terminal only, one-line texts, a progress bar.

- Colour: ANSI codes only when the stream is a TTY and ``NO_COLOR`` is unset or empty
  (https://no-color.org: any non-empty value turns colour off). Piped output and files
  never get escape codes, so scripts and ``grep`` see plain text.
- Width: ``shutil.get_terminal_size`` (``$COLUMNS``, else the terminal, else 100).
- Progress: a one-line bar redrawn on stderr (never stdout, which may be piped into a
  file), only when stderr is a TTY and the work is big enough to be worth watching;
  erased when the work ends.

No dependency beyond the standard library: this module is imported by commands that
must start fast.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Collection
from typing import TextIO

from .._base.closing import ClosesOnExit
from .._inspect.text import printable, shorten

__all__ = [
    "PROGRESS_MIN_BYTES",
    "Progress",
    "Style",
    "colour_enabled",
    "human_bytes",
    "is_tty",
    "printable",
    "shorten",
    "terminal_width",
    "text_table",
]

#: Work smaller than this (in bytes) finishes too fast for a bar to be useful.
PROGRESS_MIN_BYTES = 4 * 1024 * 1024

_CODES = {
    "bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34",
    "magenta": "35", "cyan": "36",
}
#: Redraw the bar at most this often: a redraw per chunk would cost more than the work.
_REDRAW_SECONDS = 0.1


def is_tty(stream: object) -> bool:
    """Whether ``stream`` is an open terminal (a closed or fake stream is not)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (ValueError, OSError):  # a closed stream
        return False


def colour_enabled(stream: object) -> bool:
    """Whether to colour text written to ``stream``: a TTY, and ``NO_COLOR`` unset/empty."""
    return not os.environ.get("NO_COLOR") and is_tty(stream)


class Style:
    """Paints text with ANSI codes, or leaves it alone when colour is off.

    :param enabled: whether to emit escape codes; see :meth:`for_stream`.
    """

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: object) -> Style:
        """The style for text written to ``stream`` (see :func:`colour_enabled`)."""
        return cls(colour_enabled(stream))

    def __call__(self, text: str, *styles: str) -> str:
        """``text`` in the given styles (``"bold"``, ``"red"``...), or unchanged."""
        if not self.enabled or not styles or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def terminal_width(default: int = 100) -> int:
    """The terminal's width in columns (``default`` when there is no terminal)."""
    return max(20, shutil.get_terminal_size((default, 24)).columns)


def human_bytes(n: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KB``, ``12.3 MB``."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KB", "MB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GB"


def text_table(rows: list[list[str]], right: Collection[int] = ()) -> list[str]:
    """Rows as aligned columns (two spaces apart); columns in ``right`` right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]


class Progress(ClosesOnExit):
    """A progress bar over ``total`` bytes, drawn on ``stream`` (stderr by default).

    It draws nothing unless the stream is a TTY and ``total`` is at least ``min_total``,
    so commands can use it unconditionally. Use it as a context manager (the bar is
    erased on exit) and call :meth:`advance` as work is done. With ``unit`` (e.g.
    ``"events"``), it counts things instead of bytes.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        min_total: int = PROGRESS_MIN_BYTES,
        unit: str | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.total = max(total, 1)
        self.label = label
        self.done = 0
        self.active = total >= min_total and is_tty(self.stream)
        self._drawn_at: float | None = None

    def advance(self, n: int) -> None:
        """Count ``n`` more units done; redraw when it is time."""
        self.done += n
        if not self.active:
            return
        now = time.monotonic()
        if self._drawn_at is None or now - self._drawn_at >= _REDRAW_SECONDS:
            self._drawn_at = now
            self._draw()

    def _draw(self) -> None:
        width = terminal_width()
        fraction = min(self.done / self.total, 1.0)
        if self.unit is None:
            counts = f"{human_bytes(self.done)}/{human_bytes(self.total)}"
        else:
            counts = f"{self.done:,}/{self.total:,} {self.unit}"
        bar_width = max(10, min(40, width - len(self.label) - len(counts) - 10))
        filled = int(bar_width * fraction)
        line = (f"{self.label} [{'#' * filled}{'-' * (bar_width - filled)}] "
                f"{fraction:4.0%} {counts}")
        self.stream.write("\r" + line[: width - 1])
        self.stream.flush()

    def close(self) -> None:
        """Erase the bar (if one was drawn)."""
        if self.active and self._drawn_at is not None:
            self.stream.write("\r" + " " * (terminal_width() - 1) + "\r")
            self.stream.flush()
            self._drawn_at = None
