"""The errors of loading and registering plugins.

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import DshSessionError, publish

__all__ = [
    "DuplicateEventTypeError",
    "DuplicateUnionMemberError",
    "PluginConflictError",
    "PluginError",
    "UnknownPluginWarning",
    "UnknownProjectionError",
]


class UnknownPluginWarning(UserWarning):
    """A name in ``DSH_SESSION_DISABLE_PLUGINS`` that no installed plugin has (a typo
    would otherwise leave the plugin it meant loaded, silently). Warned once per name.

    :ivar name: the name.
    :ivar installed: the names of the installed plugins.
    """

    def __init__(self, name: str, installed: tuple[str, ...]) -> None:
        known = ", ".join(installed) if installed else "none"
        super().__init__(
            f"DSH_SESSION_DISABLE_PLUGINS names {name!r}, which no installed plugin is "
            f"(installed: {known}): check the spelling (`dsh-session plugins` lists them)"
        )
        self.name = name
        self.installed = installed


class PluginError(DshSessionError):
    """A plugin could not be loaded or registered."""


class PluginConflictError(PluginError, RuntimeError):
    """Two installed distributions use the same entry-point name in ``dsh_session.plugins``.

    :ivar name: the entry-point name.
    :ivar distributions: the distributions that both claim it.
    """

    def __init__(self, name: str, distributions: tuple[str, ...]) -> None:
        dists = " and ".join(repr(d) for d in distributions)
        super().__init__(
            f"plugin name {name!r} is claimed by {dists}; uninstall one of them, or block "
            f"the name with DSH_SESSION_DISABLE_PLUGINS={name}"
        )
        self.name = name
        self.distributions = distributions


class DuplicateEventTypeError(PluginError, ValueError):
    """Two plugins declare the same event type.

    :ivar event_type: the contested type string.
    :ivar plugins: the two plugins, the first registrant first.
    """

    def __init__(self, event_type: str, plugins: tuple[str, str]) -> None:
        super().__init__(
            f"event type {event_type!r} is declared by both plugin {plugins[0]!r} and plugin "
            f"{plugins[1]!r}; block one of them with DSH_SESSION_DISABLE_PLUGINS"
        )
        self.event_type = event_type
        self.plugins = plugins


class DuplicateUnionMemberError(PluginError, ValueError):
    """Two plugins (or a plugin and core) declare the same member of a union.

    :ivar family: the union (``"content-block"``...).
    :ivar tag: the contested tag.
    :ivar plugins: the two owners, the first registrant first (``"core"`` for core).
    """

    def __init__(self, family: str, tag: str, plugins: tuple[str, str]) -> None:
        first = "core" if plugins[0] == "core" else f"plugin {plugins[0]!r}"
        super().__init__(
            f"{family} member {tag!r} is declared by both {first} and plugin {plugins[1]!r}; "
            f"rename one tag, or block one plugin with DSH_SESSION_DISABLE_PLUGINS"
        )
        self.family = family
        self.tag = tag
        self.plugins = plugins


class UnknownProjectionError(PluginError, LookupError):
    """A read names a projection that no installed plugin declares.

    :ivar name: the projection's name.
    :ivar known: the names of the projections the store knows.
    """

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        listed = ", ".join(known) if known else "none"
        super().__init__(
            f"no installed plugin declares the projection {name!r} (declared: {listed}): "
            f"install the plugin that declares it (`dsh-session plugins` lists them)"
        )
        self.name = name
        self.known = known


publish(globals(), __all__)
