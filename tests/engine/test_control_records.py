"""Transaction markers (control batches), byte-exact with Kafka's and read as Kafka reads them.

Two implementations besides engine.control check the format: the batch is written out by
hand from Kafka's documented layout (record batch v2, ControlRecordType and EndTxnMarker v0)
with kafka-python's own CRC32C, and kafka-python's DefaultRecordBatch decodes it.
"""
import struct

import pytest
from kafka.record._crc32c import crc as kafka_python_crc32c
from kafka.record.default_records import DefaultRecordBatch

from engine.control import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    MARKER_BATCH_ATTRIBUTES,
    EndTxnMarker,
    MarkerBatch,
    build_control_key,
    build_end_txn_marker_batch,
    parse_control_type,
    parse_end_txn_marker,
    read_end_txn_marker,
)
from engine.errors import InvalidRecordError
from ext.batch import build_batch, read_header, validate_records

TS = 1_700_000_000_000


def kafka_marker_batch(control_type, producer_id, producer_epoch, coordinator_epoch, timestamp,
                       base_offset, partition_leader_epoch, records=True):
    """A marker batch written field by field from Kafka's documented record batch v2 layout."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    # record: attributes int8, timestampDelta varlong, offsetDelta varint, key length varint,
    # key, value length varint, value, header count varint; lengths zigzag-encoded, all < 64
    body = bytes([0, 0, 0, len(key) * 2]) + key + bytes([len(value) * 2]) + value + bytes([0])
    record = bytes([len(body) * 2]) + body
    after_crc = (struct.pack(">hiqqqhii", MARKER_BATCH_ATTRIBUTES, 0, timestamp, timestamp,
                             producer_id, producer_epoch, -1, 1 if records else 0)
                 + (record if records else b""))
    crc = kafka_python_crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch, magic, crc, the rest
    return (struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc)
            + after_crc)


@pytest.mark.parametrize("control_type", [CONTROL_ABORT, CONTROL_COMMIT])
def test_a_marker_batch_is_byte_for_byte_kafkas_end_transaction_marker(control_type):
    ours = build_end_txn_marker_batch(control_type, producer_id=4242, producer_epoch=7,
                                      coordinator_epoch=19, timestamp_ms=TS, base_offset=1000,
                                      partition_leader_epoch=3)
    assert ours == kafka_marker_batch(control_type, 4242, 7, 19, TS, 1000, 3)
    assert len(ours) == 78  # Kafka's EndTransactionMarker batch size: 61-byte header + 17


def test_kafka_python_decodes_a_marker_batch_as_a_transactional_control_batch():
    for control_type in (CONTROL_ABORT, CONTROL_COMMIT):
        batch = DefaultRecordBatch(build_end_txn_marker_batch(
            control_type, producer_id=99, producer_epoch=2, coordinator_epoch=5,
            timestamp_ms=TS, base_offset=500, partition_leader_epoch=1))
        assert batch.validate_crc()
        assert batch.is_control_batch and batch.is_transactional
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 2, -1)
        assert (batch.base_offset, batch.last_offset_delta, batch.compression_type) == (500, 0, 0)
        (record,) = list(batch)
        assert (record.offset, record.timestamp, record.headers) == (500, TS, [])
        assert (record.version, record.type) == (0, control_type)
        assert record.abort == (control_type == CONTROL_ABORT)
        assert record.commit == (control_type == CONTROL_COMMIT)
        assert struct.unpack(">hi", record.value) == (0, 5)


def test_a_marker_batch_passes_the_brokers_own_batch_validation():
    data = build_end_txn_marker_batch(CONTROL_COMMIT, 1, 0, 0, TS)
    header = validate_records(data)
    assert header.is_control and header.is_transactional
    assert header.attributes == 0x30
    assert (header.base_sequence, header.records_count, header.max_timestamp) == (-1, 1, TS)


def test_read_end_txn_marker_reads_back_what_was_built():
    data = build_end_txn_marker_batch(CONTROL_ABORT, producer_id=12, producer_epoch=300,
                                      coordinator_epoch=2**31 - 1, timestamp_ms=TS,
                                      base_offset=77)
    assert read_end_txn_marker(data, check_crc=True) == MarkerBatch(
        12, 300, 77, TS, EndTxnMarker(CONTROL_ABORT, 2**31 - 1))
    assert not read_end_txn_marker(data).marker.is_commit


def test_read_end_txn_marker_reads_kafkas_hand_written_bytes_at_a_position_in_a_buffer():
    data = b"junk" + kafka_marker_batch(CONTROL_COMMIT, 5, 6, 8, TS, 40, 0)
    assert read_end_txn_marker(data, 4, check_crc=True) == MarkerBatch(
        5, 6, 40, TS, EndTxnMarker(CONTROL_COMMIT, 8))


def test_a_control_batch_without_records_holds_no_marker_as_after_compaction():
    empty = kafka_marker_batch(CONTROL_COMMIT, 5, 6, 8, TS, 40, 0, records=False)
    assert read_header(empty).records_count == 0
    assert read_end_txn_marker(empty, check_crc=True) is None


def test_a_data_batch_is_not_a_marker():
    data = build_batch([(b"k", b"v", (), TS)], producer_id=1, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        read_end_txn_marker(data)


def test_a_control_record_of_another_type_is_not_a_transaction_marker_as_kafkas_deserialize():
    leader_change = build_batch([(build_control_key(2), b"\x00\x00", (), TS)], is_control=True)
    with pytest.raises(InvalidRecordError, match="type 2 is not a transaction marker"):
        read_end_txn_marker(leader_change)


def test_control_key_shorter_than_four_bytes_or_of_negative_version_is_an_invalid_record():
    for key in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(InvalidRecordError, match="at least 4"):
            parse_control_type(key)
    with pytest.raises(InvalidRecordError, match="version -1"):
        parse_control_type(struct.pack(">hh", -1, 1))


def test_a_higher_control_key_version_is_read_as_version_0_as_kafka_reads_it():
    assert parse_control_type(struct.pack(">hh", 3, CONTROL_COMMIT) + b"extra") == CONTROL_COMMIT


def test_end_txn_marker_value_shorter_than_six_bytes_or_of_negative_version_is_invalid():
    key = build_control_key(CONTROL_COMMIT)
    for value in (None, b"", b"\x00\x00\x00\x00\x01"):
        with pytest.raises(InvalidRecordError, match="at least 6"):
            parse_end_txn_marker(key, value)
    with pytest.raises(InvalidRecordError, match="version -2"):
        parse_end_txn_marker(key, struct.pack(">hi", -2, 1))


def test_a_higher_end_txn_marker_version_is_read_for_its_coordinator_epoch():
    key = build_control_key(CONTROL_ABORT)
    assert parse_end_txn_marker(key, struct.pack(">hi", 1, 9) + b"\x00") == \
        EndTxnMarker(CONTROL_ABORT, 9)


def test_only_abort_and_commit_markers_are_built():
    with pytest.raises(ValueError, match="neither ABORT nor COMMIT"):
        build_end_txn_marker_batch(2, 1, 0, 0, TS)
