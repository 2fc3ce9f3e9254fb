"""The type checks of a store's public methods.

A session id, a header field or a session of the wrong type is refused with a
:class:`TypeError` naming what the method takes (as the builders refuse theirs), before
anything is looked up, written or locked, rather than failing deep inside with an
``AttributeError`` about ``encode`` or ``read_only``."""

from __future__ import annotations

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from .session import Session

__all__ = ["check_header_args", "check_id", "check_session"]


def _wrong(method: str, what: str, accepted: str, value: object) -> TypeError:
    from .builders import kind_of  # only when refusing

    return TypeError(f"{method} takes {what} as {accepted}; got {kind_of(value)}")


def check_id(method: str, value: object, *, optional: bool = False) -> None:
    """Refuse a session id that is not a ``str`` (``None`` too, when ``optional``:
    an id is then minted).

    :raises TypeError: naming ``method`` and what it takes.
    """
    if isinstance(value, str) or (optional and value is None):
        return
    accepted = "a str (or None, for a new id)" if optional else "a str"
    raise _wrong(method, "the session id", accepted, value)


def check_header_args(method: str, *, cwd: object, parent_session: object,
                      created_at: object, seed_length: object) -> None:
    """Refuse the header fields of a new session of the wrong type: ``cwd`` and
    ``parent_session`` are ``str`` or ``None``, ``created_at`` epoch milliseconds (a
    number) or ``None``, ``seed_length`` an ``int`` or ``None``.

    :raises TypeError: naming ``method``, the argument and what it takes.
    """
    if cwd is not None and not isinstance(cwd, str):
        raise _wrong(method, "cwd", "an absolute path, a str (or None)", cwd)
    if parent_session is not None and not isinstance(parent_session, str):
        raise _wrong(method, "parent_session", "a session id, a str (or None)",
                     parent_session)
    if created_at is not None and (isinstance(created_at, bool)
                                   or not isinstance(created_at, int | float)):
        raise _wrong(method, "created_at", "epoch milliseconds, an int (or None)",
                     created_at)
    if seed_length is not None and (isinstance(seed_length, bool)
                                    or not isinstance(seed_length, int)):
        raise _wrong(method, "seed_length", "an int (or None)", seed_length)


def check_session(method: str, value: object,
                  accepted: str = "a Session (the object create or open returned)",
                  ) -> Session:
    """Refuse anything but a :class:`~dsh_session_core.Session` (an id included, unless
    ``accepted`` says otherwise: these methods take the session object the store gave).

    :raises TypeError: naming ``method`` and what it takes (``accepted``).
    """
    from .session import Session

    if isinstance(value, Session):
        return value
    raise _wrong(method, "the session", accepted, value)
