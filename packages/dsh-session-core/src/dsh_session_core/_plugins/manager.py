"""Plugin discovery and the typed facade over pluggy.

:func:`create_plugin_manager` builds a manager with no import-time side effects: it adds
the hookspecs, registers core's own event types, applies the block list, refuses
entry-point name clashes, then loads the ``dsh_session.plugins`` group. :class:`PluginHooks`
is the only code that calls hooks; everything else gets typed results from it.
"""

from __future__ import annotations

import os
import types
import warnings
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, cast, final

import pluggy

from .. import hookspecs
from .._base.names import DISABLE_AUTOLOAD_ENV, DISABLE_PLUGINS_ENV, ENTRY_POINT_GROUP, PROJECT_NAME
from .._schema.registry import EventRegistry, EventSpec
from ..errors import PluginConflictError, PluginError, UnknownPluginWarning
from .entry_points import EntryPoint, blocked_names, find_entry_points

if TYPE_CHECKING:
    from .._model.session import Session
    from .._persistence.base import Backend
    from .._schema.unions import UnionMember

__all__ = [
    "CORE_PLUGIN_NAME",
    "PluginHooks",
    "PluginManager",
    "create_plugin_manager",
    "hookimpl",
]

#: Marks a function as a dsh-session hook implementation.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: The name core's own implementations are registered under.
CORE_PLUGIN_NAME = "core"

Listener = Callable[..., None]


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that counts its changes, so callers can cache what they derive
    from it (the listener list on the append path) and notice when it is stale."""

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.generation = 0
        #: The entry point each installed plugin was loaded from, by plugin name.
        self.distributions: dict[str, EntryPoint] = {}

    def register(self, plugin: object, name: str | None = None) -> str | None:
        result = super().register(plugin, name)
        self.generation += 1
        return result

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        result = super().unregister(plugin, name)
        self.generation += 1
        return result

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        """pluggy's answer, reached without ``inspect.getattr_static`` for the names of a
        module plugin (:func:`_module_marks`)."""
        found = _module_marks(plugin, name, _IMPL_MARK)
        if found is not _UNDECIDED:
            return cast("pluggy.HookimplOpts | None", found)
        return super().parse_hookimpl_opts(plugin, name)

    def parse_hookspec_opts(self, module_or_class: Any, name: str
                            ) -> pluggy.HookspecOpts | None:
        """pluggy's answer, reached without ``inspect.getattr_static`` for the names of
        the hookspecs module (:func:`_module_marks`)."""
        found = _module_marks(module_or_class, name, _SPEC_MARK)
        if found is not _UNDECIDED:
            return cast("pluggy.HookspecOpts | None", found)
        return super().parse_hookspec_opts(module_or_class, name)


def _module_marks(namespace: object, name: str, mark: str) -> object:
    """What pluggy's static lookup finds of the marker ``mark`` on ``name`` of a module
    or of an instance (for a name its class holds), read from the namespaces that
    lookup reads: a plain function's options (what pluggy reads off it), ``None`` for
    anything that is no function, method, ``staticmethod``, ``classmethod`` or slot (what
    pluggy decides), else :data:`_UNDECIDED` (pluggy decides). Every ``open_store``
    builds a manager, and pluggy's ``getattr_static`` of each name of each plugin was
    most of what opening a store cost."""
    if isinstance(namespace, types.ModuleType):
        value = namespace.__dict__.get(name, _UNDECIDED)
    elif isinstance(namespace, type):
        return _UNDECIDED
    else:
        own = getattr(namespace, "__dict__", None)
        if not isinstance(own, dict) or name in own:
            return _UNDECIDED
        value = _UNDECIDED
        for klass in type(namespace).__mro__:
            if name in klass.__dict__:
                value = klass.__dict__[name]
                break
    if isinstance(value, types.FunctionType):
        opts = getattr(value, mark, None)
        return opts if isinstance(opts, dict) else None
    if value is _UNDECIDED or isinstance(value, (
            types.MethodType, staticmethod, classmethod, types.MemberDescriptorType)):
        return _UNDECIDED
    return None


#: A name :func:`_module_marks` leaves to pluggy.
_UNDECIDED = object()
#: The attributes pluggy's markers set on a hook implementation and a hook specification.
_IMPL_MARK = PROJECT_NAME + "_impl"
_SPEC_MARK = PROJECT_NAME + "_spec"


def _blocked_from_env() -> list[str]:
    """The names in ``DSH_SESSION_DISABLE_PLUGINS``, separated by commas or spaces."""
    return blocked_names(os.environ.get(DISABLE_PLUGINS_ENV, ""))


#: The unknown names already warned about in this process (once each is enough).
_WARNED: set[str] = set()


def _warn_unknown(names: Iterable[str], installed: set[str]) -> None:
    for name in names:
        if name not in installed and name != CORE_PLUGIN_NAME and name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(UnknownPluginWarning(name, tuple(sorted(installed))),
                          stacklevel=4)


def _entry_points(blocked: set[str]) -> list[EntryPoint]:
    """The group's entry points, refusing two distributions that claim one name (pluggy
    would silently keep whichever it met first); warns of a blocked name none has."""
    owners: dict[str, set[str]] = {}
    every = list(find_entry_points(ENTRY_POINT_GROUP))
    _warn_unknown(_blocked_from_env(), {ep.name for ep in every})
    found = [ep for ep in every if ep.name not in blocked]
    for ep in found:
        owners.setdefault(ep.name, set()).add(ep.distribution or "<unknown distribution>")
    for name, dists in owners.items():
        if len(dists) > 1:
            raise PluginConflictError(name, tuple(sorted(dists)))
    return found


def create_plugin_manager(
    *, autoload: bool = True, blocked: Iterable[str] = ()
) -> PluginManager:
    """Build a plugin manager: hookspecs, core's event types, then the installed plugins.

    :param autoload: load the ``dsh_session.plugins`` entry-point group. Also turned off
        by setting ``DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD``.
    :param blocked: plugin names (entry-point names) not to load, added to those listed
        in ``DSH_SESSION_DISABLE_PLUGINS``.
    :returns: a ready manager; register more plugins on it by hand if you like.
    :raises PluginConflictError: two distributions use one entry-point name.
    """
    from . import core_plugin as _core_plugin

    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    pm.register(_core_plugin, name=CORE_PLUGIN_NAME)
    names = {*blocked, *_blocked_from_env()}
    for name in names:
        pm.set_blocked(name)
    if autoload and not os.environ.get(DISABLE_AUTOLOAD_ENV):
        for ep in _entry_points(names):
            if pm.has_plugin(ep.name):
                continue  # one distribution found twice on sys.path
            try:
                pm.register(ep.load(), name=ep.name)
            except ValueError as exc:  # pluggy: one module under two names
                msg = f"could not load the {ENTRY_POINT_GROUP} plugin {ep.name!r}: {exc}"
                raise PluginError(msg) from exc
            pm.distributions[ep.name] = ep
    # Historic: plugins registered by hand later get the call too.
    pm.hook.add_hookspecs.call_historic(kwargs={"plugin_manager": pm})
    pm.check_pending()
    return pm


@final
class PluginHooks:
    """Typed calls into a plugin manager. Core never calls ``pm.hook`` anywhere else."""

    __slots__ = ("_listener_gen", "_listeners", "pm")

    def __init__(self, pm: PluginManager) -> None:
        self.pm = pm
        self._listeners: tuple[tuple[str, Listener], ...] = ()
        self._listener_gen = -1

    def register_event_types(self) -> list[tuple[str, EventSpec]]:
        """Every plugin's event specs, each paired with the declaring plugin's name."""
        entries: list[tuple[str, EventSpec]] = []
        # Per implementation, not through pluggy's loop, to keep each entry's provenance.
        for impl in self.pm.hook.register_event_types.get_hookimpls():
            specs = cast(Iterable[object], impl.function() or ())
            for spec in specs:
                if not isinstance(spec, EventSpec):
                    msg = (
                        f"plugin {impl.plugin_name!r}: register_event_types must return "
                        f"EventSpec entries, got {spec!r}"
                    )
                    raise PluginError(msg)
                entries.append((impl.plugin_name, spec))
        return entries

    def register_union_members(self) -> list[tuple[str, UnionMember]]:
        """Every plugin's union members, each paired with the declaring plugin's name
        (checked when the registry is built)."""
        entries: list[tuple[str, UnionMember]] = []
        for impl in self.pm.hook.register_union_members.get_hookimpls():
            for member in cast("Iterable[UnionMember]", impl.function() or ()):
                entries.append((impl.plugin_name, member))
        return entries

    def register_projections(self) -> list[tuple[str, object]]:
        """Every plugin's projections, each paired with the declaring plugin's name
        (checked when the registry is built)."""
        entries: list[tuple[str, object]] = []
        for impl in self.pm.hook.register_projections.get_hookimpls():
            for projection in cast("Iterable[object]", impl.function() or ()):
                entries.append((impl.plugin_name, projection))
        return entries

    def register_commands(self, cli_of: Callable[[str], object]
                          ) -> list[tuple[str, Exception]]:
        """Call every plugin's ``register_commands``, each with the command line
        ``cli_of(plugin name)`` bound to it (what it adds is then attributed to it, so a
        clash names both plugins). One by one, not through pluggy's call loop, like
        :meth:`register_event_types`; one that raises does not stop the others.

        :returns: the plugins whose hook raised, with what it raised (noted with the
            plugin's name), in call order: the caller drops what they added.
        """
        failed: list[tuple[str, Exception]] = []
        for impl in self.pm.hook.register_commands.get_hookimpls():
            try:
                impl.function(**dict.fromkeys(impl.argnames, cli_of(impl.plugin_name)))
            except Exception as exc:
                exc.add_note(f"raised by register_commands of plugin {impl.plugin_name!r}")
                failed.append((impl.plugin_name, exc))
        return failed

    def build_registry(self) -> EventRegistry:
        """A frozen registry of every registered plugin's event types and union members."""
        return EventRegistry(self.register_event_types(), self.register_union_members(),
                             self.register_projections())

    def session_event_listeners(self) -> tuple[tuple[str, Listener], ...]:
        """``(plugin name, function)`` of every ``session_event`` implementation, in the
        order pluggy would call them; recomputed only when the manager changed."""
        if self._listener_gen != self.pm.generation:
            impls = self.pm.hook.session_event.get_hookimpls()
            for impl in impls:
                if impl.hookwrapper or impl.wrapper:
                    msg = (
                        f"plugin {impl.plugin_name!r} wraps session_event; it is called on "
                        f"the append path, where wrappers are not supported: implement it "
                        f"as a plain hook"
                    )
                    raise PluginError(msg)
            # pluggy calls the last-registered implementation first.
            self._listeners = tuple(
                (i.plugin_name, cast(Listener, i.function)) for i in reversed(impls)
            )
            self._listener_gen = self.pm.generation
        return self._listeners

    def session_created(self, session: Session) -> None:
        """Announce a new session to every plugin (the first error propagates)."""
        self.pm.hook.session_created(session=session)

    def session_flush(self, session: Session) -> tuple[list[Awaitable[None]], list[Exception]]:
        """Run every ``session_flush`` implementation; none can stop the others.

        :returns: the awaitables implementations returned (for ``aflush`` to await) and
            the exceptions they raised, each noted with its plugin's name.
        """
        awaitables: list[Awaitable[None]] = []
        errors: list[Exception] = []
        for impl in reversed(self.pm.hook.session_flush.get_hookimpls()):
            try:
                result = impl.function(session=session)
            except Exception as exc:  # collected and re-raised by the caller
                exc.add_note(f"raised by session_flush of plugin {impl.plugin_name!r}")
                errors.append(exc)
            else:
                if result is not None:
                    awaitables.append(cast(Awaitable[None], result))
        return awaitables, errors

    def store_backend(self, url: str, create: bool) -> Backend | None:
        """The backend a plugin opens for a store URL, or ``None`` when none does."""
        return cast("Backend | None", self.pm.hook.store_backend(url=url, create=create))
