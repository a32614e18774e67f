"""ext.batch.retain_records, the cleaner's rebuild of a batch in C, against the rules
engine/cleaner.py applied in Python before it (decode the records, keep those the mask keeps,
add a delete horizon when a kept record is a tombstone, rebuild_batch): on seeded random
batches of every codec, with gaps in their offsets, LogAppendTime, producer fields, headers,
null keys and values, and batches that already carry a delete horizon, the two agree byte for
byte, and a batch kept whole with no horizon to add is left for the caller to copy."""
from __future__ import annotations

import random

import pytest

from engine.cleaner import rebuild_batch
from ext.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    build_batch_at,
    decode_records,
    read_header,
    retain_records,
    validate,
)
from ext.errors import CorruptRecordError

NOW = 1_700_000_000_000
HORIZON = NOW + 86_400_000
CODECS = (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD)


def _blob(rng: random.Random, null_share: float) -> bytes | None:
    if rng.random() < null_share:
        return None
    return rng.randbytes(rng.choice((0, 1, 5, 60, 200)))


def random_batch(rng: random.Random, codec: int) -> bytes:
    """A batch as a producer or an earlier clean leaves it: offsets with gaps, any timestamps,
    transactional or not, LogAppendTime or not, a delete horizon or not."""
    count = rng.randint(1, 40)
    deltas = sorted(rng.sample(range(count * 3), count))
    records = []
    for d in deltas:
        headers = [(f"h{j}", _blob(rng, 0.2)) for j in range(rng.choice((0, 0, 1, 3)))]
        records.append((d, _blob(rng, 0.1), _blob(rng, 0.3), headers, NOW + rng.randint(-5000, 5000)))
    attributes = codec | rng.choice((0, 0x08)) | rng.choice((0, 0x10))
    has_horizon = rng.random() < 0.3
    if has_horizon:
        attributes |= 0x40
    base_timestamp = NOW - 1000 if has_horizon else records[0][4]
    max_timestamp = NOW + 9000 if attributes & 0x08 else max(r[4] for r in records)
    return build_batch_at(records, rng.randint(0, 1 << 40), deltas[-1] + rng.randint(0, 3), base_timestamp,
                          max_timestamp, attributes, rng.randint(-1, 50), rng.choice((-1, 1234)),
                          rng.choice((-1, 7)), rng.choice((-1, 0, 99)))


def old_rules(batch: bytes, keep: bytes, horizon: int | None, tombstone_horizon: int | None) -> bytes | None:
    """engine/cleaner.py's _filter_batch before the rebuild moved to C."""
    header = read_header(batch)
    records = decode_records(batch, 0, False)
    kept = [r for r, k in zip(records, keep) if k]
    needs = horizon
    if needs is None and tombstone_horizon is not None and any(r.value is None for r in kept):
        needs = tombstone_horizon
    if len(kept) == len(records) and needs is None:
        return None
    return rebuild_batch(header, kept, needs)


@pytest.mark.parametrize("codec", CODECS)
def test_retain_records_agrees_with_the_python_rebuild_on_random_batches(codec):
    rng = random.Random(29 + codec)
    copied = rebuilt = 0
    for _ in range(150):
        batch = random_batch(rng, codec)
        count = read_header(batch).records_count
        keep = bytes(rng.random() < 0.7 for _ in range(count))
        if not any(keep):
            keep = b"\x01" + keep[1:]
        if rng.random() < 0.3:
            keep = b"\x01" * count
        has_horizon = bool(read_header(batch).attributes & 0x40)
        horizon = HORIZON if not has_horizon and rng.random() < 0.2 else None
        tombstone_horizon = HORIZON + 1 if not has_horizon and horizon is None else None
        expected = old_rules(batch, keep, horizon, tombstone_horizon)
        # the batch inside a larger buffer, as the cleaner reads a segment's chunk
        pad = rng.randbytes(rng.randint(0, 30))
        got = retain_records(memoryview(pad + batch), len(pad), keep, horizon, tombstone_horizon)
        assert got == expected
        if got is None:
            copied += 1
        else:
            rebuilt += 1
            validate(got)
    assert copied and rebuilt  # both outcomes were exercised


def test_a_kept_tombstone_adds_the_delete_horizon_and_a_batch_kept_whole_is_left_to_copy():
    batch = build_batch_at([(0, b"a", b"1", [], NOW), (2, b"b", None, [], NOW + 1)], 100, 2, NOW, NOW + 1, 0)
    assert retain_records(batch, 0, b"\x01\x01") is None
    partial = validate(retain_records(batch, 0, b"\x01\x00", None, HORIZON))  # no tombstone kept
    p = partial
    assert (p.base_timestamp, p.attributes & 0x40, p.last_offset, p.records_count) == (NOW, 0, 102, 1)
    with_horizon = retain_records(batch, 0, b"\x01\x01", None, HORIZON)
    h = validate(with_horizon)
    assert (h.base_timestamp, h.attributes & 0x40) == (HORIZON, 0x40)
    assert (h.last_offset, h.max_timestamp) == (102, NOW + 1)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(with_horizon)] == \
        [(100, b"a", b"1", NOW), (102, b"b", None, NOW + 1)]


def test_retain_records_refuses_a_mask_of_the_wrong_length_and_a_torn_record():
    batch = build_batch_at([(0, b"a", b"1", [], NOW), (1, b"b", b"2", [], NOW)], 0, 1, NOW, NOW, 0)
    with pytest.raises(ValueError):
        retain_records(batch, 0, b"\x01")
    torn = bytearray(batch)
    torn[61] = 0x7F  # the first record's length runs past the batch
    with pytest.raises(CorruptRecordError):
        retain_records(bytes(torn), 0, b"\x01\x00")
