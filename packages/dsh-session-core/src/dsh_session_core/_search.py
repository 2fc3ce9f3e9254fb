"""Full-text search over session logs: what a query means, which events it reads, and
whether one log line is a hit. Every backend answers a search with this module's
:func:`hit_of_line`, whatever index found its candidates, so the same store gives the
same hits on JSONL, SQLite and PostgreSQL.

**Words.** A text's words are its runs of letters and digits (``[^\\W_]+``: an
underscore, a dot or a hyphen splits words, so ``read_file`` is the words ``read`` and
``file``), compared caselessly (``str.casefold``, per word).

**Queries.** A query is clauses separated by spaces, all of which must match (AND):

- ``word``: an event with that word;
- ``word*``: an event with a word that starts with it;
- ``"two words"``, or a term that splits into several words (``read_file``): those
  words next to each other, in order (a phrase; a trailing ``*`` makes its last word a
  prefix).

**What is searched.** Message text (``user/message``, ``prompt/blocked``,
``context/message``, ``steering/message``, ``assistant/message``: their text and
reasoning blocks), tool calls (``tool/call``: the tool's name and its arguments) and
tool results (``tool/result``: their text blocks). A call inside an
``assistant/message`` is found as its ``tool/call`` event, once. Streamed chunks are
not searched: the ``assistant/message`` they built holds the same text.

**Indexes.** A backend's index only narrows the lines to check: :func:`index_words`
gives the distinct words an index stores for an event (each cut to
:data:`MAX_INDEXED_WORD` characters), :meth:`SearchQuery.index_terms` the words a
candidate must hold (a word longer than that is looked up as a prefix). Whatever an
index returns is checked here again, so an index is never trusted for the answer.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal

import msgspec

from .events import Event, OpaqueEvent

__all__ = [
    "MAX_INDEXED_WORD",
    "ROLES",
    "SEARCHED_TYPES",
    "Clause",
    "Extracted",
    "SearchHit",
    "SearchQuery",
    "extract",
    "hit_of_line",
    "index_words",
    "may_hold",
    "order_hits",
    "walk",
    "walk_events",
    "words_of",
]

#: The event types a search reads, and the role each speaks as (``--role``).
SEARCHED_TYPES: Final[dict[str, str]] = {
    "user/message": "user",
    "prompt/blocked": "user",
    "context/message": "user",
    "steering/message": "user",
    "assistant/message": "assistant",
    "tool/call": "assistant",
    "tool/result": "tool",
}
#: The roles a search can be narrowed to.
ROLES: Final = ("user", "assistant", "tool")
#: How many characters of a word an index keeps (PostgreSQL's lexemes are bounded);
#: longer words are looked up by this prefix and checked whole here.
MAX_INDEXED_WORD: Final = 64
#: Characters of text around the first match that a hit's snippet shows.
SNIPPET_BEFORE: Final = 60
SNIPPET_AFTER: Final = 140

_WORD = re.compile(r"[^\W_]+")
#: A query's terms: a quoted phrase (a ``*`` right after it makes it a prefix), or a run
#: of anything else but spaces and quotes.
_TERM = re.compile(r'"([^"]*)"(\*?)|([^\s"]+)')
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

Sort = Literal["newest", "relevance"]


def words_of(text: str) -> list[str]:
    """The words of a text, case-folded, in order."""
    if text.isascii():  # folding ASCII is lowering it, and keeps every word's bounds
        return _WORD.findall(text.lower())
    return [m.group().casefold() for m in _WORD.finditer(text)]


def index_words(text: str) -> list[str]:
    """The distinct words an index stores for a text: each case-folded and cut to
    :data:`MAX_INDEXED_WORD` characters, in first-seen order."""
    return list(dict.fromkeys(w[:MAX_INDEXED_WORD] for w in words_of(text)))


@dataclasses.dataclass(frozen=True, slots=True)
class Clause:
    """One clause of a query: words that must stand next to each other, in order.

    :ivar words: the case-folded words (one for a plain term).
    :ivar prefix: whether the last word matches any word it starts.
    """

    words: tuple[str, ...]
    prefix: bool = False

    def matches(self, words: Sequence[str]) -> list[int]:
        """Where in ``words`` (a text's words) the clause starts: every position."""
        n = len(self.words)
        first, last = self.words[0], self.words[-1]
        found = []
        for i in range(len(words) - n + 1):
            if n == 1:
                if words[i] == first or (self.prefix and words[i].startswith(first)):
                    found.append(i)
                continue
            if words[i] != first:
                continue
            j = i + n - 1
            if all(words[i + k] == self.words[k] for k in range(1, n - 1)) and (
                words[j] == last or (self.prefix and words[j].startswith(last))
            ):
                found.append(i)
        return found


@dataclasses.dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed search, with its filters (see the module's doc for the syntax).

    :ivar text: the query as given.
    :ivar clauses: what every hit holds.
    :ivar types: only these event types (empty: every searched type).
    :ivar roles: only these roles (empty: all).
    :ivar sessions: only these sessions (empty: all).
    :ivar since: only events at or after this time (epoch ms), when given.
    :ivar until: only events before this time (epoch ms), when given.
    """

    text: str
    clauses: tuple[Clause, ...]
    types: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()
    since: int | float | None = None
    until: int | float | None = None

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        types: Iterable[str] = (),
        roles: Iterable[str] = (),
        sessions: Iterable[str] = (),
        since: int | float | None = None,
        until: int | float | None = None,
    ) -> SearchQuery:
        """Parse a query and check its filters.

        :raises ValueError: the query holds no word, a quote is not closed, or a filter
            names an event type or role a search never returns (the message says which
            ones it takes).
        """
        given: object = text  # untyped callers may pass anything
        if not isinstance(given, str):
            msg = f"a search query is a string, got {type(given).__name__}"
            raise TypeError(msg)
        if text.count('"') % 2:
            msg = f"the query {text!r} has a quote that is not closed"
            raise ValueError(msg)
        clauses: list[Clause] = []
        for m in _TERM.finditer(text):
            phrase, star, term = m.groups()
            words = tuple(words_of(phrase if phrase is not None else term))
            if words:
                prefix = bool(star) if phrase is not None else term.endswith("*")
                clauses.append(Clause(words, prefix))
        if not clauses:
            msg = (f"the query {text!r} holds no word to search for (words are letters "
                   f"and digits)")
            raise ValueError(msg)
        types = frozenset(types)
        unknown = sorted(types - SEARCHED_TYPES.keys())
        if unknown:
            msg = (f"a search never returns events of type {', '.join(unknown)}; it reads "
                   f"{', '.join(SEARCHED_TYPES)}")
            raise ValueError(msg)
        roles = frozenset(roles)
        unknown = sorted(roles - set(ROLES))
        if unknown:
            msg = f"unknown role {', '.join(unknown)}: a search takes {', '.join(ROLES)}"
            raise ValueError(msg)
        return cls(text, tuple(clauses), types, roles, frozenset(sessions), since, until)

    def event_types(self) -> list[str]:
        """The event types a hit can have, given the type and role filters."""
        return [t for t, role in SEARCHED_TYPES.items()
                if (not self.types or t in self.types)
                and (not self.roles or role in self.roles)]

    def index_terms(self) -> list[tuple[str, bool]]:
        """The words a candidate's index entry must hold, each with whether it is
        looked up as a prefix (a clause's prefix word, or a word longer than an index
        keeps)."""
        terms: dict[tuple[str, bool], None] = {}
        for clause in self.clauses:
            for k, word in enumerate(clause.words):
                prefix = (clause.prefix and k == len(clause.words) - 1) or (
                    len(word) > MAX_INDEXED_WORD)
                terms[(word[:MAX_INDEXED_WORD], prefix)] = None
        return list(terms)

    def ascii_terms(self) -> list[bytes]:
        """The query's words that are ASCII, as bytes: what :func:`may_hold` looks for."""
        return sorted({w.encode() for c in self.clauses for w in c.words if w.isascii()})

    def accepts(self, extracted: Extracted) -> bool:
        """Whether an event passes the filters (its words not looked at)."""
        if self.types and extracted.type not in self.types:
            return False
        if self.roles and extracted.role not in self.roles:
            return False
        when = extracted.time
        if self.since is not None and (not _is_number(when) or when < self.since):
            return False
        return self.until is None or (_is_number(when) and when < self.until)


@dataclasses.dataclass(frozen=True, slots=True)
class SearchHit:
    """One event a search found.

    :ivar session_id: its session.
    :ivar seq: its seq.
    :ivar turn: the turn it belongs to (its ``turn`` field, or the turn open when it
        was written), ``None`` outside any turn.
    :ivar type: its event type.
    :ivar role: ``user``, ``assistant`` or ``tool``.
    :ivar time: its time (epoch ms), as stored.
    :ivar snippet: a piece of its text around the first match, on one line.
    :ivar highlights: where the matched words are in ``snippet``: ``(start, end)``
        character offsets.
    :ivar score: how relevant it is: the matched words' count over the square root of
        the text's word count (the order of ``sort="relevance"``).
    """

    session_id: str
    seq: int
    turn: int | None
    type: str
    role: str
    time: Any
    snippet: str
    highlights: tuple[tuple[int, int], ...]
    score: float

    def to_dict(self) -> dict[str, Any]:
        """The hit as plain JSON values (``dsh-session search --json``)."""
        return {"session": self.session_id, "seq": self.seq, "turn": self.turn,
                "type": self.type, "role": self.role, "time": self.time,
                "snippet": self.snippet,
                "highlights": [list(h) for h in self.highlights],
                "score": round(self.score, 6)}


@dataclasses.dataclass(frozen=True, slots=True)
class Extracted:
    """What a search reads of one searched event."""

    type: str
    role: str
    seq: int
    time: Any
    turn: int | None
    text: str


# --- reading a log line ------------------------------------------------------------------


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


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


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
         prefixes: tuple[bytes, ...] = _SEARCHED_PREFIXES, terms: Sequence[bytes] = ()
         ) -> Iterator[tuple[Extracted | None, int | None, bool]]:
    """A session's consecutive event lines (no newline), read as a search reads them,
    starting with ``turn`` open: each searched event with the turn open where it was
    written and whether that is still the starting turn; each turn change as ``(None,
    the turn open after it, False)``.

    A line the writers' key order shows to be of another type (not one of ``prefixes``),
    or whose bytes cannot hold ``terms`` (:func:`may_hold`), is skipped undecoded; a line
    written in another key order is decoded.
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


# --- whether an event is a hit -------------------------------------------------------------


def hit_of(session_id: str, extracted: Extracted, turn: int | None, query: SearchQuery
           ) -> SearchHit | None:
    """The hit ``extracted`` is for ``query``, or ``None``.

    :param turn: the turn open where the event was written (used when the event has no
        ``turn`` field of its own).
    """
    if not query.accepts(extracted):
        return None
    text = extracted.text
    spans = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    words = [text[a:b].casefold() for a, b in spans]
    matched: set[int] = set()
    for clause in query.clauses:
        starts = clause.matches(words)
        if not starts:
            return None
        for s in starts:
            matched.update(range(s, s + len(clause.words)))
    first = min(matched)
    snippet, highlights = _snippet(text, spans, sorted(matched), first)
    score = len(matched) / math.sqrt(len(words))
    return SearchHit(session_id, extracted.seq,
                     extracted.turn if extracted.turn is not None else turn,
                     extracted.type, extracted.role, extracted.time, snippet,
                     highlights, score)


def hit_of_line(session_id: str, line: bytes, turn: int | None, query: SearchQuery
                ) -> SearchHit | None:
    """The hit one log line is for ``query``, or ``None`` (see :func:`hit_of`)."""
    extracted = extract(line)
    if extracted is None:
        return None
    return hit_of(session_id, extracted, turn, query)


def _snippet(text: str, spans: list[tuple[int, int]], matched: list[int], first: int
             ) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A one-line window of ``text`` around word ``first``, and where the matched words
    are in it."""
    begin = max(spans[first][0] - SNIPPET_BEFORE, 0)
    end = min(spans[first][1] + SNIPPET_AFTER, len(text))
    if begin > 0:  # start and end on a word's edge, not inside one
        space = text.find(" ", begin, spans[first][0])
        begin = space + 1 if space >= 0 else spans[first][0]
    if end < len(text):
        space = text.rfind(" ", spans[first][1], end)
        end = space if space >= 0 else end
    piece = text[begin:end]
    # One line: every run of whitespace is one space, so the offsets are remapped.
    out: list[str] = []
    where: list[int] = []  # where[i]: the offset in the snippet of piece[i]
    pending = False
    for ch in piece:
        if ch.isspace():
            pending = bool(out)
            where.append(len(out) + (1 if pending else 0))
            continue
        if pending:
            out.append(" ")
            pending = False
        where.append(len(out))
        out.append(ch)
    where.append(len(out))
    snippet = "".join(out)
    lead = "… " if begin > 0 else ""
    tail = " …" if end < len(text) else ""
    shift = len(lead)
    highlights = []
    for i in matched:
        a, b = spans[i]
        if a >= begin and b <= end:
            highlights.append((where[a - begin] + shift, where[b - 1 - begin] + 1 + shift))
    return lead + snippet + tail, tuple(highlights)


def order_hits(hits: list[SearchHit], sort: Sort | str = "newest") -> list[SearchHit]:
    """Hits in a search's order: ``"newest"`` first (by time, then the later seq,
    then the session id), or most ``"relevance"`` first (by score, then newest)."""
    def newest(h: SearchHit) -> tuple[Any, ...]:
        when = h.time if _is_number(h.time) else float("-inf")
        return (-when, h.session_id, -h.seq)

    if sort == "newest":
        return sorted(hits, key=newest)
    if sort == "relevance":
        return sorted(hits, key=lambda h: (-h.score, *newest(h)))
    msg = f"sort is 'newest' or 'relevance', got {sort!r}"
    raise ValueError(msg)
