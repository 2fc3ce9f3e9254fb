"""The numbers a request's query string gives the viewer, each read by one rule on every
route that takes it, so that a number out of its range is refused (or clamped) alike
everywhere:

- ``limit``, how many items an answer holds: a whole number from 1. A route that answers
  the items of a log caps it (1,000 raw events, 500 search hits): a larger limit is read
  as the cap, since the answer is a page anyway (the events say ``more``; a search is
  narrowed by its words). The sessions of ``/api/sessions`` have no cap: the list page
  asks for every one (it draws their fork tree), as ``dsh-session ls`` lists them.
  Zero, a negative limit and anything but a number are refused: none asks for a page.
- ``offset``, the items skipped first: a whole number, 0 or more.
- ``after``, a seq: a whole number, negative ones too (``-1``: from the first event;
  the page asks for the event SEQ as ``after=SEQ-1``).

A number is written in ASCII decimal digits, after a ``-`` for ``after`` only; what
``int()`` takes besides (``+5``, `` 5``, ``1_000``, another script's digits) is refused.
One of more than 18 digits is read as 10**18 (or its negative): past any cap, count or
seq, and ``int()`` would refuse one of more than 4,300 digits. A refusal is a 400
:class:`~._errors.ViewError` naming the parameter, its range and the text given.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, overload

from ._errors import ViewError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["HUGE", "read_after", "read_limit", "read_offset"]

#: The digits of a number read as written; a longer one is read as :data:`HUGE`.
_DIGITS: Final = 18
HUGE: Final = 10 ** _DIGITS
_COUNT: Final = re.compile(r"[0-9]+")
_SEQ: Final = re.compile(r"-?[0-9]+")


def _number(text: str, pattern: re.Pattern[str]) -> int | None:
    """``text`` as a number when ``pattern`` matches it whole, else None."""
    if not pattern.fullmatch(text):
        return None
    digits = text.lstrip("-").lstrip("0")
    value = HUGE if len(digits) > _DIGITS else int(digits or "0")
    return -value if text.startswith("-") else value


@overload
def read_limit(params: Mapping[str, str], default: int, most: int | None,
               what: str) -> int: ...
@overload
def read_limit(params: Mapping[str, str], default: None, most: int | None,
               what: str) -> int | None: ...
def read_limit(params: Mapping[str, str], default: int | None, most: int | None,
               what: str) -> int | None:
    """The ``limit`` of ``params`` (``default`` when absent or empty), read as ``most``
    when larger (``None``: no cap); ``what`` names the items, for the hint.

    :raises ViewError: 400, a limit that is not a whole number from 1.
    """
    text = params.get("limit")
    if text is None or text == "":
        return default
    value = _number(text, _COUNT)
    if value is None or value < 1:
        if most is None:
            message = f"limit takes a whole number, 1 or more, got {text!r}"
            hint = f"leave limit out for all the {what}"
        else:
            message = (f"limit takes a whole number from 1 to {most} (a larger one is "
                       f"read as {most}), got {text!r}")
            hint = f"leave limit out for {default} {what} at a time"
        raise ViewError(400, message, hint)
    return value if most is None else min(value, most)


def read_offset(params: Mapping[str, str]) -> int:
    """The ``offset`` of ``params`` (0 when absent or empty).

    :raises ViewError: 400, an offset that is not a whole number, 0 or more.
    """
    text = params.get("offset")
    if text is None or text == "":
        return 0
    value = _number(text, _COUNT)
    if value is None:
        raise ViewError(400, f"offset takes a whole number, 0 or more, got {text!r}",
                        "leave offset out to skip none")
    return value


def read_after(params: Mapping[str, str]) -> int | None:
    """The ``after`` of ``params`` (None when absent or empty: from the first event).

    :raises ViewError: 400, an ``after`` that is not a whole number.
    """
    text = params.get("after")
    if text is None or text == "":
        return None
    value = _number(text, _SEQ)
    if value is None:
        raise ViewError(400, f"after takes a seq (a whole number; -1: from the first "
                             f"event), got {text!r}",
                        "leave after out to start at the first event")
    return value
