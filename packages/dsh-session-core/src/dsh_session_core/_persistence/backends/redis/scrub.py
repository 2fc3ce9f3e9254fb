"""The Redis backend's scrub after a forget: what its deletes left in the server's files.

A deleted key leaves the keyspace at once (the delete's script runs ``DEL``; a value
freed lazily, by ``UNLINK`` or a ``lazyfree`` option, is out of the keyspace all the
same, only its memory is given back later), so nothing the server writes afterwards
holds it. What it wrote before does:

- **the append-only file** (``appendonly yes``; Redis 7's multi-part AOF, a base file and
  incr files under ``appendonlydir/``) holds every command that wrote the key or
  deleted it (a key's name holds the session's id), until a rewrite (``BGREWRITEAOF``)
  writes a new base from the dataset and deletes the old files (checked on Redis 7.0:
  they are unlinked when the rewrite is done, before the server reports it finished,
  unless the hidden ``aof-disable-auto-gc`` keeps them);
- **a snapshot** (``dump.rdb``) holds the key's value until the next save (``BGSAVE``).

:func:`scrub_server` starts a rewrite when the append-only file is on, then a save when
the server makes snapshots (its ``save`` rules), made one since it started or started
from one, and waits for each with a bound (:data:`PATIENCE`), reading ``INFO
persistence``: a rewrite or save counts only when it began after the call (the
server's counters of them), so one already running, forked before the delete, is waited
for and followed by ours. A server that refuses a command (a managed Redis renames
``CONFIG`` and ``BGREWRITEAOF`` away, an ACL user lacks them) is no crash: everything
else is done, and the scrub raises one :class:`PersistenceError` saying what was done
and what could not be, which ``store.forget`` puts in ``Forgotten.left``.

What the server keeps beyond its own files is said, never reached: its replicas' own
files, copies and backups of its files, memory not yet reused (docs/erasing.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from ....errors import PersistenceError

__all__ = ["PATIENCE", "scrub_server"]

#: How long, in seconds, a rewrite or a save may take before the scrub gives up waiting
#: (it goes on in the server; what it has not replaced yet is reported left).
PATIENCE: Final = 600.0
#: The longest pause between two looks at ``INFO persistence``.
_LONGEST_PAUSE: Final = 0.2

Info = dict[str, Any]


def scrub_server(client: Any, where: str, *, patience: float = PATIENCE) -> str:
    """Rewrite the server's append-only file and save its snapshot anew, as it keeps
    them (see the module), through ``client`` (a ``redis.Redis``).

    :param where: the store, as messages name it (its URL without password).
    :returns: for people, what was done and what the server keeps beyond it.
    :raises PersistenceError: something could not be done (a command refused, a rewrite
        or save that failed or outlasted ``patience``): the message says what was done
        and what was not.
    :raises redis.RedisError: the server cannot be reached.
    """
    import redis

    deadline = time.monotonic() + patience
    try:
        info = _info(client)
    except redis.ResponseError as exc:
        msg = (f"{where}: keys deleted; the server refused INFO ({_why(exc)}): neither "
               f"its append-only file nor its snapshot could be renewed, and either may "
               f"keep the deleted keys until the server's next rewrite and save")
        raise PersistenceError(msg, session_id="") from exc
    done: list[str] = []
    missed: list[str] = []
    config, config_why = _config(client)
    if int(info.get("aof_enabled", 0)):
        _rewrite(client, info, deadline, done, missed)
        if config.get("aof-disable-auto-gc") == "yes":
            missed.append("its old append-only files stay (aof-disable-auto-gc yes): "
                          "remove them from appendonlydir/ by hand")
    else:
        done.append("it keeps no append-only file (one left from when it did is not "
                    "reached)")
    if _snapshots(info, config):
        _save(client, info, deadline, done, missed)
    elif config_why:
        missed.append(f"whether it makes snapshots could not be read (CONFIG GET refused: "
                      f"{config_why}): if it does, its last snapshot keeps the deleted keys "
                      f"until its next save")
    else:
        done.append("it makes no snapshots (a snapshot file left from other settings, or "
                    "from a replica's first sync, is not reached)")
    text = "; ".join([f"{where}: keys deleted", *done, *missed]) + f". {_kept(client)}"
    if missed:
        raise PersistenceError(text, session_id="")
    return text


def _info(client: Any) -> Info:
    found: Info = client.info("persistence")
    return found


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _config(client: Any) -> tuple[dict[str, str], str]:
    """The settings the scrub reads, and ``""``; or none, and why ``CONFIG GET`` was
    refused."""
    import redis

    try:
        found = client.config_get("save", "aof-disable-auto-gc")
    except redis.ResponseError as exc:  # renamed away, or not this user's
        return {}, _why(exc)
    return {str(k): str(v) for k, v in found.items()}, ""


def _snapshots(info: Info, config: dict[str, str]) -> bool:
    """Whether a snapshot file may hold the deleted keys: the server's ``save`` rules
    make them, it saved one since it started (``SAVE``, ``BGSAVE``, a replica's sync),
    or it started from one (without the append-only file, which it would load first)."""
    return bool(config.get("save", "").strip()) or int(info.get("rdb_saves", 0)) > 0 or (
        not int(info.get("aof_enabled", 0))
        and int(info.get("rdb_last_load_keys_loaded", 0)) > 0)


def _rewrite(client: Any, info: Info, deadline: float, done: list[str],
             missed: list[str]) -> None:
    """``BGREWRITEAOF``, waited for: the files written before it are deleted when it is
    done."""
    before = int(info.get("aof_rewrites", 0))
    refused = _start(client, client.bgrewriteaof, "aof_rewrite_in_progress", deadline)
    if refused is not None:
        missed.append(f"BGREWRITEAOF {refused}: its append-only file keeps the deleted "
                      f"keys until its next rewrite")
        return
    finished = _until(client, deadline, lambda i: int(i.get("aof_rewrites", 0)) > before
                      and not int(i.get("aof_rewrite_in_progress", 0))
                      and not int(i.get("aof_rewrite_scheduled", 0)))
    if finished is None:
        missed.append("its append-only file's rewrite (BGREWRITEAOF) had not finished "
                      "when the scrub stopped waiting: its old files keep the deleted keys "
                      "until it is done")
    elif finished.get("aof_last_bgrewrite_status") != "ok":
        missed.append("its append-only file's rewrite (BGREWRITEAOF) failed (see the "
                      "server's log): its files keep the deleted keys until a rewrite "
                      "succeeds")
    else:
        done.append("its append-only file rewritten (BGREWRITEAOF) and its old files "
                    "deleted")


def _save(client: Any, info: Info, deadline: float, done: list[str],
          missed: list[str]) -> None:
    """``BGSAVE`` (scheduled after a child the server runs), waited for: the new
    snapshot replaces the old file."""
    before = int(info.get("rdb_saves", 0))
    refused = _start(client, lambda: client.bgsave(schedule=True),
                     "rdb_bgsave_in_progress", deadline)
    if refused is not None:
        missed.append(f"BGSAVE {refused}: its snapshot keeps the deleted keys until its "
                      f"next save")
        return
    finished = _until(client, deadline, lambda i: int(i.get("rdb_saves", 0)) > before
                      and not int(i.get("rdb_bgsave_in_progress", 0)))
    if finished is None:
        missed.append("its snapshot's save (BGSAVE) had not finished when the scrub "
                      "stopped waiting: the old snapshot keeps the deleted keys until it "
                      "is done")
    elif finished.get("rdb_last_bgsave_status") != "ok":
        missed.append("its snapshot's save (BGSAVE) failed (see the server's log): the "
                      "old snapshot keeps the deleted keys until a save succeeds")
    else:
        done.append("its snapshot saved anew (BGSAVE)")


def _start(client: Any, command: Callable[[], Any], running: str, deadline: float
           ) -> str | None:
    """Run ``command`` (which starts a child of the server); ``None`` once it is
    started or scheduled, else why not (refused, or still busy at the deadline). One
    already running (``INFO``'s ``running`` field) may have forked before the delete:
    it is waited for, and ``command`` run again."""
    import redis

    while True:
        try:
            command()
            return None
        except redis.ResponseError as exc:
            why = _why(exc)
        if not int(_info(client).get(running, 0)):
            return f"refused ({why})"
        if _until(client, deadline, lambda i: not int(i.get(running, 0))) is None:
            return "not started: the server was still busy with an earlier one"


def _until(client: Any, deadline: float, condition: Callable[[Info], bool]
           ) -> Info | None:
    """``INFO persistence`` once ``condition`` holds of it; ``None`` at the deadline."""
    pause = 0.005
    while True:
        info = _info(client)
        if condition(info):
            return info
        if time.monotonic() >= deadline:
            return None
        time.sleep(pause)  # polling the server's state, which it reports, not a race
        pause = min(pause * 2, _LONGEST_PAUSE)


def _kept(client: Any) -> str:
    """What the server keeps that no scrub reaches, for people."""
    import redis

    try:
        replicas = int(client.info("replication").get("connected_slaves", 0))
    except (redis.ResponseError, ValueError):
        replicas = 0
    theirs = (f"its {replicas} replica(s) keep their own files until each is rewritten "
              f"and saved (BGREWRITEAOF, BGSAVE on each), " if replicas else
              "replicas keep their own files, ")
    return (f"The server keeps what it keeps: {theirs}backups and copies of its files "
            f"keep what they were given, and memory not yet reused holds freed values "
            f"(docs/erasing.md)")
