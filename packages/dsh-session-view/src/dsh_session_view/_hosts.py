"""Which ``Host`` headers the viewer answers: the guard against DNS rebinding.

A page on another site cannot read the viewer's answers (the same-origin rule), unless
its DNS name is made to point at 127.0.0.1 after the page has loaded: the browser then
sends the viewer requests that it believes go to the other site, and lets that site's
code read the answers. Such a request always carries the other site's name in its
``Host`` header, so the viewer answers only the names that mean *this* viewer: the
loopback names (``localhost``, ``127.0.0.1``, ``[::1]``), the address it is bound to and
the name it was given with ``--host``, and the names given with ``--allowed-host``.
The port is not compared: a rebinding page reaches the viewer's own port anyway, and a
tunnel (``ssh -L 9000:localhost:8765``) changes it.

An IP address literal cannot be rebound, but only the ones listed are accepted: a
viewer bound to 127.0.0.1 has no business answering for another address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["LOOPBACK_NAMES", "WILDCARDS", "allowed_names", "host_name", "shown_name"]

#: The names every viewer answers to: loopback, whatever it is bound to.
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
#: Addresses that mean "every address of this machine": no client names them.
WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})

# A DNS name or an IPv4 address (RFC 3986's reg-name, narrowed to what resolves).
_NAME: Final = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")


def _canonical(name: str) -> str | None:
    """``name`` (no port) as compared: lower case, without the final dot of a fully
    qualified name or the brackets of an IPv6 literal; None when it is no host name."""
    name = name.lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
        try:
            return str(ipaddress.IPv6Address(name))
        except ValueError:
            return None
    if ":" in name:
        try:
            return str(ipaddress.IPv6Address(name))
        except ValueError:
            return None
    if name.endswith("."):
        name = name[:-1]
    if not _NAME.fullmatch(name) or ".." in name:
        return None
    return name


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header's value (or of an absolute URL's authority), as
    compared, without its port; None when the value is malformed (RFC 9110's
    ``uri-host [ ":" port ]``)."""
    value = value.strip(" \t")
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[:end + 1], value[end + 1:]
    else:
        name, sep, port = value.rpartition(":")
        if not sep:
            name, rest = value, ""
        else:
            rest = ":" + port
    if rest and not re.fullmatch(r":[0-9]{0,5}", rest):
        return None
    if rest[1:] and int(rest[1:]) > 65535:
        return None
    return _canonical(name) if name else None


def allowed_names(bound: Iterable[str], extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a viewer answers to: the loopback names, the ``bound`` ones (the
    ``--host`` it was given and the address it is bound to; wildcards left out) and
    ``extra`` (``--allowed-host``).

    :raises ValueError: an ``extra`` name that is no host name (a scheme, a port, a
        path, a wildcard), saying what is expected.
    """
    names = set(LOOPBACK_NAMES)
    for name in bound:
        canonical = _canonical(name) if name not in WILDCARDS else None
        if canonical is not None:
            names.add(canonical)
    for name in extra:
        canonical = _canonical(name)
        if canonical is None or canonical in WILDCARDS:
            msg = (f"{name!r} is not a host name: give a name or an address as a browser's "
                   f"address bar shows it, without scheme, port or path (such as "
                   f"viewer.example.org, 192.168.1.20 or [fe80::1]); wildcards are not "
                   f"taken")
            raise ValueError(msg)
        names.add(canonical)
    return frozenset(names)


def shown_name(name: str) -> str:
    """A canonical name as a URL writes it (an IPv6 literal in brackets)."""
    return f"[{name}]" if ":" in name else name
