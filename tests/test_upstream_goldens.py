"""Differential tests against the reference: every shared log derives to the reference's
messages (or fails where the reference failed), and exports back byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import UPSTREAM

_decode = msgspec.json.decode


def _logs(*folders: str) -> list[Path]:
    if not UPSTREAM.is_dir():
        return []
    return sorted(p for f in folders for p in (UPSTREAM / f).rglob("*.jsonl"))


def _golden(log: Path, kind: str) -> Path:
    rel = log.relative_to(UPSTREAM)
    return UPSTREAM / "goldens" / rel.with_suffix(f".{kind}.json")


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_session_core", *args], capture_output=True, check=False
    )


DERIVE_INPUTS = _logs("fixtures", "random", "synthetic")
EXPORT_INPUTS = _logs("fixtures", "random")


def test_inventory(upstream: Path) -> None:
    # The acceptance counts: 354 derive inputs, 353 reference logs that export.
    assert len(DERIVE_INPUTS) == 354
    assert len(EXPORT_INPUTS) == 353


def _derive_rows(*options: str) -> list[Any]:
    """``dsh-session derive --jsonl`` over every input: one decoded row a file."""
    proc = _cli("derive", "--jsonl", *options, *map(str, DERIVE_INPUTS))
    assert proc.returncode == 0, proc.stderr.decode()
    return [_decode(line) for line in proc.stdout.splitlines()]


def _mismatched(rows: list[Any], golden_kind: str) -> list[str]:
    """The files whose row differs from the reference's ``golden_kind`` output: the same
    messages, or an error where the reference failed."""
    mismatched = []
    for row in rows:
        golden = _decode(_golden(Path(row["file"]), golden_kind).read_bytes())
        if isinstance(golden, dict) and "error" in golden:
            ok = "error" in row and "messages" not in row
        else:
            ok = row.get("messages") == golden
        if not ok:
            mismatched.append(row["file"])
    return mismatched


def test_derive_jsonl_equals_every_golden(upstream: Path) -> None:
    rows = _derive_rows()
    assert [Path(r["file"]) for r in rows] == DERIVE_INPUTS
    assert _mismatched(rows, "messages") == []


def test_failures_are_exactly_the_references(upstream: Path) -> None:
    expected = sum(
        1 for p in DERIVE_INPUTS if "error" in _decode(_golden(p, "messages").read_bytes())
    )
    # 39 invalid replaces, 2 seeds starting at seq 1, the torn synthetic log.
    assert expected == 42


@pytest.mark.parametrize(
    "log", EXPORT_INPUTS, ids=[str(p.relative_to(UPSTREAM)) for p in EXPORT_INPUTS]
)
def test_export_reproduces_the_log_byte_for_byte(log: Path) -> None:
    from dsh_session_core._cli.support import registry as _registry
    from dsh_session_core._logformat.logfile import dump_log, parse_log

    data = log.read_bytes()
    parsed = parse_log(data, _registry())
    assert dump_log(parsed.header, parsed.events) == data


def test_export_cli_round_trip(upstream: Path) -> None:
    log = EXPORT_INPUTS[0]
    proc = _cli("export", str(log))
    assert proc.returncode == 0
    assert proc.stdout == log.read_bytes()


def test_derive_rejects_a_torn_log_with_one_line(upstream: Path) -> None:
    proc = _cli("derive", str(UPSTREAM / "synthetic" / "crash-after-tool-call.jsonl"))
    assert proc.returncode == 1
    err = proc.stderr.decode()
    # One line says what is wrong, one says what to do; no traceback.
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("dsh-session: ")
    assert lines[1].startswith("hint: ")
    assert "line 62" in err


def test_derive_recover_equals_every_scan_golden(upstream: Path) -> None:
    rows = _derive_rows("--recover")
    assert _mismatched(rows, "scan") == []
    # The reference's scanner refuses the ten version-less headers, and what seeding
    # refuses after it.
    assert sum("error" in r for r in rows) == sum(
        "error" in _decode(_golden(p, "scan").read_bytes()) for p in DERIVE_INPUTS
    )
