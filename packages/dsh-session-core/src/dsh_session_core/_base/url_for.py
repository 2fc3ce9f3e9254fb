"""A store URL made from a scheme and a path (:func:`url_for`), importing nothing of core.

It is a leaf, so that an error's message can name the URL that opens a store
(:class:`~dsh_session_core.errors.StoreKindError`) without the errors importing the URL
rules (:mod:`.urls`), which raise them."""

from __future__ import annotations

__all__ = ["url_for"]

#: What :func:`url_for` leaves unescaped: every character but ``%``, ``?`` and ``#``.
SAFE = "/:@!$&'()*+,;=[]~"


def url_for(scheme: str, path: str) -> str:
    """The URL of ``scheme`` that names ``path`` (relative paths stay relative):
    ``url_for("sqlite", "backup.db")`` is ``sqlite:///backup.db``, and an absolute path
    gets the four slashes. Only ``%``, ``?``, ``#`` (and the like) are escaped."""
    from urllib.parse import quote

    return f"{scheme}:///{quote(path, safe=SAFE)}"
