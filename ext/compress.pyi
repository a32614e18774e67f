"""The four Kafka codecs over well-kept libraries.

gzip: zlib with a gzip header. snappy: Kafka's xerial framing ("\\x82SNAPPY\\x00",
version, compatible version, then int32-length-prefixed raw snappy blocks) on read; raw
snappy is also accepted on read; we write xerial framing (what the Java client writes).
lz4: the LZ4 frame format. zstd: a zstd frame (content size may be absent).
"""
def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes: ...
MAX_DECOMPRESSED_BYTES: int

def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int = ...) -> bytes:
    """Raises ext.errors.CorruptRecordError for undecodable input, an unknown codec, or input
    that decompresses past ``max_size`` bytes (MAX_DECOMPRESSED_BYTES by default)."""
