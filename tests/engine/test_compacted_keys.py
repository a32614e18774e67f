"""A compacted topic refuses a record without a key (Kafka's LogValidator.validateKey, KIP-467's
record errors): ext.batch.null_key_indexes and Log._check_batches."""
import pytest

from engine.config import LogConfig
from engine.errors import InvalidRecordError, RecordValidationError
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

@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_a_record_without_key_on_a_compacted_topic_is_refused_with_its_batch_index_as_kafka_does(
        tmp_path, policy, codec):
    log = Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy=policy))
    log.append_as_leader(batch([b"a"]), 0, NOW)
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(batch([b"k", None, b"k2", None], codec), 0, NOW)
    assert isinstance(refused.value, InvalidRecordError)  # INVALID_RECORD at the broker
    assert refused.value.record_errors == [(1, WHY), (3, WHY)]
    assert str(refused.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{WHY}'), "
        f"RecordError(batchIndex=3, message='{WHY}')]")
    assert log.log_end_offset == 1  # nothing of the refused batch is written
    assert stored(log) == [(0, b"a")]


def test_the_message_shows_the_first_three_record_errors_and_counts_them_all(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="compact"))
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(batch([None] * 5), 0, NOW)
    assert [index for index, _ in refused.value.record_errors] == [0, 1, 2, 3, 4]
    message = str(refused.value)
    assert "due to 5 record errors in total" in message
    assert message.count("RecordError(") == 3 and "batchIndex=2" in message and "batchIndex=3" not in message


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
def test_keyed_records_including_an_empty_key_are_stored_on_a_compacted_topic(tmp_path, codec):
    log = Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="compact"))
    info = log.append_as_leader(batch([b"a", b"", b"a"], codec), 0, NOW)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert stored(log) == [(0, b"a"), (1, b""), (2, b"a")]


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


def test_the_key_check_follows_a_config_change_to_compact(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy="delete"))
    log.append_as_leader(batch([None]), 0, NOW)
    log.config = LogConfig(cleanup_policy="compact")
    with pytest.raises(RecordValidationError):
        log.append_as_leader(batch([None]), 0, NOW)
    assert log.log_end_offset == 1
