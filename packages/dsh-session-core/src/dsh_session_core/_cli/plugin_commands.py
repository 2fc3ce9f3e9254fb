"""What plugins add to the ``dsh-session`` command line.

What plugins add to the ``dsh-session`` command line through the ``register_commands``
hook: commands, and formats of ``export`` (:class:`CommandLine` collects them,
:func:`plugin_additions` asks the installed plugins); which plugin commands ``--help``
lists (:func:`command_rows`); and what a command or format of the project's own
distributions says when it is not here (:func:`refusal`).

Core imports no other distribution: it knows the project's own plugins' commands only as
data (:data:`.commands.KNOWN_PLUGINS`), so that ``--help`` lists them without loading a
plugin (reading the installed entry points imports nothing: no ``re``, no ``typing``, no
pluggy, until a plugin must be asked) and a missing one names what to install.
"""

from __future__ import annotations

import os

from .commands import COMMANDS, KNOWN_PLUGINS
from .support import EXIT_REJECTED, Failure

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from .._plugins.entry_points import EntryPoint

    #: A command's body: the parsed arguments → the exit status.
    Run = Callable[[argparse.Namespace], int]
    #: Adds a command's arguments to its parser.
    Arguments = Callable[[argparse.ArgumentParser], None]

__all__ = [
    "Additions",
    "CommandLine",
    "ExportFormat",
    "PluginCommand",
    "command_rows",
    "plugin_additions",
    "refusal",
]

#: The options ``export`` has of its own: no format may take their names.
EXPORT_OPTIONS = frozenset({"json", "output", "store", "key-env", "file", "id", "help"})


class PluginCommand:
    """A command a plugin adds: ``dsh-session NAME``."""

    __slots__ = ("arguments", "description", "example", "help", "name", "plugin", "run")

    def __init__(self, name: str, run: Run, help: str, arguments: Arguments | None,
                 description: str | None, example: str | None, plugin: str) -> None:
        # A plain record (no dataclass: this module is on --help's path, which loads
        # nothing beyond what the interpreter has).
        self.name, self.run, self.help, self.plugin = name, run, help, plugin
        self.arguments, self.description, self.example = arguments, description, example


class ExportFormat:
    """A format a plugin adds to ``export``: ``dsh-session export --NAME SOURCE``."""

    __slots__ = ("help", "name", "plugin", "run")

    def __init__(self, name: str, run: Run, help: str, plugin: str) -> None:
        self.name, self.run, self.help, self.plugin = name, run, help, plugin


class Additions:
    """What the installed plugins added, by name, and the error that stopped asking them
    (``None`` when none did): it is raised when a command needs what is missing."""

    __slots__ = ("commands", "error", "formats")

    def __init__(self) -> None:
        self.commands: dict[str, PluginCommand] = {}
        self.formats: dict[str, ExportFormat] = {}
        self.error: Exception | None = None


def _well_named(name: object) -> bool:
    """A command's or format's name: lowercase ASCII letters, digits and inner hyphens,
    starting with a letter (``view``, ``export-html``)."""
    return (isinstance(name, str) and name[:1].isascii() and name[:1].islower()
            and not name.endswith("-") and "--" not in name
            and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in name))


class CommandLine:
    """The ``dsh-session`` command line, as a plugin's ``register_commands(cli)`` is given
    it: bound to that plugin, so that what it adds is known as its own.

    A plugin adds what it has and nothing else; how ``--help`` lays a command out, how a
    failure is shown and with which exit status, stay core's (:mod:`dsh_session_core.cli`).
    """

    __slots__ = ("_additions", "_plugin")

    def __init__(self, additions: Additions, plugin: str) -> None:
        self._additions = additions
        self._plugin = plugin

    def _refuse(self, what: str) -> None:
        from ..errors import PluginError

        msg = f"plugin {self._plugin!r} {what}"
        raise PluginError(msg)

    def _check(self, kind: str, name: str, run: object, help: object) -> None:
        if not _well_named(name):
            self._refuse(f"adds {kind} named {name!r}: a name is lowercase letters, digits "
                         f"and hyphens, starting with a letter")
        if not callable(run):
            self._refuse(f"adds {kind} {name!r} whose run is not callable: {run!r}")
        if not isinstance(help, str) or not help.strip() or "\n" in help.strip():
            self._refuse(f"adds {kind} {name!r} without its help: one line, for --help")

    def add_command(self, name: str, run: Run, *, help: str,
                    arguments: Arguments | None = None, description: str | None = None,
                    example: str | None = None) -> None:
        """Add ``dsh-session NAME``.

        :param name: the command's name (lowercase letters, digits and hyphens).
        :param run: runs it: called with the parsed arguments (an
            :class:`argparse.Namespace`), returns the exit status. Raise
            :class:`~dsh_session_core.cli.Failure` to stop with one line and a hint.
        :param help: its one line in ``dsh-session --help``.
        :param arguments: adds its arguments to its parser (an
            :class:`argparse.ArgumentParser` core made, with core's layout); called only
            when that parser is built, when the command runs or its help is shown.
        :param description: the paragraph its own ``--help`` opens with.
        :param example: a command line its ``--help`` ends with, starting with
            ``dsh-session NAME``.
        :raises PluginError: a bad name or help, or a name core or another plugin has.
        """
        self._check("a command", name, run, help)
        if name in COMMANDS:
            self._refuse(f"adds the command {name!r}, which is core's: rename it, or block "
                         f"the plugin with DSH_SESSION_DISABLE_PLUGINS={self._plugin}")
        taken = self._additions.commands.get(name)
        if taken is not None:
            self._refuse(f"adds the command {name!r}, which plugin {taken.plugin!r} added "
                         f"already: uninstall one of them, or block it with "
                         f"DSH_SESSION_DISABLE_PLUGINS")
        self._additions.commands[name] = PluginCommand(
            name, run, help.strip(), arguments, description, example, self._plugin)

    def add_export_format(self, name: str, run: Run, *, help: str) -> None:
        """Add ``dsh-session export --NAME SOURCE [-o FILE]``: ``export``'s SOURCE
        arguments (``--store``, ``--file``/``--id``...) and ``-o``/``--output`` (``None``
        when not given: write to stdout) are core's, parsed before ``run`` is called with
        them; ``--NAME`` with ``--json`` is refused before it is.

        :param name: the format's name, its option without ``--``.
        :param run: writes the export: called with the parsed arguments, returns the exit
            status.
        :param help: the option's help in ``dsh-session export --help``.
        :raises PluginError: a bad name or help, or a name ``export`` or another plugin
            has.
        """
        self._check("an export format", name, run, help)
        if name in EXPORT_OPTIONS:
            self._refuse(f"adds the export format {name!r}: export --{name} is core's")
        taken = self._additions.formats.get(name)
        if taken is not None:
            self._refuse(f"adds the export format {name!r}, which plugin {taken.plugin!r} "
                         f"added already: uninstall one of them, or block it with "
                         f"DSH_SESSION_DISABLE_PLUGINS")
        self._additions.formats[name] = ExportFormat(name, run, help.strip(), self._plugin)


#: The last answer of :func:`plugin_additions`: the manager it asked, its generation then,
#: and what its plugins added.
_ASKED: list[tuple[object, int, Additions]] = []


def plugin_additions() -> Additions:
    """What the installed plugins add to the command line: each plugin's
    ``register_commands`` called once per state of the process's plugin manager (a
    plugin registered on it by hand is asked too). Plugins that cannot be loaded leave
    :attr:`Additions.error` set; a plugin whose hook raises adds nothing, and the first
    such error is :attr:`Additions.error` (what the others added is kept)."""
    from .._plugins.manager import PluginHooks
    from .support import plugin_manager

    additions = Additions()
    try:
        pm = plugin_manager()
    except Exception as exc:  # raised again, one line, by the command that needs it
        additions.error = exc
        return additions
    if _ASKED and _ASKED[0][0] is pm and _ASKED[0][1] == pm.generation:
        return _ASKED[0][2]
    failed = PluginHooks(pm).register_commands(lambda plugin: CommandLine(additions, plugin))
    for plugin, _ in failed:  # all or nothing: a plugin half-added is not offered
        additions.commands = {k: c for k, c in additions.commands.items()
                              if c.plugin != plugin}
        additions.formats = {k: f for k, f in additions.formats.items()
                             if f.plugin != plugin}
    if failed:
        additions.error = failed[0][1]
    _ASKED[:] = [(pm, pm.generation, additions)]
    return additions


def _entry_points() -> tuple[list[EntryPoint], set[str], bool]:
    """The ``dsh_session.plugins`` entry points installed, the names blocked
    (``DSH_SESSION_DISABLE_PLUGINS``), and whether entry points are loaded at all
    (``DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD``): read from the installed metadata,
    importing nothing."""
    from .._base.names import DISABLE_AUTOLOAD_ENV, DISABLE_PLUGINS_ENV, ENTRY_POINT_GROUP
    from .._plugins.entry_points import blocked_names, find_entry_points

    blocked = set(blocked_names(os.environ.get(DISABLE_PLUGINS_ENV, "")))
    return (find_entry_points(ENTRY_POINT_GROUP), blocked,
            not os.environ.get(DISABLE_AUTOLOAD_ENV))


def _known(entry: EntryPoint) -> bool:
    known = KNOWN_PLUGINS.get(entry.name)
    return known is not None and known[0] == entry.distribution


def command_rows() -> list[tuple[str, str]]:
    """``(name, help)`` of every command the installed plugins add, by name, as
    ``--help`` lists them: read from :data:`.commands.KNOWN_PLUGINS` when every plugin
    that loads is one of the project's own (nothing is imported), else from the plugins
    (loaded and asked; one that fails lists what the others added)."""
    found, blocked, autoload = _entry_points()
    loaded = [entry for entry in found if entry.name not in blocked] if autoload else []
    if all(_known(entry) for entry in loaded):
        rows = [row for entry in loaded
                for row in KNOWN_PLUGINS[entry.name][1].items()]
    else:
        rows = [(c.name, c.help) for c in plugin_additions().commands.values()]
    return sorted(dict(rows).items())


def refusal(name: str, *, export_format: bool = False) -> Run | None:
    """How ``dsh-session NAME`` (or ``export --NAME``) runs when no plugin added it: it
    raises the error that stopped asking the plugins, or says that the project's
    distribution that adds it is not installed, or not loaded (blocked); ``None`` when no
    known plugin adds it (an unknown command: argparse names the choices)."""
    what = f"dsh-session export --{name}" if export_format else f"dsh-session {name}"
    error = plugin_additions().error
    owner = next((entry for entry, (_, commands, formats) in KNOWN_PLUGINS.items()
                  if name in (formats if export_format else commands)), None)
    if error is None and owner is None:
        return None

    def run(args: argparse.Namespace) -> int:
        if error is not None:
            raise error
        assert owner is not None
        distribution = KNOWN_PLUGINS[owner][0]
        found, blocked, autoload = _entry_points()
        if not any(e.name == owner and e.distribution == distribution for e in found):
            msg = f"{what} needs {distribution}, which is not installed"
            raise Failure(msg, EXIT_REJECTED, hint=f"pip install {distribution}")
        if not autoload:
            msg = (f"{what} is added by the plugin {owner!r} ({distribution}), and no "
                   f"plugin is loaded: DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD is set")
            raise Failure(msg, EXIT_REJECTED, hint="unset DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD")
        if owner in blocked:
            msg = (f"{what} is added by the plugin {owner!r} ({distribution}), which "
                   f"DSH_SESSION_DISABLE_PLUGINS blocks")
            raise Failure(msg, EXIT_REJECTED,
                          hint=f"take {owner} out of DSH_SESSION_DISABLE_PLUGINS")
        msg = f"{what}: the plugin {owner!r} ({distribution}) is loaded but does not add it"
        raise Failure(msg, EXIT_REJECTED, hint=f"reinstall {distribution}")

    return run
