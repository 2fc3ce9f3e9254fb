"""dsh_session_core.jscompat: the JS rules, checked as properties (hypothesis), against
stdlib oracles, and against Node.js itself when it is installed."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core import JsonObject
from dsh_session_core.jscompat import (
    JS_WHITESPACE,
    MAX_SAFE_INTEGER,
    UNDEFINED,
    is_safe_integer,
    js_number_string,
    js_string,
    js_trim,
    json_parse,
    json_quote,
    json_stringify,
    strict_equals,
    utf16_len,
    utf16_prefix,
)
from dsh_session_core.vocabulary import TextBlock

# Every code point, lone surrogates included (hypothesis leaves them out by default).
ANY_CHAR = st.characters(codec=None, exclude_categories=())
TEXT = st.text(ANY_CHAR, max_size=20)
# Strings as the log and the reference hold them: no surrogates.
CLEAN_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)
FINITE = st.floats(allow_nan=False, allow_infinity=False)


def _json(leaves: st.SearchStrategy[Any], keys: st.SearchStrategy[str] = TEXT,
          ) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=12,
    )


JSON_VALUES = _json(st.none() | st.booleans() | st.integers() | FINITE | TEXT)
# No surrogates, in keys either: the stdlib writes a lone one raw, JSON.stringify escapes it.
JSON_WITHOUT_FLOATS = _json(st.none() | st.booleans() | st.integers() | CLEAN_TEXT,
                            CLEAN_TEXT)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _strict_stdlib(text: str) -> tuple[bool, Any]:
    """The oracle for ``json_parse`` on a str: the stdlib, refusing NaN and Infinity."""
    try:
        return True, json.loads(text, parse_constant=_refuse)
    except ValueError:
        return False, None


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values, key order included (NaN never occurs here)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# --- numbers ------------------------------------------------------------------------------


@given(FINITE)
def test_a_number_reads_back_as_itself(x: float) -> None:
    assert float(js_number_string(x)) == x


@given(FINITE)
def test_a_number_is_positional_exactly_from_1e_minus_6_to_1e21(x: float) -> None:
    text = js_number_string(x)
    # Number::toString: positional while the decimal exponent n is in -6 < n <= 21.
    positional = x == 0 or 1e-6 <= abs(x) < 1e21
    assert ("e" not in text) is positional
    if "e" in text:
        mantissa, exponent = text.split("e")
        assert exponent[0] in "+-"
        assert not exponent[1:].startswith("0")
        assert not mantissa.endswith(".0")
    assert not text.endswith(".0")
    if x.is_integer() and abs(x) <= MAX_SAFE_INTEGER:
        assert text == str(int(x))
    elif x.is_integer() and abs(x) < 1e21:  # the shortest digits, then zeros
        assert text.lstrip("-").isdigit()
        assert len(text.lstrip("-").rstrip("0")) <= 17


def test_numbers_that_python_writes_differently() -> None:
    cases = {
        1.0: "1", -0.0: "0", 1e21: "1e+21", 1e-7: "1e-7", 1.5e-7: "1.5e-7", 1e-5: "0.00001",
        1e16: "10000000000000000", 123e18: "123000000000000000000", 0.1: "0.1",
        5e-324: "5e-324", math.nan: "NaN", math.inf: "Infinity", -math.inf: "-Infinity",
        2**64: "18446744073709551616",  # an int is written exactly
    }
    assert {x: js_number_string(x) for x in cases} == cases


@given(st.integers() | st.floats())
def test_a_safe_integer_is_an_integral_number_within_2_53(x: float) -> None:
    integral = type(x) is int or (math.isfinite(x) and x.is_integer())
    expected = integral and abs(x) <= MAX_SAFE_INTEGER
    assert is_safe_integer(x) is expected


def test_a_bool_is_no_safe_integer() -> None:
    assert not is_safe_integer(True)
    assert is_safe_integer(3.0)
    assert not is_safe_integer(2.0**53)


# --- values as text -----------------------------------------------------------------------


def test_values_render_as_template_strings_do() -> None:
    assert js_string(UNDEFINED) == "undefined"
    assert js_string(None) == "null"
    assert [js_string(True), js_string(False)] == ["true", "false"]
    assert [js_string(1.0), js_string("x")] == ["1", "x"]
    assert js_string([1, None, UNDEFINED, [2, 3.5], "a"]) == "1,,,2,3.5,a"
    assert js_string({"a": 1}) == js_string(JsonObject({})) == "[object Object]"
    assert js_string(()) == ""
    assert repr(UNDEFINED) == "undefined"


@given(st.lists(st.none() | st.booleans() | st.integers() | FINITE | CLEAN_TEXT, max_size=6))
def test_an_array_renders_as_its_items_joined_by_commas(items: list[Any]) -> None:
    assert js_string(items) == ",".join("" if v is None else js_string(v) for v in items)


# --- equality -----------------------------------------------------------------------------


@given(st.none() | st.booleans() | st.integers() | FINITE | TEXT)
def test_strict_equality_is_reflexive_on_primitives(x: Any) -> None:
    assert strict_equals(x, x)
    assert strict_equals(UNDEFINED, UNDEFINED)
    assert not strict_equals(x, UNDEFINED)


@given(st.integers(-5, 5))
def test_strict_equality_of_numbers_and_booleans(n: int) -> None:
    assert strict_equals(n, float(n))
    assert not strict_equals(n == 1, 1)
    assert not strict_equals(0, False)
    assert not strict_equals(str(n), n)


def test_strict_equality_of_objects_is_identity() -> None:
    a: list[int] = []
    assert strict_equals(a, a)
    assert not strict_equals(a, [])
    assert not strict_equals({}, {})
    assert not strict_equals(math.nan, math.nan)
    assert not strict_equals(None, UNDEFINED)


# --- strings ------------------------------------------------------------------------------


@given(TEXT)
def test_trim_strips_exactly_the_js_whitespace(text: str) -> None:
    trimmed = js_trim(text)
    assert trimmed in text
    if trimmed:
        assert trimmed[0] not in JS_WHITESPACE
        assert trimmed[-1] not in JS_WHITESPACE
    head, _, _ = text.partition(trimmed) if trimmed else (text, "", "")
    assert all(c in JS_WHITESPACE for c in head)


def test_trim_differs_from_str_strip() -> None:
    assert js_trim("\ufeff a \x1c") == "a \x1c"
    assert "\x85 b".strip() == "b"
    assert js_trim("\x85 b") == "\x85 b"


@given(TEXT)
def test_length_counts_utf16_code_units(text: str) -> None:
    assert utf16_len(text) == _utf16(text)


@given(TEXT, st.integers(0, 25))
def test_a_prefix_is_the_longest_that_fits_without_splitting_a_pair(
    text: str, units: int
) -> None:
    prefix = utf16_prefix(text, units)
    assert text.startswith(prefix)
    assert utf16_len(prefix) <= units
    if prefix != text:
        assert utf16_len(text[: len(prefix) + 1]) > units


# --- JSON text ----------------------------------------------------------------------------


@given(JSON_VALUES)
def test_json_text_parses_back_to_the_value(value: Any) -> None:
    # Also with lone surrogates, which msgspec alone cannot encode nor decode.
    assert _same_json(json_parse(json_stringify(value)), value)
    assert _same_json(json.loads(json_stringify(value)), value)


@given(JSON_WITHOUT_FLOATS)
def test_json_text_escapes_as_the_stdlib_does(value: Any) -> None:
    # The stdlib (ensure_ascii off) escapes exactly what JSON.stringify escapes; floats
    # are left out, their forms differ (see the next tests).
    assert json_stringify(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(FINITE)
def test_js_numbers_writes_integral_floats_as_js_does(x: float) -> None:
    text = json_stringify([x], js_numbers=True)
    if x.is_integer() and abs(x) < 1e21:
        assert text == f"[{int(x)}]"
    else:
        assert text == json_stringify([x])
    assert json_stringify(1.0) == "1.0"
    assert json_stringify(1.0, js_numbers=True) == "1"


def test_json_text_of_read_only_log_data_and_structs() -> None:
    frozen = JsonObject({"b": (1, JsonObject({"a": None})), "a": "é"})
    assert json_stringify(frozen) == '{"b":[1,{"a":null}],"a":"é"}'
    assert json_stringify(TextBlock(text="\ud800")) == '{"type":"text","text":"\\ud800"}'
    assert json_stringify({"x": 2.0}, js_numbers=True) == '{"x":2}'
    assert json_stringify([math.nan, -math.inf]) == "[null,null]"  # as JS writes them
    with pytest.raises(NotImplementedError):
        json_stringify(object())


def _old_todo_quote(text: str) -> str:
    """The todo plugin's former JSON.stringify of a string, the oracle."""
    import re

    def fix(m: re.Match[str]) -> str:
        s = m.group()
        if len(s) == 2:
            return s.encode("utf-16", "surrogatepass").decode("utf-16")
        return f"\\u{ord(s):04x}"

    pattern = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
    return pattern.sub(fix, json.dumps(text, ensure_ascii=False))


@given(TEXT)
def test_a_quoted_string_reads_surrogate_pairs_as_js_does(text: str) -> None:
    assert json_quote(text) == _old_todo_quote(text)
    assert json_quote("\ud83d\ude00 \ud800") == '"😀 \\ud800"'
    assert json_stringify("\ud83d\ude00") == '"\\ud83d\\ude00"'  # the log encoder's form


# --- parsing JSON -------------------------------------------------------------------------


@given(JSON_VALUES, st.booleans())
def test_parsing_equals_the_strict_stdlib_on_json_text(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    ok, expected = _strict_stdlib(text)
    assert ok
    assert _same_json(json_parse(text), expected)
    if ascii_only:
        assert _same_json(json_parse(text.encode()), expected)


JSONISH = st.text(st.sampled_from(list('{}[]:,"\\ -+.0123456789eEtruefalsnNIfiy\ud800\n')),
                  max_size=12)


@given(JSONISH)
def test_parsing_accepts_and_refuses_what_the_strict_stdlib_does(text: str) -> None:
    ok, expected = _strict_stdlib(text)
    try:
        got = json_parse(text)
    except ValueError:
        assert not ok, text
    else:
        assert ok, text
        assert _same_json(got, expected) or (got != got and expected != expected)


def test_parsing_refuses_what_js_refuses_and_accepts_what_msgspec_refuses() -> None:
    for text in ("NaN", "Infinity", "-Infinity", "[1,]", "'a'", "01", "", '"\x01"'):
        with pytest.raises(ValueError):  # noqa: PT011  # JSONDecodeError or the constant
            json_parse(text)
    assert json_parse('"\\ud800"') == "\ud800"
    assert json_parse("1e999") == math.inf
    assert json_parse('"\ud800"') == "\ud800"  # a str holding a raw lone surrogate
    assert json_parse(b'{"a":1,"a":2}') == {"a": 2}
    with pytest.raises(UnicodeDecodeError):
        json_parse(b'"\xff"')


# --- differential: Node.js ----------------------------------------------------------------

_NODE = shutil.which("node")
_JS = (
    "const c=JSON.parse(require('fs').readFileSync(0,'utf8'));"
    "const ws=[];for(let i=0;i<0x10000;i++){const s=String.fromCharCode(i);"
    "if(s.trim()==='')ws.push(i)}"
    "process.stdout.write(JSON.stringify({"
    "numbers:c.numbers.map(n=>String(Number(n))),"
    "quoted:c.strings.map(s=>JSON.stringify(s)),"
    "lengths:c.strings.map(s=>s.length),"
    "templates:c.templates.map(v=>`${v}`),"
    "ws}));"
)


def _corpus() -> dict[str, Any]:
    rng = random.Random(20260711)  # fixed: the same corpus every run
    numbers = [
        *(rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(3000)),
        *(float(rng.randint(-(10**22), 10**22)) for _ in range(500)),
        *(rng.randint(-(2**53), 2**53) / 2 ** rng.randint(0, 60) for _ in range(500)),
        1e21, 1e-7, 1e-6, 9.999999999999999e20, 5e-324, 1.7976931348623157e308, -0.0,
    ]  # fmt: skip
    alphabet = ["a", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀",
                "\ud800", "\udc00", "\ud83d", "\ude00", " ", "\ufeff"]  # fmt: skip
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
               for _ in range(1500)]  # fmt: skip
    templates: list[Any] = [None, True, False, 0.5, 1e21, 1e-7, -0.0, "s", [1, None, [2, 3]],
                            [], {"a": 1}, [True, 1.5e300]]  # fmt: skip
    return {"numbers": numbers, "strings": strings, "templates": templates}


@pytest.mark.skipif(_NODE is None, reason="Node.js is not installed")
def test_equals_node_on_a_generated_corpus() -> None:
    corpus = _corpus()
    assert _NODE is not None  # narrowing: skipped otherwise
    # ensure_ascii: surrogates travel as escapes, which JSON.parse reads as UTF-16 units.
    proc = subprocess.run([_NODE, "-e", _JS], input=json.dumps(corpus), capture_output=True,
                          text=True, check=True, encoding="utf-8", errors="surrogatepass")
    js = json.loads(proc.stdout)
    assert [js_number_string(n) for n in corpus["numbers"]] == js["numbers"]
    # json.loads joins an escaped pair into one code point, as JS reads it: compare what
    # Python holds once the text went through JSON, exactly as a log line would.
    strings = [json.loads(json.dumps(s)) for s in corpus["strings"]]
    assert [json_quote(s) for s in strings] == js["quoted"]
    assert [utf16_len(s) for s in strings] == js["lengths"]
    assert [js_string(v) for v in corpus["templates"]] == js["templates"]
    assert sorted(ord(c) for c in JS_WHITESPACE) == js["ws"]

