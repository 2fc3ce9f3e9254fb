"""The page's files (``static/``: ``index.html``, ``app.css``, and ``app.js`` with the ES
modules it imports), shipped as package data and read once; and the modules bundled into
one classic script for the exported file (:func:`page_script`).

An exported file is opened from ``file://``, where browsers refuse to load module scripts
(and its policy allows no file but itself), so it cannot import anything. The bundle
keeps the modules' scopes apart without a parser: each module becomes a function whose
body is the module's text with its ``import`` lines turned into ``const`` bindings of the
modules it imports and ``export`` dropped from its declarations, returning its exports.
That works for the forms the page's modules are written in, and :func:`bundle` refuses
any other (:class:`BundleError`): one import a line, ``import { a, b } from "./x.js";``,
and ``export`` only before ``function``, ``async function``, ``const`` or ``class`` at
the start of a line.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ENTRY", "BundleError", "bundle", "page_files", "page_script", "static_file"]

#: The page's entry module: what ``index.html`` loads, and where the bundle starts.
ENTRY: Final = "app.js"

#: The content type of each kind of file ``/static/`` serves.
_TYPES: Final = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

_NAME: Final = r"[A-Za-z_$][\w$]*"
_MODULE: Final = re.compile(r"[a-z][a-z0-9_]*\.js")
_IMPORT: Final = re.compile(
    rf'import \{{ ?({_NAME}(?:, ?{_NAME})*) ?\}} from "\./([^"]+)";')
_EXPORT: Final = re.compile(rf"export (?=(?:async function|function|const|class) ({_NAME})\b)")
#: A line that is (or starts) an import or export statement, in any form.
_STATEMENT: Final = re.compile(r"\s*(?:import|export)\b")
#: What a module might reach through ``import`` other than a static import line.
_DYNAMIC: Final = re.compile(r"\bimport\s*[(.]")
#: The bundle's names of the modules; no module may use the prefix itself.
_PREFIX: Final = "__dsh_module_"


class BundleError(ValueError):
    """A module the bundle cannot hold: a form of import or export it does not rewrite,
    a module or a name that is not there, or an import cycle."""


@functools.cache
def static_file(name: str) -> bytes:
    """The bytes of one of the page's files."""
    return (resources.files(__package__ or "dsh_session_view") / "static" / name).read_bytes()


@functools.cache
def page_files() -> dict[str, str]:
    """The files ``/static/<name>`` serves (the page's modules and its style), each name
    with its content type; no other name is served."""
    folder = resources.files(__package__ or "dsh_session_view") / "static"
    found = {}
    for entry in folder.iterdir():
        suffix = PurePosixPath(entry.name).suffix
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = _TYPES[suffix]
    return dict(sorted(found.items()))


@functools.cache
def page_script() -> bytes:
    """The page's modules as the one script of an exported file."""
    names = [name for name in page_files() if name.endswith(".js")]
    sources = {name: static_file(name).decode("utf-8") for name in names}
    return bundle(sources).encode("utf-8")


class _Module:
    """One module's text split into what the bundle needs: its imports (module, names),
    its exported names, and its body with both rewritten."""

    def __init__(self, name: str, text: str) -> None:
        if _PREFIX in text:
            msg = f"{name}: {_PREFIX!r} is the bundle's, not a module's"
            raise BundleError(msg)
        if _DYNAMIC.search(text):
            msg = f"{name}: import() and import.meta cannot be bundled"
            raise BundleError(msg)
        self.imports: list[tuple[str, list[str]]] = []
        self.exports: list[str] = []
        lines: list[str] = []
        imported: set[str] = set()
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{name}:{number}"
            if found := _IMPORT.fullmatch(line):
                module, names = found.group(2), found.group(1).replace(" ", "").split(",")
                if not _MODULE.fullmatch(module):
                    msg = f'{where}: modules are imported as "./name.js", not {module!r}'
                    raise BundleError(msg)
                if imported & set(names) or len(set(names)) < len(names):
                    msg = f"{where}: a name imported twice"
                    raise BundleError(msg)
                imported.update(names)
                self.imports.append((module, names))
                lines.append(f"const {{ {', '.join(names)} }} = {_binding(module)};")
            elif found := _EXPORT.match(line):
                if found.group(1) in self.exports:
                    msg = f"{where}: {found.group(1)} is exported twice"
                    raise BundleError(msg)
                self.exports.append(found.group(1))
                lines.append(line[found.end():])
            elif _STATEMENT.match(line):
                msg = (f'{where}: the bundle takes `import {{ a, b }} from "./x.js";` and '
                       f"`export function|async function|const|class NAME` at the start "
                       f"of a line, not {line.strip()!r}")
                raise BundleError(msg)
            else:
                lines.append(line)
        self.body = lines


def _binding(module: str) -> str:
    return _PREFIX + module.removesuffix(".js")


def bundle(sources: Mapping[str, str], entry: str = ENTRY) -> str:
    """The modules ``sources`` (name to text) that ``entry`` imports, directly or not, and
    ``entry`` itself, as one classic script: each module evaluated once, after the ones
    it imports, in a scope of its own, as a browser would load them.

    :raises BundleError: a module not written in the forms the bundle rewrites, an
        import of a module or a name that is not there, or an import cycle.
    """
    modules: dict[str, _Module] = {}
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            msg = "import cycle: " + " -> ".join((*path[path.index(name):], name))
            raise BundleError(msg)
        if name in modules:
            return
        if name not in sources or not _MODULE.fullmatch(name):
            msg = (f"{path[-1] + ' imports' if path else 'the entry is'} {name!r}, which "
                   f"is not one of the modules")
            raise BundleError(msg)
        module = modules[name] = _Module(name, sources[name])
        for imported, names in module.imports:
            visit(imported, (*path, name))
            missing = [n for n in names if n not in modules[imported].exports]
            if missing:
                msg = (f"{name} imports {', '.join(missing)} from {imported}, which does "
                       f"not export it")
                raise BundleError(msg)
        order.append(name)

    visit(entry, ())
    out = ["// The page's modules as one script (dsh_session_view/_static.py bundles them",
           "// for an exported file, which cannot load modules).",
           "(function () {", '"use strict";']
    for name in order:
        module = modules[name]
        out.append(f"// --- {name}")
        head = f"const {_binding(name)} = " if module.exports else ""
        out.append(head + "(function () {")
        out.extend(module.body)
        if module.exports:
            out.append("return { " + ", ".join(module.exports) + " };")
        out.append("})();")
    out.append("})();")
    return "\n".join(out) + "\n"
