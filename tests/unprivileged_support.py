"""A child Python that cannot write what a test made read-only, even when the suite runs
as root (who writes a 0444 file, and makes a folder in a 0555 one, all the same).

Not root: the child runs as this user. Root: as ``nobody``, when ``nobody`` can run this
interpreter, import what the child imports and reach the paths it reads; a clone in a
private folder (a ``mktemp -d`` one, a home folder of mode 700) or a Python under one
(pyenv's under /root) keeps ``nobody`` out. Else as root without the capabilities that
let it pass over permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER: dropped
from the bounding set of a process that then runs the interpreter, which so never has
them): it reaches what root owns by the owner's bits, and writes none that lacks ``w``.
Else the test skips, saying why. Each way is checked first by a probe that imports what
the child imports, reaches its paths, and cannot write a file of mode 0444.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import pytest

__all__ = ["run_unprivileged"]

#: Runs ``argv[1:]`` (an interpreter and its arguments) without the capabilities that let
#: root pass over file permissions: dropped from the bounding set, they are not in the
#: permitted set root's next program gets (capabilities(7), "execve").
_WITHOUT_OVERRIDES = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP = 24
for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
    if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
        sys.exit(f"cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}")
os.execv(sys.argv[1], sys.argv[1:])
"""

#: The probe: argv is (a file of mode 0444, the sys.path entries, "--", the modules, "--",
#: the paths); it fails, saying why, unless it cannot write the file, imports each module
#: and reads each path (a folder: lists it too).
_PROBE = """
import importlib, os, sys
args = sys.argv[1:]
locked, args = args[0], args[1:]
cut = args.index("--")
sys.path[:0], args = args[:cut], args[cut + 1:]
cut = args.index("--")
modules, paths = args[:cut], args[cut + 1:]
if os.access(locked, os.W_OK):
    sys.exit("it may write a file of mode 0444")
for name in modules:
    importlib.import_module(name)
for path in paths:
    if not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
        sys.exit(f"it cannot reach {path}")
"""


def _failure(argv: list[str], cwd: str | None, user: str | None) -> str | None:
    """Why ``argv`` did not run to a 0 exit (its last line on stderr, or the error that
    stopped it from starting), or ``None`` when it did."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd,
                              user=user, timeout=120)
    except OSError as exc:  # the interpreter, or the folder to run in, out of its reach
        return f"cannot run {argv[0]}: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def run_unprivileged(
    args: Sequence[str], *, imports: Sequence[str] = ("dsh_session_core",),
    path: Sequence[str] = (), reach: Sequence[str] = (), cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (this interpreter) as a process that cannot write a file or a
    folder without ``w`` for it (see the module's docstring), its output captured as
    text. ``imports`` are the modules the child imports, found with ``path`` before
    ``sys.path``; ``reach`` the paths it reads: the way chosen is checked to allow them.
    Skips the test when no way is open."""
    here = [sys.executable, *args]
    if os.geteuid() != 0:
        return subprocess.run(here, capture_output=True, text=True, check=False, cwd=cwd)
    fd, locked = tempfile.mkstemp(prefix="dsh-locked-")
    os.close(fd)
    try:
        os.chmod(locked, 0o444)
        probe = [sys.executable, "-c", _PROBE, locked, *path, "--", *imports, "--", *reach]
        as_nobody = _failure(probe, cwd, "nobody")
        if as_nobody is None:
            return subprocess.run(here, capture_output=True, text=True, check=False,
                                  cwd=cwd, user="nobody")
        dropping = [sys.executable, "-c", _WITHOUT_OVERRIDES]
        as_root = _failure([*dropping, *probe], cwd, None)
    finally:
        os.unlink(locked)
    if as_root is None:
        return subprocess.run([*dropping, *here], capture_output=True, text=True,
                              check=False, cwd=cwd)
    pytest.skip(f"running as root, with no way to a process that cannot write a read-only "
                f"file: as nobody, {as_nobody}; as root without CAP_DAC_OVERRIDE, {as_root}")
