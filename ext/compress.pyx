# cython: language_level=3
"""The four Kafka codecs over well-kept libraries.

    codec  id  library            on write                        on read
    gzip   1   zlib               gzip member                     gzip members (concatenated ok)
    snappy 2   cramjam            xerial framing, 32 KiB blocks   xerial framing, or raw snappy
    lz4    3   lz4.frame,         LZ4 frame, independent 64 KiB   LZ4 frames (concatenated ok)
               lz4.block          blocks, no content size
    zstd   4   zstandard          zstd frame                      zstd frames, content size optional

Compression levels are Kafka's (KIP-390; LEVELS holds each codec's range and default), given
by the caller (a topic's compression.<codec>.level when the leader rewrites a batch), the
codec's default when not:

    codec  levels           default  how the library takes it
    gzip   1..9, or -1      -1       zlib's level; -1 is Z_DEFAULT_COMPRESSION, which zlib runs
                                     as 6 (Java's Deflater is zlib too)
    lz4    1..17            9        9: the fast compressor (lz4-java's fastCompressor, which
                                     Kafka's Lz4BlockOutputStream takes at the default level);
                                     any other: LZ4 HC at that level on each block
                                     (LZ4_compress_HC, as lz4-java's native highCompressor;
                                     the C library caps HC at 12, so 13..17 compress as 12)
    zstd   -131072..22  3        zstd's compression level (0 is zstd's own default, 3)
    snappy, none: no levels.

The LZ4 frame library would run levels 1 and 2 as its fast compressor, not as LZ4 HC, so
the HC frame is written here from lz4.block's HC blocks, in the frame the library writes
(its frame descriptor bytes, taken from it once; a block that does not shrink is stored as
it is, as both lz4 and Kafka do). At levels the library runs as HC (3 and up) the two
frames are the same bytes.

Xerial framing (snappy-java's SnappyOutputStream, what the Java client writes):

    offset size field
    0      8    magic            b"\\x82SNAPPY\\x00"
    8      4    version          int32 big-endian, 1
    12     4    compat version   int32 big-endian, 1
    16     ...  blocks           int32 big-endian length n >= 0, then n bytes of raw snappy

librdkafka writes raw snappy (no framing); Java reads both, and so do we.

Every decompressor is run to its end-of-stream marker: a stream that stops short,
carries garbage, or is not of the codec raises CorruptRecordError. The libraries stream
their output, so a forged size field in a frame header cannot make us allocate it up
front; raw snappy, whose preamble is such a size, is checked against the largest ratio
snappy can reach before it is trusted.

Decompressed size is bounded: a batch that would decompress past MAX_DECOMPRESSED_BYTES
(64 MiB; a producer's batch is a few MiB before compression) raises CorruptRecordError
before that much memory is taken, so a small batch of zeros cannot make a broker allocate
gigabytes (a decompression bomb). gzip stops its output at the bound. For zstd and lz4 the
frames are walked first (their libraries either cannot stop output or allocate the whole
limit up front): a block regenerates at most its declared size when stored (raw, RLE or
uncompressed blocks) or the codec's block maximum when compressed (zstd 128 KiB, lz4 the
frame's 64 KiB to 4 MiB), and the sum over the blocks must stay within the bound: an upper
bound, so a batch can be refused up to one block maximum per block below the limit. Snappy
is bounded by its preamble check (22 times the input at most).
"""
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.string cimport memcmp

import zlib
from collections import namedtuple

import cramjam
import lz4.block
import lz4.frame
import zstandard

from ext.errors import CorruptRecordError

MAX_DECOMPRESSED_BYTES = 64 << 20
cdef Py_ssize_t _ZSTD_BLOCK_MAX = 128 * 1024
cdef uint32_t _ZSTD_MAGIC = 0xFD2FB528
cdef uint32_t _LZ4_MAGIC = 0x184D2204

cdef enum:
    _XERIAL_HEADER_SIZE = 16
    _XERIAL_BLOCK_SIZE = 32 * 1024

cdef bytes _XERIAL_MAGIC = b"\x82SNAPPY\x00"
cdef bytes _XERIAL_HEADER = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"

Levels = namedtuple("Levels", "min_level max_level default_level")

# Kafka's CompressionType. A level is valid within [min_level, max_level] or equal to
# default_level (only gzip's default, -1, lies outside its range).
LEVELS = {
    "gzip": Levels(1, 9, -1),  # Deflater.BEST_SPEED, BEST_COMPRESSION, DEFAULT_COMPRESSION
    "lz4": Levels(1, 17, 9),  # lz4-java's LZ4Constants
    "zstd": Levels(-131072, 22, 3),  # ZSTD_minCLevel(), ZSTD_maxCLevel(), ZSTD_CLEVEL_DEFAULT
}
cdef dict _LEVELS_BY_CODEC = {CODEC_GZIP: LEVELS["gzip"], CODEC_LZ4: LEVELS["lz4"],
                              CODEC_ZSTD: LEVELS["zstd"]}

# One compressor per level in use: ZstdCompressor is reusable and not free to build (a
# handful at most: the levels a broker's topics name). Decompressors are per call (a
# decompressobj cannot be reused after a frame).
cdef dict _zstd_compressors = {}
cdef object _zstd_decompressor = zstandard.ZstdDecompressor()

cdef object _LZ4_FRAME_OPTIONS = dict(
    # Kafka's Java reader (KafkaLZ4BlockInputStream) does not follow linked blocks.
    block_size=lz4.frame.BLOCKSIZE_MAX64KB,
    block_linked=False,
    content_checksum=False,
    store_size=False,
)
cdef Py_ssize_t _LZ4_BLOCK_SIZE = 64 * 1024
# Magic, FLG, BD and the descriptor checksum, as the library writes them for those options.
cdef bytes _LZ4_FRAME_HEADER = lz4.frame.compress(b"", **_LZ4_FRAME_OPTIONS)[:7]
cdef bytes _LZ4_END_MARK = b"\x00\x00\x00\x00"
cdef object _lz4_block_compress = lz4.block.compress

cdef object _snappy_compress_raw = cramjam.snappy.compress_raw
cdef object _snappy_decompress_raw = cramjam.snappy.decompress_raw
cdef object _snappy_decompress_raw_len = cramjam.snappy.decompress_raw_len


cpdef bytes compress(int codec, object data, object level=None):
    cdef int at
    if codec == CODEC_NONE or codec == CODEC_SNAPPY:
        if level is not None:
            raise ValueError(f"{_codec_name(codec)} has no compression levels (given {level})")
        return bytes(data) if codec == CODEC_NONE else _snappy_xerial_compress(data)
    if not CODEC_GZIP <= codec <= CODEC_ZSTD:
        raise ValueError(f"unknown compression codec {codec}")
    at = _level(codec, level)
    if codec == CODEC_GZIP:
        return zlib.compress(data, at, 31)
    if codec == CODEC_LZ4:
        if at == LEVELS["lz4"].default_level:
            return lz4.frame.compress(data, **_LZ4_FRAME_OPTIONS)
        return _lz4_hc_compress(data, at)
    compressor = _zstd_compressors.get(at)
    if compressor is None:
        compressor = _zstd_compressors[at] = zstandard.ZstdCompressor(level=at)
    return compressor.compress(data)


cdef int _level(int codec, object level) except? -1:
    """``level`` of ``codec`` checked against Kafka's range (ValueError outside it, as
    Kafka's Compression builders refuse it); the codec's default for None."""
    levels = _LEVELS_BY_CODEC[codec]
    if level is None:
        return levels.default_level
    if level != levels.default_level and not levels.min_level <= level <= levels.max_level:
        raise ValueError(f"{_codec_name(codec)} has no compression level {level}: "
                         f"{levels.min_level}..{levels.max_level} or {levels.default_level}")
    return level


cdef bytes _lz4_hc_compress(object data, int level):
    """An LZ4 frame of independent 64 KiB blocks, each LZ4 HC at ``level`` (or stored as it
    is when that does not make it smaller), with the library's frame descriptor."""
    cdef object view = memoryview(data).cast("B")
    cdef Py_ssize_t n = len(view), start
    cdef list parts = [_LZ4_FRAME_HEADER]
    for start in range(0, n, _LZ4_BLOCK_SIZE):
        chunk = view[start:start + _LZ4_BLOCK_SIZE]
        block = _lz4_block_compress(chunk, mode="high_compression", compression=level, store_size=False)
        if len(block) < len(chunk):
            parts.append(len(block).to_bytes(4, "little"))
            parts.append(block)
        else:
            parts.append((len(chunk) | 0x80000000).to_bytes(4, "little"))
            parts.append(bytes(chunk))
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


cpdef bytes decompress(int codec, object data, Py_ssize_t max_size=MAX_DECOMPRESSED_BYTES):
    try:
        if codec == CODEC_GZIP:
            return _gzip_decompress(data, max_size)
        if codec == CODEC_SNAPPY:
            return _snappy_decompress(data)
        if codec == CODEC_LZ4:
            _frames_bound(data, max_size, CODEC_LZ4)
            return _lz4_decompress(data)
        if codec == CODEC_ZSTD:
            _frames_bound(data, max_size, CODEC_ZSTD)
            return _zstd_decompress(data)
        if codec == CODEC_NONE:
            return bytes(data)
    except CorruptRecordError:
        raise
    except (zlib.error, zstandard.ZstdError, cramjam.DecompressionError, RuntimeError) as e:
        raise CorruptRecordError(f"{_codec_name(codec)}: undecodable data ({e})") from e
    raise CorruptRecordError(f"unknown compression codec {codec}")


cdef str _codec_name(int codec):
    return ("none", "gzip", "snappy", "lz4", "zstd")[codec] if 0 <= codec <= 4 else str(codec)


cdef _too_big(str codec, Py_ssize_t max_size):
    raise CorruptRecordError(f"{codec}: decompresses past {max_size} bytes")


cdef bytes _gzip_decompress(object data, Py_ssize_t max_size):
    cdef list parts = []
    cdef object rest = data
    cdef Py_ssize_t left = max_size
    while True:
        d = zlib.decompressobj(31)
        part = d.decompress(rest, left + 1)
        if len(part) > left:
            _too_big("gzip", max_size)
        left -= len(part)
        parts.append(part)
        if not d.eof:
            raise CorruptRecordError("gzip: stream ends before its end-of-stream marker")
        rest = d.unused_data
        if not rest:
            break
    return b"".join(parts)


cdef inline uint32_t _le32(const unsigned char *p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef int _frames_bound(object data, Py_ssize_t max_size, int codec) except -1:
    """CorruptRecordError if the zstd or LZ4 frames in ``data`` may regenerate more than
    ``max_size`` bytes: an upper bound from their block headers (zstd: RFC 8878 section 3.1;
    LZ4: the LZ4 frame format). Skippable frames (either codec's magic 0x184D2A5?, a size,
    data) add nothing. Malformed framing ends the walk: the decompressor refuses it."""
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0], pos = 0
    cdef uint64_t bound = 0
    cdef uint32_t magic
    while n - pos >= 4:
        magic = _le32(&view[pos])
        if (magic & 0xFFFFFFF0) == 0x184D2A50:
            if n - pos < 8:
                return 0
            pos += 8 + <Py_ssize_t>_le32(&view[pos + 4])
            continue
        if codec == CODEC_ZSTD:
            pos = _zstd_frame(view, pos, &bound)
        else:
            pos = _lz4_frame(view, pos, &bound)
        if bound > <uint64_t>max_size:
            _too_big(_codec_name(codec), max_size)
        if pos < 0:
            return 0
    return 0


cdef Py_ssize_t _zstd_frame(const unsigned char[::1] view, Py_ssize_t pos, uint64_t* bound):
    """Add what the zstd frame at ``pos`` may regenerate to ``bound``; the position after
    it, or -1 if it is not a frame or is cut short. A block regenerates its own size when
    raw or RLE, at most 128 KiB when compressed."""
    cdef Py_ssize_t n = view.shape[0], header, block_size
    cdef unsigned char descriptor, block
    cdef int kind
    if _le32(&view[pos]) != _ZSTD_MAGIC or n - pos < 5:
        return -1
    descriptor = view[pos + 4]
    header = 1 + (0 if descriptor & 0x20 else 1)  # descriptor, window descriptor
    header += (0, 1, 2, 4)[descriptor & 0x03]  # dictionary id
    header += ((1 if descriptor & 0x20 else 0), 2, 4, 8)[descriptor >> 6]  # content size
    pos += 4 + header
    while True:
        if n - pos < 3:
            return -1
        block = view[pos]
        block_size = <Py_ssize_t>(view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)) >> 3
        pos += 3
        kind = (block >> 1) & 0x03
        if kind == 0:  # raw
            bound[0] += block_size
            pos += block_size
        elif kind == 1:  # RLE: one byte, repeated block_size times
            bound[0] += block_size
            pos += 1
        else:  # compressed (or reserved, which the decompressor refuses)
            bound[0] += _ZSTD_BLOCK_MAX
            pos += block_size
        if block & 1:
            break
    return pos + (4 if descriptor & 0x04 else 0)  # content checksum


cdef bytes _lz4_decompress(object data):
    cdef list parts = []
    cdef object rest = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        parts.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("lz4: frame ends before its end mark")
        rest = d.unused_data
        if not rest:
            break
    return b"".join(parts)


cdef Py_ssize_t _lz4_frame(const unsigned char[::1] view, Py_ssize_t pos, uint64_t* bound):
    """Add what the LZ4 frame at ``pos`` may regenerate to ``bound``; the position after it,
    or -1 if it is not a frame or is cut short. A block regenerates its own size when stored
    uncompressed, at most the frame's block maximum (64 KiB to 4 MiB) when compressed."""
    cdef Py_ssize_t n = view.shape[0], block_max
    cdef unsigned char flags
    cdef uint32_t size
    if _le32(&view[pos]) != _LZ4_MAGIC or n - pos < 7:
        return -1
    flags = view[pos + 4]
    block_max = (64 * 1024, 256 * 1024, 1024 * 1024, 4096 * 1024)[(view[pos + 5] >> 4) & 0x03]
    pos += 4 + 2 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0) + 1
    while True:
        if n - pos < 4:
            return -1
        size = _le32(&view[pos])
        pos += 4
        if size == 0:  # the end mark
            break
        bound[0] += (size & 0x7FFFFFFF) if size & 0x80000000 else block_max  # stored, or not
        pos += <Py_ssize_t>(size & 0x7FFFFFFF) + (4 if flags & 0x10 else 0)
    return pos + (4 if flags & 0x04 else 0)  # content checksum


cdef bytes _zstd_decompress(object data):
    # decompressobj, not ZstdDecompressor.decompress: the latter refuses frames that do
    # not record their content size, which streaming producers (librdkafka) emit.
    cdef list parts = []
    cdef object rest = data
    while True:
        d = _zstd_decompressor.decompressobj()
        parts.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("zstd: frame ends before its last block")
        rest = d.unused_data
        if not rest:
            break
    return b"".join(parts)


cdef bytes _snappy_xerial_compress(object data):
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t start = 0
    cdef list parts = [_XERIAL_HEADER]
    while start < n:
        block = bytes(_snappy_compress_raw(view[start:start + _XERIAL_BLOCK_SIZE]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
        start += _XERIAL_BLOCK_SIZE
    return b"".join(parts)


cdef bytes _snappy_decompress(object data):
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t pos
    cdef int32_t length
    cdef list parts
    if n >= 8 and memcmp(&view[0], <const char*>_XERIAL_MAGIC, 8) == 0:
        if n < _XERIAL_HEADER_SIZE:
            raise CorruptRecordError("snappy: xerial header cut short")
        parts = []
        pos = _XERIAL_HEADER_SIZE
        while pos < n:
            if n - pos < 4:
                raise CorruptRecordError("snappy: xerial block length cut short")
            length = <int32_t>((<uint32_t>view[pos] << 24) | (<uint32_t>view[pos + 1] << 16)
                               | (<uint32_t>view[pos + 2] << 8) | <uint32_t>view[pos + 3])
            pos += 4
            if length < 0 or length > n - pos:
                raise CorruptRecordError(f"snappy: xerial block length {length} past the end")
            parts.append(_snappy_raw(view[pos:pos + length]))
            pos += length
        return b"".join(parts)
    return _snappy_raw(view)


cdef bytes _snappy_raw(object block):
    # Snappy's best case is a 3-byte copy element emitting 64 bytes, so a stream of n
    # bytes never expands past 22 n; a larger preamble is forged, and is refused before
    # the library sizes its output buffer by it.
    cdef Py_ssize_t n = len(block)
    if _snappy_decompress_raw_len(block) > 22 * n + 64:
        raise CorruptRecordError("snappy: declared length exceeds what the block can hold")
    return bytes(_snappy_decompress_raw(block))
