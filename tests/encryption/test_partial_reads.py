"""One session that cannot be read takes nothing else down (issue 37, point 4): a
session crypto-shredded (a key callable that gives no key for it), a record tampered
with in the store's own bytes, or an encrypted session searched without keys. Search
answers the other sessions' hits and names each one it could not read with the error
(``SearchResults.unreadable``; ``dsh-session search`` on stderr, exit 3); the listing
hooks get nothing of such a session (never a sealed box), and the listing goes on.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pytest
from crypt_support import KEY1, KEY2, open_sealed, tamper, write_session

from dsh_session_core import (
    Event,
    Keyring,
    SessionHeader,
    create_plugin_manager,
    hookimpl,
    stored_label,
)
from dsh_session_core.errors import (
    EncryptedSessionError,
    KeyUnavailableError,
    SealedRecordError,
)
from dsh_session_core.testing import run_cli

if TYPE_CHECKING:
    from dsh_session_core import SearchResults

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def _keys(shredded: frozenset[str] = frozenset()) -> Keyring:
    """One key per session, kept by the host: none for the ``shredded`` ones (their keys
    deleted: crypto-shredding)."""
    def lookup(session_id: str, key_id: str) -> bytes | None:
        if key_id != "session" or session_id in shredded:
            return None
        return KEY2 if session_id == "b" else KEY1

    return Keyring(lookup, current="session")


def _fill(url: str) -> None:
    for sid in ("a", "b", "c"):
        write_session(url, sid, [f"the needle of {sid}", f"{sid} says hello"], _keys())


def _found(hits: SearchResults) -> set[tuple[str, int]]:
    return {(h.session_id, h.seq) for h in hits}


def test_a_shredded_session_leaves_the_others_searchable(store_url: str) -> None:
    _fill(store_url)
    with open_sealed(store_url, _keys(frozenset({"b"}))) as store:
        hits = store.search("needle")
        assert _found(hits) == {("a", 0), ("c", 0)}
        [missed] = hits.unreadable
        assert missed.session_id == "b"
        assert isinstance(missed.error, KeyUnavailableError)
        assert "cannot be read again" in missed.reason
        assert missed.to_dict()["error"] == "KeyUnavailableError"
        assert not hits.complete
        # The async twin and a page say the same.
        page = asyncio.run(store.asearch("needle", limit=1))
        assert len(page) == 1
        assert [u.session_id for u in page.unreadable] == ["b"]
        # Asked for the shredded session only: no hit, and it is named.
        only = store.search("needle", sessions=["b"])
        assert (list(only), [u.session_id for u in only.unreadable]) == ([], ["b"])
        # Every key there: the answer is whole.
    with open_sealed(store_url, _keys()) as store:
        whole = store.search("needle")
        assert _found(whole) == {("a", 0), ("b", 0), ("c", 0)}
        assert whole.complete


def test_a_tampered_record_leaves_the_others_searchable(store_url: str) -> None:
    _fill(store_url)
    tamper(store_url, "c", 1)
    with open_sealed(store_url, _keys()) as store:
        hits = store.search("needle")
        assert _found(hits) == {("a", 0), ("b", 0)}
        [missed] = hits.unreadable
        assert missed.session_id == "c"
        assert isinstance(missed.error, SealedRecordError)
        assert missed.error.seq == 1


def test_without_keys_the_plaintext_sessions_are_searched(store_url: str) -> None:
    # A store holding a plaintext session beside an encrypted one, read without keys:
    # the plaintext one is searched, the encrypted one named (not "no hits").
    write_session(store_url, "sealed", ["the needle, sealed"], _keys())
    write_session(store_url, "plain", ["the needle, plain"], None)  # type: ignore[arg-type]
    with open_sealed(store_url, None) as store:
        hits = store.search("needle")
        assert _found(hits) == {("plain", 0)}
        [missed] = hits.unreadable
        assert missed.session_id == "sealed"
        assert isinstance(missed.error, EncryptedSessionError)


def _env_keys(monkeypatch: pytest.MonkeyPatch, **keys: bytes) -> None:
    monkeypatch.setenv("DSH_SESSION_KEYS", ",".join(
        f"{kid}:{base64.b64encode(key).decode()}" for kid, key in keys.items()))


def _rotated(url: str) -> None:
    """``a`` sealed under k1, ``b`` under k2: given only k2, ``a`` is shredded."""
    write_session(url, "a", ["the needle of a"], Keyring({"k1": KEY1}))
    write_session(url, "b", ["the needle of b"], Keyring({"k2": KEY2}))


def test_the_cli_prints_the_hits_and_names_the_shredded_session(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _rotated(store_url)
    _env_keys(monkeypatch, k2=KEY2)
    code, out, err = run_cli("search", "needle", "--store", store_url)
    assert code == 3, err
    text = out.decode()
    assert "needle of b" in text.replace("**", "")
    assert "1 hit(s) in" in text
    assert "(1 session(s) could not be read, named on stderr)" in text
    [line] = err.splitlines()
    assert line.startswith('dsh-session: warning: hits of session "a" may be missing: ')
    assert 'no key "k1"' in line
    code, out, err = run_cli("search", "needle", "--store", store_url, "--json")
    assert code == 3
    assert [h["session"] for h in json.loads(out)] == ["b"]
    assert len(err.splitlines()) == 1
    # With every key: exit 0, nothing on stderr.
    _env_keys(monkeypatch, k2=KEY2, k1=KEY1)
    code, out, err = run_cli("search", "needle", "--store", store_url)
    assert (code, err) == (0, "")


def test_the_cli_names_a_tampered_session(store_url: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _rotated(store_url)
    tamper(store_url, "b", 0)
    _env_keys(monkeypatch, k2=KEY2, k1=KEY1)
    code, out, err = run_cli("search", "needle", "--store", store_url)
    assert code == 3, err
    assert "needle of a" in out.decode().replace("**", "")
    [line] = err.splitlines()
    assert 'hits of session "b" may be missing: refused record seq 0' in line


class _Labeller:
    """A plugin labelling every session from its first event, and recording what it
    was given."""

    def __init__(self) -> None:
        self.seen: dict[str, list[object]] = {}

    @hookimpl
    def label_session(self, header: SessionHeader,
                      first_events: Callable[[int], Sequence[Event]]) -> str | None:
        events = first_events(1)
        self.seen[header.id] = [e.data for e in events]
        if not events:
            return None
        return f"starts with {events[0].data.content[0].text}"


@pytest.mark.parametrize("case", ["shredded", "tampered", "no keys"])
def test_a_label_hook_gets_nothing_of_a_session_it_cannot_read(store_url: str,
                                                               case: str) -> None:
    _fill(store_url)
    if case == "tampered":
        tamper(store_url, "b", 0)
    keys = {"shredded": _keys(frozenset({"b"})), "tampered": _keys(), "no keys": None}[case]
    pm = create_plugin_manager(autoload=False)
    plugin = _Labeller()
    pm.register(plugin)
    with open_sealed(store_url, keys) as store:
        labels = {h.id: stored_label(store.backend, h, store.registry, plugins=pm)
                  for h in store.stored()}
    assert labels["b"] is None
    assert plugin.seen["b"] == []  # nothing: never the sealed box
    if case == "no keys":
        assert labels == {"a": None, "b": None, "c": None}
    else:
        assert labels == {"a": "starts with the needle of a", "b": None,
                          "c": "starts with the needle of c"}
