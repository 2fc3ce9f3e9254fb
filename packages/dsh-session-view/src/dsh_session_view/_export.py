"""The one-file export: a session's page as a single self-contained HTML file.

The page's CSS and JS are inlined, and the session's whole document is embedded as JSON in
``<script type="application/json" id="data">``, with ``<``, ``>``, ``&``, U+2028 and
U+2029 written as ``\\u`` escapes, so that no log content can end the element or be read
as markup. A Content-Security-Policy meta tag forbids every network request; the page
renders from the embedded document and never follows.
"""

from __future__ import annotations

import html
from typing import Any, Final

from ._static import static_file

__all__ = ["EXPORT_CSP", "embed_json", "export_html"]

#: What the exported file may load: nothing but itself.
EXPORT_CSP: Final = ("default-src 'none'; style-src 'unsafe-inline'; "
                     "script-src 'unsafe-inline'; img-src data:")

_ESCAPES: Final = ((b"&", b"\\u0026"), (b"<", b"\\u003c"), (b">", b"\\u003e"),
                   ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def embed_json(value: Any) -> bytes:
    """``value`` as JSON that is safe inside a ``<script>`` element: the characters that
    could end it or break a JavaScript parser escaped (they can only occur in strings)."""
    from dsh_session_core._codec import encode_line

    data = encode_line(value)
    for raw, escaped in _ESCAPES:
        data = data.replace(raw, escaped)
    return data


def _inline(name: str, closing: bytes) -> bytes:
    data = static_file(name)
    if closing in data.lower():
        msg = f"static/{name} holds {closing!r}: it cannot be inlined"
        raise AssertionError(msg)
    return data


def export_html(document: dict[str, Any]) -> bytes:
    """The HTML file of a session's whole document (``SessionDocument.whole()``)."""
    title = html.escape(f"dsh-session {document.get('session', '')}", quote=True)
    return b"".join([
        b'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        b'<meta http-equiv="Content-Security-Policy" content="',
        EXPORT_CSP.encode(), b'">\n',
        b'<meta name="referrer" content="no-referrer">\n',
        b'<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        b"<title>", title.encode("utf-8", "replace"), b"</title>\n",
        b"<style>\n", _inline("app.css", b"</style"), b"\n</style>\n</head>\n",
        b'<body data-mode="export">\n<div id="app"></div>\n',
        b'<script type="application/json" id="data">', embed_json(document), b"</script>\n",
        b"<script>\n", _inline("app.js", b"</script"), b"\n</script>\n</body>\n</html>\n",
    ])
