"""JavaScript compatibility: the JS rules dsh-session mirrors to match the reference.

The reference implementation is TypeScript. Its log lines, derived messages and error
messages are produced by JavaScript built-ins whose rules differ from Python's in small
ways, and matching the reference byte for byte means spelling those rules out. This
module is the one place that does, for core and for plugins (it is public: a plugin
porting reference behaviour imports it rather than writing its own).

What JS does, and what Python does differently:

- **Numbers as text** (``String(n)``, ``${n}``, :func:`js_number_string`). JS has one
  number type, a double, and writes it with the shortest digits that round-trip, without
  a fraction when it is integral (``1``, not Python's ``1.0``), positionally from 1e-6 up
  to 1e21 (``0.00001`` and ``100000000000000000000``, not ``1e-05`` and ``1e+20``), in
  exponent form outside it with an explicit sign (``1e+21``, ``1.5e-7``), and
  ``NaN``/``Infinity``/``-Infinity`` for the non-finite values.
- **Any value as text** (``String(value)`` and template strings, :func:`js_string`):
  ``undefined``, ``null``, ``true``/``false`` (not ``None``/``True``), arrays joined by
  commas with ``null``/``undefined`` items empty, every other object ``[object Object]``.
  JS tells an absent value (``undefined``) from ``null``; Python has only ``None``, so
  :data:`UNDEFINED` stands for the absent one.
- **JSON text** (``JSON.stringify``, :func:`json_stringify`, :func:`json_quote`):
  compact, keys in insertion order, non-ASCII written raw, lone surrogates escaped as
  ``\\udxxx`` (msgspec refuses to encode them at all).
- **Parsing JSON** (``JSON.parse``, :func:`json_parse`): strict. Python's ``json`` also
  reads ``NaN`` and ``Infinity``, which JS refuses; msgspec refuses lone surrogate
  escapes and numbers beyond the double range (``1e999``), which JS accepts.
- **Equality** (``===``, :func:`strict_equals`): numbers by value (``1 === 1.0``), a
  boolean never equal to a number (Python's ``True == 1``), objects and arrays by
  identity.
- **Strings**: ``trim()`` strips a different set than ``str.strip()``
  (:data:`JS_WHITESPACE`, :func:`js_trim`), and ``length`` counts UTF-16 code units, not
  code points (:func:`utf16_len`, :func:`utf16_prefix`).
- **Safe integers** (:data:`MAX_SAFE_INTEGER`, :func:`is_safe_integer`): integers a
  double holds exactly.

A Python ``int`` is written exactly, whatever its size: a JSON integer beyond
:data:`MAX_SAFE_INTEGER` would have lost precision in JS already when it was parsed, and
what is shown here is the value Python holds.
"""

from __future__ import annotations

__all__ = [
    "JS_WHITESPACE",
    "MAX_SAFE_INTEGER",
    "UNDEFINED",
    "Undefined",
    "is_safe_integer",
    "js_number_string",
    "js_string",
    "js_trim",
    "json_parse",
    "json_quote",
    "json_stringify",
    "strict_equals",
    "utf8_bytes",
    "utf16_len",
    "utf16_prefix",
]

import enum
import math
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ._base.json_values import enc_hook

# --- values -------------------------------------------------------------------------------


class Undefined(enum.Enum):
    """The type of :data:`UNDEFINED`."""

    UNDEFINED = "undefined"

    def __repr__(self) -> str:
        return "undefined"


#: JS ``undefined``: an absent value, which JS tells apart from ``null`` (``None``). Pass
#: it where the reference reads a missing property, e.g. ``mapping.get(key, UNDEFINED)``.
UNDEFINED: Final = Undefined.UNDEFINED

#: ``Number.MAX_SAFE_INTEGER``: the largest integer a double holds exactly (2**53 - 1).
MAX_SAFE_INTEGER: Final = 2**53 - 1


def is_safe_integer(value: object) -> bool:
    """JS ``Number.isSafeInteger(value)``: an integral number (``3.0`` counts: JS has one
    number type) no larger in magnitude than :data:`MAX_SAFE_INTEGER`. A ``bool`` is not a
    number.

    :param value: any value.
    :returns: whether it is a safe integer.
    """
    if type(value) is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if type(value) is float:
        return value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def strict_equals(a: object, b: object) -> bool:
    """JS ``a === b`` on JSON values: numbers by value (``1 === 1.0``, ``NaN`` equals
    nothing), strings by value, a boolean only to the same boolean (never to ``1``), and
    everything else (``null``, :data:`UNDEFINED`, objects, arrays) by identity.

    :param a: one value.
    :param b: the other.
    :returns: whether JS would find them strictly equal.
    """
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b


# --- values as text -----------------------------------------------------------------------


def js_number_string(value: float) -> str:
    """JS ``String(value)`` for a number (``Number.prototype.toString``).

    Shortest round-trip digits (Python's ``repr`` picks the same ones), no fraction when
    integral, positional notation from 1e-6 up to 1e21 and exponent form outside it
    (``1e+21``, ``1.5e-7``), ``NaN``, ``Infinity``, ``-Infinity``; ``-0`` is ``0``. An
    ``int`` is written exactly (see the module's notes).

    :param value: an ``int`` or a ``float`` (not a ``bool``: see :func:`js_string`).
    :returns: its JS text.
    """
    if type(value) is not float:
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"  # -0 too
    digits = repr(value)  # the shortest round-trip digits, as JS picks them
    if "e" not in digits:
        return digits.removesuffix(".0")
    mantissa, exponent = digits.split("e")
    exp = int(exponent)
    if -7 < exp < 21:
        # Positional in JS, exponent form in Python (1e-05, 1e+16): write the digits out.
        from decimal import Decimal

        return format(Decimal(digits), "f")
    return f"{mantissa}e{'+' if exp > 0 else '-'}{abs(exp)}"


def js_string(value: object) -> str:
    """JS ``String(value)``, which is also how a template string (`` `${value}` ``)
    renders it: :data:`UNDEFINED` is ``undefined``, ``None`` is ``null``, booleans are
    ``true``/``false``, numbers as :func:`js_number_string`, strings as they are, lists
    and tuples joined by commas (``null`` and ``undefined`` items empty, nested arrays
    flattened), and any other value ``[object Object]``.

    :param value: any value.
    :returns: its JS text.
    """
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return js_number_string(value)
    if isinstance(value, list | tuple):
        # Array.prototype.toString is join(","): null and undefined items render empty.
        return ",".join("" if v is None or v is UNDEFINED else js_string(v) for v in value)
    return "[object Object]"


def js_trim(text: str) -> str:
    """``text.trim()``: leading and trailing :data:`JS_WHITESPACE` removed.

    :param text: any string.
    :returns: the trimmed string.
    """
    return text.strip(JS_WHITESPACE)


#: What ``String.prototype.trim`` removes: ECMAScript WhiteSpace and LineTerminator, that
#: is TAB, VT, FF, ZWNBSP (U+FEFF), every Unicode ``Zs`` space, LF, CR, LS and PS.
#: Python's ``str.strip()`` differs: it also strips U+001C-U+001F and U+0085, and keeps
#: U+FEFF.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def utf16_len(text: str) -> int:
    """JS ``text.length``: UTF-16 code units, so a code point above U+FFFF counts twice
    (Python's ``len`` counts it once). A lone surrogate is one unit.

    :param text: any string.
    :returns: its length in UTF-16 code units.
    """
    if text.isascii():  # the common case, without walking the string in Python
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of ``text`` that fits in ``units`` UTF-16 code units.

    JS ``text.slice(0, units)`` can cut a surrogate pair in half and keep a lone high
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


# --- JSON text ----------------------------------------------------------------------------

_encode = msgspec.json.Encoder(enc_hook=enc_hook).encode
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escape_surrogate(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def _join_pair(m: re.Match[str]) -> str:
    return m.group().encode("utf-16", "surrogatepass").decode("utf-16")


def _stringify_slowly(value: object) -> str:
    """The text of a value holding a lone surrogate, which msgspec refuses to encode.

    The stdlib writes it raw (escaping exactly the characters JS escapes: quote,
    backslash, C0 controls, named ones as ``\\n`` and so on, the rest as lowercase
    ``\\u00xx``); then each surrogate is escaped, as JS escapes a lone one. Floats come
    out in the stdlib's form here (``1e+16`` where msgspec writes ``1e16``).
    """
    import json

    builtins = msgspec.to_builtins(value, enc_hook=enc_hook)
    text = json.dumps(builtins, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SURROGATE.sub(_escape_surrogate, text)


def _mapping_as_dict(obj: object) -> object:
    if isinstance(obj, Mapping):
        return dict(obj)
    msg = f"{type(obj).__name__} is not JSON"
    raise NotImplementedError(msg)


def _with_js_numbers(value: object) -> Any:
    """``value`` as plain builtins, its integral floats below 1e21 in magnitude as ints
    (JS writes ``1`` where Python writes ``1.0``). Any mapping counts as an object, its
    keys as strings."""
    if isinstance(value, Mapping):
        return {str(k): _with_js_numbers(v) for k, v in value.items()}
    if isinstance(value, msgspec.Struct):
        return _with_js_numbers(msgspec.to_builtins(value, enc_hook=_mapping_as_dict))
    if isinstance(value, list | tuple):
        return [_with_js_numbers(v) for v in value]
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def json_stringify(value: object, *, js_numbers: bool = False) -> str:
    """``JSON.stringify(value)``: compact JSON text, keys in their order, non-ASCII raw,
    lone surrogates escaped as JS escapes them (``\\ud800``).

    By default this is exactly the text the log encoder writes (msgspec's), whose floats
    differ from JS's: ``1.0`` and ``1e21`` where JS writes ``1`` and ``1e+21``. Where the
    text is only compared with text written the same way (request headers, both written
    here), that is harmless.

    A Python ``str`` holds a surrogate only when it is unpaired (a decoded pair is one
    code point), so every surrogate is escaped; a string that holds a pair as two code
    points comes out as two escapes, which ``JSON.parse`` reads back as the same JS
    string. :func:`json_quote` reads such a pair as the one character it is to JS.

    :param value: a JSON value: builtins, read-only log data (:class:`JsonObject`,
        tuples) and msgspec Structs.
    :param js_numbers: write integral floats below 1e21 in magnitude without a fraction,
        as JS does (their digits exactly: past 2**53 JS writes the digits beyond the
        shortest round-trip ones as zeros); accept any mapping as an object. Other
        floats keep msgspec's form.
    :returns: the JSON text. As in JS, NaN and the infinities are written ``null``; sets
        are written as arrays.
    :raises NotImplementedError: the value holds an object that is no JSON value.
    """
    if js_numbers:
        value = _with_js_numbers(value)
    try:
        return _encode(value).decode()
    except UnicodeEncodeError:  # a lone surrogate somewhere
        return _stringify_slowly(value)


def json_quote(text: str) -> str:
    """``JSON.stringify(text)`` for a string, reading ``text`` as JS would: a surrogate
    pair held as two code points is the one character it encodes (written raw), and only
    truly lone surrogates are escaped.

    :param text: any string.
    :returns: the JSON string literal, quotes included.
    """
    if not text.isascii():
        text = _SURROGATE_PAIR.sub(_join_pair, text)
    return json_stringify(text)


# --- parsing JSON -------------------------------------------------------------------------

_decode = msgspec.json.Decoder().decode


def _refuse_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def json_parse(text: str | bytes) -> Any:
    """``JSON.parse(text)``: one JSON value, accepting exactly what JS accepts.

    msgspec parses (fast); what it refuses although JS accepts it (lone surrogate
    escapes, numbers beyond the double range, which become infinities) is parsed by the
    stdlib, told to refuse ``NaN`` and ``Infinity`` as JS does. Bytes are UTF-8 (encoded
    surrogates are read as the stdlib's ``surrogatepass`` reads them).

    :param text: the JSON text.
    :returns: the value, as builtins (``dict``, ``list``, ``str``, ``int``, ``float``,
        ``bool``, ``None``).
    :raises ValueError: the text is not JSON (a ``json.JSONDecodeError``, or a
        ``UnicodeDecodeError`` for bytes that are not UTF-8).
    :raises RecursionError: the value nests deeper than the parsers go.
    """
    try:
        return _decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        pass  # UnicodeEncodeError: a str holding a raw lone surrogate
    import json

    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogatepass")
    return json.loads(text, parse_constant=_refuse_constant)


def utf8_bytes(text: str) -> bytes:
    """``text`` in UTF-8 as Node encodes a JS string (``Buffer.from(text)``, a hash's
    ``update(text)``): a lone surrogate, which Python's strict codec refuses, becomes
    U+FFFD; a surrogate pair held as two code points, the character it stands for."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        units = text.encode("utf-16-le", "surrogatepass")
        return units.decode("utf-16-le", "replace").encode()
