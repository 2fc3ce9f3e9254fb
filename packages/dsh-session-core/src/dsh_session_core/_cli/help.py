"""The top-level help of ``dsh-session``: its text, rendered without argparse.

``dsh-session``, ``dsh-session -h`` and ``--help`` are the commands people run first and
most, and importing argparse alone (with ``re``, ``enum``, ``gettext``) costs more than
starting Python. So this text is rendered here, from :data:`.commands.COMMANDS`, the
commands the installed plugins add (:func:`.plugin_commands.command_rows`, which loads no
plugin of the project's own) and :data:`OPTIONS`, for those three; argparse's parser of
the top level (``parser``) prints the same text, from the same function, when it is asked
for it some other way (after ``--debug``, say), and takes its options from the same table.
"""

from __future__ import annotations

import os
import sys

from .commands import COMMANDS

__all__ = ["DESCRIPTION", "OPTIONS", "PROG", "columns", "command_rows", "render_help",
           "usage"]

PROG = "dsh-session"
DESCRIPTION = "Inspect and work with dsh-session event logs."

#: The top-level options: (flags, help). None of them takes a value.
OPTIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("-h", "--help"), "show this help message and exit"),
    (("--version",), "show the versions of everything installed"),
    (("--debug",), "show tracebacks on errors"),
)


def columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it ($COLUMNS, else the
    terminal, else 80), without importing shutil (and its compression modules)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def usage() -> str:
    """The usage line, as argparse writes it for these options."""
    flags = " ".join(f"[{names[0]}]" for names, _ in OPTIONS)
    return f"usage: {PROG} {flags} COMMAND ...\n"


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (a word
    longer than a line gets a line of its own)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def command_rows() -> list[tuple[str, str]]:
    """``(name, help)`` of every command, as ``--help`` lists them: core's, in the order
    of :data:`.commands.COMMANDS`, then those the installed plugins add, by name."""
    from .plugin_commands import command_rows as plugin_rows

    return [(name, text) for name, (_, text) in COMMANDS.items()] + plugin_rows()


def render_help(width: int | None = None) -> str:
    """The whole top-level help, laid out as argparse lays it out, for a terminal
    ``width`` columns wide (default: :func:`columns`)."""
    width = (columns() if width is None else width) - 2
    rows = [("COMMAND", "", 2)] + [(name, text, 4) for name, text in command_rows()]
    options = [(", ".join(names), text, 2) for names, text in OPTIONS]
    longest = max(indent + len(name) for name, _, indent in rows + options)
    position = min(longest + 2, 24, max(width - 20, 4))
    text_width = max(width - position, 11)

    def block(entries: list[tuple[str, str, int]]) -> list[str]:
        out = []
        for name, text, indent in entries:
            head = " " * indent + name
            lines = _wrap(text, text_width) if text else []
            if not lines:
                out.append(head)
                continue
            if len(head) + 2 <= position:
                out.append(head.ljust(position) + lines[0])
            else:
                out += [head, " " * position + lines[0]]
            out += [" " * position + line for line in lines[1:]]
        return out

    parts = [usage().rstrip("\n"), "", *_wrap(DESCRIPTION, width), "",
             "positional arguments:", *block(rows), "", "options:", *block(options)]
    return "\n".join(parts) + "\n"
