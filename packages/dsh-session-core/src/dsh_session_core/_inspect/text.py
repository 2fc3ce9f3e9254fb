"""Text for people, from untrusted data.

A log's strings made safe to print (:func:`printable`), cut to one line
(:func:`shorten`), and an error as one line (:func:`one_line`). Standard library only:
the CLI imports it at start."""

from __future__ import annotations

__all__ = ["one_line", "printable", "shorten"]


#: Control characters left after whitespace is collapsed, shown escaped: a log is
#: untrusted text, and a raw ESC would let it drive the reader's terminal.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def printable(text: str) -> str:
    """``text`` safe to print: control characters escaped (``\\x1b``), lone surrogates
    (which UTF-8 cannot hold) replaced by ``?``."""
    text = text.translate(_CONTROLS)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode()
    return text


def shorten(text: str, width: int) -> str:
    """``text`` on one printable line (runs of whitespace become one space, see
    :func:`printable`), cut to ``width`` characters with a trailing ``…`` when longer."""
    one = printable(" ".join(text.split()))
    width = max(width, 2)
    return one if len(one) <= width else one[: width - 1] + "…"


def one_line(exc: BaseException) -> str:
    """An error as one line: its class, its message, and the event seq it is about."""
    text = " ".join(str(exc).split())
    seq = getattr(exc, "seq", None)
    if isinstance(seq, int) and seq >= 0:
        text += f" (at event seq {seq})"
    return f"{type(exc).__name__}: {text}"
