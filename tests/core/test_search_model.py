"""The search's model (``_search.py``): what a query means, which words a text has,
which events are read, and the byte-level shortcut that lets a scan skip lines. The
properties are checked with hypothesis against a plain reading of the rules."""

from __future__ import annotations

import re
import sys

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core._search import (
    FOLDS_TO_ASCII,
    MAX_INDEXED_WORD,
    Clause,
    SearchQuery,
    extract,
    hit_of_line,
    index_words,
    may_hold,
    words_of,
)


def _line(kind: str, data: dict[str, object], seq: int = 3, time: int = 1000) -> bytes:
    return msgspec.json.encode({"type": kind, "seq": seq, "time": time, "data": data})


def _user(text: str, seq: int = 3, time: int = 1000) -> bytes:
    return _line("user/message", {"content": [{"type": "text", "text": text}],
                                  "source": {"kind": "user"}}, seq, time)


def test_the_characters_that_fold_to_ascii_are_all_listed() -> None:
    # Recomputed from this Python's Unicode database: a new character that folds to an
    # ASCII letter must join the list, or a scan could skip a line that holds a hit.
    found = "".join(c for c in map(chr, range(128, sys.maxunicode + 1))
                    if any(x.isascii() and x.isalnum() for x in c.casefold()))
    assert found == FOLDS_TO_ASCII


@pytest.mark.parametrize(("text", "words"), [
    ("Read_File now", ["read", "file", "now"]),
    ("Straße STRASSE", ["strasse", "strasse"]),
    ("v2.1-beta x86_64", ["v2", "1", "beta", "x86", "64"]),
    ("東京 と 日本語!", ["東京", "と", "日本語"]),
    ("\x1b[31mred", ["31mred"]),
    ("--- ... ***", []),
])
def test_words(text: str, words: list[str]) -> None:
    assert words_of(text) == words


def test_index_words_are_distinct_and_bounded() -> None:
    long = "a" * (MAX_INDEXED_WORD + 10)
    assert index_words(f"Paris paris {long} PARIS") == ["paris", "a" * MAX_INDEXED_WORD]


@pytest.mark.parametrize(("query", "clauses"), [
    ("paris", [Clause(("paris",))]),
    ("Paris weather*", [Clause(("paris",)), Clause(("weather",), prefix=True)]),
    ('"sunny in paris" rain', [Clause(("sunny", "in", "paris")), Clause(("rain",))]),
    ("read_file", [Clause(("read", "file"))]),
    ('"read f"*', [Clause(("read", "f"), prefix=True)]),
    ("-- paris ++", [Clause(("paris",))]),
])
def test_parse(query: str, clauses: list[Clause]) -> None:
    assert list(SearchQuery.parse(query).clauses) == clauses


@pytest.mark.parametrize(("query", "options", "message"), [
    ("", {}, "holds no word"),
    ("-- ?", {}, "holds no word"),
    ('"open', {}, "not closed"),
    ("x", {"types": ["assistant/chunk"]}, "never returns events of type assistant/chunk"),
    ("x", {"roles": ["system"]}, "unknown role system"),
])
def test_parse_refuses(query: str, options: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SearchQuery.parse(query, **options)  # type: ignore[arg-type]


def test_what_is_searched() -> None:
    call = _line("tool/call", {"turn": 2, "step": 1, "callId": "c", "name": "read_file",
                               "arguments": '{"path": "notes.md"}'})
    extracted = extract(call)
    assert extracted is not None
    assert (extracted.role, extracted.turn) == ("assistant", 2)
    assert words_of(extracted.text) == ["read", "file", "path", "notes", "md"]
    chunk = _line("assistant/chunk", {"turn": 1, "step": 1,
                                      "chunk": {"type": "text-delta", "delta": "paris"}})
    assert extract(chunk) is None  # the message it builds is searched instead
    assistant = _line("assistant/message", {"turn": 1, "step": 1, "content": [
        {"type": "text", "text": "hello"},
        {"type": "tool-call", "id": "c", "name": "hidden", "arguments": "{}"}]})
    extracted = extract(assistant)
    assert extracted is not None
    assert extracted.text == "hello"
    for bad in (b'{"type":"user/message"', b"[1,2]", b'{"type":"user/message","seq":"x"}',
                _line("user/message", {"content": "not a list", "source": {}})):
        found = extract(bad)
        assert found is None or found.text == ""


def test_filters() -> None:
    line = _user("paris", time=5000)
    assert hit_of_line("s", line, None, SearchQuery.parse("paris", roles=["user"]))
    assert not hit_of_line("s", line, None, SearchQuery.parse("paris", roles=["tool"]))
    assert not hit_of_line("s", line, None, SearchQuery.parse("paris", since=5001))
    assert hit_of_line("s", line, None, SearchQuery.parse("paris", since=5000))
    assert not hit_of_line("s", line, None, SearchQuery.parse("paris", until=5000))
    assert not hit_of_line("s", line, None,
                           SearchQuery.parse("paris", types=["tool/result"]))


def test_a_snippet_is_one_line_around_the_first_match() -> None:
    text = ("word " * 40) + "the\n\nParis\tweather " + ("tail " * 60)
    hit = hit_of_line("s", _user(text), 7, SearchQuery.parse("paris weather"))
    assert hit is not None
    assert hit.turn == 7
    assert "\n" not in hit.snippet
    assert "\t" not in hit.snippet
    assert hit.snippet.startswith("… ")
    assert hit.snippet.endswith(" …")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["Paris", "weather"]


# --- properties --------------------------------------------------------------------------

_ALPHABET = st.sampled_from([*"aAbBsSkK ß\u212aﬁ_-.\n\"\\é1", "\x1b", "İ", "東"])
_TEXT = st.text(_ALPHABET, max_size=30)


def _plain_match(text: str, query: str) -> bool:
    """The rules read plainly: every query word is a word of the text (one clause per
    word; phrases are tested elsewhere)."""
    words = {w.casefold() for w in re.findall(r"[^\W_]+", text)}
    wanted = [w.casefold() for w in re.findall(r"[^\W_]+", query)]
    return bool(wanted) and all(w in words for w in wanted)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, query=st.text(_ALPHABET, min_size=1, max_size=6))
def test_a_hit_is_what_the_rules_say(text: str, query: str) -> None:
    if '"' in query:
        return  # phrases have their own tests
    terms = [w for w in query.split() if re.search(r"[^\W_]", w)]
    if not terms or any(re.search(r"[\W_]", w[:-1] if w.endswith("*") else w)
                        for w in terms) or any(w.endswith("*") for w in terms):
        return  # only plain one-word terms: phrases and prefixes have their own tests
    hit = hit_of_line("s", _user(text), None, SearchQuery.parse(query))
    assert (hit is not None) == _plain_match(text, query)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, query=st.text(_ALPHABET, min_size=1, max_size=6))
def test_the_byte_shortcut_never_skips_a_hit(text: str, query: str) -> None:
    try:
        parsed = SearchQuery.parse(query)
    except ValueError:
        return
    line = _user(text)
    if hit_of_line("s", line, None, parsed) is not None:
        assert may_hold(line, parsed.ascii_terms())


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, query=st.text(_ALPHABET, min_size=1, max_size=6))
def test_highlights_are_matched_words(text: str, query: str) -> None:
    try:
        parsed = SearchQuery.parse(query)
    except ValueError:
        return
    hit = hit_of_line("s", _user(text), None, parsed)
    if hit is None:
        return
    wanted = {w for c in parsed.clauses for w in c.words}
    prefixes = {c.words[-1] for c in parsed.clauses if c.prefix}
    assert hit.highlights
    for a, b in hit.highlights:
        word = hit.snippet[a:b].casefold()
        assert re.fullmatch(r"[^\W_]+", hit.snippet[a:b])
        assert word in wanted or any(word.startswith(p) for p in prefixes)


def test_phrases_and_prefixes() -> None:
    line = _user("It is sunny in Paris today, said read_file.")
    for query, found in [('"sunny in paris"', True), ('"paris sunny"', False),
                         ('"in par"*', True), ("sun*", True), ("sun", False),
                         ("read_file", True), ("file_read", False), ("tod* pa*", True)]:
        assert (hit_of_line("s", line, None, SearchQuery.parse(query)) is not None) is found
