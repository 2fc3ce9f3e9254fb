"""The one-file export: a session's page as a single self-contained HTML file.

The page's CSS and JS are inlined, and the session's whole document is embedded as JSON in
``<script type="application/json" id="data">``, with ``<``, ``>``, ``&``, U+2028 and
U+2029 written as ``\\u`` escapes, so that no log content can end the element or be read
as markup. A Content-Security-Policy meta tag forbids every network request and runs
only the file's own code and style, named by their SHA-256 (:func:`export_csp`), never
inline code in general: should anything ever slip a ``<script>`` into the file, the
browser would not run it. The page renders from the embedded document and never
follows.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import Any, Final

from ._static import static_file

__all__ = ["embed_json", "export_csp", "export_html", "source_hash"]

_ESCAPES: Final = ((b"&", b"\\u0026"), (b"<", b"\\u003c"), (b">", b"\\u003e"),
                   ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def embed_json(value: Any) -> bytes:
    """``value`` as JSON that is safe inside a ``<script>`` element: the characters that
    could end it or break a JavaScript parser escaped (they can only occur in strings)."""
    from dsh_session_core.inspect import encode_json

    data = encode_json(value)
    for raw, escaped in _ESCAPES:
        data = data.replace(raw, escaped)
    return data


def _inline(name: str, closing: bytes) -> bytes:
    """The text of the element inlining ``static/name``, exactly as a browser's parser
    reads it (what its hash is taken of): no closing tag or ``<!--`` inside (either would
    move the element's end), and no CR or NUL, which the parser would rewrite (CR LF and
    CR to LF, NUL to U+FFFD) before hashing."""
    data = static_file(name)
    if closing in data.lower() or b"<!--" in data or b"\r" in data or b"\0" in data:
        msg = f"static/{name} holds {closing!r}, <!--, a CR or a NUL: it cannot be inlined"
        raise AssertionError(msg)
    return b"\n" + data + b"\n"


def source_hash(text: bytes) -> str:
    """The CSP source naming an inline element by its text (its UTF-8 bytes):
    ``'sha256-<base64>'``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text).digest()).decode() + "'"


def export_csp(script: bytes, style: bytes) -> str:
    """What an exported file may load and run: nothing from anywhere, only the inline
    ``script`` and ``style`` (their elements' texts) by hash, and ``data:`` images."""
    return (f"default-src 'none'; style-src {source_hash(style)}; "
            f"script-src {source_hash(script)}; img-src data:")


def export_html(document: dict[str, Any]) -> bytes:
    """The HTML file of a session's whole document (``SessionDocument.whole()``)."""
    title = html.escape(f"dsh-session {document.get('session', '')}", quote=True)
    script, style = _inline("app.js", b"</script"), _inline("app.css", b"</style")
    return b"".join([
        b'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        b'<meta http-equiv="Content-Security-Policy" content="',
        export_csp(script, style).encode(), b'">\n',
        b'<meta name="referrer" content="no-referrer">\n',
        b'<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        b"<title>", title.encode("utf-8", "replace"), b"</title>\n",
        b"<style>", style, b"</style>\n</head>\n",
        b'<body data-mode="export">\n<div id="app"></div>\n',
        b'<script type="application/json" id="data">', embed_json(document), b"</script>\n",
        b"<script>", script, b"</script>\n</body>\n</html>\n",
    ])
