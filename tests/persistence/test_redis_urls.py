"""Redis store URLs as Redis users write them: an ACL user and password, a database
number, a key prefix, TLS options; what is refused, and a password never printed (``ls``,
``show``, ``copy``'s reports, errors), checked on a server of the test's own that asks
for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core._persistence.backends.redis.url import parse_redis_url
from dsh_session_core.errors import SessionNotStoredError, StoreUrlError
from dsh_session_core.testing import run_cli
from redis_support import acl_store

SECRET = "s3cret-Pw"


def test_a_url_names_the_user_password_database_prefix_and_lease() -> None:
    t = parse_redis_url(f"redis://agent:{SECRET}@cache.example:6380/3?prefix=app:&lease=5")
    assert (t.host, t.port, t.db, t.prefix, t.lease, t.tls) == (
        "cache.example", 6380, 3, "app:", 5.0, False)
    assert (t.options["username"], t.options["password"]) == ("agent", SECRET)
    assert t.shown == "redis://agent@cache.example:6380/3?prefix=app:&lease=5"
    defaults = parse_redis_url("redis://localhost")
    assert (defaults.port, defaults.db, defaults.prefix, defaults.lease) == (
        6379, None, "dsh:", 20.0)
    assert (defaults.wait, defaults.wait_timeout) == (0, 2.0)
    waiting = parse_redis_url("redis://cache.example?wait=2&wait_timeout=0.5")
    assert (waiting.wait, waiting.wait_timeout) == (2, 0.5)


def test_a_password_alone_is_the_default_users_and_never_shown() -> None:
    t = parse_redis_url(f"rediss://:{SECRET}@cache.example?ssl_cert_reqs=required"
                        f"&ssl_ca_certs=/etc/ca.pem&ssl_check_hostname=false")
    assert "username" not in t.options
    assert t.options["password"] == SECRET
    assert (t.options["ssl"], t.options["ssl_cert_reqs"], t.options["ssl_ca_certs"],
            t.options["ssl_check_hostname"]) == (True, "required", "/etc/ca.pem", False)
    assert SECRET not in t.shown
    assert t.shown.startswith("rediss://cache.example?")


def test_the_store_is_the_server_database_and_prefix_however_the_url_is_spelt() -> None:
    a = parse_redis_url(f"redis://u:{SECRET}@localhost:6379/0?prefix=p:&socket_timeout=3")
    b = parse_redis_url("redis://127.0.0.1?prefix=p:")
    c = parse_redis_url("redis://127.0.0.1/1?prefix=p:")
    d = parse_redis_url("redis://127.0.0.1?prefix=q:")
    assert a.identity() == b.identity()
    assert len({b.identity(), c.identity(), d.identity()}) == 3


@pytest.mark.parametrize(("url", "problem"), [
    ("redis://", "names no host"),
    ("redis://host:port/0", "port that is no number"),
    ("redis://host/agents", "Redis numbers them"),
    ("redis://host?prefix=a{b}", "with a brace"),
    ("redis://host?ssl_ca_certs=/ca.pem", "redis:// is not TLS"),
    ("redis://host?keyprefix=a", "which a Redis store does not take"),
    ("redis://host?lease=0.5", "under a second"),
    ("redis://host?socket_timeout=soon", "no number"),
    ("rediss://host?ssl_cert_reqs=maybe", "ssl_cert_reqs"),
    ("redis://host?wait=one", "wait='one'"),
    ("redis://host?wait=-1", "wait='-1'"),
    ("redis://host?wait=1&wait_timeout=0", "wait_timeout='0'"),
])
def test_a_url_that_names_no_store_is_refused(url: str, problem: str) -> None:
    with pytest.raises(StoreUrlError, match=problem):
        parse_redis_url(url)


def test_a_refused_url_never_shows_its_password() -> None:
    with pytest.raises(StoreUrlError) as caught:
        parse_redis_url(f"redis://agent:{SECRET}@host?nope=1")
    assert SECRET not in str(caught.value)


@pytest.fixture
def acl_url(tmp_path: Path) -> Iterator[str]:
    """A store on a server of its own whose only user is ``agent``, with a password."""
    with acl_store(tmp_path / "server", SECRET, "acl:") as url:
        yield url


def test_an_acl_user_writes_and_no_command_prints_the_password(
    acl_url: str, tmp_path: Path
) -> None:
    with open_store(acl_url) as store:
        s = store.create("chat-1", cwd="/w")
        s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                       "source": {"kind": "user"}}})
        s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        store.flush(s)
        assert SECRET not in store.location("chat-1")
        with pytest.raises(SessionNotStoredError) as missing:
            store.open("nobody")
        assert SECRET not in str(missing.value) + "".join(
            getattr(missing.value, "__notes__", []))
    outputs = []
    for argv in (("ls", "--store", acl_url), ("show", "chat-1", "--store", acl_url),
                 ("show", "nobody", "--store", acl_url),
                 ("copy", acl_url, str(tmp_path / "copied")),
                 ("copy", str(tmp_path / "copied"), acl_url.replace("acl:", "acl2:")),
                 ("copy", acl_url, str(tmp_path / "other"), "--session", "nobody")):
        code, out, err = run_cli(*argv)
        outputs.append((argv[0], code, out.decode() + err))
    assert [code for _, code, _ in outputs] == [0, 0, 1, 0, 0, 1]
    assert "chat-1" in outputs[0][2]
    assert "agent@127.0.0.1" in outputs[0][2]  # the store, named without its password
    for command, _, text in outputs:
        assert SECRET not in text, command


def test_a_wrong_password_is_refused_without_printing_it(acl_url: str) -> None:
    wrong = acl_url.replace(SECRET, "not-the-password")
    code, out, err = run_cli("ls", "--store", wrong)
    assert code != 0
    assert "not-the-password" not in out.decode() + err
    assert SECRET not in out.decode() + err
