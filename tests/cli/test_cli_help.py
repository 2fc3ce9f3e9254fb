"""Issue 15, point 5: every command's ``--help`` ends with one example, a command line
that starts with ``dsh-session <the command>`` and parses."""

from __future__ import annotations

import shlex

import pytest

from dsh_session_core._cli.commands import COMMANDS, KNOWN_PLUGINS
from dsh_session_core._cli.parser import build_parser
from dsh_session_core.testing import run_cli

#: Core's commands, and those the project's own plugins add (the demo, the viewer).
_EVERY = [*COMMANDS, *(name for _, added, _ in KNOWN_PLUGINS.values() for name in added)]


@pytest.mark.parametrize("command", _EVERY)
def test_every_help_ends_with_an_example_that_parses(command: str) -> None:
    code, out, err = run_cli(command, "--help")
    assert (code, err) == (0, "")
    lines = out.decode().rstrip("\n").splitlines()
    assert lines[-2] == "example:", lines[-3:]
    example = lines[-1].strip()
    argv = shlex.split(example.split(" > ")[0])
    assert argv[:2] == ["dsh-session", command], example
    args = build_parser(argv[1:]).parse_args(argv[1:])  # a usage error would exit
    assert args.command == command
