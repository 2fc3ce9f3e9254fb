"""JavaScript string semantics the hook protocol depends on: what ``String.prototype.trim``
strips, and string length counted in UTF-16 code units.

The reference trims hook output with JS ``trim()`` and caps stderr summaries by JS
``length``. Python's ``str.strip()`` strips a different set (it also strips U+001C-U+001F
and U+0085 but keeps U+FEFF), and ``len()`` counts code points (an emoji is 1, in JS 2),
so both are spelled out here.
"""

from __future__ import annotations

__all__ = ["JS_WHITESPACE", "js_trim", "utf16_len", "utf16_prefix"]

#: ECMAScript WhiteSpace and LineTerminator: TAB, VT, FF, ZWNBSP (U+FEFF), every
#: Unicode ``Zs`` space, LF, CR, LS and PS. Exactly what JS ``trim()`` removes.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """``text`` with leading and trailing whitespace removed, as JS ``trim()`` does.

    :param text: any string.
    :returns: the trimmed string.
    """
    return text.strip(JS_WHITESPACE)


def utf16_len(text: str) -> int:
    """The JS ``length`` of ``text``: code points above U+FFFF count twice.

    :param text: any string.
    :returns: its length in UTF-16 code units.
    """
    if text.isascii():  # the common case, without walking the string in Python
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of ``text`` that fits in ``units`` UTF-16 code units.

    JS ``slice(0, units)`` can cut a surrogate pair in half and keep a lone high
    surrogate, which is not valid UTF-8 and so could not be written to the log; here a
    pair that does not fit is left out whole, so the prefix may be one unit shorter.

    :param text: any string.
    :param units: the budget in UTF-16 code units (``>= 0``).
    :returns: the prefix.
    """
    if utf16_len(text) <= units:
        return text
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text  # unreachable: the budget was checked above
