"""docs/layout.md's maps of core and of the viewer are their trees, so that the page
stays true:

- a map names every module (and every file of the page the viewer serves) of its
  package, and nothing that does not exist;
- core's map lists each folder's entries in the layer order of
  :data:`test_layers.LAYERS`, lowest first.

A map is the ``text`` block under its ``## Inside ...`` heading. A line whose first word
is a folder (``name/``) or a file (``name.py``, ``name.js``...) is an entry, under the
folder above it with less indentation; a folder's line stands for its ``__init__.py``.
Each rule is a function over a page and a tree, so the tests show it fails on a page
that breaks it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from test_layers import CORE, CORE_SRC, _rank

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "layout.md"
VIEW_SRC = Path("packages/dsh-session-view/src/dsh_session_view")
#: The files a map names: modules, and the viewer's page.
MAPPED = (".py", ".js", ".html", ".css")
_ENTRY = re.compile(r"(?P<indent> *)(?P<name>[\w.-]+(?:/|\.(?:py|js|html|css)))(?: {2,}.*)?$")


def map_block(page: str, heading: str) -> str:
    """The ``text`` block that follows ``heading`` on the page."""
    at = ("\n" + page).index(f"\n{heading}\n")
    start = page.index("```text\n", at) + len("```text\n")
    return page[start:page.index("```", start)]


def map_entries(block: str) -> list[str]:
    """The paths a map names, in its order, relative to the folder on its first line
    (folders end with ``/``)."""
    parents: list[tuple[int, str]] = []
    found: list[str] = []
    for line in block.splitlines():
        m = _ENTRY.match(line)
        if m is None:
            continue
        indent, name = len(m["indent"]), m["name"]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (parents[-1][1] if parents else "") + name
        if name.endswith("/"):
            parents.append((indent, path))
        found.append(path)
    root = found[0]
    return [path.removeprefix(root) for path in found[1:]]


def tree_files(package: Path) -> set[str]:
    """Every mapped file of the package, a package's ``__init__.py`` as its folder."""
    found = set()
    for path in package.rglob("*"):
        if path.suffix not in MAPPED or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(package).as_posix()
        if relative.endswith("/__init__.py"):
            relative = relative.removesuffix("__init__.py")
        found.add(relative)
    return found


def map_differences(page: str, heading: str, package: Path) -> tuple[list[str], list[str]]:
    """What the tree holds and the map does not name, and what the map names and the
    tree does not hold (a folder counts as held when it holds a mapped file)."""
    named = set(map_entries(map_block(page, heading)))
    held = tree_files(package)
    folders = {path[: i + 1] for path in held for i, c in enumerate(path) if c == "/"}
    return sorted(held - named), sorted(named - held - folders)


def _dotted(path: str) -> str:
    return path.removesuffix("/").removesuffix(".py").replace("/", ".")


def out_of_layer_order(entries: list[str]) -> Iterator[str]:
    """Each entry listed after a sibling of a higher layer, as ``entry (after sibling)``."""
    last: dict[str, tuple[int, str]] = {}  # folder -> (highest layer so far, its entry)
    for path in entries:
        rank = _rank(_dotted(path))
        if rank is None:  # the package itself, __main__: above every room
            continue
        folder = path.removesuffix("/").rpartition("/")[0]
        top = last.get(folder)
        if top is not None and rank < top[0]:
            yield f"{path} (after {top[1]})"
        elif top is None or rank > top[0]:
            last[folder] = (rank, path)


# --- the page as it is ----------------------------------------------------------------------


def test_the_core_map_names_every_module_of_core_and_nothing_else() -> None:
    missing, unknown = map_differences(PAGE.read_text(), "## Inside core",
                                       ROOT / CORE_SRC / CORE)
    assert (missing, unknown) == ([], [])


def test_the_viewer_map_names_every_module_and_page_file_and_nothing_else() -> None:
    missing, unknown = map_differences(PAGE.read_text(), "## Inside the viewer",
                                       ROOT / VIEW_SRC)
    assert (missing, unknown) == ([], [])


def test_the_core_map_lists_the_rooms_in_layer_order() -> None:
    entries = map_entries(map_block(PAGE.read_text(), "## Inside core"))
    # The walk sees the nesting: the rooms of _persistence/ and a module of a subroom.
    assert "_persistence/backends/jsonl/backend.py" in entries
    assert list(out_of_layer_order(entries)) == []


# --- each rule bites -------------------------------------------------------------------------

_PAGE = """\
## Inside core

```text
dsh_session_core/
  __init__.py    the public names
  _base/         the base room
    names.py       fixed names
  _model/        the model
    session.py     the Session: a line that goes on
                   past its first line (a continuation, not an entry)
  _persistence/  persistence
    backends/      the backends
      gone.py        a module the tree does not hold
```
"""


def _plant(root: Path, *relatives: str) -> Path:
    package = root / CORE
    for relative in relatives:
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return package


def test_a_module_missing_from_the_map_or_named_by_it_alone_is_caught(
        tmp_path: Path) -> None:
    package = _plant(tmp_path, "__init__.py", "_base/__init__.py", "_base/names.py",
                     "_model/__init__.py", "_model/session.py", "_persistence/__init__.py",
                     "_persistence/backends/__init__.py", "_persistence/backends/gone.py")
    assert map_differences(_PAGE, "## Inside core", package) == ([], [])
    (package / "_persistence/backends/gone.py").unlink()
    _plant(tmp_path, "_model/surface.py", "_persistence/store/__init__.py")
    assert map_differences(_PAGE, "## Inside core", package) == (
        ["_model/surface.py", "_persistence/store/"], ["_persistence/backends/gone.py"])


def test_an_entry_below_a_sibling_of_a_higher_layer_is_caught() -> None:
    entries = map_entries(map_block(_PAGE, "## Inside core"))
    assert entries == ["__init__.py", "_base/", "_base/names.py", "_model/",
                       "_model/session.py", "_persistence/", "_persistence/backends/",
                       "_persistence/backends/gone.py"]
    assert list(out_of_layer_order(entries)) == []
    swapped = _PAGE.replace("  _base/         the base room\n    names.py       fixed names\n",
                            "").replace("  _persistence/  persistence\n",
                                        "  _persistence/  persistence\n  _base/  the base\n")
    entries = map_entries(map_block(swapped, "## Inside core"))
    assert list(out_of_layer_order(entries)) == ["_base/ (after _persistence/)"]
