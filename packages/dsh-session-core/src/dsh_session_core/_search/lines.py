"""How a search reads a session's log lines: what is searched, its turn, what to skip.

Which events are searched and their text (:func:`extract`), the turn each was written
in (:func:`walk`, and :func:`walk_events` for typed events), and the byte-level
shortcut that lets a scan skip a line or a file undecoded (:func:`may_hold`).

**What is searched.** Message text (``user/message``, ``prompt/blocked``,
``context/message``, ``steering/message``, ``assistant/message``: their text and
reasoning blocks), tool calls (``tool/call``: the tool's name and its arguments) and
tool results (``tool/result``: their text blocks). A call inside an
``assistant/message`` is found as its ``tool/call`` event, once. Streamed chunks are
not searched: the ``assistant/message`` they built holds the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import msgspec

from ..events import Event, OpaqueEvent
from .query import SEARCHED_TYPES, Extracted

__all__ = [
    "FOLDS_TO_ASCII",
    "damaged",
    "extract",
    "may_hold",
    "record_seq",
    "turn_change",
    "walk",
    "walk_events",
]

#: The characters outside ASCII whose case folding holds an ASCII letter or digit
#: (``ß`` is ``ss``, the Kelvin sign is ``k``...): a line holding one of them may hold an
#: ASCII word in disguise, so :func:`may_hold` cannot rule it out by its bytes.
#: ``tests/core/test_search_model.py`` recomputes this list from the running Python.
FOLDS_TO_ASCII: Final = (
    "\xdf\u0130\u0149\u017f\u01f0\u1e96\u1e97\u1e98\u1e99\u1e9a\u1e9e\u212a"
    "\ufb00\ufb01\ufb02\ufb03\ufb04\ufb05\ufb06"
)
_DISGUISED: Final = re.compile(
    b"|".join(re.escape(c.encode()) for c in (*FOLDS_TO_ASCII, "\\u")))


class _Data(msgspec.Struct, rename="camel"):
    content: Any = None
    name: Any = None
    arguments: Any = None
    turn: Any = None


class _Line(msgspec.Struct):
    type: Any = None
    seq: Any = None
    time: Any = None
    data: Any = None


_line_decoder = msgspec.json.Decoder(_Line)
_data_of = msgspec.convert


def _block_texts(content: object, out: list[str]) -> None:
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and block.get("type") in ("text", "reasoning"):
            text = block.get("text")
            if isinstance(text, str):
                out.append(text)


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None


class _TypedData(msgspec.Struct, rename="camel"):
    content: list[_Block] | None = None
    name: Any = None
    arguments: Any = None
    turn: Any = None


class _TypedLine(msgspec.Struct):
    type: str
    seq: int
    time: Any = None
    data: _TypedData | None = None


_typed_decoder = msgspec.json.Decoder(_TypedLine)


def _extract_typed(line: bytes) -> Extracted | bool | None:
    """:func:`extract` of a well-formed line in one typed decode (content blocks as
    structs, not dicts); ``False`` when the line is not of that shape (the general
    reading decides)."""
    try:
        wire = _typed_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    role = SEARCHED_TYPES.get(wire.type)
    data = wire.data
    if role is None or data is None or type(wire.seq) is not int:
        return False if role is not None else None
    texts: list[str] = []
    if wire.type == "tool/call":
        for value in (data.name, data.arguments):
            if isinstance(value, str):
                texts.append(value)
    elif data.content is not None:
        for block in data.content:
            if block.type in ("text", "reasoning") and isinstance(block.text, str):
                texts.append(block.text)
    turn = data.turn if type(data.turn) is int else None
    return Extracted(wire.type, role, wire.seq, wire.time, turn, "\n".join(texts))


def extract(line: bytes) -> Extracted | None:
    """The searched text of one log line, with what a hit reports; ``None`` for a line
    that is not a searched event (another type, a torn or malformed line)."""
    typed = _extract_typed(line)
    if typed is not False:
        return typed  # type: ignore[return-value]
    try:
        wire = _line_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    role = SEARCHED_TYPES.get(wire.type) if isinstance(wire.type, str) else None
    if role is None or type(wire.seq) is not int or not isinstance(wire.data, dict):
        return None
    try:
        data = _data_of(wire.data, _Data)
    except msgspec.ValidationError:
        return None
    texts: list[str] = []
    if wire.type == "tool/call":
        for value in (data.name, data.arguments):
            if isinstance(value, str):
                texts.append(value)
    else:
        _block_texts(data.content, texts)
    turn = data.turn if type(data.turn) is int else None
    return Extracted(wire.type, role, wire.seq, wire.time, turn, "\n".join(texts))


def turn_change(line: bytes) -> tuple[bool, int | None] | None:
    """For a ``turn/start`` or ``turn/end`` line, ``(True, its turn)`` or ``(True,
    None)``: the turn open after it; ``None`` for any other line."""
    if not (line.startswith(b'{"type":"turn/') or (b'"turn/' in line[:200])):
        return None
    try:
        wire = _line_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if wire.type == "turn/start":
        turn = wire.data.get("turn") if isinstance(wire.data, dict) else None
        return True, turn if type(turn) is int else None
    if wire.type == "turn/end":
        return True, None
    return None


_TYPE_PREFIX: Final = b'{"type":"'
_TURN_PREFIX: Final = b'{"type":"turn/'
_SEARCHED_PREFIXES: Final = tuple(b'{"type":"%s"' % t.encode() for t in SEARCHED_TYPES)


def walk(lines: Iterable[bytes], turn: int | None = None, *,
         prefixes: tuple[bytes, ...] = _SEARCHED_PREFIXES, terms: Sequence[bytes] = (),
         damaged_lines: list[bytes] | None = None,
         ) -> Iterator[tuple[Extracted | None, int | None, bool]]:
    """A session's consecutive event lines (no newline), read as a search reads them,
    starting with ``turn`` open: each searched event with the turn open where it was
    written and whether that is still the starting turn; each turn change as ``(None,
    the turn open after it, False)``.

    A line the writers' key order shows to be of another type (not one of ``prefixes``),
    or whose bytes cannot hold ``terms`` (:func:`may_hold`), is skipped undecoded; a line
    written in another key order is decoded.

    :param damaged_lines: given, each line decoded whose bytes may hold ``terms`` and
        that is :func:`damaged` is appended to it (a search reports its session: its
        hit there, if any, is missing).
    """
    inherited = True
    for line in lines:
        if line.startswith(_TYPE_PREFIX):
            if line.startswith(_TURN_PREFIX):
                change = turn_change(line)
                if change is not None:
                    turn, inherited = change[1], False
                    yield None, turn, False
                continue
            if not line.startswith(prefixes) or not may_hold(line, terms):
                continue
        else:
            change = turn_change(line)
            if change is not None:
                turn, inherited = change[1], False
                yield None, turn, False
                continue
        extracted = extract(line)
        if extracted is not None:
            yield extracted, turn, inherited
        elif damaged_lines is not None and may_hold(line, terms) and damaged(line):
            damaged_lines.append(line)  # what the words were in, if they were


def damaged(line: bytes) -> bool:
    """Whether a stored log line is damaged: not a JSON object (as JavaScript's
    ``JSON.parse`` reads it: a lone surrogate's escape is JSON), what a load refuses as
    an unparsable committed event. Asked only of a line :func:`extract` found nothing
    in, so it costs nothing on the lines a search reads well."""
    from ..jscompat import json_parse

    try:
        value = json_parse(line)
    except (ValueError, RecursionError):
        return True
    return not isinstance(value, dict)


_SEQ: Final = re.compile(rb'"seq":(-?[0-9]+)[,}]')


def record_seq(line: bytes) -> int | None:
    """The seq a damaged line still shows near its start (the writers put it second),
    or ``None``: where the damage is, for a person."""
    found = _SEQ.search(line, 0, 200)
    return None if found is None else int(found.group(1))


_TEXT_BLOCKS: Final = ("text", "reasoning")


def walk_events(events: Sequence[Event], turn: int | None = None
                ) -> Iterator[tuple[Extracted | None, int | None, bool]] | None:
    """:func:`walk` of typed events' own log lines, read from the events themselves (no
    line decoded): the same items, as a typed event's line is its encoding. ``None``
    when an event is opaque (kept verbatim: its line says what it holds), so that the
    caller walks the lines instead."""
    if any(type(event) is OpaqueEvent for event in events):
        return None
    return _walk_typed(events, turn)


def _walk_typed(events: Sequence[Event], turn: int | None
                ) -> Iterator[tuple[Extracted | None, int | None, bool]]:
    inherited = True
    searched = SEARCHED_TYPES
    for event in events:
        etype = event.type
        if etype == "turn/start":
            started = event.data.turn
            turn, inherited = (started if type(started) is int else None), False
            yield None, turn, False
        elif etype == "turn/end":
            turn, inherited = None, False
            yield None, None, False
        elif etype in searched:
            data = event.data
            if etype == "tool/call":
                texts = [v for v in (data.name, data.arguments) if isinstance(v, str)]
            else:
                texts = [block.text for block in data.content
                         if block.type in _TEXT_BLOCKS and isinstance(block.text, str)]
            own = getattr(data, "turn", None)
            yield (Extracted(etype, searched[etype], event.seq, event.time,
                             own if type(own) is int else None, "\n".join(texts)),
                   turn, inherited)


def may_hold(data: bytes, terms: Sequence[bytes]) -> bool:
    """Whether ``data`` (log lines as stored) may hold every one of the query's ASCII
    ``terms``: ``False`` only when some term cannot be in it, whatever its case, so
    that a file or line can be skipped undecoded. A line holding a JSON ``\\u`` escape
    or a character that folds to ASCII (:data:`FOLDS_TO_ASCII`) may hold anything."""
    if not terms:
        return True
    lowered = data.lower()
    for term in terms:
        if term not in lowered:
            break
    else:
        return True
    if data.isascii():  # the common case: no character outside ASCII to fold
        return b"\\u" in data
    return _DISGUISED.search(data) is not None
