"""``dsh-session plugins`` and ``events``: what is installed, and the event catalog."""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import EXIT_OK, EXIT_REJECTED, Failure, plugin_manager, registry, write

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any


# What the commands run is imported in the functions that run it: `dsh-session plugins
# --help` imports this module to build the parser with argparse alone, and `--version`
# needs only version_text's own imports (not the catalog's).

__all__ = ["add_commands", "installed_distributions", "own_version", "version_text"]

#: The distribution this package ships in.
CORE_DISTRIBUTION = "dsh-session-core"

CATALOG = "docs/persistence-catalog.md"


def _plugin_rows() -> list[dict[str, Any]]:
    from .._base.names import ENTRY_POINT_GROUP

    pm = plugin_manager()
    reg = registry()
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue  # blocked
        dist = pm.distributions.get(name)
        hooks = sorted(
            caller.name for caller in pm.get_hookcallers(plugin) or ()
            if caller.name != "add_hookspecs" or name != "core"
        )
        rows.append({
            "name": name,
            "distribution": dist.distribution if dist is not None else CORE_DISTRIBUTION,
            "version": dist.version if dist is not None else own_version(),
            "source": f"entry point in {ENTRY_POINT_GROUP}" if dist is not None else "built in",
            "hooks": hooks,
            "event_types": sorted(r.type for r in reg if r.plugin == name),
        })
    return rows


def own_version() -> str:
    """The installed version of dsh-session-core (``"unknown"`` when it runs from a
    source tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(CORE_DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def _normalized(name: str) -> str:
    """A distribution's name as packaging compares them (PEP 503)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> list[tuple[str, str]]:
    """Every installed distribution of dsh-session's, as (name, version), by name: those
    whose name starts with ``dsh-session`` (core, the plugins, the viewer, the batteries,
    the integrations) and any other that depends on dsh-session-core (a third party's
    plugin or backend). Read from the installed metadata (nothing is imported); where
    one is installed twice on the path, the first, as :mod:`importlib.metadata` finds it."""
    import re
    from importlib.metadata import distributions

    found: dict[str, tuple[str, str]] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        if not isinstance(name, str) or _normalized(name) in found:
            continue
        ours = _normalized(name).startswith("dsh-session")
        if not ours:
            for requirement in dist.requires or ():
                match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
                if match and _normalized(match[1]) == CORE_DISTRIBUTION:
                    ours = True
                    break
        if ours:
            found[_normalized(name)] = (name, dist.version)
    return [found[key] for key in sorted(found)]


def _distribution_lines() -> list[str]:
    """``--version``'s last part: every installed distribution of dsh-session's."""
    try:
        installed = installed_distributions()
    except Exception as exc:  # broken metadata must not hide the rest
        return [f"distributions: cannot be listed ({exc})"]
    if not installed:  # run from a source tree that was never installed
        return ["distributions: none installed"]
    width = max(len(name) for name, _ in installed)
    return ["distributions:", *(f"  {name:<{width}}  {version}" for name, version in installed)]


def version_text() -> str:
    """What ``dsh-session --version`` prints: core's version and Python's, then one line
    per installed plugin (name, distribution, version), as ``plugins`` lists them, then
    every installed distribution of dsh-session's with its version
    (:func:`installed_distributions`: the viewer, the batteries and the integrations
    too, which are no plugins)."""
    import platform

    lines = [f"{CORE_DISTRIBUTION} {own_version()} (Python {platform.python_version()})"]
    plugins = sorted((row for row in _plugin_rows() if row["name"] != "core"),
                     key=lambda row: str(row["name"]))
    if not plugins:
        lines.append("plugins: none installed (core alone)")
    else:
        lines.append("plugins:")
        width = max(len(row["name"]) for row in plugins)
        for row in plugins:
            lines.append(f"  {row['name']:<{width}}  {row['distribution']} {row['version']}")
    lines += _distribution_lines()
    return "\n".join(lines) + "\n"


def _plugins(args: argparse.Namespace) -> int:
    from .._schema.codec import encode_line

    rows = _plugin_rows()
    if args.json:
        write(encode_line(rows) + b"\n")
        return EXIT_OK
    if len(rows) == 1:
        write("no plugins installed (entry-point group dsh_session.plugins): core alone; "
              "pip install dsh-session-compact (or -hooks, -mode, -todo), or dsh-session "
              "for all four\n")
    for row in rows:
        write(f"{row['name']}  ({row['distribution']} {row['version']}, {row['source']})\n")
        write(f"    hooks:       {', '.join(row['hooks']) or '-'}\n")
        write(f"    event types: {', '.join(row['event_types']) or '-'}\n")
    return EXIT_OK


def _events(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._schema.catalog import event_rows, member_rows, payload_schemas, render_catalog
    from .._schema.codec import encode_line

    reg = registry()
    if args.check is not None:
        path = Path(args.check)
        expected = render_catalog(reg)
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != expected:
            msg = f"{path} is stale (it does not list the installed plugins' event types)"
            hint = f"regenerate it with `dsh-session events --markdown > {path}` and commit it"
            raise Failure(msg, EXIT_REJECTED, hint=hint)
        write(f"{path} is up to date.\n")
        return EXIT_OK
    if args.markdown:
        write(render_catalog(reg))
    elif args.vocabulary:
        from .._schema.vocabulary_doc import render_vocabulary

        write(render_vocabulary(reg))
    elif args.schema:
        write(encode_line(payload_schemas(reg)) + b"\n")
    elif args.json:
        rows = {"events": event_rows(reg), "unions": member_rows(reg)}
        write(encode_line(rows) + b"\n")
    else:
        from .term import terminal_width

        width = terminal_width()
        for row in event_rows(reg):
            badge = "surface" if row["surface"] else "log-only"
            write(_wrapped(f"{row['type']:<22} {badge:<8}  {row['plugin']:<8}  ",
                           row["doc"], width))
        write("\nunion members:\n")
        for member in member_rows(reg):
            write(_wrapped(f"{member['union']:<16} {member['tag']:<16} "
                           f"{member['plugin']:<8}  ", member["doc"], width))
    return EXIT_OK


def _wrapped(prefix: str, doc: str, width: int) -> str:
    """``prefix`` then ``doc`` wrapped to ``width`` columns, its continuation lines under
    its first (as ``show`` wraps its lines); a long prefix leaves the doc 30 at least."""
    import textwrap

    lines = textwrap.wrap(doc, max(30, width - len(prefix)), break_on_hyphens=False,
                          break_long_words=False) or [""]
    indent = " " * len(prefix)
    return prefix + f"\n{indent}".join(lines) + "\n"


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plugins = sub.add_parser("plugins", help=HELP["plugins"])
    plugins.add_argument("--json", action="store_true", help="print JSON")
    plugins.set_defaults(run=_plugins)

    events = sub.add_parser("events", help=HELP["events"])
    mode = events.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="print JSON rows")
    mode.add_argument("--markdown", action="store_true", help="print the event catalog")
    mode.add_argument(
        "--vocabulary", action="store_true",
        help="print the vocabulary reference: every struct, with Python and wire names",
    )
    mode.add_argument(
        "--check", nargs="?", const=CATALOG, metavar="PATH",
        help=f"exit 1 when the committed catalog (default {CATALOG}) is stale",
    )
    mode.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of every payload"
    )
    events.set_defaults(run=_events)
