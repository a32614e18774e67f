"""Request values and frames made from the schemas, and the mutations the fuzzers apply.

A ``Source`` draws the choices (an int in a range, a bool, some bytes): ``RandomSource`` from a
seeded random.Random (the live fuzzer, fast), ``HypothesisSource`` from hypothesis' ``data``
(the decoder tests, which shrink). ``request_value`` walks a request schema at one version and
builds the struct the generic codec would decode: every field present in that version drawn,
every other at its class default, nulls only where the schema allows them, unless
``hostile`` asks for nulls anywhere a length can say null (string, bytes, array, nullable
struct marker).

``encode_loose`` is a second encoder of the same wire format, written from the schema here and
not from protocol/codec.py: it writes a null wherever the value is None, allowed or not, so
the tests can send what a broken client sends. For allowed values it is byte-identical to the
codec (tests/fuzz/test_decoders.py checks that).

Mutations of an encoded body (``mutate``):

| name        | what it does                                                          |
|-------------|-----------------------------------------------------------------------|
| bitflip     | flips 1-8 random bits                                                 |
| truncate    | cuts the body at a random position                                    |
| extend      | appends 1-64 random bytes                                             |
| length      | overwrites 1, 2 or 4 bytes with a boundary length: -2, -1, 0, max,  |
|             | 0x7fffffff, a 5-byte varint                                           |
| splice      | deletes or duplicates a random slice                                  |
| zero / ones | overwrites a random slice with 0x00 or 0xff                           |
"""
from __future__ import annotations

import random
import struct
from typing import Any

from protocol import messages
from protocol.codec import KafkaStruct
from protocol.schema import Field, Struct
from protocol.types import Writer

INT_RANGES = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
              "uint16": (0, (1 << 16) - 1)}
TEXT = "abcxyz-._ 0123456789ëß日本"
MAX_ARRAY = 3


class RandomSource:
    field = ""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        r = self.rng.random()
        if r < 0.3:
            return self.rng.choice([v for v in (lo, hi, 0, -1, 1) if lo <= v <= hi])
        return self.rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def raw(self, lo: int, hi: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(lo, hi))

    def text(self, hi: int) -> str:
        return "".join(self.rng.choice(TEXT) for _ in range(self.rng.randint(0, hi)))


class HypothesisSource:
    """Draws through hypothesis' ``data`` object (so failures shrink)."""

    field = ""

    def __init__(self, data):
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        return self.data.draw(self.st.booleans()) if p >= 0.5 else \
            self.data.draw(self.st.integers(0, int(1 / p) - 1)) == 0

    def raw(self, lo: int, hi: int) -> bytes:
        return self.data.draw(self.st.binary(min_size=lo, max_size=hi))

    def text(self, hi: int) -> str:
        return self.data.draw(self.st.text(alphabet=TEXT, max_size=hi))


# ---- values -------------------------------------------------------------------------------

def _nullable(f: Field, version: int) -> bool:
    return f.nullable is not None and version in f.nullable


def _present(f: Field, version: int, flexible: bool) -> bool:
    return version in f.versions and (f.tag is None or flexible)


def _element(src, f: Field, cls: type[KafkaStruct], version: int, flexible: bool, hostile: bool):
    base = f.element
    if base in INT_RANGES:
        return src.integer(*INT_RANGES[base])
    if base == "float64":
        return float(src.integer(-(1 << 40), 1 << 40)) / 8
    if base == "bool":
        return src.chance(0.5)
    if base == "uuid":
        return src.raw(16, 16)
    if base == "string":
        return src.text(12)
    if base in ("bytes", "records"):
        return src.raw(0, 40)
    return _struct(src, f.struct, getattr(cls, f.struct.name), version, flexible, hostile)


def _struct(src, struct: Struct, cls: type[KafkaStruct], version: int, flexible: bool,
            hostile: bool) -> KafkaStruct:
    obj = cls()
    for f in struct.fields:
        if not _present(f, version, flexible):
            continue
        src.field = f.name  # what is being drawn (a source may bias by name)
        can_null = f.is_array or f.element in ("string", "bytes", "records") or (
            f.struct is not None and _nullable(f, version))
        if can_null and f.tag is None and (_nullable(f, version) or hostile) and src.chance(0.15):
            setattr(obj, f.name, None)
        elif f.is_array:
            setattr(obj, f.name, [_element(src, f, cls, version, flexible, hostile)
                                  for _ in range(src.integer(0, MAX_ARRAY))])
        else:
            setattr(obj, f.name, _element(src, f, cls, version, flexible, hostile))
    return obj


def request_value(src, api_key: int, version: int, hostile: bool = False) -> KafkaStruct:
    codec = messages.REQUESTS[api_key]
    message = codec.message
    return _struct(src, message.root, codec.cls, version, message.is_flexible(version), hostile)


def has_forbidden_null(api_key: int, version: int, obj: KafkaStruct) -> bool:
    """Whether ``obj`` holds a null the schema does not allow at ``version``."""
    message = messages.REQUESTS[api_key].message
    flexible = message.is_flexible(version)

    def walk(struct: Struct, value) -> bool:
        for f in struct.fields:
            if not _present(f, version, flexible) or f.tag is not None:
                continue
            v = getattr(value, f.name)
            if v is None:
                if not _nullable(f, version):
                    return True
                continue
            if f.struct is not None:
                if any(walk(f.struct, item) for item in (v if f.is_array else [v])):
                    return True
        return False
    return walk(message.root, obj)


# ---- the loose encoder ---------------------------------------------------------------------

def _write_length(w: Writer, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        w.uvarint(n + 1)
    elif wide:
        w.int32(n)
    else:
        w.int16(n)


def _write_value(w: Writer, f: Field, v: Any, version: int, flexible: bool) -> None:
    base = f.element
    if base in INT_RANGES or base in ("float64", "bool", "uuid"):
        getattr(w, base)(v)
    elif base in ("string", "bytes", "records"):
        if v is None:
            _write_length(w, -1, flexible, base != "string")
            return
        data = v.encode() if base == "string" else bytes(v)
        _write_length(w, len(data), flexible, base != "string")
        w.raw(data)
    else:
        if _nullable(f, version):
            if v is None:
                w.int8(-1)
                return
            w.int8(1)
        _write_struct(w, f.struct, v, version, flexible)


def _write_struct(w: Writer, struct: Struct, obj, version: int, flexible: bool) -> None:
    tagged = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        v = getattr(obj, f.name)
        if f.tag is not None:
            default = type(obj)._defaults[f.name]
            if flexible and v is not None and v != (default() if callable(default) else default):
                tagged.append((f.tag, f, v))
            continue
        if f.is_array:
            if v is None:
                _write_length(w, -1, flexible, True)
                continue
            _write_length(w, len(v), flexible, True)
            for item in v:
                _write_value(w, f, item, version, flexible) if f.struct is None else \
                    _write_struct(w, f.struct, item, version, flexible)
        else:
            _write_value(w, f, v, version, flexible)
    if flexible:
        w.uvarint(len(tagged))
        for tag, f, v in sorted(tagged, key=lambda t: t[0]):
            sub = Writer()
            if f.is_array:
                _write_length(sub, len(v), True, True)
                for item in v:
                    _write_value(sub, f, item, version, True) if f.struct is None else \
                        _write_struct(sub, f.struct, item, version, True)
            else:
                _write_value(sub, f, v, version, True)
            w.uvarint(tag)
            w.uvarint(len(sub.buf))
            w.raw(sub.buf)


def encode_loose(api_key: int, version: int, obj: KafkaStruct) -> bytes:
    """The request body, nulls written wherever the value is None (see the module doc)."""
    message = messages.REQUESTS[api_key].message
    w = Writer()
    _write_struct(w, message.root, obj, version, message.is_flexible(version))
    return bytes(w.buf)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes,
                  client_id: str | None = "fuzz") -> bytes:
    """A whole frame (size prefix and request header) around an encoded body."""
    w = Writer()
    w.int16(api_key)
    w.int16(version)
    w.int32(correlation_id)
    if client_id is None:
        w.int16(-1)
    else:
        w.int16(len(client_id.encode()))
        w.raw(client_id.encode())
    codec = messages.REQUESTS.get(api_key)
    if codec is not None and codec.message.is_flexible(version):
        w.uvarint(0)
    w.raw(body)
    return struct.pack(">i", len(w.buf)) + bytes(w.buf)


# ---- mutations ----------------------------------------------------------------------------

LENGTHS = (b"\xff\xfe", b"\xff\xff", b"\x7f\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff",
           b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x10\x00", b"\xff\xff\xff\xff\x0f",
           b"\x00", b"\xff", b"\x80")
MUTATIONS = ("bitflip", "truncate", "extend", "length", "splice", "zero", "ones")


def mutate(data: bytes, rng: random.Random, kind: str | None = None) -> bytes:
    kind = kind or rng.choice(MUTATIONS)
    buf = bytearray(data)
    n = len(buf)
    if kind == "bitflip" and n:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif kind == "truncate" and n:
        del buf[rng.randrange(n):]
    elif kind == "extend":
        buf += rng.randbytes(rng.randint(1, 64))
    elif kind == "length":
        at = rng.randrange(n + 1)
        value = rng.choice(LENGTHS)
        buf[at:at + len(value)] = value
    elif kind == "splice" and n:
        a = rng.randrange(n)
        b = min(n, a + rng.randint(1, 16))
        if rng.random() < 0.5:
            del buf[a:b]
        else:
            buf[a:a] = buf[a:b]
    elif kind in ("zero", "ones") and n:
        a = rng.randrange(n)
        b = min(n, a + rng.randint(1, 8))
        buf[a:b] = (b"\x00" if kind == "zero" else b"\xff") * (b - a)
    return bytes(buf)
