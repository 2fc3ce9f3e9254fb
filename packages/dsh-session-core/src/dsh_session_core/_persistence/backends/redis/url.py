"""What a ``redis://`` or ``rediss://`` store URL names: the server, the client's options,
the store's key prefix, and how the URL is shown without its password.

The URL is written as Redis users write it, and as redis-py reads it::

    redis://[[user]:password@]host[:port][/db][?option=value&...]
    rediss://...   (TLS)

Options of the store: ``prefix`` (every key of the store starts with it; default
``dsh:``, so that several stores share a database), ``lease`` (the writer lease's
time to live, in seconds; default 20), ``wait`` (how many replicas must have a flush's
batch before the flush returns: Redis's ``WAIT``, sent after the batch on its
connection; default 0, none) and ``wait_timeout`` (how long a flush waits for them, in
seconds; default 2: then it fails, its batch on the primary only). Options of the
connection, passed to redis-py:
``socket_timeout``, ``socket_connect_timeout``, ``health_check_interval``, and, for
``rediss://`` only, ``ssl_ca_certs``, ``ssl_ca_path``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_cert_reqs`` (``required``, ``optional``, ``none``),
``ssl_check_hostname``. Any other option is refused (a misspelt one would otherwise be
ignored), and so is a TLS option on ``redis://``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from ....errors import StoreUrlError
from ...urls import printable_url

__all__ = ["DEFAULT_LEASE", "DEFAULT_PREFIX", "DEFAULT_WAIT_TIMEOUT", "RedisTarget",
           "parse_redis_url"]

#: The key prefix of a store whose URL names none.
DEFAULT_PREFIX: Final = "dsh:"
#: The writer lease's time to live, in seconds, when the URL sets none.
DEFAULT_LEASE: Final = 20.0
#: How long a flush waits for its replicas (``wait``), in seconds, when the URL sets no
#: ``wait_timeout``.
DEFAULT_WAIT_TIMEOUT: Final = 2.0

_FLOATS: Final = ("socket_timeout", "socket_connect_timeout", "health_check_interval")
_TLS: Final = ("ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile",
               "ssl_cert_reqs", "ssl_check_hostname")
_CERT_REQS: Final = ("required", "optional", "none")


@dataclasses.dataclass(frozen=True, slots=True)
class RedisTarget:
    """A parsed store URL.

    :ivar url: the URL as given (it may hold a password: never shown, see ``shown``).
    :ivar shown: the URL without its password, for messages and listings.
    :ivar tls: ``rediss://``.
    :ivar host: the server's host.
    :ivar port: its port.
    :ivar db: the database number (``None``: not given, 0).
    :ivar prefix: the store's key prefix.
    :ivar lease: the writer lease's time to live, in seconds.
    :ivar options: redis-py's keyword arguments for the connection (the password among
        them).
    :ivar wait: how many replicas a flush waits for (0: none).
    :ivar wait_timeout: how long it waits for them, in seconds.
    """

    url: str
    shown: str
    tls: bool
    host: str
    port: int
    db: int | None
    prefix: str
    lease: float
    options: dict[str, Any]
    wait: int = 0
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT

    def identity(self) -> tuple[str, ...]:
        """What picks the sessions: the server, the database and the prefix (not the
        user, the password, TLS files or timeouts); ``localhost`` is ``127.0.0.1``."""
        host = "127.0.0.1" if self.host in ("localhost", "::1") else self.host.lower()
        return ("redis", host, str(self.port), str(self.db or 0), self.prefix)


def _refuse(url: str, problem: str, fix: str) -> StoreUrlError:
    return StoreUrlError(printable_url(url), problem, fix)


def parse_redis_url(url: str) -> RedisTarget:
    """The server, the options and the prefix ``url`` names.

    :raises StoreUrlError: another scheme, no host, a port or database that is no
        number, an unknown option, a TLS option on ``redis://``, a bad value.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss"):
        raise _refuse(url, "is not a Redis URL", "redis://host:6379/0 or rediss://...")
    try:
        port = parts.port or 6379
    except ValueError:
        raise _refuse(url, "has a port that is no number", "redis://host:6379") from None
    host = parts.hostname or ""
    if not host:
        raise _refuse(url, "names no host", "redis://host:6379/0 (redis://localhost for "
                                            "a server on this machine)")
    path = unquote(parts.path).strip("/")
    db = None
    if path:
        if not path.isdigit():
            raise _refuse(url, f"names the database {path!r}, and Redis numbers them",
                          "redis://host:6379/0 (a number; the key prefix is ?prefix=...)")
        db = int(path)
    options: dict[str, Any] = {"host": host, "port": port, "db": db or 0}
    if parts.username:
        options["username"] = unquote(parts.username)
    if parts.password:
        options["password"] = unquote(parts.password)
    prefix, lease = DEFAULT_PREFIX, DEFAULT_LEASE
    wait, wait_timeout = 0, DEFAULT_WAIT_TIMEOUT
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "prefix":
            if "{" in value or "}" in value:
                raise _refuse(url, f"has the key prefix {value!r}, with a brace",
                              "a prefix without { or }: braces make the hash tag that "
                              "keeps a session's keys in one cluster slot")
            prefix = value
        elif name == "lease":
            lease = _number(url, name, value)
            if lease < 1:
                raise _refuse(url, f"has lease={value}, under a second",
                              "lease=20 (seconds; the lease is renewed every third of it)")
        elif name == "wait":
            if not value.isdigit():
                raise _refuse(url, f"has wait={value!r}",
                              "wait=<how many replicas must have each flush: 0, 1, 2...>")
            wait = int(value)
        elif name == "wait_timeout":
            wait_timeout = _number(url, name, value)
        elif name in _FLOATS:
            options[name] = _number(url, name, value)
        elif name in _TLS:
            if scheme != "rediss":
                raise _refuse(url, f"has the TLS option {name!r}, and redis:// is not TLS",
                              "use rediss:// for TLS")
            options[name] = _tls_value(url, name, value)
        else:
            known = ", ".join(("prefix", "lease", "wait", "wait_timeout", *_FLOATS, *_TLS))
            raise _refuse(url, f"has the option {name!r}, which a Redis store does not take",
                          f"one of {known}")
    if scheme == "rediss":
        options["ssl"] = True
    return RedisTarget(url, printable_url(url), scheme == "rediss", host, port, db,
                       prefix, lease, options, wait, wait_timeout)


def _number(url: str, name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _refuse(url, f"has {name}={value!r}, which is no number",
                      f"{name}=<seconds>") from None
    if not number > 0 or number == float("inf"):
        raise _refuse(url, f"has {name}={value!r}", f"{name}=<seconds, above 0>")
    return number


def _tls_value(url: str, name: str, value: str) -> Any:
    if name == "ssl_cert_reqs":
        if value not in _CERT_REQS:
            raise _refuse(url, f"has ssl_cert_reqs={value!r}",
                          f"one of {', '.join(_CERT_REQS)}")
        return value
    if name == "ssl_check_hostname":
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise _refuse(url, f"has ssl_check_hostname={value!r}", "true or false")
        return value.lower() in ("true", "1", "yes")
    return value
