"""Running the ``dsh-session`` command inside the test process, as a person would see it.

Its exit status, what it printed, and what it said on stderr.

A backend or plugin of your own can check that every command works with it this way
(``tests/test_third_party_backend.py`` does). Importing this module imports pytest.
"""

from __future__ import annotations

__all__ = ["run_cli"]

import contextlib
import io
from collections.abc import Callable, Sequence

import pytest


def run_cli(*argv: str,
            main: Callable[[Sequence[str]], object] | None = None) -> tuple[int, bytes, str]:
    """Run a command in this process: its exit status, stdout (bytes) and stderr.

    :param main: the command's entry point (default: ``dsh-session``'s).
    """
    if main is None:
        from .._cli.main import main as cli_main

        main = cli_main
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    err = io.StringIO()
    with (contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
          pytest.raises(SystemExit) as exit_):
        main(list(argv))
    out.flush()
    out.detach()
    code = exit_.value.code
    assert isinstance(code, int)
    return code, raw.getvalue(), err.getvalue()
