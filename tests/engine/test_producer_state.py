"""Idempotent producer rules, one test per rule (engine/producer_state.py), and their
effect through Log appends and restarts."""
import pytest

from engine.errors import DuplicateSequenceError
from engine.log import Log
from engine.producer_state import (
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateManager,
    UnknownProducerIdError,
)
from ext.batch import build_batch
from tests.engine.batches import BASE_TS

NOW = BASE_TS + 1000


def test_first_batch_of_a_producer_must_start_at_sequence_zero():
    state = ProducerStateManager()
    assert state.check(7, 0, 0, 4) is None
    with pytest.raises(UnknownProducerIdError):
        state.check(8, 0, 5, 9)


def test_retry_of_one_of_the_last_five_batches_is_a_duplicate():
    state = ProducerStateManager()
    for i in range(6):
        state.update(7, 0, i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10)
    assert state.check(7, 0, 50, 59).first_offset == 150
    assert state.check(7, 0, 10, 19).first_offset == 110
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 0, 0, 9)  # older than the five kept batches


def test_a_gap_in_sequences_is_out_of_order():
    state = ProducerStateManager()
    state.update(7, 0, 0, 9, 0, 9)
    assert state.check(7, 0, 10, 19) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 0, 11, 19)


def test_an_older_epoch_is_fenced_and_a_newer_one_restarts_at_zero():
    state = ProducerStateManager()
    state.update(7, 3, 0, 9, 0, 9)
    with pytest.raises(ProducerFencedError):
        state.check(7, 2, 10, 19)
    assert state.check(7, 4, 0, 0) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 4, 10, 19)


def test_sequences_wrap_at_int_max():
    state = ProducerStateManager()
    state.update(7, 0, 2**31 - 10, 2**31 - 1, 0, 9)
    assert state.check(7, 0, 0, 4) is None


def idempotent_batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytearray:
    records = [(None, b"v%d" % (seq + i), [], NOW) for i in range(n)]
    return bytearray(build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_log_answers_a_retried_batch_with_its_original_offsets_and_writes_nothing(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    size = log.active_segment.size
    with pytest.raises(DuplicateSequenceError) as dup:
        log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    assert (dup.value.first_offset, dup.value.last_offset) == (0, 2)
    assert log.active_segment.size == size and log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent_batch(7, 0, 5), 0, NOW)
    assert log.append_as_leader(idempotent_batch(7, 0, 3), 0, NOW).first_offset == 3


def test_producer_state_is_rebuilt_from_the_log_after_a_restart(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(idempotent_batch(7, 1, 0), 0, NOW)
    log.append_as_leader(idempotent_batch(7, 1, 3), 0, NOW)
    log.close()
    again = Log(str(tmp_path / "t-0"), had_clean_shutdown=False)
    with pytest.raises(DuplicateSequenceError):
        again.append_as_leader(idempotent_batch(7, 1, 3), 0, NOW)
    with pytest.raises(ProducerFencedError):
        again.append_as_leader(idempotent_batch(7, 0, 6), 0, NOW)
    assert again.append_as_leader(idempotent_batch(7, 1, 6), 0, NOW).first_offset == 6
