"""The viewer's real server run for a test: served from a thread on the port it was
given (``port=0``: a free one), shut down and closed when the test is done."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from dsh_session_view import ViewServer

__all__ = ["running"]


@contextlib.contextmanager
def running(server: ViewServer) -> Iterator[ViewServer]:
    """Serve ``server`` until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
