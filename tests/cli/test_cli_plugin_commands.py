"""Commands plugins add to ``dsh-session`` (the ``register_commands`` hook): the viewer's
``view`` and ``export --html`` and the demo's ``demo`` come through their entry points,
and say what to install when their distribution is not there; a third party's plugin
adds a command and an export format the same way, listed, parsed and failing as core's
own commands do.

Each runs the real command in a child process. "Not installed" is an environment where
the distribution's files are gone, as ``pip uninstall`` leaves it: this test
environment's site-packages mirrored (a link per entry) without the files its RECORD
names (its metadata, with its entry points, and its code or the ``.pth`` of an editable
install), the interpreter started without its own site-packages (``-S``). A third
party's plugin is a distribution of its own, on ``PYTHONPATH``: its metadata with its
entry point, and its module.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from dsh_session_core import create_plugin_manager
from dsh_session_core._cli.commands import COMMANDS, KNOWN_PLUGINS
from dsh_session_core._cli.plugin_commands import Additions, CommandLine
from dsh_session_core._plugins.manager import PluginHooks

#: The command, as ``python -c`` runs it (the console script's own entry), in an
#: interpreter started without its site-packages, given the folder to use instead.
_RUN = ("import site, sys; site.addsitedir(sys.argv.pop(1)); "
        "from dsh_session_core._cli.main import main; main()")
#: What the test environment installs beside the batteries (the example third-party
#: plugin and the integrations), blocked unless a test says otherwise.
_NOT_BATTERIES = "example,adk,claude-agent,langgraph,openai-agents,pydantic-ai"


def _site_without(tmp: Path, *distributions: str) -> Path:
    """This environment's site-packages, without the files of ``distributions``."""
    site: Path | None = None
    owned: set[str] = set()
    for name in distributions:
        dist = importlib.metadata.distribution(name)
        assert dist.files, f"{name} has no RECORD: its files are not known"
        here = Path(str(dist.locate_file("")))
        assert site in (None, here)
        site = here
        owned |= {Path(str(f)).parts[0] for f in dist.files}
    assert site is not None
    mirror = tmp / "site-packages"
    mirror.mkdir()
    for entry in site.iterdir():
        if entry.name not in owned and entry.name != "__pycache__":
            (mirror / entry.name).symlink_to(entry)
    return mirror


def _dsh(site: Path | None, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``dsh-session ARGV``: with ``site`` as the only site-packages (``None``: this
    environment's), the batteries' plugins unless ``env`` says otherwise."""
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environ["DSH_SESSION_DISABLE_PLUGINS"] = _NOT_BATTERIES
    environ.update(env)
    command = ([sys.executable, "-c", "from dsh_session_core._cli.main import main; main()"]
               if site is None else [sys.executable, "-S", "-c", _RUN, str(site)])
    return subprocess.run([*command, *argv], capture_output=True, text=True, env=environ,
                          check=False)


def _listed(help_text: str) -> list[str]:
    """The commands a top-level ``--help`` lists."""
    lines = help_text.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in lines.splitlines()[1:] if line.startswith("    ")
            and not line.startswith("     ")]


def _failed(proc: subprocess.CompletedProcess[str], status: int) -> list[str]:
    """The stderr lines of a command that failed as the CLI fails: with ``status``, one
    line and its hint, no traceback, nothing on stdout."""
    assert (proc.returncode, proc.stdout) == (status, ""), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr.splitlines()


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log file with one session, written by a JSONL store."""
    folder = tmp_path_factory.mktemp("store")
    code = ("import sys; from dsh_session_core import open_store\n"
            "store = open_store(sys.argv[1])\n"
            "s = store.create('chat')\n"
            "s.append('user/message', {'content': [{'type': 'text', 'text': 'hi'}], "
            "'source': {'kind': 'user'}}, surface_op='append')\n"
            "store.flush(s)\n"
            "store.close()\n")
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True)
    [path] = folder.rglob("chat.jsonl")
    return path


# --- the project's own: through their entry points ------------------------------------------


def test_the_viewer_and_the_demo_add_their_commands_through_entry_points() -> None:
    proc = _dsh(None, "plugins", "--json")
    rows = {r["name"]: r for r in msgspec.json.decode(proc.stdout)}
    assert (rows["view"]["distribution"], rows["view"]["hooks"]) == (
        "dsh-session-view", ["register_commands"])
    assert (rows["demo"]["distribution"], rows["demo"]["hooks"]) == (
        "dsh-session", ["register_commands"])
    listed = _listed(_dsh(None, "--help").stdout)
    assert listed == [*COMMANDS, "demo", "view"]
    assert "--no-open" in _dsh(None, "view", "--help").stdout
    assert "--session-id ID" in _dsh(None, "demo", "--help").stdout
    assert "--html" in _dsh(None, "export", "--help").stdout


def test_without_the_viewer_its_commands_say_what_to_install(tmp_path: Path,
                                                            log: Path) -> None:
    site = _site_without(tmp_path, "dsh-session-view")
    for argv, what in ((["view", "--no-open"], "dsh-session view"),
                       (["view", "--help"], "dsh-session view"),
                       (["export", "--html", str(log)], "dsh-session export --html"),
                       (["export", "--html", str(log), "-o", str(tmp_path / "x.html")],
                        "dsh-session export --html")):
        assert _failed(_dsh(site, *argv), 1) == [
            f"dsh-session: {what} needs dsh-session-view, which is not installed",
            "hint: pip install dsh-session-view",
        ], argv
    assert not (tmp_path / "x.html").exists()
    assert "view" not in _listed(_dsh(site, "--help").stdout)
    assert "demo" in _listed(_dsh(site, "--help").stdout)
    assert ("--html                (needs dsh-session-view, which is not installed)"
            in _dsh(site, "export", "--help", COLUMNS="200").stdout)
    # The rest of export is core's, and works.
    exported = _dsh(site, "export", str(log))
    assert (exported.returncode, exported.stdout) == (0, log.read_text())


def test_without_the_batteries_the_demo_says_what_to_install(tmp_path: Path) -> None:
    site = _site_without(tmp_path, "dsh-session")
    store = tmp_path / "store"
    assert _failed(_dsh(site, "demo", "--store", str(store)), 1) == [
        "dsh-session: dsh-session demo needs dsh-session, which is not installed",
        "hint: pip install dsh-session",
    ]
    assert not store.exists()
    assert _listed(_dsh(site, "--help").stdout) == [*COMMANDS, "view"]


def test_a_blocked_plugins_command_says_so(tmp_path: Path) -> None:
    blocked = _dsh(None, "view", "--no-open",
                   DSH_SESSION_DISABLE_PLUGINS=f"{_NOT_BATTERIES},view")
    assert _failed(blocked, 1) == [
        "dsh-session: dsh-session view is added by the plugin 'view' (dsh-session-view), "
        "which DSH_SESSION_DISABLE_PLUGINS blocks",
        "hint: take view out of DSH_SESSION_DISABLE_PLUGINS",
    ]
    off = _dsh(None, "demo", "--store", str(tmp_path / "s"),
               DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD="1")
    assert _failed(off, 1)[-1] == "hint: unset DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD"
    assert not (tmp_path / "s").exists()
    assert "view" not in _listed(_dsh(None, "--help",
                                      DSH_SESSION_DISABLE_PLUGINS=f"{_NOT_BATTERIES},view")
                                 .stdout)


def test_the_table_of_the_projects_plugins_is_what_they_add() -> None:
    """``--help`` lists the project's plugins' commands from core's table, without
    loading them: each plugin adds exactly its row, help included."""
    pm = create_plugin_manager(blocked=["example"])
    additions = Additions()
    assert PluginHooks(pm).register_commands(
        lambda plugin: CommandLine(additions, plugin)) == []
    installed = {name for name, plugin in pm.list_name_plugin()
                 if plugin is not None and name != "core"}
    assert installed == set(KNOWN_PLUGINS)  # every one is installed for the tests
    for name, (distribution, commands, formats) in KNOWN_PLUGINS.items():
        assert pm.distributions[name].distribution == distribution
        assert {c.name: c.help for c in additions.commands.values()
                if c.plugin == name} == commands, name
        assert tuple(f.name for f in additions.formats.values() if f.plugin == name) == formats
    # And the listing from the table is the one the plugins give when asked.
    rows = ("from dsh_session_core._cli.plugin_commands import command_rows; "
            "print(command_rows())")
    fast = subprocess.run([sys.executable, "-c", rows], capture_output=True, text=True,
                          check=True, env={**os.environ, "DSH_SESSION_DISABLE_PLUGINS":
                                           "example"}).stdout
    asked = subprocess.run([sys.executable, "-c", rows], capture_output=True, text=True,
                           check=True, env={**os.environ, "DSH_SESSION_DISABLE_PLUGINS":
                                            ""}).stdout
    assert fast == asked
    assert "'demo'" in fast
    assert "'view'" in fast


# --- a third party's -------------------------------------------------------------------------


_HELLO = '''\
from dsh_session_core import hookimpl
from dsh_session_core.cli import EXIT_OK, EXIT_USAGE, Failure, add_source_arguments, write


def _hello(args):
    if not args.name:
        raise Failure("--name is empty", EXIT_USAGE, hint="give a name")
    write(f"hello {args.name}\\n")
    return EXIT_OK


def _arguments(parser):
    parser.add_argument("--name", default="world", help="whom to greet")


def _shout(args):
    write(f"{args.source.upper()} -> {args.output or 'stdout'}\\n")
    return EXIT_OK


def _broken(parser):
    raise RuntimeError("the plugin's arguments are broken")


@hookimpl
def register_commands(cli):
    cli.add_command("hello", _hello, help="greet someone", arguments=_arguments,
                    description="Greets.", example="dsh-session hello --name Ada")
    cli.add_command("broken", _hello, help="cannot build its parser", arguments=_broken)
    cli.add_export_format("shout", _shout, help="the session, shouted")
'''

_CLASH = '''\
from dsh_session_core import hookimpl


@hookimpl
def register_commands(cli):
    cli.add_command("also", lambda args: 0, help="comes first")
    cli.add_command("ls", lambda args: 0, help="core has it")
'''


def _distribution(where: Path, name: str, module: str, text: str) -> Path:
    """A distribution installed in ``where``: its metadata with a ``dsh_session.plugins``
    entry point named ``name``, and its module."""
    info = where / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\n"
                                   f"Version: 0.1\nRequires-Dist: dsh-session-core\n")
    (info / "entry_points.txt").write_text(f"[dsh_session.plugins]\n{name} = {module}\n")
    (where / f"{module}.py").write_text(text)
    return where


def test_a_third_party_plugin_adds_a_command(tmp_path: Path) -> None:
    where = str(_distribution(tmp_path, "hello", "dsh_session_hello", _HELLO))
    listing = _dsh(None, "--help", PYTHONPATH=where, COLUMNS="100").stdout
    assert "    hello     greet someone\n" in listing
    assert _listed(listing) == [*COMMANDS, "broken", "demo", "hello", "view"]
    ran = _dsh(None, "hello", "--name", "Ada", PYTHONPATH=where)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "hello Ada\n", "")
    helped = _dsh(None, "hello", "--help", PYTHONPATH=where).stdout
    assert helped.startswith("usage: dsh-session hello [-h] [--name NAME]\n\nGreets.\n")
    assert helped.endswith("example:\n  dsh-session hello --name Ada\n")
    assert _failed(_dsh(None, "hello", "--name", "", PYTHONPATH=where), 2) == [
        "dsh-session: --name is empty", "hint: give a name"]
    wrong = _dsh(None, "hello", "--nme", "x", PYTHONPATH=where)
    assert wrong.returncode == 2
    assert "unrecognized arguments: --nme x" in wrong.stderr
    plugins = {r["name"]: r for r in
               msgspec.json.decode(_dsh(None, "plugins", "--json", PYTHONPATH=where).stdout)}
    assert plugins["hello"]["hooks"] == ["register_commands"]


def test_a_third_party_plugin_adds_an_export_format(tmp_path: Path) -> None:
    where = str(_distribution(tmp_path, "hello", "dsh_session_hello", _HELLO))
    shout = _dsh(None, "export", "--shout", "chat", "-o", "x", PYTHONPATH=where)
    assert (shout.returncode, shout.stdout) == (0, "CHAT -> x\n"), shout.stderr
    assert _failed(_dsh(None, "export", "--shout", "--json", "chat", PYTHONPATH=where),
                   2) == ["dsh-session: --shout and --json are two formats: pick one"]
    assert _failed(_dsh(None, "export", "--shout", "--html", "chat", PYTHONPATH=where),
                   2) == ["dsh-session: --shout and --html are two formats: pick one"]
    assert _failed(_dsh(None, "export", "-o", "x", "chat", PYTHONPATH=where), 2) == [
        "dsh-session: -o/--output goes with --html or --shout",
        "hint: JSONL and --json go to stdout: redirect it"]


def test_a_plugin_command_that_cannot_build_its_parser_fails_in_one_line(
        tmp_path: Path) -> None:
    where = str(_distribution(tmp_path, "hello", "dsh_session_hello", _HELLO))
    [line, hint] = _failed(_dsh(None, "broken", "--x", PYTHONPATH=where), 1)
    assert line.startswith("dsh-session: ")
    assert line.endswith("the plugin's arguments are broken")
    assert hint.startswith("hint: ")
    debug = _dsh(None, "--debug", "broken", PYTHONPATH=where)
    assert "Traceback" in debug.stderr
    assert debug.stderr.rstrip().endswith("RuntimeError: the plugin's arguments are broken")


def test_a_command_core_has_is_refused_naming_the_plugin(tmp_path: Path) -> None:
    where = str(_distribution(tmp_path, "clash", "dsh_session_clash", _CLASH))
    # The plugin's commands are refused when one is asked for; core's own run as ever.
    [line, hint] = _failed(_dsh(None, "also", PYTHONPATH=where), 1)
    assert line.startswith("dsh-session: ")
    assert line.endswith("plugin 'clash' adds the command 'ls', which is core's: rename it, "
                         "or block the plugin with DSH_SESSION_DISABLE_PLUGINS=clash")
    assert hint.startswith("hint: ")
    assert _dsh(None, "ls", "--store", str(tmp_path / "none"), PYTHONPATH=where).returncode == 1
    # A plugin whose hook fails adds nothing: its commands are not listed.
    listed = _listed(_dsh(None, "--help", PYTHONPATH=where).stdout)
    assert listed == [*COMMANDS, "demo", "view"]


@pytest.mark.parametrize(("call", "message"), [
    ("cli.add_command('Hello', run, help='x')", "adds a command named 'Hello': a name is"),
    ("cli.add_command('hello', run, help='')", "adds a command 'hello' without its help"),
    ("cli.add_command('hello', 'run', help='x')", "whose run is not callable"),
    ("cli.add_export_format('json', run, help='x')", "export --json is core's"),
    ("cli.add_command('view', run, help='x')", "which plugin 'view' added already"),
])
def test_what_a_plugin_adds_is_checked(call: str, message: str) -> None:
    from dsh_session_core.errors import PluginError

    additions = Additions()
    CommandLine(additions, "view").add_command("view", lambda args: 0, help="the viewer")
    namespace = {"cli": CommandLine(additions, "mine"), "run": lambda args: 0}
    with pytest.raises(PluginError, match=message) as refused:
        exec(textwrap.dedent(call), namespace)
    assert str(refused.value).startswith("plugin 'mine' ")
