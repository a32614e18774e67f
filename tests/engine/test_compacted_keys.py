"""Records without a key (Kafka's LogValidator.validateKey, KIP-467's record errors):
ext.batch.null_key_indexes, and the logs that store them."""
import pytest

from engine.config import LogConfig
from engine.log import Log
from ext.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CorruptRecordError,
    build_batch,
    decode_records,
    iter_batches,
    null_key_indexes,
)
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 1000
CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
WHY = "Compacted topic cannot accept message without key in topic partition t-0"


def batch(keys, compression=COMPRESSION_NONE) -> bytearray:
    return bytearray(build_batch([(k, b"v%d" % i, [("h", b"x")], NOW + i) for i, k in enumerate(keys)],
                                 compression=compression))


def stored(log) -> list[tuple[int, bytes | None]]:
    data = log.read(0, 1 << 20).records.read()
    return [(r.offset, r.key) for h in iter_batches(data) for r in decode_records(data, h.position)]


# ---- ext.batch.null_key_indexes ----

@pytest.mark.parametrize("codec", CODECS)
def test_null_key_indexes_are_the_records_index_within_the_batch_in_every_codec(codec):
    assert null_key_indexes(batch([b"a", None, b"b", None, None], codec)) == [1, 3, 4]
    assert null_key_indexes(batch([b"a", b"b"], codec)) == []


def test_an_empty_key_is_a_key_as_kafka_reads_it():
    """Kafka's Record.hasKey is key != null: a zero-length key is a key."""
    assert null_key_indexes(batch([b"", None, b""])) == [1]


def test_null_key_indexes_reads_the_batch_at_its_position():
    first = batch([b"a"])
    assert null_key_indexes(first + batch([None, b"b"]), len(first)) == [0]


def test_null_key_indexes_refuses_a_malformed_batch():
    bad = batch([None, b"b"])
    bad[-1] ^= 0xFF  # not a record's last byte any more: the walk finds bytes left over or missing
    bad = bad[:-3]
    with pytest.raises(CorruptRecordError):
        null_key_indexes(bad)


# ---- the leader's append ----

def test_a_record_without_key_is_stored_on_a_topic_that_does_not_compact(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="delete"))
    log.append_as_leader(batch([None, b"a", None]), 0, NOW)
    assert stored(log) == [(0, None), (1, b"a"), (2, None)]


def test_a_follower_stores_what_its_leader_wrote_without_checking_keys(tmp_path):
    """Only a leader's append from a client validates records; a follower copies the leader's
    log (written before the topic became compacted, say) as it is."""
    leader = Log(str(tmp_path / "leader" / "t-0"), LogConfig(cleanup_policy="delete"))
    leader.append_as_leader(producer_batch(3, ts=NOW, key=None), 0, NOW)
    follower = Log(str(tmp_path / "follower" / "t-0"), LogConfig(cleanup_policy="compact"))
    follower.append_as_follower(leader.read(0, 1 << 20).records.read(), NOW)
    assert stored(follower) == [(0, None), (1, None), (2, None)]
