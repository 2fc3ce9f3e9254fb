"""Finding the ``dsh_session.plugins`` entry points without importlib.metadata.

importlib.metadata costs about 40 ms to import and scan (it parses every distribution's
metadata with the email package); every command that needs the registry would pay it.
Installed distributions keep their entry points in ``<dist>.dist-info/entry_points.txt``
on ``sys.path``; reading just those files, in path order, takes a millisecond. Anything
unusual (a zip file on ``sys.path``) falls back to importlib.metadata.

``dsh-session --help`` reads them too (to list the commands of the installed plugins),
so this module imports nothing but ``os`` and ``sys``: no ``re``, no ``dataclasses``
(which imports ``inspect``), no ``typing``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["EntryPoint", "blocked_names", "find_entry_points"]


class EntryPoint:
    """One entry point: ``name = module:attr`` from ``distribution`` at ``version``
    (immutable, compared and hashed by its four fields)."""

    __slots__ = ("distribution", "name", "value", "version")

    name: str
    value: str
    distribution: str
    version: str

    def __init__(self, name: str, value: str, distribution: str, version: str) -> None:
        for field, given in (("name", name), ("value", value),
                             ("distribution", distribution), ("version", version)):
            object.__setattr__(self, field, given)

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"cannot assign to field {name!r}"
        raise AttributeError(msg)

    def _fields(self) -> tuple[str, str, str, str]:
        return (self.name, self.value, self.distribution, self.version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntryPoint):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"EntryPoint(name={self.name!r}, value={self.value!r}, "
                f"distribution={self.distribution!r}, version={self.version!r})")

    def load(self) -> object:
        """Import the module (and attribute) the entry point names."""
        import importlib

        module, _, attr = self.value.partition(":")
        target: object = importlib.import_module(module.strip())
        for part in filter(None, attr.strip().split(".")):
            target = getattr(target, part)
        return target


def _normalized(name: str) -> str:
    """``name`` with each run of ``-``, ``_`` and ``.`` made one ``_``, lowercased (as
    ``re.sub(r"[-_.]+", "_", name).lower()``)."""
    out: list[str] = []
    for char in name.lower():
        if char in "-_.":
            if not out or out[-1] != "_":
                out.append("_")
        else:
            out.append(char)
    return "".join(out)


def blocked_names(raw: str) -> list[str]:
    """The plugin names of a ``DSH_SESSION_DISABLE_PLUGINS`` value, separated by commas
    or white space."""
    return raw.replace(",", " ").split()


def _metadata(dist_dir: str) -> tuple[str, str]:
    """(Name, Version) from the METADATA (or PKG-INFO) header, read to its first blank line."""
    name = version = ""
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(dist_dir, filename), encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
        except OSError:
            continue
        break
    return name, version


def _group(text: str, group: str) -> list[tuple[str, str]]:
    """``name = value`` pairs of one section of an entry_points.txt (INI format)."""
    found: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found


def _with_importlib(group: str) -> list[EntryPoint]:
    import importlib.metadata

    return [
        EntryPoint(
            ep.name,
            ep.value,
            ep.dist.metadata["Name"] if ep.dist is not None else "",
            ep.dist.version if ep.dist is not None else "",
        )
        for ep in importlib.metadata.entry_points(group=group)
    ]


#: The last answer of each group, and what it was read from: the ``sys.path`` folders
#: with their modification times (a distribution installed or removed changes its
#: folder's) and every ``entry_points.txt`` read with its own (one rewritten in place,
#: an editable reinstall, changes that). Checked by ``stat`` calls, not by listing and
#: reading: opening a store costs a few hundred microseconds, not milliseconds.
_CACHE: dict[str, tuple[tuple[object, ...], list[EntryPoint]]] = {}


def _stamp(path: str) -> object:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def find_entry_points(group: str) -> list[EntryPoint]:
    """Every entry point of ``group`` of the distributions on ``sys.path``, in path order
    and by name within a folder (a distribution found twice counts once, where it is
    found first, as importlib does). The order is the plugins' registration order: sorted,
    it is the same on every machine, whatever order the file system lists folders in.
    Read again only when a folder or file it was read from changed (:data:`_CACHE`)."""
    cached = _CACHE.get(group)
    if cached is not None:
        key, found = cached
        if key == _key(tuple(sys.path), key[1]):  # type: ignore[arg-type]
            return list(found)
    read: list[str] = []
    fresh = _find(group, read)
    if fresh is None:
        return _with_importlib(group)
    _CACHE[group] = (_key(tuple(sys.path), tuple(read)), fresh)
    return list(fresh)


def _key(path: tuple[str, ...], read: tuple[str, ...]) -> tuple[object, ...]:
    """What an answer was read from, and the state it was in."""
    return (path, read, tuple(_stamp(entry or ".") for entry in path),
            tuple(_stamp(f) for f in read))


def _find(group: str, read: list[str]) -> list[EntryPoint] | None:
    """:func:`find_entry_points`, read from the files (``read``: those it read);
    ``None`` for a zip on ``sys.path`` (importlib reads it)."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.isfile(folder):  # a zip on sys.path: let importlib read it
                return None
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            dist_dir = os.path.join(folder, name)
            key = _normalized(name.rsplit(".", 1)[0].split("-", 1)[0])
            if key in seen:
                continue
            seen.add(key)
            where = os.path.join(dist_dir, "entry_points.txt")
            try:
                with open(where, encoding="utf-8") as f:
                    pairs = _group(f.read(), group)
            except OSError:
                continue
            read.append(where)
            if pairs:
                dist_name, version = _metadata(dist_dir)
                found.extend(EntryPoint(n, v, dist_name, version) for n, v in pairs)
    return found
