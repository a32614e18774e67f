"""ext.compress: round trips per codec, Kafka's snappy framings, and corrupt input."""
import os
import random
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from ext import compress
from ext.errors import CorruptRecordError

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
XERIAL_MAGIC = b"\x82SNAPPY\x00"

PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 500,
    "random": os.urandom(100_000),
    "zeros_past_blocks": bytes(300_000),  # many 32 KiB snappy / 64 KiB lz4 blocks
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(codec, name):
    data = PAYLOADS[name]
    packed = compress.compress(codec, data)
    assert isinstance(packed, bytes)
    assert compress.decompress(codec, packed) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_accepts_any_buffer(codec, kind):
    data = PAYLOADS["text"]
    assert compress.decompress(codec, kind(compress.compress(codec, kind(data)))) == data


def test_none_codec_is_identity():
    assert compress.compress(0, b"abc") == b"abc"
    assert compress.decompress(0, memoryview(b"abc")) == b"abc"


def test_compresses_repetitive_data():
    data = PAYLOADS["text"]
    for codec in CODECS:
        assert len(compress.compress(codec, data)) < len(data) // 5


def test_snappy_writes_xerial_framing():
    data = bytes(100_000)
    packed = compress.compress(SNAPPY, data)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks, out = 16, 0, b""
    while pos < len(packed):
        (n,) = struct.unpack(">i", packed[pos : pos + 4])
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n]))
        pos += 4 + n
        blocks += 1
    assert out == data
    assert blocks == 4  # 32 KiB blocks, as snappy-java


def test_snappy_reads_raw():
    data = PAYLOADS["text"]
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert raw[:8] != XERIAL_MAGIC
    assert compress.decompress(SNAPPY, raw) == data


def test_snappy_reads_xerial_written_by_hand():
    parts = [b"hello " * 1000, b"world " * 3000, b""]
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for part in parts:
        block = bytes(cramjam.snappy.compress_raw(part))
        framed += struct.pack(">i", len(block)) + block
    assert compress.decompress(SNAPPY, framed) == b"".join(parts)


def test_gzip_is_gzip_and_reads_concatenated_members():
    packed = compress.compress(GZIP, b"abc")
    assert packed[:2] == b"\x1f\x8b"
    two = zlib.compress(b"abc", 6, 31) + zlib.compress(b"def", 6, 31)
    assert compress.decompress(GZIP, two) == b"abcdef"


def test_lz4_frame_has_independent_blocks_and_no_content_size():
    packed = compress.compress(LZ4, PAYLOADS["text"])
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg & 0x20  # block independence
    assert not flg & 0x08  # no content size
    assert lz4.frame.decompress(packed) == PAYLOADS["text"]


def test_zstd_reads_frames_without_content_size():
    data = PAYLOADS["text"]
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert compress.decompress(ZSTD, packed) == data
    stream = zstandard.ZstdCompressor().compressobj()
    streamed = stream.compress(data) + stream.flush()
    assert compress.decompress(ZSTD, streamed) == data


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_raises_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        compress.decompress(codec, b"this is not compressed at all" * 3)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_input_raises_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        compress.decompress(codec, b"")


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_stream_raises_corrupt(codec):
    packed = compress.compress(codec, PAYLOADS["random"])
    for cut in (len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            compress.decompress(codec, packed[:cut])


@pytest.mark.parametrize("codec", CODECS)
def test_trailing_garbage_raises_corrupt(codec):
    packed = compress.compress(codec, PAYLOADS["text"])
    with pytest.raises(CorruptRecordError):
        compress.decompress(codec, packed + b"\x01\x02\x03garbage")


def test_xerial_block_length_past_end():
    framed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, 1000) + b"abc"
    with pytest.raises(CorruptRecordError, match="past the end"):
        compress.decompress(SNAPPY, framed)
    with pytest.raises(CorruptRecordError):
        compress.decompress(SNAPPY, XERIAL_MAGIC + struct.pack(">iii", 1, 1, -5))
    with pytest.raises(CorruptRecordError):
        compress.decompress(SNAPPY, XERIAL_MAGIC + b"\x00\x00")


def test_raw_snappy_forged_length_is_refused():
    # preamble claims 4 GiB from 6 bytes of input
    with pytest.raises(CorruptRecordError):
        compress.decompress(SNAPPY, b"\xff\xff\xff\xff\x0f\x00")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(CorruptRecordError):
        compress.decompress(codec, b"abc")
    with pytest.raises(ValueError):
        compress.compress(codec, b"abc")


# ---- decompression bombs: output is bounded (MAX_DECOMPRESSED_BYTES) ----------------------------


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_a_batch_that_decompresses_past_the_bound_is_refused_before_it_is_allocated(codec):
    bomb = compress.compress(codec, bytes(compress.MAX_DECOMPRESSED_BYTES + 1))
    assert len(bomb) < compress.MAX_DECOMPRESSED_BYTES // 100  # a small batch of zeros
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(codec, bomb)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY])  # zstd and lz4 bounds count whole blocks: below
def test_output_of_exactly_the_bound_is_accepted_and_one_byte_more_refused(codec):
    data = b"kafka " * 5000
    assert compress.decompress(codec, compress.compress(codec, data), len(data)) == data
    if codec == SNAPPY:
        return  # bounded by its preamble check instead (22 times the input)
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(codec, compress.compress(codec, data), len(data) - 1)


def test_zstd_bound_adds_up_every_frame_and_skips_skippable_frames():
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(bytes(200_000))
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"abc"
    data = frame + skippable + frame
    assert compress.decompress(ZSTD, data) == bytes(400_000)
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(ZSTD, data, 300_000)


def test_zstd_bound_counts_a_compressed_block_as_128_kib():
    frame = zstandard.ZstdCompressor().compress(b"kafka " * 5000)  # one compressed block
    assert compress.decompress(ZSTD, frame, 128 * 1024) == b"kafka " * 5000
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(ZSTD, frame, 128 * 1024 - 1)


def test_lz4_bound_counts_a_compressed_block_as_the_frames_block_maximum():
    frame = compress.compress(LZ4, b"kafka " * 5000)  # 64 KiB blocks
    assert compress.decompress(LZ4, frame, 64 * 1024) == b"kafka " * 5000
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(LZ4, frame, 64 * 1024 - 1)
    twice = frame + frame
    assert compress.decompress(LZ4, twice, 128 * 1024) == b"kafka " * 10000
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(LZ4, twice, 128 * 1024 - 1)


def test_zstd_streaming_frames_of_a_client_are_bounded_by_their_blocks():
    co = zstandard.ZstdCompressor(level=3).compressobj()  # no content size, as librdkafka writes
    data = os.urandom(1000) * 700
    frame = co.compress(data) + co.flush()
    assert compress.decompress(ZSTD, frame) == data
    with pytest.raises(CorruptRecordError, match="decompresses past"):
        compress.decompress(ZSTD, frame, 100_000)


# ---- compression levels (KIP-390): what the broker compresses at when it rewrites a batch -------

# Compressible but not trivially so, so that levels differ on it: seeded random words.
_WORDS = [b"%x" % (i * 2654435761 % 2**32) for i in range(400)]
LEVELLED = b" ".join(random.Random(7).choices(_WORDS, k=40_000))


def test_the_codecs_levels_are_kafkas():
    """Kafka's CompressionType: gzip 1..9 or -1 (Deflater.DEFAULT_COMPRESSION, zlib's level 6),
    lz4 1..17 default 9 (lz4-java's LZ4Constants), zstd ZSTD_minCLevel()..22 default 3."""
    assert compress.LEVELS == {"gzip": (1, 9, -1), "lz4": (1, 17, 9), "zstd": (-131072, 22, 3)}
    assert compress.LEVELS["zstd"].min_level == -131072 and compress.LEVELS["lz4"].default_level == 9


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_no_level_is_the_codecs_default_level(codec):
    default = compress.LEVELS[{GZIP: "gzip", LZ4: "lz4", ZSTD: "zstd"}[codec]].default_level
    assert compress.compress(codec, LEVELLED) == compress.compress(codec, LEVELLED, default)


@pytest.mark.parametrize("level", [-1, 1, 5, 9])
def test_a_gzip_level_is_zlibs_level(level):
    """Java's Deflater is zlib: -1 is Z_DEFAULT_COMPRESSION, which zlib runs as level 6."""
    packed = compress.compress(GZIP, LEVELLED, level)
    assert packed == zlib.compress(LEVELLED, level, 31)
    assert compress.decompress(GZIP, packed) == LEVELLED
    if level == -1:
        assert packed == compress.compress(GZIP, LEVELLED, 6)


def test_a_higher_gzip_level_compresses_smaller():
    sizes = [len(compress.compress(GZIP, LEVELLED, level)) for level in (1, 6, 9)]
    assert sizes[0] > sizes[1] >= sizes[2]


@pytest.mark.parametrize("level", [-7, 0, 1, 3, 19, 22])
def test_a_zstd_level_is_zstds_level(level):
    packed = compress.compress(ZSTD, LEVELLED, level)
    assert packed == zstandard.ZstdCompressor(level=level).compress(LEVELLED)
    assert compress.decompress(ZSTD, packed) == LEVELLED


def test_a_higher_zstd_level_compresses_smaller():
    sizes = [len(compress.compress(ZSTD, LEVELLED, level)) for level in (-5, 1, 3, 19)]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4


def test_lz4_at_kafkas_default_level_is_the_fast_compressor():
    """Kafka's Lz4BlockOutputStream takes lz4-java's fastCompressor at the default level, 9,
    and its highCompressor (LZ4 HC) at any other: level 8 compresses smaller than level 9."""
    fast = compress.compress(LZ4, LEVELLED, 9)
    assert fast == lz4.frame.compress(LEVELLED, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                      block_linked=False, content_checksum=False, store_size=False)
    assert len(compress.compress(LZ4, LEVELLED, 8)) < len(fast)


@pytest.mark.parametrize("name", [*PAYLOADS, "levelled"])
@pytest.mark.parametrize("level", [3, 8, 12, 16, 17])
def test_lz4_at_another_level_is_lz4_hc_in_kafkas_frame(name, level):
    """The frame is the one Kafka writes (64 KiB independent blocks, no checksums or content
    size, a block that does not shrink stored as it is); each block is LZ4 HC at the level,
    byte for byte what the LZ4 frame library writes at that HC level."""
    data = LEVELLED if name == "levelled" else PAYLOADS[name]
    packed = compress.compress(LZ4, data, level)
    assert packed == lz4.frame.compress(data, compression_level=level, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                        block_linked=False, content_checksum=False, store_size=False)
    assert compress.decompress(LZ4, packed) == data


@pytest.mark.parametrize("level", [1, 2])
def test_lz4_levels_below_lz4_hcs_least_are_still_lz4_hc(level):
    """lz4-java's highCompressor(1 or 2) runs LZ4 HC (the C library's lowest HC setting); the LZ4
    frame library would take those levels as its fast compressor, so the blocks are LZ4 HC
    here as in Kafka: smaller than the fast compressor's on compressible data."""
    packed = compress.compress(LZ4, LEVELLED, level)
    assert compress.decompress(LZ4, packed) == LEVELLED
    assert len(packed) < len(compress.compress(LZ4, LEVELLED, 9))
    assert packed[:7] == compress.compress(LZ4, b"", 9)[:7]  # the same frame descriptor


@pytest.mark.parametrize("codec,level", [(GZIP, 0), (GZIP, 10), (GZIP, -2), (LZ4, 0), (LZ4, 18),
                                         (ZSTD, 23), (ZSTD, -131073)])
def test_a_level_outside_the_codecs_range_is_refused(codec, level):
    with pytest.raises(ValueError, match=f"level {level}"):
        compress.compress(codec, b"abc", level)


@pytest.mark.parametrize("codec", [0, SNAPPY])
def test_a_codec_without_levels_takes_none(codec):
    assert compress.decompress(codec, compress.compress(codec, b"abc", None)) == b"abc"
    with pytest.raises(ValueError, match="no compression levels"):
        compress.compress(codec, b"abc", 1)
