"""A throwaway PostgreSQL server for the test suite (standard library only).

    python3 tests/pgserver.py check        # exit 0 iff the server binaries are found
    python3 tests/pgserver.py start DIR    # initdb DIR/data, start, print the server URL
    python3 tests/pgserver.py stop DIR     # stop the server and remove DIR

The server listens on 127.0.0.1 on a free port (and on a unix socket in DIR), trusts
every local connection, and has the superuser ``dsh``: ``start`` prints
``postgresql://dsh@127.0.0.1:PORT/postgres``. fsync stays on (the tests check
durability). PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` system user, or ``nobody`` without one; DIR is then chowned to that user,
and its parents must be traversable by it (a directory under /tmp, not under /root).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

SUPERUSER = "dsh"
STATE = "pgserver.json"  # marks DIR as ours: stop removes only such a directory
INSTALL_HINT = "install PostgreSQL, e.g. `apt-get install postgresql` (Debian/Ubuntu)"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
#: A unix socket path longer than this is refused by the kernel (sun_path is 108 bytes).
MAX_SOCKET_DIR = 90
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    # Load tests open ~20 concurrent connections plus pools; each test has its database.
    "max_connections": "200",
    "shared_buffers": "32MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "max_wal_size": "1GB",
    "log_min_messages": "warning",
    "log_line_prefix": "'%m [%p] %d '",
}


class PgServerError(Exception):
    """A failure to report in one line, without a traceback."""


def _has_server(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in SERVER_BINARIES)


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.name))


def candidate_bindirs() -> list[Path]:
    """Where the server binaries are looked for, best first."""
    found: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        proc = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                              check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            found.append(Path(proc.stdout.strip()))
    found += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                      key=_version_key, reverse=True)]
    initdb = shutil.which("initdb")
    if initdb is not None:
        found.append(Path(initdb).resolve().parent)
    return found


def find_bindir(candidates: list[Path] | None = None) -> Path:
    """The first directory holding initdb, pg_ctl and postgres."""
    candidates = candidate_bindirs() if candidates is None else candidates
    for bindir in candidates:
        if _has_server(bindir):
            return bindir
    looked = ", ".join(str(c) for c in candidates) or "nowhere"
    raise PgServerError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found "
        f"(looked in pg_config --bindir, /usr/lib/postgresql/*/bin and PATH: {looked}); "
        f"{INSTALL_HINT}")


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged user to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PgServerError("running as root, and neither a `postgres` nor a `nobody` user "
                        "exists to run PostgreSQL as (it refuses to run as root)")


def _run(argv: list[str], user: pwd.struct_passwd | None, cwd: Path,
         ) -> subprocess.CompletedProcess[str]:
    """Run a command (as ``user`` if given), its output captured."""
    if user is None:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)
    env = {**os.environ, "HOME": str(cwd), "USER": user.pw_name, "LOGNAME": user.pw_name}
    try:
        return subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, check=False, env=env,
            stdin=subprocess.DEVNULL, user=user.pw_uid, group=user.pw_gid,
            extra_groups=os.getgrouplist(user.pw_name, user.pw_gid))
    except OSError as exc:
        raise PgServerError(f"cannot run {argv[0]} as user {user.pw_name}: {exc}") from exc


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip()
        raise PgServerError(f"{what} failed (exit {proc.returncode}):\n{output}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _log_tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


def start(directory: Path) -> str:
    """Initialize and start a server in ``directory``; return its URL."""
    bindir = find_bindir()
    user = _run_as()
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    if data.exists() or (directory / STATE).exists():
        raise PgServerError(f"{directory} already holds a server; stop it first")
    (directory / STATE).write_text(json.dumps({"bindir": str(bindir)}))
    if user is not None:
        os.chown(directory, user.pw_uid, user.pw_gid)
        os.chmod(directory, 0o700)
        probe = _run(["/bin/sh", "-c", 'test -w "$1" && test -x "$1"', "sh",
                      str(directory)], user, Path("/"))
        if probe.returncode != 0:
            raise PgServerError(
                f"user {user.pw_name} cannot write {directory}: as root, use a directory "
                "whose parents everyone can traverse, e.g. one under /tmp")
    # -N: the cluster's initial files need no fsync; a throwaway cluster that is lost
    # to a crash here is simply made again. The server itself runs with fsync on.
    _check(_run([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust",
                 "-E", "UTF8", "--locale=C", "-N"], user, directory), "initdb")
    conf = data / "dsh-test.conf"  # our settings, included last by postgresql.conf
    with (data / "postgresql.conf").open("a") as main_conf:
        main_conf.write(f"\ninclude '{conf.name}'\n")
    socket_dir = str(directory) if len(str(directory)) <= MAX_SOCKET_DIR else ""
    log = directory / "server.log"
    attempts = 3  # a free port can be taken before the server binds it
    for attempt in range(1, attempts + 1):
        port = _free_port()
        settings = {**SETTINGS, "port": str(port),
                    "unix_socket_directories": f"'{socket_dir}'"}
        conf.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
        if user is not None:
            os.chown(conf, user.pw_uid, user.pw_gid)
        proc = _run([str(bindir / "pg_ctl"), "start", "-D", str(data), "-l", str(log),
                     "-w", "-t", "120"], user, directory)
        if proc.returncode == 0:
            (directory / STATE).write_text(json.dumps({"bindir": str(bindir), "port": port}))
            return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/postgres"
        if attempt == attempts or "could not bind" not in _log_tail(log):
            raise PgServerError(
                f"pg_ctl start failed (exit {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr).strip()}\n--- {log}\n{_log_tail(log)}")
    raise AssertionError("unreachable")


def stop(directory: Path) -> None:
    """Stop the server of ``directory`` (if it runs) and remove ``directory``."""
    directory = directory.absolute()
    if not directory.exists():
        return
    state_file = directory / STATE
    if not state_file.is_file():
        raise PgServerError(f"{directory} was not made by `pgserver.py start`; "
                            "not removing it")
    data = directory / "data"
    if (data / "postmaster.pid").exists():
        bindir = Path(json.loads(state_file.read_text())["bindir"])
        user = _run_as()
        pg_ctl = [str(bindir / "pg_ctl"), "stop", "-D", str(data), "-w", "-t", "60"]
        proc = _run([*pg_ctl, "-m", "fast"], user, directory)
        if proc.returncode != 0 and (data / "postmaster.pid").exists():
            proc = _run([*pg_ctl, "-m", "immediate"], user, directory)
            _check(proc, "pg_ctl stop")
    shutil.rmtree(directory)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    try:
        if command == "check" and len(argv) == 1:
            print(f"PostgreSQL server binaries: {find_bindir()}")
            return 0
        if command in ("start", "stop") and len(argv) == 2:
            if command == "start":
                print(start(Path(argv[1])))
            else:
                stop(Path(argv[1]))
            return 0
    except PgServerError as exc:
        print(f"pgserver: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
