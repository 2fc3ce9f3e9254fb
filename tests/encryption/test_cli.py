"""The command line on an encrypted store: with keys (``DSH_SESSION_KEYS``, or the
variable ``--key-env`` names) it reads as any store; without them ``ls`` lists what the
envelopes say, and every command that would read a record refuses in one line."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from crypt_support import KEY1, write_session

from dsh_session_core.testing import run_cli

SECRET = "s3cr3t-in-the-log"
KEYS_TEXT = f"k1:{base64.b64encode(KEY1).decode()}"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("DSH_SESSION_KEYS", raising=False)
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    url = str(tmp_path / "store")
    (tmp_path / "store").mkdir()
    write_session(url, "enc", [SECRET])
    return url


@pytest.mark.parametrize("argv", [["show", "enc"], ["export", "enc"], ["stats", "enc"],
                                  ["tail", "enc"]])
def test_without_keys_a_reading_command_refuses_in_one_line(
    store: str, argv: list[str]
) -> None:
    code, out, err = run_cli(*argv, "--store", store)
    assert code == 1, err
    assert SECRET.encode() not in out
    assert "encrypted at rest" in err
    assert "Traceback" not in err
    assert err.startswith("dsh-session: ")


def test_without_keys_search_names_the_encrypted_session_and_exits_3(store: str) -> None:
    # Not "no hits": the session is named, with how to pass the keys, and the status
    # says the answer is partial (a plaintext session beside it would be searched).
    code, out, err = run_cli("search", SECRET, "--store", store)
    assert code == 3, err
    assert out.startswith(b"no hits for ")
    assert b"(1 session(s) could not be read, named on stderr)" in out
    [line] = err.splitlines()
    assert line.startswith('dsh-session: warning: hits of session "enc" may be missing: ')
    assert "encrypted at rest" in line
    assert "DSH_SESSION_KEYS" in line


def test_without_keys_ls_lists_the_envelopes(store: str) -> None:
    code, out, err = run_cli("ls", "--store", store, "--json")
    assert (code, err) == (0, "")
    [row] = json.loads(out)
    assert (row["id"], row["events"], row["version"]) == ("enc", 1, -1)  # says: sealed


def test_a_sealed_log_file_is_refused_as_a_file_too(store: str) -> None:
    [log] = Path(store).glob("*/enc.jsonl")
    code, out, err = run_cli("show", str(log))
    assert code == 1
    assert "encrypted at rest" in err
    assert SECRET.encode() not in out


@pytest.mark.parametrize("how", ["default", "key-env"])
def test_with_keys_every_command_reads(store: str, how: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    extra: list[str] = []
    if how == "default":
        monkeypatch.setenv("DSH_SESSION_KEYS", KEYS_TEXT)
    else:
        monkeypatch.setenv("MY_KEYS", KEYS_TEXT)
        extra = ["--key-env", "MY_KEYS"]
    code, out, err = run_cli("export", "enc", "--store", store, *extra)
    assert (code, err) == (0, "")
    header, line = out.decode().splitlines()
    assert json.loads(header)["version"] == 0  # the export is the plaintext log
    assert json.loads(line)["data"]["content"][0]["text"] == SECRET
    code, out, err = run_cli("search", SECRET, "--store", store, *extra)
    assert (code, err) == (0, "")
    assert b"1 hit(s)" in out
    code, out, err = run_cli("show", "enc", "--store", store, *extra)
    assert (code, err) == (0, "")


def test_a_key_variable_that_is_not_set_is_a_usage_error(store: str) -> None:
    code, _, err = run_cli("show", "enc", "--store", store, "--key-env", "NOT_SET_HERE")
    assert code == 2
    assert "NOT_SET_HERE" in err


def test_the_advice_for_a_plaintext_session_works(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 37, point 5: the refusal said "seal it in place: dsh-session rekey ID", and
    # rekey refused with the same message. Followed now, it seals the session.
    url = str(tmp_path / "store")
    (tmp_path / "store").mkdir()
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    write_session(url, "old", [SECRET], None)  # type: ignore[arg-type]  # plaintext
    monkeypatch.setenv("DSH_SESSION_KEYS", KEYS_TEXT)
    code, out, err = run_cli("show", "old", "--store", url)
    assert code == 1
    advice = err.splitlines()[0].rsplit(": ", 1)[-1]
    assert advice == "store.rekey('old'), or dsh-session rekey old"
    command = advice.split(", or ")[1].split()
    code, out, err = run_cli(*command[1:], "--store", url)  # as it says
    assert (code, err) == (0, "")
    assert out == b"old: 1 record(s) sealed under k1 (were: plaintext)\n"
    code, out, err = run_cli("export", "old", "--store", url)  # read with the keys
    assert (code, err) == (0, "")
    assert json.loads(out.decode().splitlines()[1])["data"]["content"][0]["text"] == SECRET
    [log] = Path(url).glob("*/old.jsonl")
    assert SECRET.encode() not in log.read_bytes()
    monkeypatch.delenv("DSH_SESSION_KEYS")
    code, out, err = run_cli("show", "old", "--store", url)
    assert code == 1
    assert "encrypted at rest" in err
