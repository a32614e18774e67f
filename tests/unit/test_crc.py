"""ext.crc against published CRC32C vectors (RFC 3720 B.4 and the check value)."""
import pytest

from ext import crc

VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_known_vectors(data, expected):
    assert crc.crc32c(data) == expected


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_buffer_kinds(kind):
    assert crc.crc32c(kind(b"123456789")) == 0xE3069283


def test_memoryview_slice_covers_only_the_slice():
    data = b"xx123456789yy"
    assert crc.crc32c(memoryview(data)[2:11]) == 0xE3069283
    assert crc.crc32c(memoryview(bytearray(data))[2:11]) == 0xE3069283


def test_continuation_equals_one_shot():
    data = bytes(range(256)) * 40
    for cut in (0, 1, 7, 4096, len(data)):
        assert crc.crc32c(data[cut:], crc.crc32c(data[:cut])) == crc.crc32c(data)


def test_continuation_keyword():
    assert crc.crc32c(b"6789", crc=crc.crc32c(b"12345")) == 0xE3069283


def test_large_buffer_differs_by_one_bit():
    data = bytearray(1 << 20)
    before = crc.crc32c(data)
    data[123456] ^= 0x10
    assert crc.crc32c(data) != before


def test_rejects_non_buffers():
    with pytest.raises(TypeError):
        crc.crc32c("123456789")


def test_hardware_flag_is_bool():
    assert isinstance(crc.HARDWARE, bool)
