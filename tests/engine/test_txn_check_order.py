"""The order of a leader's checks of a producer's batch, as Kafka's analyzeAndValidateProducerState
and ProducerAppendInfo.appendDataBatch run them: a duplicate first, then the epoch, then the
sequence, and the transaction state last; and completed transactions forgotten as the high
watermark passes their markers (onHighWatermarkUpdated)."""
from __future__ import annotations

import pytest

from engine.errors import DuplicateSequenceError
from engine.producer_state import OutOfOrderSequenceError
from tests.engine.test_log_transactions import NOW, Writer, data, new_log


def test_a_retried_batch_from_before_the_transaction_is_a_duplicate_as_kafka_finds_duplicates_first(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    first, last = w.send(1, txn=False)  # sequences 0-1, outside a transaction
    w.send(1)  # then its transaction opens
    with pytest.raises(DuplicateSequenceError) as e:
        log.append_as_leader(data(2, 1, 0, 0, txn=False), 0, NOW)
    assert (e.value.first_offset, e.value.last_offset) == (first, last)


def test_a_gap_outside_an_open_transaction_is_out_of_order_as_kafka_checks_the_sequence_first(
        tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(data(1, 1, 0, 7, txn=False), 0, NOW)


def test_completed_transactions_are_forgotten_when_the_high_watermark_passes_their_markers(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    for _ in range(50):
        w.send(1)
        w.end(1, commit=True)
    assert len(log.producer_state.unreplicated) == 50
    log.update_high_watermark(log.log_end_offset)  # no read of the last stable offset
    assert len(log.producer_state.unreplicated) == 0
    w.send(1)
    w.end(1, commit=False)
    assert log.maybe_increment_high_watermark(log.log_end_offset)
    assert len(log.producer_state.unreplicated) == 0
