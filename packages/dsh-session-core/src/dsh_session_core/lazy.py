"""Lazy package exports (PEP 562), for plugin packages.

A package's public names load on first use.

Core and the plugin packages use it so that loading a plugin through its entry point,
or starting the ``dsh-session`` command, does not import what it does not use. A
plugin's ``__init__.py``::

    import typing as _typing

    from dsh_session_core.lazy import lazy_exports as _lazy_exports

    if _typing.TYPE_CHECKING:  # type checkers see the real imports
        from ._service import Service

    _LAZY = {"Service": "._service"}
    __all__ = ["Service"]
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)

Import it under a private name, as above: a package's namespace should hold its
``__all__`` and nothing else public. The three lists name the same names, each from the
same module; keep ``__all__`` a literal list all the same, not one built from the table:
a strict type checker (mypy's ``no_implicit_reexport``) takes an imported name as
exported only when a literal ``__all__`` lists it, so ``from package import Service``
would fail to type-check. (This project's tests/meta/test_lazy_exports.py checks the
three lists against each other in every package of it.) This module imports nothing heavy (not even
``typing``), so the ``dsh-session`` command can use it at startup.
"""

from __future__ import annotations

import sys

# Every ``import dsh_session_core`` runs this module: the annotations' types (and
# importlib, until a name is first used) are not imported at run time, which saves about
# 3 ms of collections.abc and warnings.
_TYPE_CHECKING = False
if _TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    table: Mapping[str, str],
    names: Iterable[str],
    *,
    distribution: str | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names load lazily::

        __getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)

    :param package: the package's ``__name__``.
    :param table: public name → the relative module that defines it (``".name"`` for a
        submodule of that name).
    :param names: the package's ``__all__``, listed by ``dir()``.
    :param distribution: answer ``__version__`` with this distribution's version.
    """
    listed = tuple(names)

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            if name == "__version__" and distribution is not None:
                from importlib.metadata import version

                return version(distribution)
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        from importlib import import_module

        imported = import_module(module, package)
        value = imported if module == f".{name}" else getattr(imported, name)
        vars(sys.modules[package])[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *listed})

    return __getattr__, __dir__
