"""What a search means: words, a query's clauses and filters, hits and their order.

The words of a text, a query's clauses and filters (:class:`SearchQuery`), the words an
index stores and looks up, what a hit reports (:class:`SearchHit`) and the order hits
come in.

**Words.** A text's words are its runs of letters and digits (``[^\\W_]+``: an
underscore, a dot or a hyphen splits words, so ``read_file`` is the words ``read`` and
``file``), compared caselessly (``str.casefold``, per word).

**Queries.** A query is clauses separated by spaces, all of which must match (AND):

- ``word``: an event with that word;
- ``word*``: an event with a word that starts with it;
- ``"two words"``, or a term that splits into several words (``read_file``): those
  words next to each other, in order (a phrase; a trailing ``*`` makes its last word a
  prefix).

**Indexes.** A backend's index only narrows the lines to check: :func:`index_words`
gives the distinct words an index stores for an event (each cut to
:data:`MAX_INDEXED_WORD` characters), :meth:`SearchQuery.index_terms` the words a
candidate must hold (a word longer than that is looked up as a prefix).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

from ..errors import InspectUsageError

__all__ = [
    "MAX_INDEXED_WORD",
    "ROLES",
    "SEARCHED_TYPES",
    "WORD",
    "Clause",
    "Extracted",
    "SearchHit",
    "SearchQuery",
    "Sort",
    "index_words",
    "is_number",
    "order_hits",
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
#: longer words are looked up by this prefix and checked whole (:func:`~.hits.hit_of`).
MAX_INDEXED_WORD: Final = 64

#: A word: a run of letters and digits.
WORD = re.compile(r"[^\W_]+")
#: A query's terms: a quoted phrase (a ``*`` right after it makes it a prefix), or a run
#: of anything else but spaces and quotes.
_TERM = re.compile(r'"([^"]*)"(\*?)|([^\s"]+)')

Sort = Literal["newest", "relevance"]

#: How to write a query, for a query that holds no word, and one whose quote is open.
_WORDS_HINT: Final = 'search for words: dsh-session search "tool error" --type tool/result'
_QUOTE_HINT: Final = "close the phrase: dsh-session search '\"exact words\"'"


def words_of(text: str) -> list[str]:
    """The words of a text, case-folded, in order."""
    if text.isascii():  # folding ASCII is lowering it, and keeps every word's bounds
        return WORD.findall(text.lower())
    return [m.group().casefold() for m in WORD.finditer(text)]


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

        :raises InspectUsageError: (a :class:`ValueError`) the query holds no word, a
            quote is not closed, or a filter names an event type or role a search never
            returns (the message says which ones it takes; the hint, for the first two,
            how to write a query).
        """
        given: object = text  # untyped callers may pass anything
        if not isinstance(given, str):
            msg = f"a search query is a string, got {type(given).__name__}"
            raise TypeError(msg)
        if text.count('"') % 2:
            msg = f"the query {text!r} has a quote that is not closed"
            raise InspectUsageError(msg, hint=_QUOTE_HINT)
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
            raise InspectUsageError(msg, hint=_WORDS_HINT)
        types = frozenset(types)
        unknown = sorted(types - SEARCHED_TYPES.keys())
        if unknown:
            msg = (f"a search never returns events of type {', '.join(unknown)}; it reads "
                   f"{', '.join(SEARCHED_TYPES)}")
            raise InspectUsageError(msg)
        roles = frozenset(roles)
        unknown = sorted(roles - set(ROLES))
        if unknown:
            msg = f"unknown role {', '.join(unknown)}: a search takes {', '.join(ROLES)}"
            raise InspectUsageError(msg)
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
        """The query's words that are ASCII, as bytes: what :func:`~.lines.may_hold` looks
        for."""
        return sorted({w.encode() for c in self.clauses for w in c.words if w.isascii()})

    def accepts(self, extracted: Extracted) -> bool:
        """Whether an event passes the filters (its words not looked at)."""
        if self.types and extracted.type not in self.types:
            return False
        if self.roles and extracted.role not in self.roles:
            return False
        when = extracted.time
        if self.since is not None and (not is_number(when) or when < self.since):
            return False
        return self.until is None or (is_number(when) and when < self.until)


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


def is_number(value: object) -> bool:
    """Whether ``value`` is a JSON number (an int or a float, never a bool)."""
    return type(value) in (int, float)


def order_hits(hits: list[SearchHit], sort: Sort | str = "newest") -> list[SearchHit]:
    """Hits in a search's order: ``"newest"`` first (by time, then the later seq,
    then the session id), or most ``"relevance"`` first (by score, then newest)."""
    def newest(h: SearchHit) -> tuple[Any, ...]:
        when = h.time if is_number(h.time) else float("-inf")
        return (-when, h.session_id, -h.seq)

    if sort == "newest":
        return sorted(hits, key=newest)
    if sort == "relevance":
        return sorted(hits, key=lambda h: (-h.score, *newest(h)))
    msg = f"sort is 'newest' or 'relevance', got {sort!r}"
    raise ValueError(msg)
