"""What ``dsh-session view`` and ``dsh-session export --html`` run (core's CLI parses
their arguments, as :mod:`._commands` declares them, and calls these through the
viewer's plugin; they use the surface core gives plugins' commands,
:mod:`dsh_session_core.cli`, and read sessions by :mod:`dsh_session_core.inspect`):
where to listen, refusing to listen on the network unless asked to in so many words, and
which host names to answer to (``--allowed-host``, checked by :mod:`._hosts`)."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Final

__all__ = ["check_address", "run_export_html", "run_view"]

#: The default address: this machine only.
LOOPBACK: Final = "127.0.0.1"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(args: argparse.Namespace) -> tuple[str, int]:
    """The host and port to listen on. A host that is not a loopback address is taken
    only with ``--allow-remote`` (then with a warning: anyone who can reach it reads
    every session, with no authentication). A wildcard host (``0.0.0.0``, ``::``) names
    no address a client would send in its ``Host`` header, so it also needs the names
    it is reached by (``--allowed-host``).

    :raises Failure: a non-loopback host without ``--allow-remote``, a wildcard host
        without ``--allowed-host``, an ``--allowed-host`` that is no host name, or a bad
        port (usage).
    """
    from dsh_session_core.cli import EXIT_USAGE, Failure

    from ._hosts import WILDCARDS, allowed_names

    host: str = args.host or LOOPBACK
    port: int = args.port
    extra: list[str] = getattr(args, "allowed_host", None) or []
    if not 0 <= port <= 65535:
        msg = f"--port takes 0 (a free port) to 65535, got {port}"
        raise Failure(msg, EXIT_USAGE)
    try:
        allowed_names([], extra)
    except ValueError as exc:
        msg = f"--allowed-host {exc}"
        raise Failure(msg, EXIT_USAGE) from None
    if not _is_loopback(host):
        if not args.allow_remote:
            msg = (f"--host {host} would make the viewer reachable from the network "
                   f"(read-only, with no authentication)")
            raise Failure(msg, EXIT_USAGE, hint=f"add --allow-remote to mean it, or leave "
                                                f"--host out ({LOOPBACK})")
        if host in WILDCARDS and not extra:
            msg = (f"--host {host} listens on every address of this machine: say which "
                   f"names the viewer is reached by (it answers only the requests that "
                   f"name one)")
            raise Failure(msg, EXIT_USAGE, hint="add --allowed-host NAME (the name or "
                                                "address other machines use, repeatable), "
                                                "or give --host that address")
        sys.stderr.write(f"dsh-session: warning: listening on {host}: anyone who can reach "
                         f"port {port or '(free)'} of this machine can read every session "
                         f"shown (read-only, no authentication)\n")
    return host, port


def run_view(args: argparse.Namespace) -> int:
    """``dsh-session view [SOURCE]``: serve until Ctrl-C."""
    import webbrowser
    from urllib.parse import quote

    from dsh_session_core.cli import (
        EXIT_OK,
        EXIT_REJECTED,
        EXIT_USAGE,
        Failure,
        Progress,
        failure_of,
        registry,
        source_spec,
        warn,
    )
    from dsh_session_core.errors import InspectError
    from dsh_session_core.inspect import (
        find_session,
        load_source,
        open_listed_store,
        resolve_source,
        store_url,
    )

    from ._errors import ViewError
    from ._server import make_server

    host, port = check_address(args)
    reg = registry()
    file = None
    session_id = None
    try:
        url: str | None = store_url(args.store)
        if args.source is not None:
            spec = source_spec(args)
            if resolve_source(spec) == "file":
                # A log that does not read fails now.
                session_id = load_source(spec, reg, progress=Progress, report=warn).header.id
                url, file = None, args.source
            else:
                session_id = args.source
        if url is not None:
            # A bad URL, an unknown scheme, or a named store that is not there: refused
            # now, as `ls` refuses them, not page by page.
            import os

            named = bool(args.store or os.environ.get("DSH_SESSION_STORE"))
            backend = open_listed_store(url, named=named)
            try:
                if session_id is not None:  # its id, its name, or an id prefix
                    session_id = find_session(backend, session_id, url, registry=reg,
                                              prefixes=True) or session_id
            finally:
                backend.close()
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc
    try:
        server = make_server(reg, url=url, file=file, host=host, port=port,
                             allowed_hosts=args.allowed_host)
    except OSError as exc:
        msg = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise Failure(msg, hint="pick another --port, or 0 for a free one") from exc
    if args.allow_remote or args.allowed_host:
        from ._hosts import shown_name

        names = ", ".join(sorted(map(shown_name, server.allowed_hosts)))
        sys.stderr.write(f"dsh-session: answering requests to {names} (others get 421)\n")
    path = ""
    if session_id is not None:
        try:
            server.viewed.preload(session_id)
        except ViewError as exc:
            server.server_close()
            status = EXIT_USAGE if exc.status == 400 else EXIT_REJECTED
            raise Failure(exc.message, status, hint=exc.hint) from None
        path = "s/" + quote(session_id, safe="")
    page = server.url + path
    print(f"viewing {server.viewed.label} at {page}", flush=True)
    print("read-only; Ctrl-C stops it", flush=True)
    if not args.no_open:
        webbrowser.open(page)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        # Said as every interrupted command says it, and with its status (130).
        msg = "interrupted: the viewer is stopped"
        raise Failure(msg) from None
    finally:
        server.stopping.set()
        server.server_close()
    return EXIT_OK


def run_export_html(args: argparse.Namespace) -> int:
    """``dsh-session export --html SOURCE [-o FILE]``: one self-contained HTML file."""
    from dsh_session_core.cli import (
        EXIT_OK,
        Failure,
        Progress,
        failure_of,
        registry,
        source_spec,
        warn,
        write,
    )
    from dsh_session_core.errors import InspectError
    from dsh_session_core.inspect import load_source

    from ._export import export_html
    from ._model import SessionDocument

    reg = registry()
    try:
        source = load_source(source_spec(args), reg, progress=Progress, report=warn)
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc
    for warning in source.warnings:
        warn(warning)
    data = export_html(SessionDocument(source, reg))
    if args.output is None or args.output == "-":
        write(data)
        return EXIT_OK
    try:
        with open(args.output, "wb") as f:
            f.write(data)
    except OSError as exc:
        msg = f"cannot write {args.output}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    sys.stderr.write(f"wrote {args.output} ({len(data):,} bytes)\n")
    return EXIT_OK
