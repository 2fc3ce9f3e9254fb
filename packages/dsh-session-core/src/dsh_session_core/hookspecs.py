"""The hook specifications of dsh-session: what a plugin can implement.

A plugin is a module (or object) with functions decorated by
``dsh_session_core.hookimpl`` and named after a hook below. It is found through the
``dsh_session.plugins`` entry-point group, or registered by hand on a manager made by
:func:`dsh_session_core.create_plugin_manager`.

The hooks are named as the design card names them (``session_event`` rather than
``dsh_session_event``): they are the public vocabulary of the log, and the project name
already scopes them, since pluggy only matches implementations marked with the
``dsh_session`` marker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from ._base.names import PROJECT_NAME

if TYPE_CHECKING:
    from ._cli.plugin_commands import CommandLine
    from ._model.session import Session
    from ._persistence.base import Backend
    from ._persistence.listing import SessionName
    from ._persistence.projections.read import ProjectionView
    from ._plugins.manager import PluginManager
    from ._schema.header import SessionHeader
    from ._schema.projections import Projection
    from ._schema.registry import EventSpec
    from ._schema.unions import UnionMember
    from .events import Event

__all__ = [
    "add_hookspecs",
    "hide_session",
    "label_session",
    "name_session",
    "register_commands",
    "register_event_types",
    "register_projections",
    "register_union_members",
    "session_created",
    "session_event",
    "session_flush",
    "session_labels",
    "store_backend",
]

_spec = pluggy.HookspecMarker(PROJECT_NAME)

# --- registration ----------------------------------------------------------------------


@_spec(historic=True)
def add_hookspecs(plugin_manager: PluginManager) -> None:
    """Add hook specifications that this plugin defines for other plugins to implement.

    Call ``plugin_manager.add_hookspecs(module_or_class)`` here (for example, the
    compaction plugin publishes the summarizer hook this way), so that core need not
    know the hooks of every plugin.

    :param plugin_manager: the manager being set up.

    Called for plugins registered later as well (historic).

    .. versionadded:: 0.1
    """



@_spec
def register_event_types() -> Iterable[EventSpec]:
    """Declare the event types this plugin contributes to the log vocabulary.

    Called once per plugin when a registry is built; each returned entry is recorded
    with this plugin as its declaring plugin. The registry is frozen afterwards, so a
    plugin registered later contributes nothing to registries already built.

    :returns: the :class:`~dsh_session_core.EventSpec` entries, one per event type.
        Two plugins declaring the same type make the build fail naming both.

    Implementations are called one by one (not through pluggy's call loop) so that
    each entry is attributed to its plugin; hook wrappers on this hook are not run.

    .. versionadded:: 0.1
    """


@_spec
def register_union_members() -> Iterable[UnionMember]:
    """Declare members this plugin adds to the merge-extensible unions of the vocabulary:
    content-block kinds, stream-chunk kinds, turn triggers, turn-end reasons and
    message-source kinds.

    Called once per plugin when a registry is built, like
    :func:`register_event_types`; each member is recorded with this plugin as its
    owner, and the registry is frozen afterwards.

    :returns: the :class:`~dsh_session_core.UnionMember` entries, each a family name
        and a msgspec Struct tagged on that family's tag field (``type`` for blocks
        and chunks, ``kind`` for triggers, reasons and sources). A tag declared twice
        in one family (by two plugins, or by a plugin and core) makes the build fail
        naming both (:class:`~dsh_session_core.errors.DuplicateUnionMemberError`).

    Strict appends accept a payload holding a declared member (it is kept verbatim,
    as an opaque event: typed decoding is core's); without the plugin installed, the
    same payload loads opaquely and ``dsh-session validate --strict`` names it.

    .. versionadded:: 0.2
    """


@_spec
def register_projections() -> Iterable[Projection]:
    """Declare the projections this plugin keeps beside the log: keyed rows folded from
    some event types, read by key, key range or newest first
    (:class:`~dsh_session_core.Projection`, docs/projections.md).

    Called once per plugin when a registry is built, like
    :func:`register_event_types`. A store keeps each projection current at every flush
    where its backend keeps rows, and folds the log for a read where it does not.

    :returns: the :class:`~dsh_session_core.Projection` entries. Two plugins declaring
        one name make the build fail naming both.

    .. versionadded:: 0.6
    """


# --- the session lifecycle ---------------------------------------------------------------


@_spec
def session_created(session: Session) -> None:
    """A session was created in a store (``SessionStore.create`` or ``fork``).

    Fired after the session is registered and wired, before ``create`` returns; seeded
    events are already in ``session.events`` (no ``session_event`` fires for them). If
    an implementation raises, the session is detached again and ``create`` raises.

    :param session: the new session.

    .. versionadded:: 0.1
    """


@_spec
def session_event(session: Session, event: Event) -> None:
    """An event was appended to a store-registered session.

    Called synchronously, once per appended event, for every implementation, in seq
    order for each implementation, even when an implementation appends re-entrantly
    (the nested event is delivered after the current one has reached everybody) or
    raises (the others still run; the error reaches the caller of ``append`` after all
    implementations ran, with the event already logged). Keep it cheap: it is on the
    append path. Durable backends buffer here and write on ``session_flush``.

    :param session: the session appended to.
    :param event: the logged event itself (immutable).

    Implementations are called directly, in pluggy's order; hook wrappers on this hook
    are refused when the store is built.

    .. versionadded:: 0.1
    """


@_spec
def session_flush(session: Session) -> Awaitable[None] | None:
    """Durability checkpoint: make every event appended so far durable.

    Harnesses call it at every ``turn/end`` through ``SessionStore.flush`` (synchronous)
    or ``SessionStore.aflush`` (asyncio). Every implementation runs and none can veto;
    failures are raised after all ran. A failed flush is never recorded as an event,
    since the turn is already closed.

    :param session: the session to make durable.
    :returns: ``None`` when done, or an awaitable for ``aflush`` to await.

    .. versionadded:: 0.1
    """


# --- stores --------------------------------------------------------------------------------


@_spec(firstresult=True)
def store_backend(url: str, create: bool) -> Backend | None:
    """Open the backend of a store URL whose scheme core does not know.

    ``open_store(url)``, ``DurableStore`` users going through it, and every
    ``dsh-session`` command that takes ``--store URL`` (or SRC and DST for ``copy``) map
    a URL to a backend in one place; the schemes core knows (a folder path, ``jsonl:``,
    ``file:``, ``sqlite:``, ``postgresql:``, ``postgres:``, ``memory:``) are never asked
    about. Return a backend for a URL your plugin owns (by its scheme, say
    ``dict:name``), else ``None``; the first backend returned wins, and with none the
    URL is refused as an unknown scheme.

    :param url: the URL as given.
    :param create: whether the store may be created. ``False`` for commands that only
        read: then raise :class:`~dsh_session_core.errors.StoreNotFoundError` rather
        than leave a new store behind.
    :returns: an object implementing :class:`~dsh_session_core.Backend` (subclass it to
        inherit the defaults of its reading methods), or ``None``.

    .. versionadded:: 0.1
    """


# --- listing -------------------------------------------------------------------------------


@_spec(firstresult=True)
def hide_session(header: SessionHeader) -> bool | None:
    """Whether ``dsh-session ls`` and the viewer's list leave this stored session out
    unless asked for every session (``ls --all``), as ``ls`` leaves out dot files: a
    plugin's bookkeeping sessions (the ADK adapter's app and user state), not a
    conversation anyone reads.

    Asked for every session listed, from its header alone (ls reads no log to pick its
    rows: keep it to the header's fields, the id's form say). Read through
    :func:`dsh_session_core.is_hidden`.

    :param header: the session's header.
    :returns: ``True`` to hide it, ``False`` to show it, ``None`` when not yours (the
        first answer wins; with none, it is shown).

    .. versionadded:: 0.3
    """


@_spec(firstresult=True)
def label_session(header: SessionHeader,
                  first_events: Callable[[int], Sequence[Event]]) -> str | None:
    """A name a person reads for a stored session whose id says nothing (the ADK
    adapter's ids are digests: its label is the app, user and ADK session id), shown by
    ``dsh-session ls`` (a NAME column, ``label`` in ``--json``), ``show`` and the viewer.

    Asked for the rows shown only. ``first_events(n)`` reads and decodes the session's
    first ``n`` events (at most ``n``; fewer when the log is shorter), and only when
    called: a label from the header alone reads no log. It gives no event at all when
    the reader cannot read them (an encrypted session listed without keys, a key not in
    the keyring, a damaged record): a listing shows such a session by its header, so
    answer ``None`` rather than fail. Read through :func:`dsh_session_core.label_of`.

    :param header: the session's header.
    :param first_events: reads the first events of the log, oldest first.
    :returns: the label, or ``None`` when not yours (the first answer wins).

    .. versionadded:: 0.3
    """


@_spec(firstresult=True)
def name_session(header: SessionHeader,
                 projection: Callable[[str], ProjectionView[Any] | None]
                 ) -> SessionName | None:
    """The name a person types for a stored session whose id says nothing (the ADK
    adapter's ids are digests: its name is ``app/user/session``), and whether its
    framework deleted it: the command line's ``show``, ``view``, ``tail``, ``rm`` and
    ``search`` take the name for the id, ``ls``, ``search`` and ``show`` print it, and
    ``ls`` marks a deleted session and leaves it out unless ``--all``.

    Asked for every session a listing picks from (``ls`` hides the deleted ones before
    it pages), and for every session of the store when a name is looked up: read
    summary rows, which a store keeps beside the log (docs/projections.md), never the
    log. ``projection(name)`` opens one of the session's projections (its
    ``summary()``, its rows by key), and only when called; it gives ``None`` when the
    reader cannot read it (an encrypted session listed without keys, a key not in the
    keyring, a projection no plugin declares), and its reads give ``None`` for a row
    that does not read: answer ``None`` then. Decide from the header first (the id's
    form) to read nothing for a session not yours. Read through
    :func:`dsh_session_core.name_of`.

    :param header: the session's header.
    :param projection: opens a projection of the session by name.
    :returns: a :class:`dsh_session_core.SessionName`, or ``None`` when not yours (the
        first answer wins).

    .. versionadded:: 0.6
    """


@_spec
def session_labels(header: SessionHeader,
                   first_events: Callable[[int], Sequence[Event]]) -> Mapping[str, str] | None:
    """Named labels of a stored session, by which retention groups sessions: the ADK
    adapter gives ``{"app": ..., "user": ...}``, so that a policy keeps the latest N
    sessions of each user (``RetentionPolicy(keep_latest=5, per=("user",))``; any other
    name is ``per=("label:NAME",)``).

    Asked only by a prune whose policy groups by a named label, for each session in its
    scope. ``first_events`` is as for :func:`label_session`.

    :param header: the session's header.
    :param first_events: reads the first events of the log, oldest first.
    :returns: names and values, or ``None`` when not yours; the answers of every plugin
        are merged (an earlier plugin's value for a name wins).

    .. versionadded:: 0.4
    """


# --- the command line ----------------------------------------------------------------------


@_spec
def register_commands(cli: CommandLine) -> None:
    """Add commands to the ``dsh-session`` command line (``dsh-session NAME ...``), and
    formats to its ``export`` (``dsh-session export --NAME SOURCE``), as plugins of
    ``llm`` and Datasette add theirs through their own ``register_commands(cli)``.

    ``cli`` is the command line, bound to this plugin:
    ``cli.add_command(name, run, help=..., arguments=...)`` adds a command, whose
    ``arguments(parser)`` adds its arguments to the argparse parser core makes for it
    (only when that parser is built: the command runs, or its ``--help`` is asked for),
    and whose ``run(args)`` runs it and returns its exit status;
    ``cli.add_export_format(name, run, help=...)`` adds ``export --NAME``. What a
    command needs to fail, write and read sessions as core's commands do is
    :mod:`dsh_session_core.cli`.

    Called when the CLI builds the parser of a command core does not have, of
    ``export``, or of every command, once per process; never by a store. Keep it cheap
    and import nothing heavy here: import what the command needs in ``run``. The
    distributions of this project add theirs so (the viewer ``view`` and
    ``export --html``, the batteries ``demo``).

    :param cli: the command line (:class:`dsh_session_core.cli.CommandLine`).

    A name core's commands (or ``export``'s own options) have, or another plugin
    added, makes the command line fail naming both
    (:class:`~dsh_session_core.errors.PluginError`).

    .. versionadded:: 0.5
    """
