"""The matcher beyond scenario 81: Claude literals are whole-string literals, regexes are
JavaScript regexes (searched, unanchored), and matching never raises.

Expected values are JavaScript's (ECMAScript, non-unicode mode with Annex B); when Node.js
is installed, a differential test checks a generated corpus against ``RegExp`` itself.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_hooks import MatcherMode, matches_matcher

MODES: tuple[MatcherMode, ...] = ("claude", "codex")


# --- Claude literals ---------------------------------------------------------------------------


def test_claude_literal_is_an_exact_match_of_an_alternative() -> None:
    assert matches_matcher("Edit|Write", "Write", "claude")
    assert not matches_matcher("Edit|Write", "Edit|Write", "claude")
    assert not matches_matcher("Bash", "bash", "claude")
    assert not matches_matcher("Bash", "Bash\n", "claude")  # no trailing-newline slack
    assert not matches_matcher("Bash", "MyBash", "claude")
    assert matches_matcher("mcp__srv__tool_1", "mcp__srv__tool_1", "claude")
    # An empty alternative is an alternative.
    assert matches_matcher("Bash|", "", "claude")


def test_claude_literal_test_is_on_the_whole_pattern() -> None:
    # A trailing newline makes the pattern a regex, searched: it needs "Bash\n".
    assert not matches_matcher("Bash\n", "Bash", "claude")
    assert matches_matcher("Bash\n", "Bash\n", "claude")
    # Non-ASCII letters are not literal characters: "Bäsh" is a regex, and searched.
    assert matches_matcher("B\u00e4sh", "xB\u00e4shx", "claude")


def test_codex_searches_every_pattern() -> None:
    assert matches_matcher("Edit|Write", "MultiEditFile", "codex")
    assert not matches_matcher("Edit|Write", "MultiEditFile", "claude")


# --- JavaScript regex semantics ----------------------------------------------------------------

JS_CASES: list[tuple[str, str, bool]] = [
    # $ is the end of the input, never before a final newline.
    ("^Bash$", "Bash\n", False),
    ("Bash$", "Bash", True),
    # . excludes line terminators; \s is JS whitespace; \d and \w are ASCII.
    (".", "\u2028", False),
    (".", "\r", False),
    (r"^\s$", "\ufeff", True),
    (r"^\s$", "\x1c", False),
    (r"^\S$", "\x1c", True),
    (r"\d", "\u0663", False),
    (r"\w", "\u00e9", False),
    (r"\bx", "\u00e9x", True),
    (r"^\B$", "", True),
    # Named groups and backreferences.
    (r"(?<tool>ab)\k<tool>", "abab", True),
    (r"(?<tool>ab)\k<tool>", "abba", False),
    (r"(a)|b\1", "b", True),  # a group that did not match: an empty backreference
    (r"\1(a)", "a", True),  # a forward reference: empty
    (r"(a)\1", "aa", True),
    # Annex B legacy escapes.
    (r"\1", "\x01", True),  # no group 1: an octal escape
    (r"\8", "8", True),
    (r"\a", "a", True),
    (r"\Z", "Z", True),
    (r"\x", "x", True),
    (r"\x41", "A", True),
    (r"\u00e9", "\u00e9", True),
    (r"\cJ", "\n", True),
    (r"\c", "\\c", True),
    (r"[\1]", "\x01", True),
    (r"[\B]", "B", True),
    ("a{", "a{", True),
    ("{a}", "{a}", True),
    ("x{2}", "xx", True),
    # Empty classes.
    ("[]", "", False),
    ("[]", "a", False),
    ("[^]", "\n", True),
    ("[[]", "[", True),
    ("[&&]", "&", True),
    ("[--z]", "a", True),
    ("[a--]", "a", False),  # a range from "a" down to "-": invalid
    (r"[\d-z]", "-", True),  # a class escape at a range's end: a union
    (r"[\d-z]", "m", False),
    (r"[^\S]", "\u2028", True),  # JS whitespace inside classes, too
    (r"[a\S]", "\u3000", False),
    (r"[\b]", "\x08", True),
    (r"[\n]", "\n", True),
    # Lazy quantifiers are JS; possessive ones and inline flags are not.
    ("a+?", "a", True),
    ("a??b", "b", True),
    ("a*+", "aa", False),
    ("a++", "aa", False),
    ("(?i)bash", "bash", False),
    ("(?P<x>a)", "a", False),
    ("(?#c)a", "a", False),
    ("(?>a)", "a", False),
    # Invalid in both.
    ("a**", "a", False),
    ("*a", "a", False),
    ("^*", "", False),
    ("{1}", "", False),
    ("(a", "a", False),
    ("a)", "a", False),
    ("\\", "\\", False),
    ("[a", "a", False),
    (r"\k<nope>(?<x>a)", "a", False),
    ("x{2,1}", "xx", False),
]


@pytest.mark.parametrize(("pattern", "query", "expected"), JS_CASES)
def test_regexes_read_as_javascript(pattern: str, query: str, expected: bool) -> None:
    assert matches_matcher(pattern, query, "codex") is expected
    # Claude reads each of these as a regex too (none is purely [A-Za-z0-9_|]).
    assert matches_matcher(pattern, query, "claude") is expected


@settings(deadline=None)  # the first compile of a pattern costs more than later ones
@given(
    matcher=st.one_of(st.none(), st.text(max_size=12)),
    query=st.text(max_size=12),
    mode=st.sampled_from(MODES),
)
def test_matching_never_raises(matcher: str | None, query: str, mode: MatcherMode) -> None:
    assert matches_matcher(matcher, query, mode) in (True, False)


_REGEX_ALPHABET = st.sampled_from(list("ab()[]{}|*+?^$.\\-:=!<>,0129dDsSwWbBkcxu_&~ \n"))


@settings(deadline=None)
@given(
    pattern=st.text(_REGEX_ALPHABET, min_size=1, max_size=10),
    query=st.text(max_size=10),
    mode=st.sampled_from(MODES),
)
def test_matching_regex_syntax_never_raises(pattern: str, query: str, mode: MatcherMode) -> None:
    assert matches_matcher(pattern, query, mode) in (True, False)


@given(query=st.text(), mode=st.sampled_from(MODES))
def test_sentinels_match_everything(query: str, mode: MatcherMode) -> None:
    assert matches_matcher(None, query, mode)
    assert matches_matcher("", query, mode)
    assert matches_matcher("*", query, mode)


@given(query=st.text(), mode=st.sampled_from(MODES))
def test_invalid_regex_matches_nothing(query: str, mode: MatcherMode) -> None:
    for pattern in ("(", "[", "a**", "(?i)x"):
        assert not matches_matcher(pattern, query, mode)


def test_huge_or_deep_patterns_match_nothing_without_raising() -> None:
    assert not matches_matcher("a{99999999999999999999}", "a", "codex")
    assert not matches_matcher("(" * 5000 + "a" + ")" * 5000 + "b", "a", "codex")
    # Digit strings longer than int() takes (4300 digits).
    assert not matches_matcher("a{" + "9" * 5000 + "}", "a", "codex")
    assert matches_matcher("\\" + "9" * 5000, "9" * 5000, "codex")  # "\9" is "9" in JS


# --- differential: Node.js RegExp ----------------------------------------------------------------

_NODE = shutil.which("node")
_JS = (
    "const cs=JSON.parse(require('fs').readFileSync(0,'utf8'));"
    "process.stdout.write(JSON.stringify(cs.map(([p,q])=>{let r;"
    "try{r=new RegExp(p)}catch(e){return false}return r.test(q)})));"
)
# Tokens of BMP characters only, and no lookbehind: the two documented differences
# (UTF-16 halves of astral characters; variable-width lookbehind) stay out.
_TOKENS = [
    *"ab$^.*+?()[]{}|\\-,:=!<>0129_&~ \n\u00e9\u2028\u00a0\ufeff",
    "(?<n>", "(?<m>", r"\k<n>", "(?=", "(?!", "(?:", "{2}", "{1,}", "{0,2}",
    r"\1", r"\2", r"\8", r"\0", r"\x41", r"\u00e9", r"\cA", r"\c", r"\s", r"\S",
    r"\B", r"\b", r"\d", r"\w", "[^", "(?i)", "(?P<x>", ".*", r"\/", r"\-", r"\n",
]  # fmt: skip
_QUERY_CHARS = [
    *"ab\n _9A{}\\c<>/u8", "\u00e9", "\u2028", "\u00a0", "\ufeff", "\x01", "\x08",
]  # fmt: skip


@pytest.mark.skipif(_NODE is None, reason="Node.js is not installed")
def test_matches_node_regexp_on_a_generated_corpus() -> None:
    rng = random.Random(20260710)  # fixed: the same corpus every run
    cases = [
        (
            "".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 6))),
            "".join(rng.choice(_QUERY_CHARS) for _ in range(rng.randint(0, 6))),
        )
        for _ in range(6000)
    ]
    cases = [(p, q) for p, q in cases if p != "*"]  # the match-all sentinel is no regex
    cases += [(p, q) for p, q, _ in JS_CASES]
    assert _NODE is not None  # narrowing: skipped otherwise
    proc = subprocess.run(
        [_NODE, "-e", _JS], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    expected = json.loads(proc.stdout)
    mismatches = [
        (p, q, js)
        for (p, q), js in zip(cases, expected, strict=True)
        if matches_matcher(p, q, "codex") is not js
    ]
    assert mismatches == []
    # The hand-written expectations above are JavaScript's, too.
    assert expected[-len(JS_CASES) :] == [e for _, _, e in JS_CASES]
