"""What the viewer reads: a store (by its URL) or one log file, and how: sessions listed,
searched, loaded into documents (cached until the log changes) and followed.

Every read goes through core's read model (:mod:`dsh_session_core.inspect`) and the
``Backend`` protocol's reading methods (``list``, ``summaries``, ``load_stored``,
``tail_lines``, ``follow_lines``): no store is opened for writing, no lock is taken,
nothing is repaired. A refusal is a :class:`~._errors.ViewError` carrying the read
model's one-line message and hint, with the HTTP status of its error's class
(:func:`~._errors.from_error`); the numbers of a request (``limit``, ``offset``) are read
by :mod:`._params`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, Final

from dsh_session_core.cli import printable_url

from ._errors import ViewError, from_error
from ._model import PAGE_TURNS, SessionDocument, quick_page
from ._params import read_limit, read_offset

if TYPE_CHECKING:
    from dsh_session_core import Backend, EventRegistry, PluginManager
    from dsh_session_core.inspect import Source

__all__ = ["Viewed"]

#: How many session documents are kept built.
CACHED: Final = 4
#: The store's retention ledger (docs/retention.md): a session of the store whose
#: changes (a mark set or released) change what a session's page says (``retained``).
_LEDGER: Final = "dsh-session.retention"
#: Search hits per answer, by default and at most.
SEARCH_LIMIT: Final = 50
SEARCH_MAX: Final = 500


class _Entry:
    """A session as read, and its document once built."""

    def __init__(self, token: object, source: Source) -> None:
        self.token = token
        self.source = source
        self.doc: SessionDocument | None = None
        self.started = False
        self.lock = threading.Lock()


class Viewed:
    """A store, or one log file, as the viewer reads it.

    :ivar url: the store's URL (``None`` for a file).
    :ivar file: the log file (``None`` for a store).
    :ivar label: what the viewer says it shows.
    """

    def __init__(self, reg: EventRegistry, *, url: str | None = None,
                 file: str | None = None) -> None:
        if (url is None) == (file is None):
            msg = "a store URL or a log file, not both"
            raise ValueError(msg)
        self.reg = reg
        self.url = url
        self.file = file
        # Said to people (the command's banner, the page): never the URL's password.
        self.label = printable_url(url) if url is not None else str(file)
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._file_source: Source | None = None
        self._pm: PluginManager | None = None

    # --- the store ----------------------------------------------------------------------

    def _backend(self) -> Backend:
        from dsh_session_core.errors import InspectError
        from dsh_session_core.inspect import open_store

        assert self.url is not None
        try:
            return open_store(self.url)
        except InspectError as exc:
            raise from_error(exc) from exc

    def _check_id(self, backend: Backend | None, session_id: str) -> None:
        from dsh_session_core.errors import InspectError
        from dsh_session_core.inspect import check_session_id

        try:
            check_session_id(backend, session_id)
        except InspectError as exc:
            raise from_error(exc) from None

    def _not_found(self, session_id: str) -> ViewError:
        from dsh_session_core.inspect import not_found

        if self.url is None:
            return ViewError(404, f'no session "{session_id}" in {self.file} (it holds '
                                  f'"{self._file().header.id}")')
        return from_error(not_found(session_id, self.url))

    # --- the file -----------------------------------------------------------------------

    def _file_token(self) -> object:
        assert self.file is not None
        try:
            st = os.stat(self.file)
        except OSError as exc:
            raise ViewError(422, f"cannot read {self.file}: {exc.strerror or exc}") from exc
        return (st.st_size, st.st_mtime_ns)

    def _file(self) -> Source:
        from dsh_session_core.errors import InspectError
        from dsh_session_core.inspect import SourceSpec, load_source

        if self._file_source is None:
            assert self.file is not None
            try:
                self._file_source = load_source(SourceSpec(self.file, as_file=True),
                                                self.reg)
            except InspectError as exc:
                raise from_error(exc) from exc
        return self._file_source

    def _load(self, session_id: str) -> Source:
        """The stored session, read whole."""
        from dsh_session_core.errors import InspectError
        from dsh_session_core.inspect import SourceSpec, load_source

        try:
            return load_source(SourceSpec(session_id, store=self.url, as_id=True),
                               self.reg)
        except InspectError as exc:
            raise from_error(exc) from exc

    def _plugins(self) -> PluginManager:
        """The installed plugins (labels of sessions), loaded once."""
        if self._pm is None:
            from dsh_session_core import create_plugin_manager

            self._pm = create_plugin_manager()
        return self._pm

    # --- reading --------------------------------------------------------------------------

    def rows(self, params: dict[str, str]) -> list[dict[str, Any]]:
        """The sessions, as ``dsh-session ls --json`` rows, with ``sizeBytes`` where a
        session's log is a file of its own."""
        from dsh_session_core import stored_label
        from dsh_session_core.errors import InspectError
        from dsh_session_core.inspect import SessionQuery, select_sessions, session_row, wire_of

        # Read first, by the rule of every route, a log file's single row too.
        limit = read_limit(params, None, None, "sessions")
        offset = read_offset(params)
        if self.url is None:
            source = self._file()
            header = wire_of(source.header)
            header.pop("type", None)
            last = source.events[-1].time if source.events else None
            return [{**header, "events": len(source.events),
                     "turns": sum(e.type == "turn/start" for e in source.events),
                     "lastActivity": last, "torn": False,
                     "sizeBytes": os.path.getsize(str(self.file))}]
        try:
            query = SessionQuery.parse(
                cwd=params.get("cwd") or None, parent=params.get("parent") or None,
                since=params.get("since") or None, until=params.get("until") or None,
                limit=None if limit is None else str(limit), offset=str(offset),
                all=params.get("all") in ("1", "true"))
        except InspectError as exc:
            raise from_error(exc) from exc
        backend = self._backend()
        try:
            if not backend.exists():
                return []
            pm = self._plugins()
            page = select_sessions(backend, query, plugins=pm, registry=self.reg)
            rows = []
            for s in page.summaries:
                row = session_row(s, page.names.get(s.header.id))
                label = stored_label(backend, s.header, self.reg, plugins=pm)
                if label is not None:
                    row["label"] = label
                where = backend.location(s.header)
                if where.endswith((".jsonl", ".jsonl.zst")) and os.path.isfile(where):
                    row["sizeBytes"] = os.path.getsize(where)
                rows.append(row)
            return rows
        except OSError as exc:
            raise ViewError(422, f"cannot list the store {self.url}: "
                                 f"{exc.strerror or exc}") from exc
        finally:
            backend.close()

    def search(self, params: dict[str, str]) -> list[dict[str, Any]]:
        """The hits of ``dsh-session search`` for the query ``q``, newest first."""
        from dsh_session_core.inspect import SearchQuery, search_lines, search_page, search_store

        def listed(name: str) -> list[str]:
            value = params.get(name)
            return [value] if value else []

        limit = read_limit(params, SEARCH_LIMIT, SEARCH_MAX, "hits")
        try:
            query = SearchQuery.parse(params.get("q", ""), types=listed("type"),
                                      roles=listed("role"), sessions=listed("session"))
        except ValueError as exc:
            raise ViewError(400, str(exc)) from None
        if self.url is None:
            source = self._file()
            doc = self.document(source.header.id)
            found = search_lines(source.header.id, doc.lines, query)
        else:
            from dsh_session_core import stored_name

            backend = self._backend()
            try:
                found = search_store(backend, query)
                page = search_page(found, "newest", limit, 0)
                # Each hit's session by the name a plugin gives it (an ADK session's
                # app/user/session), as `dsh-session search` prints it.
                ids = {hit.session_id for hit in page}
                names = {h.id: stored_name(backend, h, self.reg, plugins=self._plugins())
                         for h in backend.list() if h.id in ids} if ids else {}
            except OSError as exc:
                raise ViewError(422, f"cannot search the store {self.url}: "
                                     f"{exc.strerror or exc}") from exc
            finally:
                backend.close()
            return [{**hit.to_dict(), "sessionName": named.name}
                    if (named := names.get(hit.session_id)) is not None else hit.to_dict()
                    for hit in page]
        return [hit.to_dict() for hit in search_page(found, "newest", limit, 0)]

    def _entry(self, session_id: str) -> _Entry:
        """The session as last read, read again when its log changed since (a change of
        the backend's follow position, or of the file's size and time), or its store's
        retention ledger did (a mark set or released)."""
        if self.url is None:
            self._check_id(None, session_id)
            token = self._file_token()
        else:
            backend = self._backend()
            try:
                self._check_id(backend, session_id)
                tail = backend.tail_lines(session_id, 0)
                ledger = self._ledger_position(backend) if tail is not None else None
            except OSError as exc:
                raise ViewError(422, f"cannot read the store {self.url}: "
                                     f"{exc.strerror or exc}") from exc
            finally:
                backend.close()
            if tail is None:
                raise self._not_found(session_id)
            token = repr((tail.position, ledger))
        with self._lock:
            cached = self._cache.get(session_id)
            if cached is not None and cached.token == token:
                self._cache.move_to_end(session_id)
                return cached
            if self.url is None:
                self._file_source = None
                source = self._file()
                if source.header.id != session_id:
                    raise self._not_found(session_id)
            else:
                source = self._load(session_id)
            entry = _Entry(token, source)
            self._cache[session_id] = entry
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
            return entry

    @staticmethod
    def _ledger_position(backend: Backend) -> object:
        """Where the store's retention ledger ends (``None``: it has none, or it does not
        read: the session's read says so)."""
        from dsh_session_core.errors import DshSessionError

        try:
            tail = backend.tail_lines(_LEDGER, 0)
        except (DshSessionError, OSError):
            return None
        return None if tail is None else tail.position

    def _build(self, entry: _Entry) -> SessionDocument:
        with entry.lock:
            if entry.doc is None:
                entry.doc = SessionDocument(entry.source, self.reg)
            return entry.doc

    def document(self, session_id: str) -> SessionDocument:
        """The session's whole document, built again only when its log changed."""
        return self._build(self._entry(session_id))

    def preload(self, session_id: str) -> None:
        """Read the session now and build its document in the background, so that the
        page opened on it comes at once.

        :raises ViewError: the id breaks the store's rule, no such session, or its log
            does not read (the CLI's message).
        """
        self._start_build(self._entry(session_id))

    def page(self, session_id: str, start: int, end: int, *, full: bool = False
             ) -> dict[str, Any]:
        """Turn blocks ``start..end`` of the session's document. The first page of a
        document not built yet is answered at once from the log's first blocks
        (:func:`~._model.quick_page`, marked ``partial``) while the rest is built;
        ``full`` waits for the whole document."""
        entry = self._entry(session_id)
        if entry.doc is None and start == 0 and not full and end == PAGE_TURNS - 1:
            page = quick_page(entry.source, self.reg, PAGE_TURNS)
            if page.get("partial"):
                self._start_build(entry)
                return page
        return self._build(entry).page(start, end)

    def _start_build(self, entry: _Entry) -> None:
        if entry.started:
            return
        entry.started = True

        def build() -> None:
            with contextlib.suppress(Exception):
                self._build(entry)

        threading.Thread(target=build, name="build document", daemon=True).start()

    def follow(self, session_id: str, after: int | None, stop: threading.Event,
               quiet: float) -> Generator[dict[str, Any] | None, None, None]:
        """Each batch of events appended to the session from now on (``{"count",
        "lastSeq", "note"}``; first one at once when events past ``after`` are already
        there), and ``None`` after each ``quiet`` seconds without news (a heartbeat, to
        notice a client gone). Ends when ``stop`` is set."""
        if self.url is None:
            yield from self._follow_file(session_id, stop, quiet)
            return
        from dsh_session_core.inspect import line_wire

        def seq_of(line: bytes) -> Any:
            wire = line_wire(line)
            return None if wire is None else wire.get("seq")

        backend = self._backend()
        try:
            self._check_id(backend, session_id)
            tail = backend.tail_lines(session_id, 1)
            if tail is None:
                raise self._not_found(session_id)
            last = seq_of(tail.lines[-1]) if tail.lines else None
            yield {"count": 0, "lastSeq": last, "note": None, "hello": True}
            if after is not None and isinstance(last, int) and last > after:
                yield {"count": last - after, "lastSeq": last, "note": None}
            position = tail.position
            while not stop.is_set():
                for news in backend.follow_lines(session_id, position, timeout=quiet):
                    position = news.position
                    if news.lines or news.note:
                        yield {"count": len(news.lines),
                               "lastSeq": seq_of(news.lines[-1]) if news.lines else None,
                               "note": news.note}
                    if stop.is_set():
                        return
                yield None
        finally:
            backend.close()

    def _follow_file(self, session_id: str, stop: threading.Event, quiet: float
                     ) -> Iterator[dict[str, Any] | None]:
        self._check_id(None, session_id)
        token = self._file_token()
        yield {"count": 0, "lastSeq": None, "note": None, "hello": True}
        quiet_since = time.monotonic()
        while not stop.wait(0.1):
            now = self._file_token()
            if now != token:
                token = now
                quiet_since = time.monotonic()
                yield {"count": None, "lastSeq": None, "note": None}
            elif time.monotonic() - quiet_since >= quiet:
                quiet_since = time.monotonic()
                yield None
