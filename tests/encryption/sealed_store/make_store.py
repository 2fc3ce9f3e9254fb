"""How ``store/`` and ``expected/`` beside this file were made: an encrypted JSONL store
sealed by the code of commit efe64e2 (each record its own AEAD ciphertext, as
this release still seals them), and each session's plaintext log as that code reads
it with the keys.

Run with that commit's core first on the path, never by the suite (the fixture is its
output, kept as bytes)::

    git archive efe64e2 packages/dsh-session-core/src | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1/packages/dsh-session-core/src python make_store.py OUT

The sessions: ``chat-aes`` (AES-256-GCM, three turns under ``k1`` then two under
``k2``, a rotated key), ``chat-chacha`` (ChaCha20-Poly1305 under ``k1``) and
``chat-odd`` (copied from a plaintext log one of whose lines does not begin with its
envelope as this library writes it: that record is sealed whole).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

from dsh_session_core import Keyring, Session, copy_sessions, open_store

KEY1 = bytes(range(32))
KEY2 = bytes(range(100, 132))
USER = {"kind": "user"}


def turn(s: Session, t: int, text: str, answer: str, chunks: int = 3,
         tool: bool = True) -> None:
    """One turn: the user's words, the reply streamed, and a tool call."""
    s.append("turn/start", {"turn": t, "trigger": {"kind": "message", "source": USER}})
    s.append("user/message", {"content": [{"type": "text", "text": text}], "source": USER},
             surface_op="append")
    s.append("step/start", {"turn": t, "step": 1})
    first = s.seq
    for i in range(chunks):
        s.append("assistant/chunk", {"turn": t, "step": 1, "chunk": {
            "type": "text-delta", "index": 0, "text": f"tok{i} "}})
    content: list[dict[str, Any]] = [{"type": "text", "text": answer}]
    if tool:
        content.append({"type": "tool-call", "id": f"call-{t}", "name": "bash",
                        "arguments": '{"command":"ls"}'})
    s.append("assistant/message", {"turn": t, "step": 1, "content": content},
             surface_op="append", source_event_seqs=list(range(first, first + chunks)))
    if tool:
        call = s.seq
        s.append("tool/call", {"turn": t, "step": 1, "callId": f"call-{t}", "name": "bash",
                               "arguments": '{"command":"ls"}'})
        s.append("tool/result", {"turn": t, "step": 1, "callId": f"call-{t}", "content": [
            {"type": "text", "text": "a.txt\nb.txt\n"}], "isError": False},
            surface_op="append", source_event_seqs=[call])
    s.append("step/end", {"turn": t, "step": 1})
    s.append("turn/end", {"turn": t, "reason": {"kind": "completed"}})


def main(out: str) -> None:
    shutil.rmtree(out, ignore_errors=True)
    store_dir, plain_dir = os.path.join(out, "store"), os.path.join(out, "plain")
    os.makedirs(store_dir)
    os.makedirs(plain_dir)
    with open_store(store_dir, keys=Keyring({"k1": KEY1})) as store:
        s = store.create("chat-aes", cwd="/work")
        for t in range(1, 4):
            turn(s, t, f"question {t}, the password is hunter{t}", f"answer {t}")
            store.flush(s)
        store.release(s)
    with open_store(store_dir, keys=Keyring({"k2": KEY2, "k1": KEY1})) as store:
        s = store.open("chat-aes")
        for t in range(4, 6):
            turn(s, t, f"question {t} (under k2)", f"answer {t} \u00e9\u6f22 \U0001f600")
            store.flush(s)
        store.release(s)
    chacha = Keyring({"k1": KEY1}, algorithm="chacha20-poly1305")
    with open_store(store_dir, keys=chacha) as store:
        s = store.create("chat-chacha", cwd="/work")
        for t in range(1, 3):
            turn(s, t, f"chacha question {t}", f"chacha answer {t}", chunks=2, tool=False)
            store.flush(s)
        store.release(s)
    with open_store(plain_dir, strict=False) as plain:
        s = plain.create("chat-odd", cwd="/work")
        turn(s, 1, "odd one", "odd answer", chunks=1, tool=False)
        s.append("x/custom", {"note": "kept verbatim"})
        turn(s, 2, "after it", "fine", chunks=1, tool=False)
        plain.release(s)
    [log] = [os.path.join(d, f) for d, _, fs in os.walk(plain_dir) for f in fs
             if f.endswith(".jsonl")]
    with open(log, "rb") as source:
        lines = source.read().split(b"\n")
    for i, line in enumerate(lines):
        if b'"x/custom"' in line:  # its keys in another order than this library's
            wire = json.loads(line)
            lines[i] = json.dumps({k: wire[k] for k in ("seq", "type", "time", "data")},
                                  separators=(",", ":")).encode()
    with open(log, "wb") as target:
        target.write(b"\n".join(lines))
    with (open_store(plain_dir, strict=False) as plain,
          open_store(store_dir, keys=Keyring({"k1": KEY1})) as sealed):
        copy_sessions(plain.backend, sealed.backend)
    shutil.rmtree(plain_dir)
    expected = os.path.join(out, "expected")
    os.makedirs(expected)
    with open_store(store_dir, keys=Keyring({"k2": KEY2, "k1": KEY1})) as store:
        for sid in ("chat-aes", "chat-chacha", "chat-odd"):
            with open(os.path.join(expected, f"{sid}.jsonl"), "wb") as out_file:
                out_file.write(store.open(sid).jsonl())
    for folder, _, files in os.walk(store_dir):
        for name in files:
            if name.endswith(".lock"):
                os.remove(os.path.join(folder, name))


if __name__ == "__main__":
    main(sys.argv[1])
