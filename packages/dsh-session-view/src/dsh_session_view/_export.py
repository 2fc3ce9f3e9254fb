"""The one-file export: a session's page as a single self-contained HTML file.

The page's CSS is inlined, and its modules as one script (:func:`._static.page_script`).
The session's document is embedded as JSON in ``<script type="application/json"
id="data">``: its head once, and its pages as the server answers them
(:func:`embedded_pages`), so that the page only looks a page up, as it would fetch it;
``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\u`` escapes, so that no log
content can end the element or be read as markup. A Content-Security-Policy meta tag
forbids every network request and runs only the file's own code and style, named by
their SHA-256 (:func:`export_csp`), never inline code in general: should anything ever
slip a ``<script>`` into the file, the browser would not run it. The page renders from
the embedded pages and never follows.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import TYPE_CHECKING, Any, Final

from ._model import PAGE_TURNS
from ._static import page_script, static_file

if TYPE_CHECKING:
    from ._model import SessionDocument

__all__ = ["embed_json", "embedded_pages", "export_csp", "export_html", "source_hash"]

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


def _inline(name: str, data: bytes, closing: bytes) -> bytes:
    """The text of the element inlining ``data`` (``name``), exactly as a browser's parser
    reads it (what its hash is taken of): no closing tag or ``<!--`` inside (either would
    move the element's end), and no CR or NUL, which the parser would rewrite (CR LF and
    CR to LF, NUL to U+FFFD) before hashing."""
    if closing in data.lower() or b"<!--" in data or b"\r" in data or b"\0" in data:
        msg = f"{name} holds {closing!r}, <!--, a CR or a NUL: it cannot be inlined"
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


def embedded_pages(document: SessionDocument, size: int = PAGE_TURNS) -> dict[str, Any]:
    """What an exported file embeds of ``document``: ``{"head": ..., "pages": [...]}``,
    its head once and its pages of ``size`` turn blocks from block 0 on (one page when it
    has no block), each as :meth:`~._model.SessionDocument.page` answers it without the
    head. The page asks for the blocks from the end of those it shows, as when served,
    and finds the page that starts there."""
    head = document.head
    pages = []
    for start in range(0, max(len(document.timeline), 1), size):
        page = document.page(start, start + size - 1)
        pages.append({key: value for key, value in page.items() if key not in head})
    return {"head": head, "pages": pages}


def export_html(document: SessionDocument) -> bytes:
    """The HTML file of a session's document."""
    title = html.escape(f"dsh-session {document.head.get('session', '')}", quote=True)
    script = _inline("the page's bundled modules", page_script(), b"</script")
    style = _inline("static/app.css", static_file("app.css"), b"</style")
    return b"".join([
        b'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        b'<meta http-equiv="Content-Security-Policy" content="',
        export_csp(script, style).encode(), b'">\n',
        b'<meta name="referrer" content="no-referrer">\n',
        b'<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        b"<title>", title.encode("utf-8", "replace"), b"</title>\n",
        b"<style>", style, b"</style>\n</head>\n",
        b'<body data-mode="export">\n<div id="app"></div>\n',
        b'<script type="application/json" id="data">', embed_json(embedded_pages(document)),
        b"</script>\n",
        b"<script>", script, b"</script>\n</body>\n</html>\n",
    ])
