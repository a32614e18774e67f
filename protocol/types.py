"""Primitive Kafka protocol types over a bounds-checked cursor.

Fixed-width integers are big-endian. Varints are zigzag (KIP-482 unsigned varints for
compact lengths and tag counts). Flexible versions use compact strings/bytes/arrays
(length + 1 as an unsigned varint, 0 = null) and a tagged-field section after every struct.
Every read checks bounds: a short or malformed buffer raises ProtocolError, never reads on.
"""
from __future__ import annotations

import struct
import uuid as _uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class ProtocolError(ValueError):
    """A malformed request or response: the connection that sent it is closed."""


class Reader:
    """A read cursor over a buffer. ``records`` fields come back as memoryview slices of
    the buffer (no copy)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.buf = memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def _take(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ProtocolError(f"need {n} bytes at position {pos}, have {self.end - pos}")
        self.pos = pos + n
        return pos

    def remaining(self) -> int:
        return self.end - self.pos

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._take(8))[0]

    def bool(self) -> bool:
        return self.buf[self._take(1)] != 0

    def uuid(self) -> bytes:
        pos = self._take(16)
        return bytes(self.buf[pos:pos + 16])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if shift > 28:
                raise ProtocolError(f"unsigned varint longer than 5 bytes at {self.pos}")
            b = self.buf[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def uvarlong(self) -> int:
        value = shift = 0
        while True:
            if shift > 63:
                raise ProtocolError(f"unsigned varlong longer than 10 bytes at {self.pos}")
            b = self.buf[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def varlong(self) -> int:
        v = self.uvarlong()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> memoryview:
        pos = self._take(n)
        return self.buf[pos:pos + n]

    def string_of(self, n: int) -> str:
        pos = self._take(n)
        try:
            return str(self.buf[pos:pos + n], "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"string at {pos} is not valid UTF-8") from None


class Writer:
    """An append-only output buffer. ``external`` splices in an object that is not copied
    (a file slice to send with sendfile): the output becomes a list of parts."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list = []

    def external(self, obj) -> None:
        self.parts.append(bytes(self.buf))
        self.parts.append(obj)
        self.buf = bytearray()

    def finish(self) -> list:
        """Every part in order: bytes objects and external objects."""
        if self.buf or not self.parts:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        return self.parts

    def size(self) -> int:
        return len(self.buf) + sum(len(p) if isinstance(p, bytes) else p.size for p in self.parts)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: bytes | None) -> None:
        if v is None:
            self.buf += bytes(16)
        elif len(v) != 16:
            raise ValueError(f"uuid must be 16 bytes, got {len(v)}")
        else:
            self.buf += v

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise ValueError(f"unsigned varint cannot be negative: {v}")
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 31))

    def varlong(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data


def uvarint_size(v: int) -> int:
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


ZERO_UUID = bytes(16)


def uuid_str(raw: bytes) -> str:
    return str(_uuid.UUID(bytes=raw))
