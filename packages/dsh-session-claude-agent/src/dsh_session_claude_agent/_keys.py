"""Which dsh session holds which SDK session key (:func:`dsh_session_id`), and back.

A key is one dsh session: ``claude/<project_key>/<session_id>`` for a main transcript,
``.../<subpath>`` for a subagent's (``%`` and ``/`` of the project key and session id
percent-escaped, so the id splits back unambiguously; the subpath, last, is kept as
it is). The ids sort a session's subagents right after it, and a store's listing names
the SDK's keys as they are.
"""

from __future__ import annotations

__all__ = ["PREFIX", "dsh_session_id", "key_of", "project_prefix", "session_prefix"]

import re
from collections.abc import Mapping
from typing import Any

#: The prefix of every dsh session id this integration writes.
PREFIX = "claude/"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


_ESCAPED = re.compile("%(25|2F)")


def _unescape(part: str) -> str:
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else "/", part)


def _check(key: Mapping[str, Any]) -> tuple[str, str, str | None]:
    project, session = key.get("project_key"), key.get("session_id")
    subpath = key.get("subpath")
    if not isinstance(project, str) or not isinstance(session, str):
        msg = (f"a session key holds a project_key and a session_id, both str, "
               f"got {dict(key)!r}")
        raise TypeError(msg)
    if subpath is not None and (not isinstance(subpath, str) or not subpath):
        msg = (f"a session key's subpath is a non-empty str, or absent for the main "
               f"transcript, got {subpath!r}")
        raise ValueError(msg)
    return project, session, subpath


def project_prefix(project_key: str) -> str:
    """The start of the ids of a project's sessions."""
    return f"{PREFIX}{_escape(project_key)}/"


def session_prefix(key: Mapping[str, Any]) -> str:
    """The start of the ids of a main transcript's subagent sessions."""
    project, session, _ = _check(key)
    return f"{project_prefix(project)}{_escape(session)}/"


def dsh_session_id(key: Mapping[str, Any]) -> str:
    """The dsh session id holding the SDK's session key ``key`` (``project_key``,
    ``session_id``, optional ``subpath``).

    :raises TypeError: the key's project key or session id is no ``str``.
    :raises ValueError: its subpath is empty.
    """
    project, session, subpath = _check(key)
    main = f"{project_prefix(project)}{_escape(session)}"
    return main if subpath is None else f"{main}/{subpath}"


def key_of(session_id: str) -> tuple[str, str, str | None] | None:
    """The SDK key ``(project_key, session_id, subpath)`` a dsh session id holds
    (``None``: not one of this integration's)."""
    if not session_id.startswith(PREFIX):
        return None
    parts = session_id[len(PREFIX):].split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None
    return (_unescape(parts[0]), _unescape(parts[1]),
            parts[2] if len(parts) == 3 and parts[2] else None)
