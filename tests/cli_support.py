"""Running ``dsh-session`` inside the test process, as a person would see it."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest


def run_cli(*argv: str, main: Any = None) -> tuple[int, bytes, str]:
    """A command in this process: its exit status, stdout (bytes) and stderr.

    :param main: the CLI entry point (default: ``dsh_session_core._cli.main.main``).
    """
    if main is None:
        from dsh_session_core._cli.main import main
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
