"""How ``dsh-session`` shows an error a command lets out is one table,
``_cli.support.failure_for``, which ``main`` applies: the read model's errors (usage:
exit 2; the rest: exit 1) with their hint, a session not stored naming its store, any
other error of dsh-session, and a bug, each as one line and a hint, never a traceback.
The commands let these errors out instead of formatting them each its own way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core._cli.support import EXIT_REJECTED, EXIT_USAGE, Failure, failure_for
from dsh_session_core.errors import (
    InspectUsageError,
    PluginError,
    SessionNotFoundError,
    SessionNotStoredError,
    SourceReadError,
)
from dsh_session_core.inspect import SearchQuery
from dsh_session_core.testing import run_cli


def _shown(exc: Exception) -> tuple[str, str | None, int]:
    failure = failure_for(exc)
    return str(failure), failure.hint, failure.status


def test_the_table_has_one_row_per_kind_of_error() -> None:
    own = Failure("a command's own words", EXIT_USAGE, hint="do this")
    assert failure_for(own) is own
    assert _shown(InspectUsageError("--limit takes a count", hint="--limit 10")) == (
        "--limit takes a count", "--limit 10", EXIT_USAGE)
    assert _shown(SessionNotFoundError('no session "x" in S', session_id="x", location="S",
                                       hint="`dsh-session ls --store S` lists the sessions")
                  ) == ('no session "x" in S', "`dsh-session ls --store S` lists the sessions",
                        EXIT_REJECTED)
    assert _shown(SourceReadError("cannot read the store S")) == (
        "cannot read the store S", None, EXIT_REJECTED)
    assert _shown(PluginError("two plugins  clash\n here")) == (
        "PluginError: two plugins clash here", "run again with --debug to see where it came from",
        EXIT_REJECTED)
    assert _shown(ZeroDivisionError("division by zero")) == (
        "internal error: ZeroDivisionError: division by zero",
        "run again with --debug for the traceback, and report it", EXIT_REJECTED)


def test_a_session_not_stored_is_said_with_its_store(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s")) as store, pytest.raises(SessionNotStoredError) as c:
        store.delete("nope\x1b[31m")  # what a terminal would run is escaped
    assert _shown(c.value) == (
        f'no session "nope\\x1b[31m" in {tmp_path / "s"}',
        f"`dsh-session ls --store {tmp_path / 's'}` lists the sessions", EXIT_REJECTED)
    # Raised where the store is not known: said without it.
    assert _shown(SessionNotStoredError("nope")) == (
        'no session "nope" in the store', "`dsh-session ls` lists the sessions",
        EXIT_REJECTED)


@pytest.mark.parametrize(("query", "message", "hint"), [
    ('"open', "the query '\"open' has a quote that is not closed",
     "close the phrase: dsh-session search '\"exact words\"'"),
    ("--- ...", "the query '--- ...' holds no word to search for (words are letters and "
                "digits)",
     'search for words: dsh-session search "tool error" --type tool/result'),
])
def test_a_query_that_does_not_read_is_a_usage_error_with_its_hint(
        query: str, message: str, hint: str, tmp_path: Path) -> None:
    with pytest.raises(InspectUsageError) as caught:
        SearchQuery.parse(query)
    assert (caught.value.message, caught.value.hint) == (message, hint)
    assert isinstance(caught.value, ValueError)  # what callers caught before
    # The command says it as it always did (the hint was chosen by reading the message).
    code, out, err = run_cli("search", query, "--store", str(tmp_path / "s"))
    assert (code, out, err) == (EXIT_USAGE, b"", f"dsh-session: {message}\nhint: {hint}\n")


def test_a_filter_a_search_never_returns_is_a_usage_error_without_hint() -> None:
    with pytest.raises(InspectUsageError, match=r"^unknown role robot: a search takes ") as c:
        SearchQuery.parse("x", roles=["robot"])
    assert c.value.hint is None
    with pytest.raises(InspectUsageError, match=r"^a search never returns events of ") as c:
        SearchQuery.parse("x", types=["session/start"])
    assert c.value.hint is None
