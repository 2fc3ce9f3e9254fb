"""``_cli.term``: colour only on a terminal and never with NO_COLOR, safe one-line texts, and a
progress bar that is drawn on a terminal only and erased when done."""

from __future__ import annotations

import io

import pytest

from dsh_session_core._cli.term import (
    Progress,
    Style,
    colour_enabled,
    human_bytes,
    printable,
    shorten,
    text_table,
)


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class ClosedTTY(FakeTTY):
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


@pytest.fixture(autouse=True)
def _colour_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_colour_on_a_terminal() -> None:
    style = Style.for_stream(FakeTTY())
    assert style.enabled
    assert style("hi", "red", "bold") == "\x1b[31;1mhi\x1b[0m"
    assert style("hi") == "hi"  # no style asked: no codes
    assert style("", "red") == ""


def test_no_colour_off_a_terminal() -> None:
    assert not colour_enabled(io.StringIO())
    assert not colour_enabled(ClosedTTY())
    assert not colour_enabled(object())
    assert Style.for_stream(io.StringIO())("hi", "red") == "hi"


@pytest.mark.parametrize("value", ["1", "yes", "0"])
def test_no_color_set_turns_colour_off_even_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("NO_COLOR", value)
    assert not colour_enabled(FakeTTY())
    assert "\x1b" not in Style.for_stream(FakeTTY())("hi", "green")


def test_an_empty_no_color_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # no-color.org: only a non-empty value disables colour.
    monkeypatch.setenv("NO_COLOR", "")
    assert colour_enabled(FakeTTY())


def test_shorten_makes_one_line_and_cuts_with_an_ellipsis() -> None:
    assert shorten("a\n b\t\tc", 80) == "a b c"
    assert shorten("abcdefghij", 5) == "abcd…"
    assert len(shorten("x" * 500, 40)) == 40
    assert shorten("abc", 3) == "abc"


def test_printable_escapes_what_would_drive_a_terminal() -> None:
    # A log is untrusted: an ESC from it must not reach the terminal raw.
    assert printable("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07"
    assert printable("\x9b") == "\\x9b"
    assert printable("lone \ud800 surrogate") == "lone ? surrogate"
    assert shorten("ok\x1b]0;title\x07", 80) == "ok\\x1b]0;title\\x07"
    assert printable("中文 é 😀") == "中文 é 😀"


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KB"
    assert human_bytes(5 * 1024 * 1024) == "5.0 MB"
    assert human_bytes(3 * 1024**3) == "3.0 GB"


def test_text_table_aligns_columns() -> None:
    assert text_table([["A", "NUM"], ["long", "7"]], right={1}) == ["A     NUM", "long    7"]


def test_progress_draws_on_a_terminal_and_erases_itself() -> None:
    stream = FakeTTY()
    with Progress(100, "loading x", stream=stream, min_total=10) as bar:
        assert bar.active
        bar.advance(50)
        drawn = stream.getvalue()
        assert drawn.startswith("\rloading x [")
        assert "50%" in drawn
        assert "\n" not in drawn  # one line, redrawn in place
    erased = stream.getvalue()[len(drawn):]
    assert erased[0] == erased[-1] == "\r"
    assert erased.strip() == ""


def test_progress_is_silent_off_a_terminal_or_for_small_work() -> None:
    for stream, total in ((io.StringIO(), 10**9), (FakeTTY(), 10)):
        with Progress(total, "loading", stream=stream, min_total=100) as bar:
            bar.advance(total)
        assert stream.getvalue() == ""
