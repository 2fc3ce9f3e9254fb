"""The viewer's HTTP server: its routes, their JSON answers and the live-follow stream.

A :class:`ViewServer` is the standard library's ``ThreadingHTTPServer`` (one thread a
request) over a :class:`~._sources.Viewed` store or file. Every route is a GET; any other
method is 405, an unknown path 404, and every refusal a JSON ``{"error", "hint"}``. JSON
is encoded with core's codec (a lone surrogate of a log is written as JavaScript writes
it). Every answer says its type and carries :data:`HEADERS`, whatever its route or
status: the handler's ``end_headers`` writes them, so that none can be left out, and the
standard library's own refusals (a request line or a header too long, an unknown method,
an unreadable version) are answered as the viewer's, in JSON (``send_error``). A request
whose ``Host`` header names no host this viewer answers to (:mod:`._hosts`: DNS
rebinding) is refused before any route, with 421 Misdirected Request and a plain-text
line saying how to allow the name.

Routes::

    /                                  the session list page
    /s/<id>                            one session's page (the same HTML shell)
    /static/<name>                     the page's files: its modules (app.js and what it
                                       imports) and app.css
    /api/sessions?cwd=&parent=&since=&until=&limit=&offset=&all=1   (all: the hidden too)
    /api/search?q=&type=&role=&session=&limit=
    /api/session/<id>?turns=A-B        a page of the session's document (default 0-49;
                                       A-: the page from A, PAGE_TURNS long; &full=1
                                       waits for the whole document, &all=1 answers
                                       every block)
    /api/session/<id>/events?after=SEQ&limit=N
    /api/session/<id>/follow?after=SEQ server-sent events: one per appended batch

``limit``, ``offset`` and ``after`` are read by one rule on every route (:mod:`._params`):
a limit past its route's cap is read as the cap, and anything else out of range is 400.
"""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from ._errors import ViewError
from ._hosts import allowed_names, host_name, shown_name
from ._model import PAGE_TURNS
from ._params import read_after, read_limit
from ._sources import Viewed
from ._static import page_files, static_file

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dsh_session_core import EventRegistry

__all__ = ["CSP", "HEADERS", "ViewServer", "make_server"]

#: What the served page may load: its own files, and data: images; and what
#: ``default-src`` does not cover: no page may frame it (clickjacking), it sets no base
#: URL, and its forms go to itself only.
CSP: Final = ("default-src 'self'; img-src 'self' data:; style-src 'self'; "
              "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
              "base-uri 'none'; form-action 'self'")
#: The headers every answer carries, once each, whatever its route or status: the one
#: place that defines them. ``X-Frame-Options`` says ``frame-ancestors`` again for the
#: browsers that predate it; no answer is sniffed into another type, sends its address
#: as a Referer, or is kept in a cache (a session changes as it is followed).
HEADERS: Final = (
    ("Content-Security-Policy", CSP),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)
#: Seconds without news after which the follow stream sends a heartbeat (and so notices
#: a client gone).
HEARTBEAT: Final = 5.0
#: Raw events per answer, by default and at most (a larger limit is read as this).
EVENTS_LIMIT: Final = 100
EVENTS_MAX: Final = 1000


class ViewServer(ThreadingHTTPServer):
    """The viewer: a threading HTTP server over one store or log file.

    :ivar viewed: what it shows.
    :ivar stopping: set on shutdown; follow streams end when they see it.
    :ivar allowed_hosts: the host names (lower case, IPv6 without brackets) its
        requests' ``Host`` header may name: the loopback names, the address it was given
        and the one it is bound to, and ``allowed_hosts``.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], viewed: Viewed,
                 allowed_hosts: Iterable[str] = ()) -> None:
        names = allowed_names([], allowed_hosts)  # a bad name is refused before binding
        super().__init__(address, _Handler)
        self.viewed = viewed
        self.stopping = threading.Event()
        self.allowed_hosts = names | allowed_names([address[0], str(self.server_address[0])])

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = str(host)
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{port}/"

    def shutdown(self) -> None:
        self.stopping.set()
        super().shutdown()


def make_server(reg: EventRegistry, *, url: str | None = None, file: str | None = None,
                host: str = "127.0.0.1", port: int = 0,
                allowed_hosts: Iterable[str] = ()) -> ViewServer:
    """A viewer of the store at ``url`` (or of one log ``file``), bound to ``host:port``
    (``port`` 0: a free one), not yet serving. It answers requests whose ``Host`` names
    a loopback name, ``host`` or the address it is bound to, or one of
    ``allowed_hosts`` (names or addresses, without port).

    :raises ValueError: an ``allowed_hosts`` entry that is no host name.
    """
    return ViewServer((host, port), Viewed(reg, url=url, file=file), allowed_hosts)


def _encode(value: Any) -> bytes:
    from dsh_session_core.inspect import encode_json

    return encode_json(value)


def _turns(text: str | None) -> tuple[int, int]:
    if not text:
        return 0, PAGE_TURNS - 1
    first, sep, last = text.partition("-")
    try:
        start = int(first)
        # "A-": the page from A, of the size the server pages by (the page asks so, and
        # need not know the size).
        end = start + PAGE_TURNS - 1 if sep and not last else int(last) if sep else start
    except ValueError:
        raise ViewError(400, f"turns takes a range of turn blocks such as 0-49, got "
                             f"{text!r}") from None
    if start < 0 or end < start:
        raise ViewError(400, f"turns takes a range of turn blocks such as 0-49, got {text!r}")
    return start, end


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    server_version = "dsh-session-view"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no line per request
        return

    # --- the Host header --------------------------------------------------------------------

    def parse_request(self) -> bool:
        """The request line and headers, as the standard library reads them, then the
        ``Host`` check, before any method or route: a refused request gets its answer
        here and goes no further."""
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            # An HTTP/0.9 answer is a bare body, with no room for HEADERS: refused, in
            # HTTP/1.1 form (send_error). No browser sends such a request.
            self.send_error(505, "HTTP/0.9 is not supported",
                            "send an HTTP/1.1 request (a browser does)")
            return False
        refusal = self._host_refusal()
        if refusal is None:
            return True
        status, text = refusal
        self._answer_and_close(status, "text/plain; charset=utf-8",
                               text.encode("utf-8", "replace"))
        return False

    def _host_refusal(self) -> tuple[int, str] | None:
        """Why this request is not answered, as (status, text), or None.

        RFC 9112 §3.2: an HTTP/1.1 request without exactly one ``Host`` is 400. An
        HTTP/1.0 one may have none: it was sent to this socket by a program that needed
        no name to reach it (a browser always sends the name it used), so there is no
        name to check. A request target in absolute form (``GET http://name/...``) names
        its host too: both are checked.
        """
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1:
            return 400, "dsh-session view: the request has more than one Host header\n"
        named = list(hosts)
        if not self.path.startswith("/") and "://" in self.path:
            named.append(urlsplit(self.path).netloc)
        if not named:
            if self.request_version == "HTTP/1.0":
                return None
            return 400, "dsh-session view: an HTTP/1.1 request needs a Host header\n"
        allowed = self.server.allowed_hosts
        for value in named:
            name = host_name(value)
            if name is None:
                return 400, (f"dsh-session view: the Host header {value!r} is not a host "
                             f"name with an optional port\n")
            if name not in allowed:
                return 421, _not_allowed(name, allowed)
        return None

    # --- answers --------------------------------------------------------------------------

    def end_headers(self) -> None:
        """:data:`HEADERS`, then the end of the headers: every answer ends its headers
        here (the standard library's too), so every answer carries them."""
        for name, value in HEADERS:
            self.send_header(name, value)
        super().end_headers()

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The standard library's refusals (414, 431, 501, an unreadable request line
        400 or 505) as the viewer's: ``{"error", "hint", "status"}`` in JSON rather than
        its HTML page, with :data:`HEADERS`, and the connection closed."""
        short, long = self.responses.get(code, ("Error", ""))
        if code == 501:  # a method the standard library does not know (BREW, TRACE)
            long = "the viewer is read-only: use GET"
        body = _encode({"error": message or short, "hint": explain or long or None,
                        "status": code})
        if self.request_version == "HTTP/0.9":
            # The version was not read (or is 0.9): the standard library would answer
            # with the bare body, without status line or headers.
            self.request_version = "HTTP/1.0"
        # The standard reason phrase, not ``message``: it may quote the request's bytes.
        self._answer_and_close(code, "application/json", body)

    def _answer_and_close(self, status: int, ctype: str, body: bytes) -> None:
        """A refusal: ``body`` (not for HEAD) with the headers every answer carries, and
        the connection closed after it."""
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _headers(self, status: int, ctype: str, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self._headers(status, ctype, len(body))
        self.wfile.write(body)

    def _json(self, value: Any, status: int = 200) -> None:
        self._send(status, _encode(value), "application/json")

    def _raw_json(self, body: bytes) -> None:
        self._send(200, body, "application/json")

    def _error(self, error: ViewError) -> None:
        self._json(error.to_dict(), error.status)

    # --- methods --------------------------------------------------------------------------

    def _refuse(self) -> None:
        body = _encode({"error": f"method {self.command} is not allowed: the viewer is "
                                 f"read-only", "hint": "use GET", "status": 405})
        self.send_response(405)
        self.send_header("Allow", "GET")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse

    def do_GET(self) -> None:
        try:
            self._route()
        except ViewError as exc:
            self._error(exc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug: one JSON line, the server goes on
            from dsh_session_core.inspect import one_line

            self._error(ViewError(500, f"internal error: {one_line(exc)}",
                                  "report it, with the log if you can"))

    def _route(self) -> None:
        parts = urlsplit(self.path)
        raw = parts.path
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        if raw in ("/", "/index.html") or raw.startswith("/s/"):
            if raw.startswith("/s/"):
                _segment(raw[3:])  # a bad id is refused here too, as JSON
            self._send(200, static_file("index.html"), "text/html; charset=utf-8")
            return
        if raw.startswith("/static/") and raw[len("/static/"):] in page_files():
            name = raw[len("/static/"):]
            self._send(200, static_file(name), page_files()[name])
            return
        if raw == "/api/sessions":
            self._json(self.server.viewed.rows(params))
            return
        if raw == "/api/search":
            self._json(self.server.viewed.search(params))
            return
        if raw.startswith("/api/session/"):
            rest = raw[len("/api/session/"):]
            encoded, _, tail = rest.partition("/")
            session_id = _segment(encoded)
            if tail == "":
                self._session(session_id, params)
                return
            if tail == "events":
                self._events(session_id, params)
                return
            if tail == "follow":
                self._follow(session_id, params)
                return
        raise ViewError(404, f"no such page: {unquote(raw)!r}",
                        "the pages are /, /s/<id> and /api/...")

    def _session(self, session_id: str, params: dict[str, str]) -> None:
        viewed = self.server.viewed
        if params.get("all") == "1":
            self._json(viewed.document(session_id).whole())
            return
        start, end = _turns(params.get("turns"))
        self._json(viewed.page(session_id, start, end, full=params.get("full") == "1"))

    def _events(self, session_id: str, params: dict[str, str]) -> None:
        after = read_after(params)
        limit = read_limit(params, EVENTS_LIMIT, EVENTS_MAX, "events")
        doc = self.server.viewed.document(session_id)
        self._raw_json(doc.events_after(after, limit))

    def _follow(self, session_id: str, params: dict[str, str]) -> None:
        after = read_after(params)
        stream = self.server.viewed.follow(session_id, after, self.server.stopping,
                                           HEARTBEAT)
        first = next(stream)  # refusals (a bad id, no such session) before the headers
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self._event("hello", first)
            for news in stream:
                if news is None:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                else:
                    self._event("append", news)
                if self.server.stopping.is_set():
                    break
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the page went away
        finally:
            with contextlib.suppress(Exception):
                stream.close()

    def _event(self, name: str, value: Any) -> None:
        self.wfile.write(b"event: " + name.encode() + b"\ndata: " + _encode(value) + b"\n\n")
        self.wfile.flush()


def _not_allowed(name: str, allowed: frozenset[str]) -> str:
    shown = shown_name(name)
    names = ", ".join(sorted(map(shown_name, allowed)))
    return (f"dsh-session view does not answer to the host {shown} (the request's Host "
            f"header): it answers to {names}.\n"
            f"If you reach it by that name on purpose (a proxy, a tunnel, a name of this "
            f"machine), start it with --allowed-host {shown}.\n")


def _segment(encoded: str) -> str:
    """A path segment, URL-decoded (UTF-8; an encoded surrogate decodes to one, for the
    id rule to refuse)."""
    try:
        return unquote(encoded, errors="surrogatepass")
    except UnicodeDecodeError:
        raise ViewError(400, f"the session id in the URL is not UTF-8: {encoded!r}",
                        "session ids are strings with a UTF-8 form") from None
