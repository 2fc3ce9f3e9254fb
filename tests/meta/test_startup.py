"""What starting costs: importing the package loads no CLI or backend module, and
``dsh-session --help`` builds no command (timings are benchmarks: bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from process_support import python_prints

_LOADED = (
    "import sys\n"
    "{code}\n"
    "print(' '.join(sorted(m for m in sys.modules if m.startswith('dsh_session'))))"
)


def _modules_after(code: str, **env: str) -> set[str]:
    return set(python_prints(_LOADED.format(code=code), **env).split())


def test_importing_the_package_loads_no_cli_and_no_backend() -> None:
    loaded = _modules_after("import dsh_session_core")
    assert "dsh_session_core" in loaded
    assert not {m for m in loaded if m.startswith(("dsh_session_core._cli",
                                                    "dsh_session_core._persistence"))}


def test_a_public_name_loads_only_its_own_modules() -> None:
    loaded = _modules_after("from dsh_session_core import Session")
    assert not {m for m in loaded if m.startswith(("dsh_session_core._cli",
                                                    "dsh_session_core._persistence"))}
    assert not {m for m in loaded if not m.startswith("dsh_session_core")}  # no plugin


_HELP = (
    "import contextlib, io\n"
    "from dsh_session_core._cli.main import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    main({argv!r})\n"
    "import sys; print('argparse' if 'argparse' in sys.modules else '')"
)
#: The modules of core's commands, and what the viewer's and the demo's commands run
#: (their plugins' light modules that declare the commands are none of them).
_CORE_COMMANDS = {"logs", "registry", "sessions", "copy", "ls", "show", "tail", "parser"}
_RUN = {"dsh_session_view._cli", "dsh_session_view._server", "dsh_session_demo._run"}


def _commands(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m in _RUN or (
        m.startswith("dsh_session_core._cli.") and m.rpartition(".")[2] in _CORE_COMMANDS)}


def test_help_imports_no_command_module_and_no_argparse() -> None:
    # The batteries' plugins (the test suite's example plugin blocked): their commands
    # (demo, view) are listed from core's table of the project's own plugins, so that no
    # plugin is loaded at all, nor pluggy.
    for argv in ([], ["-h"], ["--help"]):
        loaded = _modules_after(_HELP.format(argv=argv), DSH_SESSION_DISABLE_PLUGINS="example")
        assert not _commands(loaded), argv
        assert "argparse" not in loaded, argv
        assert "dsh_session_core._cli.help" in loaded
        assert not {m for m in loaded if not m.startswith("dsh_session_core")}, argv
        assert "dsh_session_core._plugins.manager" not in loaded, argv


def test_help_with_a_third_party_plugin_asks_the_plugins_and_builds_no_command() -> None:
    # The example plugin is no plugin of the project's: the plugins are loaded, to ask
    # them for their commands; still no command's module, and no argparse.
    loaded = _modules_after(_HELP.format(argv=["--help"]), DSH_SESSION_DISABLE_PLUGINS="")
    assert "dsh_session_example.plugin" in loaded
    assert "dsh_session_view.plugin" in loaded
    assert not _commands(loaded)
    assert "argparse" not in loaded


@pytest.mark.parametrize("columns", [60, 80, 100, 200])
def test_the_help_is_laid_out_as_argparse_lays_it_out(
    columns: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The text printed without argparse is the one argparse's own formatter makes of the
    same parser (from 60 columns up; narrower, lines break at spaces only)."""
    import argparse

    from dsh_session_core._cli.help import render_help
    from dsh_session_core._cli.main import _parser

    monkeypatch.setenv("COLUMNS", str(columns))
    parser = _parser(["--help"])
    assert render_help() == argparse.ArgumentParser.format_help(parser)
    assert parser.format_help() == render_help()  # and argparse prints it when asked
    assert argparse.ArgumentParser.format_usage(parser) == parser.format_usage()


def test_a_command_imports_only_its_own_module() -> None:
    loaded = _modules_after(
        "import contextlib, io\n"
        "from dsh_session_core._cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['plugins', '--help'])"
    )
    assert "dsh_session_core._cli.registry" in loaded
    assert not {m for m in loaded if m.rpartition(".")[2] in {"logs", "sessions", "copy"}}
    assert not {m for m in loaded if m.startswith(("dsh_session_view", "dsh_session_demo"))}


def test_the_help_lists_every_command_with_its_own_help() -> None:
    """The table ``--help`` prints from is the one the commands' parsers use: core's,
    and for the plugins' commands, what they add (demo and view among them)."""
    import argparse

    from dsh_session_core._cli.commands import COMMANDS
    from dsh_session_core._cli.help import command_rows
    from dsh_session_core._cli.main import _parser

    full = _parser()  # every command built
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    built = {a.dest: a.help for a in sub._get_subactions()}
    rows = dict(command_rows())
    assert built == rows
    assert set(COMMANDS) | {"demo", "view"} <= set(rows)
    listed = _parser(["--help"]).format_help()
    for name, text in rows.items():
        assert name in listed
        assert text.split()[0] in listed


def test_loading_every_installed_plugin_imports_no_framework() -> None:
    # What every store and CLI command does: load the plugins through their entry points.
    # The framework integrations declare their event types without importing the
    # framework (the OpenAI Agents SDK alone costs more than a second to import).
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "from dsh_session_core import create_plugin_manager\n"
         "pm = create_plugin_manager()\n"
         "print(' '.join(sorted(name for name, _ in pm.list_name_plugin())))\n"
         "print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"],
        capture_output=True, text=True, check=True)
    plugins, modules = (line.split() for line in out.stdout.splitlines())
    assert {"openai-agents", "adk", "langgraph", "pydantic-ai", "claude-agent"} <= set(
        plugins), plugins
    assert not {"agents", "openai", "google", "pydantic", "anthropic", "langgraph",
                 "langchain_core", "claude_agent_sdk"} & set(modules)
