"""The four Kafka codecs over well-kept libraries.

gzip: zlib with a gzip header. snappy: Kafka's xerial framing ("\\x82SNAPPY\\x00",
version, compatible version, then int32-length-prefixed raw snappy blocks) on read; raw
snappy is also accepted on read; we write xerial framing (what the Java client writes).
lz4: the LZ4 frame format. zstd: a zstd frame (content size may be absent).
"""
def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes: ...
def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Raises ext.errors.CorruptRecordError for undecodable input or an unknown codec."""
