"""``RetentionPolicy``: what makes sense is taken, what does not is refused naming the
field and the value; durations and sizes as people write them; a policy file (TOML)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core import RetentionPolicy
from dsh_session_core._persistence.retention.policy import parse_duration, parse_size

DAY = datetime.timedelta(days=1)


@pytest.mark.parametrize(("fields", "says"), [
    ({"older_than": -DAY}, "older_than takes a duration (0 or more)"),
    ({"older_than": 30}, "older_than takes a duration"),
    ({"keep_latest": -1}, "keep_latest takes a whole number (0 or more), got -1"),
    ({"keep_latest": 2.5}, "keep_latest takes a whole number"),
    ({"keep_latest": True}, "keep_latest takes a whole number"),
    ({"max_total_bytes": -5}, "max_total_bytes takes a whole number (0 or more), got -5"),
    ({"keep_latest": 1, "per": ("team",)}, "unknown grouping 'team'"),
    ({"keep_latest": 1, "per": ("label:",)}, "unknown grouping 'label:'"),
    ({"keep_latest": 1, "per": "user"}, "per takes a tuple of groupings"),
    ({"keep_latest": 1, "per": ("user", "user")}, "per names a grouping twice"),
    ({"older_than": DAY, "per": ("user",)}, "give keep_latest too"),
    ({}, "a retention policy needs a rule"),
    ({"cwd": "/p"}, "a retention policy needs a rule"),
    ({"older_than": DAY, "archive_to": ""}, "archive_to takes a non-empty string"),
    ({"older_than": DAY, "cwd": 3}, "cwd takes a non-empty string"),
])
def test_nonsense_is_refused_naming_the_field(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        RetentionPolicy(**fields)


def test_sensible_policies_are_taken_and_frozen() -> None:
    policy = RetentionPolicy(older_than=DAY * 30, keep_latest=5, per=["user", "label:team"],  # type: ignore[arg-type]
                             max_total_bytes=10 << 30, archive_to="jsonl+zstd:///a")
    assert policy.per == ("user", "label:team")  # a list is taken as a tuple
    with pytest.raises(AttributeError):
        policy.keep_latest = 3  # type: ignore[misc]
    assert RetentionPolicy(keep_latest=0).keep_latest == 0  # alone: keeps none
    assert RetentionPolicy(max_total_bytes=0).max_total_bytes == 0
    assert policy.describe() == ("older than 30d, keep latest 5 per user+label:team, "
                                 "max 10,737,418,240 bytes, archive to jsonl+zstd:///a")


@given(st.lists(st.tuples(st.integers(1, 999), st.sampled_from("smhdw")), min_size=1,
                max_size=4))
def test_a_duration_is_the_sum_of_its_parts(parts: list[tuple[int, str]]) -> None:
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    text = "".join(f"{n}{u}" for n, u in parts)
    assert parse_duration(text) == datetime.timedelta(
        seconds=sum(n * seconds[u] for n, u in parts))


@pytest.mark.parametrize("text", ["", "30", "d", "30x", "1.5d", "-1d", " 30d", "30d "])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("text", "size"), [
    ("4096", 4096), ("1K", 1024), ("500M", 500 * 2**20), ("10G", 10 * 2**30),
    ("10GB", 10 * 2**30), ("10gib", 10 * 2**30), ("1.5T", 3 * 2**39), ("7B", 7),
])
def test_sizes_are_powers_of_1024(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "10X", "-1G", "1,5G", "ten"])
def test_a_bad_size_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_a_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "retention.toml"
    path.write_text('[retention]\nolder_than = "30d"\nkeep_latest = 3\nper = ["user"]\n'
                    'max_size = "2G"\narchive = "jsonl+zstd:///srv/archive"\n')
    policy = RetentionPolicy.from_toml(str(path))
    assert policy == RetentionPolicy(
        older_than=DAY * 30, keep_latest=3, per=("user",), max_total_bytes=2 << 30,
        archive_to="jsonl+zstd:///srv/archive", name="retention.toml")
    top = tmp_path / "top.toml"
    top.write_text("keep_latest = 1\nper = 'cwd'\n")  # no [retention] table: the top level
    assert RetentionPolicy.from_toml(str(top)).per == ("cwd",)


@pytest.mark.parametrize(("text", "says"), [
    ('older_than = "30d"\nkeep = 3\n', "unknown retention policy key 'keep'"),
    ('older_than = "a month"\n', "not a duration: 'a month'"),
    ('max_size = "lots"\n', "not a size: 'lots'"),
    ("keep_latest = -2\n", "keep_latest takes a whole number"),
    ("per = 3\nkeep_latest = 1\n", "per takes a list of groupings"),
    ("older_than = \n", "is no TOML"),
    ("retention = 3\n", "[retention] must be a table"),
])
def test_a_bad_policy_file_is_refused_naming_what(tmp_path: Path, text: str,
                                                   says: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(says)):
        RetentionPolicy.from_toml(str(path))
