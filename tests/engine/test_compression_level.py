"""The topic configs compression.gzip.level, compression.lz4.level and compression.zstd.level
(KIP-390), as Kafka's LogConfig and LogValidator apply them.

The level of the codec compression.type names is what the leader compresses at when it
rewrites a batch in that codec; the other two levels play no part. A batch already in the
topic's codec is stored as it came, whatever level its producer used (Kafka assigns offsets
in place and never recompresses it). Each level is validated against Kafka's range and names
itself when it is out of it; the broker properties of the same names are every topic's
default.
"""
import random

import pytest

from engine.config import LogConfig, log_config_from_broker
from engine.errors import ConfigError
from engine.log import Log
from ext.batch import build_batch, decode_records, iter_batches
from tests.engine.batches import BASE_TS

NOW = BASE_TS + 1000
NONE, GZIP, LZ4, ZSTD = 0, 1, 3, 4
LEVEL_CONFIG = {GZIP: "compression.gzip.level", LZ4: "compression.lz4.level", ZSTD: "compression.zstd.level"}
TYPE = {GZIP: "gzip", LZ4: "lz4", ZSTD: "zstd"}


def text_batch(n: int = 400, compression: int = NONE) -> bytearray:
    """A producer's batch of compressible text whose compressed size depends on the level."""
    words = [b"%x" % (i * 2654435761 % 2**32) for i in range(300)]
    rng = random.Random(11)
    records = [(b"k%d" % (i % 13), b" ".join(rng.choices(words, k=40)), [("h", b"v")], BASE_TS + i)
               for i in range(n)]
    return bytearray(build_batch(records, compression=compression))


def rewritten(tmp_path, name: str, batch: bytearray, **overrides) -> bytes:
    """The log's bytes after a leader append of ``batch`` (its offsets and epoch patched in
    place, as the request buffer's are) to a topic with ``overrides``."""
    log = Log(str(tmp_path / name), LogConfig().with_overrides(overrides))
    log.append_as_leader(batch, 0, NOW)
    return log.read(0, 1 << 30).records.read()


def records_of(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for h in iter_batches(data) for r in decode_records(data, h.position)]


# ---- the leader's rewrite uses the level of the topic's codec ---------------------------------


@pytest.mark.parametrize("codec,low,high", [(ZSTD, 1, 19), (GZIP, 1, 9), (LZ4, 9, 12)])
def test_the_level_of_the_topics_codec_is_used_when_the_leader_rewrites_a_batch(tmp_path, codec, low, high):
    """lz4's 9 is Kafka's default, its fast compressor; 12 is LZ4 HC at its strongest."""
    batch = text_batch()
    sent = records_of(bytes(batch))
    name = LEVEL_CONFIG[codec]
    cheap = rewritten(tmp_path, "low-0", batch, **{"compression.type": TYPE[codec], name: low})
    dense = rewritten(tmp_path, "high-0", batch, **{"compression.type": TYPE[codec], name: high})
    assert [h.compression for h in iter_batches(cheap, check_crc=True)] == [codec]
    assert [h.compression for h in iter_batches(dense, check_crc=True)] == [codec]
    assert len(dense) < len(cheap) < len(batch)
    assert records_of(cheap) == records_of(dense) == sent


def test_compression_zstd_level_is_used_when_the_leader_rewrites_a_batch(tmp_path):
    batch = text_batch(compression=GZIP)
    sizes = {level: len(rewritten(tmp_path, f"z{level}-0", batch, **{
        "compression.type": "zstd", "compression.zstd.level": level})) for level in (-5, 3, 19)}
    assert sizes[-5] > sizes[3] > sizes[19]
    default = rewritten(tmp_path, "default-0", batch, **{"compression.type": "zstd"})
    assert len(default) == sizes[3]  # Kafka's default zstd level is 3
    assert records_of(default) == records_of(bytes(batch))


def test_the_levels_of_the_other_codecs_play_no_part(tmp_path):
    batch = text_batch()
    plain = rewritten(tmp_path, "plain-0", batch, **{"compression.type": "lz4"})
    others = rewritten(tmp_path, "others-0", batch, **{
        "compression.type": "lz4", "compression.gzip.level": 1, "compression.zstd.level": 19})
    assert others == plain
    snappy = rewritten(tmp_path, "snappy-0", batch, **{"compression.type": "snappy"})
    levelled = rewritten(tmp_path, "snappy-levelled-0", batch, **{
        "compression.type": "snappy", "compression.gzip.level": 1, "compression.lz4.level": 17,
        "compression.zstd.level": 22})
    assert levelled == snappy


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_a_batch_already_in_the_topics_codec_is_stored_as_it_came_whatever_the_level(tmp_path, codec):
    """Kafka's LogValidator assigns offsets in place when the codecs match; the level the
    producer compressed at is kept."""
    batch = text_batch(compression=codec)  # at the codec's default level
    high = {GZIP: 9, LZ4: 12, ZSTD: 19}[codec]
    data = rewritten(tmp_path, "t-0", batch, **{"compression.type": TYPE[codec], LEVEL_CONFIG[codec]: high})
    assert data == bytes(batch)


def test_compression_type_producer_ignores_the_levels(tmp_path):
    batch = text_batch(compression=GZIP)
    data = rewritten(tmp_path, "t-0", batch, **{"compression.type": "producer", "compression.gzip.level": 9})
    assert data == bytes(batch)


# ---- validation and defaults -------------------------------------------------------------------


def test_the_compression_levels_default_as_kafkas():
    config = LogConfig()
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (
        -1, 9, 3)
    props = config.to_properties()
    assert (props["compression.gzip.level"], props["compression.lz4.level"],
            props["compression.zstd.level"]) == ("-1", "9", "3")


@pytest.mark.parametrize("name,value", [
    ("compression.gzip.level", "1"), ("compression.gzip.level", "9"), ("compression.gzip.level", "-1"),
    ("compression.lz4.level", "1"), ("compression.lz4.level", "17"),
    ("compression.zstd.level", "-131072"), ("compression.zstd.level", "0"), ("compression.zstd.level", "22"),
])
def test_a_compression_level_in_kafkas_range_is_accepted(name, value):
    attr = name.replace(".", "_")
    assert getattr(LogConfig().with_overrides({name: value}), attr) == int(value)


@pytest.mark.parametrize("name,value,why", [
    ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "10", "between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "-2", "between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "0", "at least 1"),
    ("compression.lz4.level", "18", "no more than 17"),
    ("compression.zstd.level", "-131073", "at least -131072"),
    ("compression.zstd.level", "23", "no more than 22"),
    ("compression.zstd.level", "high", "integer"),
])
def test_a_compression_level_out_of_kafkas_range_is_invalid_config_naming_it(name, value, why):
    with pytest.raises(ConfigError, match=why) as err:
        LogConfig().with_overrides({name: value})
    assert err.value.name == name and str(err.value).startswith(name)


def test_the_broker_compression_level_is_the_default_of_every_topic(tmp_path):
    broker = log_config_from_broker({"compression.type": "zstd", "compression.zstd.level": "19",
                                     "compression.gzip.level": "1", "compression.lz4.level": "4"})
    assert (broker.compression_gzip_level, broker.compression_lz4_level, broker.compression_zstd_level) == (
        1, 4, 19)
    batch = text_batch()
    topic = Log(str(tmp_path / "t-0"), broker)  # a topic with no override of its own
    topic.append_as_leader(bytearray(batch), 0, NOW)
    stored = topic.read(0, 1 << 30).records.read()
    assert stored == rewritten(tmp_path, "nineteen-0", batch, **{
        "compression.type": "zstd", "compression.zstd.level": 19})
    assert stored != rewritten(tmp_path, "three-0", batch, **{"compression.type": "zstd"})
    overridden = broker.with_overrides({"compression.zstd.level": "3"})  # the topic's own wins
    assert overridden.compression_zstd_level == 3 and overridden.compression_lz4_level == 4


def test_a_bad_broker_compression_level_names_the_broker_property():
    with pytest.raises(ConfigError, match="no more than 17") as err:
        log_config_from_broker({"compression.lz4.level": "99"})
    assert err.value.name == "compression.lz4.level"
