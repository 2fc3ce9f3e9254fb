"""What a search of a store answers: its hits, and the sessions it could not read.

:class:`SearchResults`, a list of hits with :attr:`~SearchResults.unreadable`.

A session the search cannot read (a record damaged in the store, an encrypted record
that fails its authentication, a key not in the keyring: a crypto-shredded session, an
encrypted session searched without keys) takes nothing else down: the other sessions'
hits are answered, and that session is named with the error that says why
(:class:`UnreadableSession`), never dropped silently. docs/search.md says what each
backend reads and reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .query import SearchHit

if TYPE_CHECKING:
    from ..errors import DshSessionError

__all__ = ["SearchResults", "UnreadableSession", "damaged_records"]


@dataclasses.dataclass(frozen=True, slots=True)
class UnreadableSession:
    """A session a search could not read, in whole or in part: its hits are missing
    from the answer (all of them, or those of the records that did not read).

    :ivar session_id: the session.
    :ivar error: why, and what to do: a :class:`~dsh_session_core.errors.KeyUnavailableError`
        (its key is not in the keyring: never given, or deleted), a
        :class:`~dsh_session_core.errors.SealedRecordError` (a record fails its
        authentication), an :class:`~dsh_session_core.errors.EncryptedSessionError`
        (encrypted, searched without keys), another
        :class:`~dsh_session_core.errors.EncryptionError`, or a
        :class:`~dsh_session_core.errors.LogFormatError` (a record that does not read).
    """

    session_id: str
    error: DshSessionError

    @property
    def reason(self) -> str:
        """The error's message: what is wrong, and what to do."""
        return str(self.error)

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON values: ``session``, ``error`` (the error's class name) and
        ``reason``."""
        return {"session": self.session_id, "error": type(self.error).__name__,
                "reason": self.reason}


class SearchResults(list[SearchHit]):
    """A search's hits (a ``list`` of :class:`~dsh_session_core.SearchHit`, used as
    one), and the sessions it could not read.

    :ivar unreadable: each session whose hits are missing, in whole or in part, with
        why (:class:`UnreadableSession`), ordered by session id; empty when the answer
        is complete.
    """

    unreadable: tuple[UnreadableSession, ...]

    def __init__(self, hits: Iterable[SearchHit] = (),
                 unreadable: Iterable[UnreadableSession] = ()) -> None:
        super().__init__(hits)
        self.unreadable = tuple(sorted(unreadable, key=lambda u: u.session_id))

    @property
    def complete(self) -> bool:
        """Whether every session searched was read (nothing is :attr:`unreadable`)."""
        return not self.unreadable

    def __repr__(self) -> str:
        if not self.unreadable:
            return f"SearchResults({list.__repr__(self)})"
        return f"SearchResults({list.__repr__(self)}, unreadable={self.unreadable!r})"


def damaged_records(session_id: str, where: list[str], path: str | None = None,
                    line: int | None = None) -> DshSessionError:
    """The error of a plaintext session with records a search read but could not decode
    (not a JSON object): ``where`` says where each is (``"line 4, seq 3"``); ``path``
    and ``line`` are the log file's and the first such line's, when the session is a
    file."""
    from ..errors import LogFormatError

    count = len(where)
    shown = "; ".join(where[:3]) + (f"; {count - 3} more" if count > 3 else "")
    records = "record" if count == 1 else "records"
    return LogFormatError(
        f'session "{session_id}": {count} damaged {records} ({shown}) not JSON, so any '
        f"hit in {'it' if count == 1 else 'them'} is missing (the rest of the session was "
        f"searched); restore the log from a backup", path=path, line=line)
