"""Matcher groups: whether a configured ``matcher`` pattern selects a query (a tool name,
a session source...), in either dialect.

``None``, ``''`` and ``'*'`` match everything. Claude Code reads a pattern made only of
ASCII letters, digits, ``_`` and ``|`` as literal alternatives (exact match), anything
else as a regex; Codex reads every pattern as a regex. A regex is searched, unanchored.
An invalid regex matches nothing: matching never raises.

The patterns are JavaScript regular expressions (the hook configs are written for JS
tools), so they are translated to Python's ``re`` dialect before compiling (checked
against Node.js on generated patterns). The translation keeps what changes a match or
the pattern's validity:

- ``$`` is the end of the input only (Python's also matches before a final newline);
- ``.`` excludes LF, CR, U+2028 and U+2029; ``\\s`` and ``\\S`` use JS whitespace
  (also inside classes); ``\\d``, ``\\w`` and ``\\b`` are ASCII; ``\\B`` also holds
  in an empty string; a class range with a class escape at one end is a union;
- ``(?<name>...)`` and ``\\k<name>`` are named groups and their backreferences; a
  backreference to a group that has not matched matches the empty string;
- ``[]`` matches nothing and ``[^]`` any character;
- legacy forms are read as JS reads them (Annex B): ``\\a`` is ``a``, a lone ``\\x``
  is ``x``, ``\\cX`` is a control character, ``\\12`` an octal escape when there is
  no group 12, a brace that is no quantifier (``{``, ``{a}``) is a literal;
- Python-only syntax is invalid, as in JS: inline flags ``(?i)``, ``(?P<...>)``,
  ``(?#...)``, atomic groups, possessive quantifiers, a quantified ``^`` or lookbehind.

Known differences left: a variable-width lookbehind (valid in JS) is invalid here, so it
matches nothing; a character beyond U+FFFF, in a pattern or a query, is one character
(JS sees two UTF-16 units, so ``.`` and quantifiers apply to halves of it there); in a
class, ``\\c`` before a digit or ``_`` is read literally.
"""

from __future__ import annotations

__all__ = ["MatcherMode", "matches_matcher"]

import functools
import re
from typing import Final, Literal, TypeAlias

from dsh_session_core.jscompat import JS_WHITESPACE

#: How a bridge reads its patterns: ``claude`` (literal alternatives or regex) or
#: ``codex`` (always regex).
MatcherMode: TypeAlias = Literal["claude", "codex"]

# The whole pattern, not a prefix: ``re.match`` with ``$`` would accept "Bash\n".
_CLAUDE_LITERAL: Final = re.compile(r"[A-Za-z0-9_|]+")
_MATCH_ALL: Final = frozenset({"", "*"})

_QUANTIFIER: Final = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_HEX2: Final = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4: Final = re.compile(r"[0-9A-Fa-f]{4}")
_GROUP_NAME: Final = re.compile(r"<([^>]*)>")
_DECIMAL: Final = re.compile(r"[1-9][0-9]*")
_OCTAL: Final = re.compile(r"[0-3][0-7]{0,2}|[4-7][0-7]?")
# Escapes whose meaning JS and Python (compiled with re.ASCII) share.
_SHARED_ESCAPES: Final = frozenset("dDwWbfnrtv")

_WS: Final = "".join(f"\\u{ord(c):04x}" for c in JS_WHITESPACE)
_DOT: Final = r"[^\n\r\u2028\u2029]"
# Python's \B never matches an empty string (until 3.14); JS's matches there.
_NOT_BOUNDARY: Final = r"(?:(?<=\w)(?=\w)|(?<!\w)(?!\w))"


class _NotJs(Exception):
    """The pattern is not a valid JS regex (or is one Python cannot express)."""


def matches_matcher(matcher: str | None, query: str, mode: MatcherMode) -> bool:
    """Whether the pattern ``matcher`` selects ``query``.

    :param matcher: the matcher group's pattern; ``None``, ``''`` and ``'*'`` match all.
    :param query: the candidate (a tool name, a session source...).
    :param mode: ``claude`` reads a pattern of only ``[A-Za-z0-9_|]`` as literal
        alternatives; otherwise, and always for ``codex``, the pattern is a JS regex,
        searched unanchored.
    :returns: ``True`` on a match; ``False`` otherwise, including for an invalid regex.
    """
    if matcher is None or matcher in _MATCH_ALL:
        return True
    if mode == "claude" and _CLAUDE_LITERAL.fullmatch(matcher):
        return query in matcher.split("|")
    compiled = _compile(matcher)
    return compiled is not None and compiled.search(query) is not None


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` (a JS regex) compiled for Python, or ``None`` when it is invalid.
    Cached: bridges match the same few patterns against every tool call."""
    try:
        translated = _translate(pattern)
    except _NotJs:
        return None
    try:
        return re.compile(translated, re.ASCII)
    except (re.error, ValueError, OverflowError, RecursionError):
        # Bad syntax; a repeat count too large (or too long for int()); nesting deeper
        # than the parser goes.
        return None


def _translate(pattern: str) -> str:
    """The Python ``re`` form of the JS regex ``pattern`` (no flags, non-unicode mode).

    :raises _NotJs: the pattern is invalid in JS in a way Python would accept, or uses a
        JS feature Python cannot express.
    """
    return _Translator(pattern).run()


def _scan_groups(pattern: str) -> tuple[int, frozenset[str]]:
    """How many capturing groups ``pattern`` has, and the names of its named ones (JS
    resolves a backreference against the whole pattern, forward references included)."""
    total = 0
    names: set[str] = set()
    in_class = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"  # the first "]" closes a JS class, even "[]"
        elif c == "[":
            in_class = True
        elif c == "(" and not pattern.startswith("(?", i):
            total += 1
        elif c == "(" and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in "=!":
            total += 1
            m = _GROUP_NAME.match(pattern, i + 2)
            if m is not None:
                names.add(m.group(1))
        i += 1
    return total, frozenset(names)


class _Translator:
    """One pass over a JS pattern, emitting its Python form."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.total, self.names = _scan_groups(pattern)
        self.opened = 0
        # One entry per open group: its number when capturing, 0 for (?:..) and
        # lookaheads, -1 for lookbehinds (which JS does not let one quantify).
        self.stack: list[int] = []
        self.closed: set[int] = set()
        self.numbers: dict[str, int] = {}
        # Whether the last token may take a quantifier, and whether it was one.
        self.quantifiable = False
        self.after_quantifier = 0  # 1: a quantifier; 2: one with its lazy "?"

    def run(self) -> str:
        p, n = self.p, len(self.p)
        while self.i < n:
            c = p[self.i]
            m = _QUANTIFIER.match(p, self.i) if c == "{" else None
            if c in "*+?" or m is not None:
                self._quantifier(m.group() if m is not None else c)
                continue
            self.after_quantifier = 0
            self.quantifiable = True
            if c == "\\":
                self._escape()
            elif c == "[":
                self.i += 1
                self.out.append(self._char_class())
            elif c == "(":
                self._open_group()
            elif c == ")":
                self._close_group()
            else:
                self.i += 1
                if c == ".":
                    self.out.append(_DOT)
                elif c in "^$|":
                    self.quantifiable = False  # assertions and "|" take no quantifier
                    self.out.append(r"\Z" if c == "$" else c)
                elif c in "{}":
                    self.out.append("\\" + c)  # a brace that is no quantifier: a literal
                else:
                    self.out.append(c)
        if self.stack:
            raise _NotJs  # an unterminated group
        return "".join(self.out)

    def _quantifier(self, token: str) -> None:
        if self.after_quantifier == 1 and token == "?":
            self.out.append("?")  # lazy
            self.after_quantifier = 2
            self.i += 1
            return
        if self.after_quantifier or not self.quantifiable:
            # "Nothing to repeat" in JS; Python 3.11 would read "a*+" as possessive.
            raise _NotJs
        self.out.append(token)
        self.i += len(token)
        self.after_quantifier = 1

    def _open_group(self) -> None:
        p, i = self.p, self.i
        self.quantifiable = False
        if not p.startswith("(?", i):
            self.opened += 1
            self.stack.append(self.opened)
            self.out.append("(")
            self.i += 1
            return
        for prefix, kind in (("(?:", 0), ("(?=", 0), ("(?!", 0), ("(?<=", -1), ("(?<!", -1)):
            if p.startswith(prefix, i):
                self.stack.append(kind)
                self.out.append(prefix)
                self.i += len(prefix)
                return
        m = _GROUP_NAME.match(p, i + 2) if p.startswith("(?<", i) else None
        if m is None or not m.group(1).isidentifier():
            # (?i), (?P<..>), (?#..), (?>..) are not JS; "$x" is a JS name Python refuses.
            raise _NotJs
        self.opened += 1
        self.stack.append(self.opened)
        self.numbers[m.group(1)] = self.opened
        self.out.append(f"(?P<{m.group(1)}>")
        self.i = m.end()

    def _close_group(self) -> None:
        if not self.stack:
            raise _NotJs  # unmatched ")"
        kind = self.stack.pop()
        if kind > 0:
            self.closed.add(kind)
        self.quantifiable = kind >= 0
        self.out.append(")")
        self.i += 1

    def _is_group(self, digits: str) -> bool:
        # Length first: int() refuses over 4300 digits, and no pattern has 10**6 groups.
        return len(digits) <= 6 and int(digits) <= self.total

    def _backreference(self, number: int, name: str | None) -> str:
        # JS matches a backreference to a group that has not matched (yet) as empty;
        # Python fails it (an unmatched group) or refuses it (an open or later group).
        if number not in self.closed:
            return "(?:)"
        ref = f"(?P={name})" if name is not None else f"\\{number}"
        return f"(?({name or number}){ref})"

    def _escape(self) -> None:
        p = self.p
        self.i += 1
        if self.i >= len(p):
            raise _NotJs  # a trailing backslash
        c = p[self.i]
        if c in _SHARED_ESCAPES:
            self.quantifiable = c != "b"
            self.out.append("\\" + c)
            self.i += 1
        elif c == "B":
            self.quantifiable = False
            self.out.append(_NOT_BOUNDARY)
            self.i += 1
        elif c in "sS":
            self.out.append(f"[{'^' if c == 'S' else ''}{_WS}]")
            self.i += 1
        elif c == "k" and self.names:
            m = _GROUP_NAME.match(p, self.i + 1)
            if m is None or m.group(1) not in self.names:
                raise _NotJs
            number = self.numbers.get(m.group(1), 0)
            self.out.append(self._backreference(number, m.group(1)))
            self.i = m.end()
        elif (m := _DECIMAL.match(p, self.i)) is not None and self._is_group(m.group()):
            self.out.append(self._backreference(int(m.group()), None))
            self.i = m.end()
        else:
            text, self.i = _character_escape(p, self.i)
            self.out.append(text)

    def _char_class(self) -> str:
        """Translate the class whose body starts at ``self.i`` (after its ``[``)."""
        p = self.p
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        if p.startswith("]", self.i):  # JS closes at once: "[]" and "[^]"
            self.i += 1
            return r"[\s\S]" if negated else "(?!)"
        members: list[str] = []
        not_space = False  # a "\S" member: JS whitespace is not ASCII, so kept apart
        while not p.startswith("]", self.i):
            first, first_kind = self._class_atom()
            if p.startswith("-", self.i) and self.i + 1 < len(p) and p[self.i + 1] != "]":
                self.i += 1
                last, last_kind = self._class_atom()
                # A range with a class escape at either end ("[\d-z]") is, in JS (Annex
                # B), the union of both ends and a "-"; Python refuses it.
                if first_kind == last_kind == "char":
                    members.append(f"{first}-{last}")
                else:
                    members.append(f"{first}\\-{last}")
                not_space = not_space or "not-space" in (first_kind, last_kind)
            else:
                members.append(first)
                not_space = not_space or first_kind == "not-space"
        self.i += 1
        others = "".join(members)
        if not not_space:
            return f"[^{others}]" if negated else f"[{others}]"
        if not others:
            return f"[{_WS}]" if negated else f"[^{_WS}]"
        # [..\S] is "in the others, or not JS whitespace"; [^..\S] its complement.
        if negated:
            return f"(?:(?![{others}])[{_WS}])"
        return f"(?:[{others}]|[^{_WS}])"

    def _class_atom(self) -> tuple[str, str]:
        """One class member at ``self.i``: its Python text, and its kind: ``char`` (one
        character), ``set`` (a class escape such as ``\\d``) or ``not-space`` (``\\S``,
        whose text is empty: the caller adds it)."""
        p = self.p
        if self.i >= len(p):
            raise _NotJs  # an unterminated class
        c = p[self.i]
        if c != "\\":
            self.i += 1
            # Escaped, so Python never reads a nested set ("[[") or a set operation
            # ("--", "&&", "~~", "||"), which it warns about today and may adopt.
            return re.escape(c), "char"
        if self.i + 1 >= len(p):
            raise _NotJs
        e = p[self.i + 1]
        self.i += 2
        if e == "S":
            return "", "not-space"
        if e in "dDwWs":
            return (_WS if e == "s" else "\\" + e), "set"
        if e in "b-fnrtv":
            return ("\\x08" if e == "b" else "\\" + e), "char"  # \b: a backspace here
        text, self.i = _character_escape(p, self.i - 1)
        return text, "char"


def _character_escape(pattern: str, i: int) -> tuple[str, int]:
    """The escapes read alike in and out of a class (Annex B): hex, control, legacy
    octal, and identity escapes. ``pattern[i]`` is the character after the backslash."""
    c = pattern[i]
    if c == "x" and _HEX2.match(pattern, i + 1):
        return "\\x" + pattern[i + 1 : i + 3], i + 3
    if c == "u" and _HEX4.match(pattern, i + 1):
        return "\\u" + pattern[i + 1 : i + 5], i + 5
    if c == "c":
        nxt = pattern[i + 1 : i + 2]
        if nxt.isascii() and nxt.isalpha():
            return f"\\x{ord(nxt) % 32:02x}", i + 2
        return r"\\c", i + 1  # JS reads a lone "\c" as those two characters
    m = _OCTAL.match(pattern, i)
    if m is not None:
        # "\0" is NUL; "\1".."\7" that name no group are legacy octal escapes.
        return f"\\x{int(m.group(), 8):02x}", m.end()
    # An identity escape: JS reads "\a", "\Z", "\8", "\/"... as the character itself.
    return re.escape(c), i + 1
