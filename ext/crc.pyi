def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC32C (Castagnoli) of a buffer, continuing from ``crc``; hardware-accelerated."""
