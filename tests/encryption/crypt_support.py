"""What the encryption tests share: keys, stores opened with a sealer, a deliberately
weakened sealer (no associated data, plaintext let through: the holes users found in
peers' encryption), and a way to rewrite one stored record behind the store's back, in
each backend's own storage (a JSONL file's line, a database row)."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dsh_session_core import DurableStore, Keyring, Session, create_plugin_manager
from dsh_session_core._persistence.encryption.sealed import SealedBackend
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.urls import local_store
from redis_support import entry_line, rewrite_entry, stored_values

KEY1 = bytes(range(32))
KEY2 = bytes(range(100, 132))
KEYS = Keyring({"k1": KEY1})
USER = {"kind": "user"}


class WeakSealer(Sealer):
    """A sealer as the holes in peers' encryption make one: the ciphertext is bound to
    nothing (no associated data), and a line that is not sealed is read as it is."""

    def associated_data(self, session_id: str, envelope: tuple[bytes, bytes, bytes],
                        kid: str, alg: str, whole: bool) -> bytes:
        return b""

    def open_line(self, session_id: str, line: bytes) -> bytes:
        try:
            return super().open_line(session_id, line)
        except Exception:
            if b'"sealed"' in line:
                raise
            return line  # plaintext taken as if it had been sealed


def sealer(kind: str, keys: Keyring = KEYS) -> Sealer:
    """Ours (``"ours"``) or the weakened one (``"weak"``)."""
    return WeakSealer(keys) if kind == "weak" else Sealer(keys)


def open_sealed(url: str, seal: Sealer | Keyring | None = KEYS) -> DurableStore:
    """A store on ``url``, encrypted with ``seal`` (a sealer, or a keyring for ours;
    ``None``: plain)."""
    backend = backend_for(url)
    if seal is not None:
        backend = SealedBackend(backend, seal if isinstance(seal, Sealer) else Sealer(seal))
    return DurableStore(backend, create_plugin_manager(autoload=False))


def say(session: Session, text: str) -> None:
    session.append("user/message", {"content": [{"type": "text", "text": text}],
                                    "source": USER}, surface_op="append")


def write_session(url: str, sid: str, texts: list[str], seal: Sealer | Keyring = KEYS
                  ) -> None:
    """Store session ``sid`` holding one user message per text, in order."""
    with open_sealed(url, seal) as store:
        s = store.create(sid, cwd="/crypt")
        for text in texts:
            say(s, text)
        store.flush(s)


class Records:
    """The stored records of a store, read and rewritten in its own storage (the
    store is closed meanwhile): each record as its wire dict."""

    def __init__(self, url: str) -> None:
        self.url = url
        local = local_store(url)
        self.kind = ("redis" if url.startswith("redis") else "postgresql") if local is None \
            else local[0]
        self.path = "" if local is None else local[1]

    def _log(self, sid: str) -> Path:
        [log] = Path(self.path).glob(f"*/{sid}.jsonl")
        return log

    @contextlib.contextmanager
    def _sql(self) -> Iterator[Any]:
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self.path)) as conn:
                yield conn
            return
        import psycopg

        with psycopg.connect(self.url) as conn:
            yield conn

    def get(self, sid: str, seq: int) -> dict[str, Any]:
        if self.kind == "redis":
            found: dict[str, Any] = json.loads(entry_line(self.url, sid, seq))
            return found
        if self.kind == "jsonl":
            wire: dict[str, Any] = json.loads(self._log(sid).read_text().splitlines()[seq + 1])
            return wire
        with self._sql() as conn:
            mark = "?" if self.kind == "sqlite" else "%s"
            row = conn.execute(f"SELECT type, time, data FROM events WHERE session_id = "
                               f"{mark} AND seq = {mark}", (sid, seq)).fetchone()
        return {"type": row[0], "seq": seq, "time": row[1], "data": json.loads(row[2])}

    def put(self, sid: str, seq: int, wire: dict[str, Any]) -> None:
        """Store ``wire`` (its type, time and data) as record ``seq`` of ``sid``."""
        if self.kind == "redis":
            rewrite_entry(self.url, sid, seq, json.dumps({**wire, "seq": seq},
                                                 separators=(",", ":")).encode())
            return
        if self.kind == "jsonl":
            log = self._log(sid)
            lines = log.read_text().splitlines()
            lines[seq + 1] = json.dumps({**wire, "seq": seq}, separators=(",", ":"))
            log.write_text("".join(line + "\n" for line in lines))
            return
        mark = "?" if self.kind == "sqlite" else "%s"
        with self._sql() as conn:
            op = wire.get("surfaceOp")
            conn.execute(f"UPDATE events SET type = {mark}, time = {mark}, data = {mark}, "
                         f"surface_op = {mark} WHERE session_id = {mark} AND seq = {mark}",
                         (wire["type"], wire["time"], json.dumps(wire["data"]),
                          None if op is None else json.dumps(op), sid, seq))
            conn.commit()

    def stored_bytes(self) -> bytes:
        """Everything the store holds, as bytes (files, or every table's rows, or
        every key's values)."""
        if self.kind == "redis":
            return stored_values(self.url)
        if self.kind in ("jsonl", "sqlite"):
            root = Path(self.path)
            files = [root] if root.is_file() else sorted(root.rglob("*"))
            files += sorted(root.parent.glob(root.name + "-*")) if root.is_file() else []
            return b"".join(f.read_bytes() for f in files if f.is_file())
        with self._sql() as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]
            return b"".join(str(conn.execute(f"SELECT * FROM {t}").fetchall()).encode()
                            for t in tables)


def tamper(url: str, sid: str, seq: int) -> None:
    """Flip one bit of a record's ciphertext, in the store's own storage."""
    records = Records(url)
    wire = records.get(sid, seq)
    box = wire["data"]["sealed"]
    ct = bytearray(base64.b64decode(box["ct"]))
    ct[0] ^= 0x01
    box["ct"] = base64.b64encode(bytes(ct)).decode()
    records.put(sid, seq, wire)


def start_turn(session: Session, turn: int, text: str) -> None:
    """A turn begun: its start and the user's message (no end: an open turn)."""
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                            "source": USER}})
    say(session, text)


def end_turn(session: Session, turn: int, answer: str) -> None:
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("assistant/message", {"turn": turn, "step": 1, "content": [
        {"type": "text", "text": answer}]}, surface_op="append")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
