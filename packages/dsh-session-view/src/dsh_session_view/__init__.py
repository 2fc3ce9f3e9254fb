"""dsh-session-view: a store's sessions as a local, read-only web page, and a session as
one self-contained HTML file.

``dsh-session view [SOURCE] [--store URL]`` serves the page (:mod:`._server`, over
:mod:`._sources`); ``dsh-session export --html SOURCE -o FILE`` writes the file
(:mod:`._export`). Both show the documents of :mod:`._model`, built from core's readers.
From Python::

    from dsh_session_view import make_server

    server = make_server(registry, url="sqlite:///agent.db", port=0)
    print(server.url)
    server.serve_forever()
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from ._cli import check_address, run_export_html, run_view
    from ._errors import ViewError
    from ._export import embed_json, export_html
    from ._model import SessionDocument, build_document
    from ._server import ViewServer, make_server
    from ._sources import Viewed

_LAZY: dict[str, str] = {
    "SessionDocument": "._model",
    "ViewError": "._errors",
    "ViewServer": "._server",
    "Viewed": "._sources",
    "build_document": "._model",
    "check_address": "._cli",
    "embed_json": "._export",
    "export_html": "._export",
    "make_server": "._server",
    "run_export_html": "._cli",
    "run_view": "._cli",
}

__all__ = [
    "SessionDocument",
    "ViewError",
    "ViewServer",
    "Viewed",
    "build_document",
    "check_address",
    "embed_json",
    "export_html",
    "make_server",
    "run_export_html",
    "run_view",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-view")
