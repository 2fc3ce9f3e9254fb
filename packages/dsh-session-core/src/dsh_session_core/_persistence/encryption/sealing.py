"""Sealing log lines at rest: the sealer, from a plaintext log line to a sealed one and back.

It works with the keys of a :class:`~.keyring.Keyring` (:mod:`.keyring`).

A sealed line keeps the envelope a store needs without keys (``type``, ``seq``,
``time``: recovery, tails, forks, counts and the writer lock work on it unchanged) and
holds everything of the event, its whole plaintext line, as one AEAD ciphertext::

    {"type":"user/message","seq":3,"time":1700000000000,
     "data":{"sealed":{"kid":"k1","alg":"aes-256-gcm","nonce":"<base64>","ct":"<base64>"}}}

The associated data binds the ciphertext to where it is stored: a fixed label with the
sealing format's version, the session id, the seq, the type, the time, the key id and
the algorithm, each length-prefixed (never concatenated strings, so no two lists of
fields give the same bytes). A record moved to another seq, session or type, or given
another time or key id, fails authentication. The line is in the shape every backend
stores (SQLite and PostgreSQL keep the box in their ``data`` column).

``cryptography`` (the ``encryption`` extra) is imported when a :class:`Sealer` is made,
never before: a store opened without keys does not import it.
"""

from __future__ import annotations

import binascii
import functools
import os
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from ..._base.json_values import JsonObject, JsonValue
from ..._schema.codec import ENCODER, encode_events, encode_line
from ..._schema.registry import EventRegistry, EventSpec
from ...errors import EncryptionError, KeyUnavailableError, SealedRecordError
from ...events import Event, OpaqueEvent
from .keyring import ALGORITHMS, Keyring, aead_classes, check_key

__all__ = ["Sealer", "sealed_registry"]

#: The first field of every record's associated data: what it is, and its version.
_LABEL: Final = b"dsh-session sealed record v1"
#: The first field of a sealed field's associated data (a retention mark's note).
_FIELD_LABEL: Final = b"dsh-session sealed field v1"
_NONCE_BYTES: Final = 12

# --- the sealed line's shape ------------------------------------------------------------


class _Box(msgspec.Struct, gc=False, forbid_unknown_fields=True, omit_defaults=True):
    kid: str
    alg: str
    # bytes: msgspec reads (and writes) them as standard base64, in C.
    nonce: bytes
    ct: bytes
    #: The plaintext is the whole line, not its body (rare: see :meth:`Sealer.seal`).
    line: bool = False


class _Data(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    sealed: _Box


class _Line(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    # Field order is the line's key order: a sealed line begins {"type":..., as every
    # line does (summaries and typed reads find the type without parsing).
    type: Any
    seq: Any
    time: Any
    data: _Data


class _OutBox(msgspec.Struct, gc=False, omit_defaults=True):
    """:class:`_Box` as :meth:`Sealer.seal` writes it: the base64 it made once for the
    opaque event is written as it is."""

    kid: str
    alg: str
    nonce: str
    ct: str
    line: bool = False


class _OutData(msgspec.Struct, gc=False):
    sealed: _OutBox


class _OutLine(msgspec.Struct, gc=False):
    type: Any
    seq: Any
    time: Any
    data: _OutData


class _SealedEvent(Event, frozen=True):
    """A sealed record as a backend holds it: its envelope and its box."""

    data: _Data


#: The sealed twin of each event type, made once per type (see :func:`sealed_registry`).
_TWINS: dict[str, type[Event]] = {}
_REGISTRIES: dict[tuple[str, ...], EventRegistry] = {}


def _twin(event_type: str) -> type[Event]:
    twin = _TWINS.get(event_type)
    if twin is None:
        made: Any = msgspec.defstruct(
            "Sealed", [], bases=(_SealedEvent,), tag=event_type, frozen=True, gc=False,
            module=__name__)
        twin = _TWINS[event_type] = made
    return twin


def sealed_registry(registry: EventRegistry) -> EventRegistry:
    """The registry a sealed backend's records decode with: for each type of
    ``registry``, a twin whose payload is the sealed box. A wrapped backend's load thus
    decodes its sealed lines in one msgspec call, as it does plaintext ones (a type no
    plugin declares stays opaque, as ever)."""
    types = registry.types
    found = _REGISTRIES.get(types)
    if found is None:
        specs = [("sealed", EventSpec(_twin(t), doc="A sealed record.")) for t in types]
        found = _REGISTRIES[types] = EventRegistry(specs)
    return found


_LINES = msgspec.json.Decoder(list[_Line])
_LINE = msgspec.json.Decoder(_Line)
_pack = struct.Struct(">I").pack


def _field(value: bytes) -> bytes:
    return _pack(len(value)) + value


@functools.lru_cache(maxsize=64)
def _tail(kid: str, alg: str, whole: bool) -> bytes:
    """The associated data's last fields: the same for most records."""
    return b"".join(_field(p) for p in (kid.encode(), alg.encode(),
                                         b"line" if whole else b"body"))


def _b64(raw: bytes) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


class Sealer:
    """Seals and opens the log lines of one encrypted store, with its :class:`Keyring`.

    Each record gets a fresh random 96-bit nonce (see docs/encryption.md for how many
    records one key may seal). The AEAD of each (session, key id, algorithm) is made
    once and kept while the store is open (:meth:`forget` drops a session's).

    :raises MissingExtraError: ``cryptography`` is not installed.
    """

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self._classes, self._invalid = aead_classes()
        self._aeads: dict[tuple[str, str, str], Any] = {}
        #: The (session, key id) pairs whose key opened a record of the session: a
        #: record under that key that fails then was altered (see :meth:`_not_opened`).
        self._proven: set[tuple[str, str]] = set()

    def forget(self, session_id: str) -> None:
        """Drop the AEADs kept for ``session_id`` (its keys are asked again)."""
        for entry in [e for e in self._aeads if e[0] == session_id]:
            del self._aeads[entry]
        self._proven = {p for p in self._proven if p[0] != session_id}

    def associated_data(self, session_id: str, envelope: tuple[bytes, bytes, bytes],
                        kid: str, alg: str, whole: bool) -> bytes:
        """What a record's ciphertext is bound to: the label, the session id, the
        envelope's type, seq and time (as their JSON), the key id, the algorithm and
        what the plaintext is (the line's body or, rarely, the whole line), each
        prefixed by its length."""
        event_type, seq, time = envelope
        return b"".join((
            _field(_LABEL), _field(session_id.encode("utf-8", "surrogatepass")),
            _pack(len(event_type)), event_type, _pack(len(seq)), seq,
            _pack(len(time)), time, _tail(kid, alg, whole)))

    def _aead(self, session_id: str, kid: str, alg: str, seq: int | None) -> Any:
        entry = (session_id, kid, alg)
        aead = self._aeads.get(entry)
        if aead is None:
            cls = self._classes.get(alg)
            if cls is None:
                raise SealedRecordError(session_id, seq, None,
                                        f"sealed with {alg!r}, which this build does not "
                                        f"open ({', '.join(ALGORITHMS)})")
            key = self.keyring.key(session_id, kid)
            if key is None:
                raise KeyUnavailableError(session_id, kid, seq)
            try:
                check_key(kid, key)
            except ValueError as exc:
                msg = f'session "{session_id}": {exc}'
                raise EncryptionError(msg,
                                      session_id=session_id, seq=seq) from None
            aead = self._aeads[entry] = cls(key)
        return aead

    # --- sealing ------------------------------------------------------------------------

    def seal(self, session_id: str, events: Sequence[Event], jsonl: bytes,
             again: Mapping[int, tuple[bytes, bytes]] | None = None,
             ) -> tuple[list[Event], bytes]:
        """The sealed events and lines of ``events`` (whose lines are ``jsonl``): what a
        backend stores in their place.

        What is encrypted is the line's body, after its envelope
        (``{"type":..,"seq":..,"time":..,``), which the sealed line keeps in the clear and
        the associated data binds; a line that does not begin with its envelope so
        written (an opaque event of a hand-written log) is encrypted whole.

        :param again: for the retry of a failed write, the ``(plain line, nonce)`` each
            seq was sealed with: the same line at the same seq is sealed with the same
            nonce, to the same bytes (a backend may have published the failed write, and
            finishes it when the retry's bytes begin with it). One nonce never seals two
            plaintexts: it is reused only for the very line it sealed.
        """
        if not events:
            return [], b""
        plain = jsonl.split(b"\n")
        kid, alg = self.keyring.current, self.keyring.algorithm
        aead = self._aead(session_id, kid, alg, None)
        encrypt, urandom, ad = aead.encrypt, os.urandom, self.associated_data
        sealed: list[Event] = []
        lines = []
        for event, line in zip(events, plain, strict=False):
            seq, event_type, time = event.seq, event.type, event.time
            envelope = _envelope(event_type, seq, time)
            prefix = _prefix(envelope)
            whole = not line.startswith(prefix)
            body = line if whole else line[len(prefix):]
            before = again.get(seq) if again else None
            nonce = before[1] if before is not None and before[0] == line else urandom(
                _NONCE_BYTES)
            ct = encrypt(nonce, body, ad(session_id, envelope, kid, alg, whole))
            box = _OutBox(kid, alg, _b64(nonce), _b64(ct), whole)
            lines.append(_OutLine(event_type, seq, time, _OutData(box)))
            # Opaque, as the backend must see them: its index reads their lines, which
            # hold nothing to index (a typed twin would be read as the plaintext type).
            wire_box: dict[str, JsonValue] = {"kid": kid, "alg": alg, "nonce": box.nonce,
                                              "ct": box.ct}
            if whole:
                wire_box["line"] = True
            data = JsonObject({"sealed": JsonObject(wire_box)})
            wire = JsonObject({"type": event_type, "seq": seq, "time": time, "data": data})
            sealed.append(OpaqueEvent(seq, time, data, wire=wire))
        try:
            jsonl = ENCODER.encode_lines(lines)
        except UnicodeEncodeError:  # a lone surrogate in an opaque event's type
            jsonl = encode_events(sealed)
        return sealed, jsonl

    # --- a field sealed alone (a retention mark's note) ---------------------------------

    def seal_field(self, key_session: str, context: Sequence[str], plain: bytes
                   ) -> tuple[str, str, str, str]:
        """``plain`` sealed under the current key of ``key_session``, bound to
        ``context`` (where it is stored, each part length-prefixed in the associated
        data): ``(kid, alg, nonce, ct)``, the last two base64."""
        kid, alg = self.keyring.current, self.keyring.algorithm
        nonce = os.urandom(_NONCE_BYTES)
        ct = self._aead(key_session, kid, alg, None).encrypt(
            nonce, plain, _field_ad(context, kid, alg))
        return kid, alg, _b64(nonce), _b64(ct)

    def open_field(self, key_session: str, context: Sequence[str],
                   box: tuple[str, str, str, str]) -> bytes:
        """The plaintext of a :meth:`seal_field` box ``(kid, alg, nonce, ct)``.

        :raises KeyUnavailableError: its key is not in the keyring.
        :raises EncryptionError: it fails authentication (moved, altered), or it names
            an algorithm this build does not open.
        """
        kid, alg, nonce, ct = box
        aead = self._aead(key_session, kid, alg, None)
        try:
            return bytes(aead.decrypt(binascii.a2b_base64(nonce, strict_mode=True),
                                      binascii.a2b_base64(ct, strict_mode=True),
                                      _field_ad(context, kid, alg)))
        except (self._invalid, binascii.Error, ValueError):
            msg = (f"the sealed field of {' / '.join(context)} fails authentication "
                   f"(moved from elsewhere, or altered)")
            raise EncryptionError(msg, session_id=key_session) from None

    # --- opening ------------------------------------------------------------------------

    @staticmethod
    def nonces(events: Sequence[Event], jsonl: bytes, sealed: Sequence[Event]
               ) -> dict[int, tuple[bytes, bytes]]:
        """What :meth:`seal`'s ``again`` takes for a retry of ``events`` (their lines
        ``jsonl``), once sealed as ``sealed``."""
        found = {}
        for event, line, record in zip(events, jsonl.split(b"\n"), sealed, strict=False):
            box = record.data["sealed"] if type(record) is OpaqueEvent else None
            if type(event.seq) is int and box is not None:
                found[event.seq] = (line, binascii.a2b_base64(box["nonce"]))
        return found

    def open_lines(self, session_id: str, lines: Iterable[bytes]) -> list[bytes]:
        """The plaintext lines of sealed ``lines`` (each without its newline).

        :raises SealedRecordError: a line is not sealed (plaintext, another format) or
            fails authentication.
        :raises KeyUnavailableError: a line's key is not in the keyring.
        """
        lines = list(lines)
        if not lines:
            return []
        try:
            records = _LINES.decode(b"[" + b",".join(lines) + b"]")
        except (msgspec.ValidationError, msgspec.DecodeError):
            return [self.open_line(session_id, line) for line in lines]
        if type(self).associated_data is not Sealer.associated_data:
            return [self._open(session_id, record, records) for record in records]
        try:
            return self._open_fast(session_id, records)
        except (EncryptionError, UnicodeEncodeError, binascii.Error, ValueError,
                self._invalid):
            # Said again record by record, to name the one refused.
            return [self._open(session_id, record, records) for record in records]

    def open_records(self, session_id: str, records: Sequence[Event],
                     lines: Callable[[], list[bytes]]) -> list[bytes]:
        """:meth:`open_lines` of the lines ``lines()`` gives, given the events a wrapped
        backend decoded them to with :func:`sealed_registry`: when every one is a sealed
        twin, its box is read from it (the lines are neither split nor parsed again)."""
        if (type(self).associated_data is not Sealer.associated_data
                or not all(isinstance(r, _SealedEvent) for r in records)):
            return self.open_lines(session_id, lines())
        try:
            return self._open_fast(session_id, records)  # type: ignore[arg-type]
        except (EncryptionError, UnicodeEncodeError, binascii.Error, ValueError,
                self._invalid):
            return self.open_lines(session_id, lines())  # to name the one refused

    def _open_fast(self, session_id: str, records: Sequence[_Line | _SealedEvent]
                   ) -> list[bytes]:
        """:meth:`_open` of each record, inlined (the per-record cost of a load): the
        same associated data and plaintext, with the type's JSON made once per type
        and an integer's written directly. Any failure raises; the caller then opens
        the records one by one, to say which one fails and why."""
        head = _field(_LABEL) + _field(session_id.encode("utf-8", "surrogatepass"))
        pack, encode = _pack, ENCODER.encode
        #: per type: the associated data up to the seq, and the line up to the seq
        kinds: dict[str, tuple[bytes, bytes]] = {}
        kid = alg = None
        kids: set[str] = set()
        decrypt: Any = None
        tail = b""
        out: list[bytes] = []
        append = out.append
        for record in records:
            box = record.data.sealed
            if box.kid != kid or box.alg != alg or box.line:
                if box.line:
                    raise ValueError  # the rare whole-line record: the careful path
                kid, alg = box.kid, box.alg
                kids.add(kid)
                decrypt = self._aead(session_id, kid, alg, None).decrypt
                tail = _tail(kid, alg, False)
            event_type, seq, time = record.type, record.seq, record.time
            kind = kinds.get(event_type) if type(event_type) is str else None
            if kind is None:
                if type(event_type) is not str:
                    raise ValueError  # an odd envelope: the careful path
                t = encode(event_type)
                kind = kinds[event_type] = (head + pack(len(t)) + t, b'{"type":' + t
                                            + b',"seq":')
            if type(seq) is not int or type(time) is not int:
                raise ValueError  # an odd envelope: the careful path
            s, m = b"%d" % seq, b"%d" % time
            body = decrypt(box.nonce, box.ct, b"".join(
                (kind[0], pack(len(s)), s, pack(len(m)), m, tail)))
            append(b"".join((kind[1], s, b',"time":', m, b",", body)))
        for opened in kids:
            self._proven.add((session_id, opened))
        return out

    def open_line(self, session_id: str, line: bytes) -> bytes:
        """The plaintext line of one sealed ``line`` (see :meth:`open_lines`)."""
        try:
            record = _LINE.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise self.refused(session_id, line) from None
        return self._open(session_id, record)

    def refused(self, session_id: str, line: bytes) -> SealedRecordError:
        """Why ``line``, which is not a sealed record, is refused."""
        from ..._logformat.logfile import line_wire

        wire = line_wire(line) or {}
        seq = wire.get("seq")
        data = wire.get("data")
        if isinstance(data, dict) and "sealed" in data:
            problem = "its sealed box is not of the form this build reads (kid, alg, nonce, ct)"
        else:
            problem = "it is plaintext, where only sealed records belong"
        return SealedRecordError(session_id, seq if type(seq) is int else None,
                                 wire.get("type"), problem)

    def _open(self, session_id: str, record: _Line, others: Sequence[_Line] = ()) -> bytes:
        """The plaintext line of one sealed record (``others``: the records read with
        it, which say, when it fails, whether its key is the right one)."""
        box = record.data.sealed
        seq = record.seq if type(record.seq) is int else None
        aead = self._aead(session_id, box.kid, box.alg, seq)
        envelope = _envelope(record.type, record.seq, record.time)
        try:
            body = aead.decrypt(box.nonce, box.ct, self.associated_data(
                session_id, envelope, box.kid, box.alg, box.line))
        except (self._invalid, binascii.Error, ValueError):
            raise self._not_opened(session_id, record, others) from None
        self._proven.add((session_id, box.kid))
        return bytes(body) if box.line else _prefix(envelope) + body

    def _opens(self, session_id: str, record: _Line) -> bool:
        """Whether ``record`` opens (never raises)."""
        box = record.data.sealed
        try:
            aead = self._aead(session_id, box.kid, box.alg, None)
            aead.decrypt(box.nonce, box.ct, self.associated_data(
                session_id, _envelope(record.type, record.seq, record.time), box.kid,
                box.alg, box.line))
        except Exception:
            return False
        return True

    def _not_opened(self, session_id: str, record: _Line, others: Sequence[_Line]
                    ) -> SealedRecordError:
        """Why ``record`` fails authentication. An AEAD cannot tell a wrong key from an
        altered record: both fail the tag (docs/decisions.md, "A record the key does
        not open"). When the same key opened another record of the session (read with
        it, or before by this store), the key is right and the record was altered;
        otherwise the key is named first, as the likelier cause."""
        kid = record.data.sealed.kid
        seq = record.seq if type(record.seq) is int else None
        proven = (session_id, kid) in self._proven or any(
            other is not record and other.data.sealed.kid == kid
            and self._opens(session_id, other) for other in others)
        if proven:
            return SealedRecordError(
                session_id, seq, record.type,
                f'its ciphertext fails authentication, though the key "{kid}" opens the '
                f"session's other records: it was moved from another seq, session or "
                f"type, altered, or cut short", key_id=kid)
        return SealedRecordError(
            session_id, seq, record.type,
            f'the key "{kid}" does not open it: a wrong key for this id, or the record '
            f"was altered (its authentication fails either way, and cannot tell which)",
            key_id=kid,
            advice=f'Check the key first: give the key that sealed it as "{kid}" '
                   f"(DSH_SESSION_KEYS=...,{kid}:<base64 key>, or your key callable); if "
                   f"that is the key, the record was altered: restore the log from a "
                   f"backup, or cut the session back before it")


def _envelope(event_type: object, seq: object, time: object) -> tuple[bytes, bytes, bytes]:
    """The JSON of a record's type, seq and time."""
    try:
        return ENCODER.encode(event_type), ENCODER.encode(seq), ENCODER.encode(time)
    except UnicodeEncodeError:  # a lone surrogate in an opaque event's type
        return encode_line(event_type), encode_line(seq), encode_line(time)


def _prefix(envelope: tuple[bytes, bytes, bytes]) -> bytes:
    """How a line written by this library begins, given its envelope's JSON."""
    event_type, seq, time = envelope
    return b'{"type":' + event_type + b',"seq":' + seq + b',"time":' + time + b","


def _field_ad(context: Sequence[str], kid: str, alg: str) -> bytes:
    """A sealed field's associated data: its label, ``context`` and the key id and
    algorithm, each length-prefixed."""
    parts = [_FIELD_LABEL, *(c.encode("utf-8", "surrogatepass") for c in context),
             kid.encode(), alg.encode()]
    return b"".join(_field(p) for p in parts)
