"""Which stored session a SESSION argument names: its id, its name, or an id prefix.

One rule (docs/decisions.md), in this order:

1. **the id**: a session stored under exactly that id is the one, whatever else the
   text could name;
2. **a name**: the name a plugin gives a session (``name_session``: the ADK adapter's
   ``app/user/session``, read from its summary rows, sealed on an encrypted store and
   so read only with keys);
3. **an id prefix**, where the reader allows it (the command line's read commands:
   ``show``, ``view``, ``tail``, ``search``): the one id that starts with the text, as
   git takes a short object id. Never for what removes or writes (``rm``, ``forget``),
   nor for the store's API: a prefix that names one session today names two tomorrow.

A name or a prefix that names more than one session is refused, the candidates listed
(:class:`~..errors.AmbiguousSessionError`): nothing is picked. Looking up reads the ids
(``Backend.list``) and, when a plugin names sessions, their summary rows; no log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import AmbiguousSessionError
from .text import printable

if TYPE_CHECKING:
    from .._persistence.base import Backend
    from .._persistence.listing import SessionName
    from .._plugins.manager import PluginManager
    from .._schema.header import SessionHeader
    from .._schema.registry import EventRegistry

__all__ = ["find_session", "prefix_candidates"]

#: Candidates an ambiguity names one by one (then "and N more").
_NAMED = 8


def _stored(backend: Backend, session_id: str) -> bool:
    """Whether ``backend`` holds a session under exactly ``session_id`` (an id its rule
    refuses is held by none)."""
    from ..errors import DshSessionError

    try:
        backend.check_id(session_id)
        return backend.tail_lines(session_id, 0) is not None
    except (DshSessionError, OSError):
        return False


def _shown(ids: list[str], names: dict[str, SessionName]) -> str:
    def one(sid: str) -> str:
        named = names.get(sid)
        return printable(sid) + (f" ({printable(named.name)})" if named is not None else "")

    listed = ", ".join(one(sid) for sid in ids[:_NAMED])
    return listed + (f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def prefix_candidates(headers: list[SessionHeader], text: str) -> list[str]:
    """The ids of ``headers`` that start with ``text`` (none for an empty text), sorted."""
    if not text:
        return []
    return sorted(h.id for h in headers if h.id.startswith(text))


def find_session(backend: Backend, text: str, url: str, *, registry: EventRegistry,
                 plugins: PluginManager | None = None, prefixes: bool = False
                 ) -> str | None:
    """The id of the session ``text`` names in ``backend`` (the module's rule), or
    ``None`` when it names none.

    :param url: the store, as the user named it (for messages).
    :param plugins: the plugins that name sessions (default: the installed ones, loaded
        for this call).
    :param prefixes: an unambiguous id prefix names its session too.
    :raises AmbiguousSessionError: the name, or the prefix, names several sessions.
    """
    if _stored(backend, text):
        return text
    from .._persistence.projections.naming import stored_names

    headers = backend.list()
    names = stored_names(backend, headers, registry, plugins=plugins)
    named = sorted(sid for sid, n in names.items() if n.name == text)
    if len(named) == 1:
        return named[0]
    if named:
        msg = (f'the name "{printable(text)}" is borne by {len(named)} sessions in {url}: '
               f"{_shown(named, {})}")
        raise AmbiguousSessionError(msg, session_id=text, location=url,
                                    candidates=tuple(named),
                                    hint="give the session's id instead")
    if not prefixes:
        return None
    starting = prefix_candidates(headers, text)
    if len(starting) == 1:
        return starting[0]
    if starting:
        msg = (f'the id prefix "{printable(text)}" is ambiguous in {url}: '
               f"{len(starting)} ids start with it: {_shown(starting, names)}")
        raise AmbiguousSessionError(msg, session_id=text, location=url,
                                    candidates=tuple(starting),
                                    hint="give more of the id, or the whole id")
    return None
