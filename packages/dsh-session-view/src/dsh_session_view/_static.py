"""The page's files (``static/``: ``index.html``, ``app.js``, ``app.css``), shipped as
package data and read once."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["static_file"]


@functools.cache
def static_file(name: str) -> bytes:
    """The bytes of one of the page's files."""
    return (resources.files(__package__ or "dsh_session_view") / "static" / name).read_bytes()
