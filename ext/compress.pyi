"""The four Kafka codecs over well-kept libraries.

gzip: zlib with a gzip header. snappy: Kafka's xerial framing ("\\x82SNAPPY\\x00",
version, compatible version, then int32-length-prefixed raw snappy blocks) on read; raw
snappy is also accepted on read; we write xerial framing (what the Java client writes).
lz4: the LZ4 frame format. zstd: a zstd frame (content size may be absent).
"""
from typing import NamedTuple

class Levels(NamedTuple):
    min_level: int
    max_level: int
    default_level: int

LEVELS: dict[str, Levels]
"""Kafka's compression levels (KIP-390) by codec name ("gzip", "lz4", "zstd"): a level is
valid within [min_level, max_level] or equal to default_level (gzip's -1, zlib's 6)."""

def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed in ``codec`` at Kafka's ``level`` of that codec (None: its default;
    snappy and none take only None). lz4 at its default, 9, is the fast compressor and at any
    other level LZ4 HC, as in Kafka. Raises ValueError for an unknown codec or a level outside
    the codec's range."""

MAX_DECOMPRESSED_BYTES: int

def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int = ...) -> bytes:
    """Raises ext.errors.CorruptRecordError for undecodable input, an unknown codec, or input
    that decompresses past ``max_size`` bytes (MAX_DECOMPRESSED_BYTES by default)."""
