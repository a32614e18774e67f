"""Strom's native hot path: Cython kernels for the per-byte work.

One small extension per concern, each a .pyx (code), .pxd (its table of contents
for other Cython modules) and .pyi (its Python surface):

    cursor    (a .pxd alone) the one bounds-checked read cursor over batch, record and
              wire bytes, and the one table of a record batch's field offsets
    crc       CRC32C over any buffer
    batch     record batch v2: header parse/validate, walk, offset assignment, build, decode
    compress  the four Kafka codecs (gzip, snappy with xerial framing, lz4 frame, zstd)
    segment   one-write append of a buffer to a segment fd, sendfile of a byte range
    columns   record batches decoded into Arrow-shaped columns (the Spark reader's path)
    index     mmap-backed offset index and time index, binary search in C
    epoch     leader-epoch cache and its leader-epoch-checkpoint file

ext/ imports nothing from the packages above it (engine/, protocol/, ...).
"""
