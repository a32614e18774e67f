"""Idempotent producer rules, one test per rule (engine/producer_state.py), and their
effect through Log appends, restarts and producer.id.expiration.ms."""
import pytest

from engine.config import LogConfig
from engine.errors import DuplicateSequenceError
from engine.log import Log
from engine.manager import LogManager
from engine.producer_state import (
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateManager,
    UnknownProducerIdError,
)
from ext.batch import build_batch
from tests.engine.batches import BASE_TS

NOW = BASE_TS + 1000
DAY_MS = 86400000  # producer.id.expiration.ms's default


def test_first_batch_of_a_producer_must_start_at_sequence_zero():
    """Kafka's rule up to 2.4: a producer this partition keeps no state for (never seen here,
    or expired) starts at sequence 0; anything else is UNKNOWN_PRODUCER_ID, which the producer
    answers by bumping its epoch and starting again at 0."""
    state = ProducerStateManager()
    assert state.check(7, 0, 0, 4) is None
    with pytest.raises(UnknownProducerIdError):
        state.check(8, 0, 5, 9)


def test_retry_of_one_of_the_last_five_batches_is_a_duplicate():
    state = ProducerStateManager()
    for i in range(6):
        state.update(7, 0, i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10, NOW)
    assert state.check(7, 0, 50, 59).first_offset == 150
    assert state.check(7, 0, 10, 19).first_offset == 110
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 0, 0, 9)  # older than the five kept batches


def test_a_gap_in_sequences_is_out_of_order():
    state = ProducerStateManager()
    state.update(7, 0, 0, 9, 0, 9, NOW)
    assert state.check(7, 0, 10, 19) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 0, 11, 19)


def test_an_older_epoch_is_fenced_and_a_newer_one_restarts_at_zero():
    state = ProducerStateManager()
    state.update(7, 3, 0, 9, 0, 9, NOW)
    with pytest.raises(ProducerFencedError):
        state.check(7, 2, 10, 19)
    assert state.check(7, 4, 0, 0) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 4, 10, 19)


def test_sequences_wrap_at_int_max():
    state = ProducerStateManager()
    state.update(7, 0, 2**31 - 10, 2**31 - 1, 0, 9, NOW)
    assert state.check(7, 0, 0, 4) is None


def idempotent_batch(pid: int, epoch: int, seq: int, n: int = 3, ts: int = NOW) -> bytearray:
    records = [(None, b"v%d" % (seq + i), [], ts) for i in range(n)]
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


# ---- producer.id.expiration.ms -------------------------------------------------------------

def test_a_producer_idle_longer_than_producer_id_expiration_is_forgotten():
    state = ProducerStateManager()
    state.update(7, 0, 0, 4, 0, 4, 1000)
    state.update(8, 0, 0, 4, 5, 9, 5000)
    assert state.remove_expired_producers(1000 + DAY_MS - 1, DAY_MS) == []
    assert state.remove_expired_producers(1000 + DAY_MS, DAY_MS) == [7]  # idle exactly that long: gone
    assert list(state.producers) == [8]


def test_a_producers_idle_time_counts_from_the_max_timestamp_of_its_last_batch():
    state = ProducerStateManager()
    state.update(7, 0, 0, 4, 0, 4, 50_000)
    state.update(7, 0, 5, 9, 5, 9, 1000)  # its clock went back: the last batch's time still counts
    assert state.remove_expired_producers(1000 + DAY_MS, DAY_MS) == [7]
    state.update(8, 0, 0, 4, 10, 14, 1000)
    state.update(8, 0, 5, 9, 15, 19, 50_000)
    assert state.remove_expired_producers(50_000 + DAY_MS - 1, DAY_MS) == []


def test_a_producer_expires_by_its_record_timestamps_unless_the_topic_stamps_log_append_time(tmp_path):
    """The time is the batch's max timestamp as stored: the producer's own (CreateTime), or the
    leader's clock at the append (LogAppendTime); not when the broker happened to append it."""
    hour = 3600000
    create_time = Log(str(tmp_path / "c-0"))
    create_time.append_as_leader(idempotent_batch(7, 0, 0, ts=NOW - hour), 0, NOW)
    assert create_time.remove_expired_producers(NOW + DAY_MS - hour, DAY_MS) == 1
    append_time = Log(str(tmp_path / "a-0"), LogConfig(message_timestamp_type="LogAppendTime"))
    append_time.append_as_leader(idempotent_batch(7, 0, 0, ts=NOW - hour), 0, NOW)
    assert append_time.remove_expired_producers(NOW + DAY_MS - 1, DAY_MS) == 0
    assert append_time.remove_expired_producers(NOW + DAY_MS, DAY_MS) == 1


def test_after_expiry_the_forgotten_producer_is_unknown_until_it_starts_again_at_zero(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent_batch(7, 0, 10), 0, NOW)
    log.remove_expired_producers(NOW + DAY_MS, DAY_MS)
    with pytest.raises(UnknownProducerIdError):
        log.append_as_leader(idempotent_batch(7, 0, 3), 0, NOW + DAY_MS)
    # the producer bumps its epoch and starts again at 0 (KIP-360)
    assert log.append_as_leader(idempotent_batch(7, 1, 0), 0, NOW + DAY_MS).first_offset == 3
    with pytest.raises(OutOfOrderSequenceError):  # its state starts again from that batch
        log.append_as_leader(idempotent_batch(7, 1, 4), 0, NOW + DAY_MS)


def test_after_expiry_a_retried_batch_is_written_again(tmp_path):
    """What producer.id.expiration.ms trades away: the batches it remembered to catch retries."""
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    log.remove_expired_producers(NOW + DAY_MS, DAY_MS)
    assert log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW + DAY_MS).first_offset == 3


def test_a_follower_forgets_an_idle_producer_by_the_replicated_batches_timestamps(tmp_path):
    leader, follower = Log(str(tmp_path / "l" / "t-0")), Log(str(tmp_path / "f" / "t-0"))
    batch = idempotent_batch(7, 0, 0)
    leader.append_as_leader(batch, 0, NOW)
    follower.append_as_follower(bytes(batch), now_ms=NOW + 10 * DAY_MS)  # appended much later
    assert follower.remove_expired_producers(NOW + DAY_MS - 1, DAY_MS) == 0
    assert follower.remove_expired_producers(NOW + DAY_MS, DAY_MS) == 1
    assert follower.producer_state.producers == {}


def test_a_restart_rebuilds_each_producers_last_timestamp_from_the_log(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    log.append_as_leader(idempotent_batch(8, 0, 0, ts=NOW + 5000), 0, NOW + 5000)
    log.close()
    again = Log(str(tmp_path / "t-0"), had_clean_shutdown=False)
    assert again.remove_expired_producers(NOW + DAY_MS, DAY_MS) == 1
    assert list(again.producer_state.producers) == [8]


def test_the_log_manager_expires_idle_producers_of_every_log(tmp_path):
    logs = LogManager([str(tmp_path / "d")], cluster_id="c", node_id=1)
    logs.startup()
    logs.get_or_create_log("a", 0).append_as_leader(idempotent_batch(7, 0, 0), 0, NOW)
    replicated = idempotent_batch(8, 0, 0)
    Log(str(tmp_path / "leader" / "b-0")).append_as_leader(replicated, 0, NOW)
    logs.get_or_create_log("b", 0).append_as_follower(bytes(replicated), now_ms=NOW)
    assert logs.remove_expired_producers(NOW + DAY_MS - 1, DAY_MS) == 0
    assert logs.remove_expired_producers(NOW + DAY_MS, DAY_MS) == 2
    logs.shutdown()
