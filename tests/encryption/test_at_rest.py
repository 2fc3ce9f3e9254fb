"""What an encrypted store holds at rest, and how it recovers: no plaintext in any
byte it stores (files, database rows, the search index), search by opening and
scanning, a truncated ciphertext at the tail cut as a torn tail, and every payload
back byte for byte."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from crypt_support import (
    KEYS,
    Records,
    end_turn,
    open_sealed,
    say,
    start_turn,
    write_session,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import DurableStore, Keyring, RetentionPolicy, create_plugin_manager
from dsh_session_core._persistence.encryption.sealed import SealedBackend
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core.errors import EncryptedSessionError, SealedRecordError

SECRET = "hunter2-7f3a-correct-horse"


def _at_rest(url: str) -> bytes:
    records = Records(url)
    if url.startswith("jsonl+zstd:"):  # the frames' contents, not their compression
        import zstandard

        [log] = Path(records.path).glob("*/*.jsonl.zst")
        with log.open("rb") as f:
            return zstandard.ZstdDecompressor().stream_reader(
                f, read_across_frames=True).read()
    return records.stored_bytes()


@pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")
@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "sealed"])
def test_no_plaintext_at_rest_and_search_still_finds_it(store_url: str, keys: object) -> None:
    with open_sealed(store_url, keys) as store:  # type: ignore[arg-type]
        s = store.create("a", cwd="/crypt")
        start_turn(s, 1, f"my password is {SECRET}")
        end_turn(s, 1, f"noted: {SECRET}")
        store.flush(s)
        hits = store.search(SECRET)
        assert {(h.session_id, h.seq) for h in hits} == {("a", 1), ("a", 3)}
    stored = _at_rest(store_url)
    # The control (a plain store) shows the grep finds the secret where it is.
    assert (SECRET.encode() in stored) is (keys is None)


@pytest.mark.store_kinds("jsonl", "jsonl+zstd")
def test_a_truncated_ciphertext_at_the_tail_is_a_torn_tail(store_url: str) -> None:
    with open_sealed(store_url) as store:
        s = store.create("a", cwd="/crypt")
        start_turn(s, 1, "first")
        end_turn(s, 1, "done")
        store.flush(s)
        committed = s.jsonl()
        start_turn(s, 2, "second, cut short")
        store.flush(s)
        store.release(s)
    [log] = Path(Records(store_url).path).glob("*/a.jsonl*")
    log.write_bytes(log.read_bytes()[:-12])  # into the last record's ciphertext
    with open_sealed(store_url) as store:
        repaired = store.open("a")
        events = repaired.jsonl()
        assert events.startswith(committed)  # nothing committed lost
        kept = [e.type for e in repaired.events[len(committed.splitlines()):]]
        # JSONL cuts the torn line (its turn then closed as interrupted); compact JSONL
        # the torn frame (the whole second batch).
        assert kept in (["turn/start", "turn/end"], [])
    with open_sealed(store_url) as store:  # the repair was written sealed, and loads
        assert store.open("a").jsonl() == events
    if not store_url.startswith("jsonl+zstd:"):
        lines = log.read_bytes().splitlines()[1:]
        assert all(b'"data":{"sealed":{' in line for line in lines), lines


@pytest.mark.store_kinds("jsonl")
def test_a_sealed_line_cut_short_in_place_is_refused_not_cut(store_url: str) -> None:
    # Still JSON, so no torn write made it: it was changed, and is refused.
    write_session(store_url, "a", ["one", "two"])
    records = Records(store_url)
    last = records.get("a", 1)
    last["data"]["sealed"]["ct"] = last["data"]["sealed"]["ct"][:-8]
    records.put("a", 1, last)
    with open_sealed(store_url) as store, pytest.raises(SealedRecordError) as info:
        store.open("a")
    assert info.value.seq == 1


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_a_fork_is_sealed_under_its_own_id(store_url: str) -> None:
    with open_sealed(store_url) as store:
        a = store.create("a", cwd="/crypt")
        start_turn(a, 1, "shared past")
        end_turn(a, 1, "ok")
        store.flush(a)
        fork = store.fork(a, child_id="b")
        start_turn(fork, 2, "fork's own")
        store.flush(fork)
        want = fork.jsonl()
    records = Records(store_url)
    assert records.get("b", 1)["data"] != records.get("a", 1)["data"]
    with open_sealed(store_url) as store:
        assert store.open("b").jsonl().startswith(want)



@pytest.mark.store_kinds("jsonl", "sqlite")
@pytest.mark.parametrize("pruner", [KEYS, None], ids=["with-keys", "without-keys"])
def test_an_archive_of_an_encrypted_store_is_sealed(
        store_url: str, tmp_path: Path, pruner: Keyring | None) -> None:
    # With the keys, the archive is sealed with them; without, the sealed records are
    # copied as they are. Either way no plaintext lands in it.
    archive = f"jsonl+zstd:///{tmp_path / 'archive'}"
    with open_sealed(store_url) as store:
        a = store.create("a", cwd="/crypt")
        start_turn(a, 1, f"my password is {SECRET}")
        end_turn(a, 1, "noted")
        store.release(a)
    with open_sealed(store_url, pruner) as store:
        report = store.prune(RetentionPolicy(max_total_bytes=0, archive_to=archive))
    assert [(d.session_id, d.status, d.archived_to) for d in report.decisions
            if d.session_id == "a"] == [("a", "deleted", archive)]
    assert SECRET.encode() not in _at_rest(archive)  # sealed, not decrypted into it
    with open_sealed(archive) as kept:
        assert SECRET.encode() in kept.open("a").jsonl()
    with open_sealed(archive, None) as reader, pytest.raises(EncryptedSessionError):
        reader.open("a")

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12)
_IDS = itertools.count()


@pytest.fixture(scope="module")
def stores() -> Iterator[list[str]]:
    """A JSONL and a SQLite store, shared by every example of the hypothesis test (each
    example writes a session of its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "jsonl").mkdir()
        yield [f"{tmp}/jsonl", f"sqlite:///{tmp}/s.db"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, max_size=4), foreign=_JSON)
def test_every_payload_comes_back_byte_for_byte(
    stores: list[str], texts: list[str], foreign: object
) -> None:
    sid = f"h{next(_IDS)}"
    for url in stores:
        backend = SealedBackend(backend_for(url), Sealer(KEYS))
        with DurableStore(backend, create_plugin_manager(autoload=False),
                          foreign_types=["x/*"]) as store:
            s = store.create(sid, cwd="/crypt")
            for text in texts:
                say(s, text)
            s.append("x/thing", {"value": foreign})  # a foreign type: kept verbatim
            store.flush(s)
            written = s.jsonl()
        again = DurableStore(SealedBackend(backend_for(url), Sealer(KEYS)),
                             create_plugin_manager(autoload=False))
        with again:
            assert again.read_session(sid).jsonl() == written


@pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")
@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "sealed"])
def test_no_plaintext_at_rest_in_projection_rows(store_url: str, keys: Keyring | None
                                                 ) -> None:
    # A projection whose rows and summary hold the text (the contract's): its rows, the
    # JSONL sidecar or the database's tables, are sealed like the events.
    from dsh_session_core.testing.projection_contract import ContractPlugin, contract_projection

    pm = create_plugin_manager(autoload=False)
    pm.register(ContractPlugin(), "contract")
    backend = backend_for(store_url, create=True)
    with DurableStore(backend if keys is None else SealedBackend(backend, Sealer(keys)),
                      pm) as store:
        s = store.create("a", cwd="/crypt")
        start_turn(s, 1, f"my password is {SECRET}")
        end_turn(s, 1, f"noted: {SECRET}")
        store.flush(s)
        store.release(s)
        view = store.projection("a", contract_projection.name)
        assert view.folded == 0  # read from the rows: they are there to be searched
        assert SECRET in view.summary().text
    # The control (a plain store) shows the grep finds the secret where it is.
    assert (SECRET.encode() in Records(store_url).stored_bytes()) is (keys is None)
