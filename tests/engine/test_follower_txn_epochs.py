"""Producer state on followers and in replay follows the log, whatever the epochs (Kafka's
AppendOrigin.REPLICATION: a lower epoch is only logged, maybeUpdateProducerEpoch takes the
batch's epoch whenever it differs), and the per-batch rules that go with it."""
from __future__ import annotations

import os

from engine.config import LogConfig
from engine.log import FETCH_TXN_COMMITTED, Log
from engine.reader import iter_file_batches
from tests.engine.test_log_transactions import NOW, Writer, data, new_log, txn_indexes, txn_state


def leader_bytes(log: Log) -> list[bytes]:
    return [bytes(b) for s in log.segments for _, b in iter_file_batches(s.fd, 0, s.size)]


def expired_then_lower_epoch(tmp_path, txn: bool) -> tuple[Log, Log]:
    """Producer 7 writes at epoch 5 on the leader, and the follower copies it; the leader
    expires producer 7 and then takes its batch at epoch 3 (legal: the producer is unknown
    there), transactional and aborted when ``txn``; the follower, still at epoch 5, copies
    that too."""
    leader, follower = new_log(tmp_path, "leader-0"), new_log(tmp_path, "follower-0")
    w = Writer(leader)
    leader.append_as_leader(data(2, 7, 5, 0, txn=False), 0, NOW)
    follower.append_as_follower(b"".join(leader_bytes(leader)), NOW)
    assert leader.remove_expired_producers(NOW + 10**9, 1000) == 1
    w.send(7, n=3, epoch=3, txn=txn)
    if txn:
        w.end(7, commit=False, epoch=3)
    follower.append_as_follower(b"".join(leader_bytes(leader)[1:]), NOW)  # after the first batch
    assert follower.log_end_offset == leader.log_end_offset
    for log in (leader, follower):
        log.update_high_watermark(log.log_end_offset)
    return leader, follower


def test_a_follower_takes_a_lower_epoch_transaction_and_its_abort_as_kafkas_replication_origin(tmp_path):
    leader, follower = expired_then_lower_epoch(tmp_path, txn=True)
    assert txn_state(follower) == txn_state(leader)
    assert txn_indexes(follower.dir) == txn_indexes(leader.dir) != {}
    upper = follower.fetch_upper_bound(FETCH_TXN_COMMITTED)
    assert follower.collect_aborted(0, upper) == leader.collect_aborted(0, upper) != []


def test_a_follower_takes_a_lower_epoch_idempotent_batch_as_kafkas_replication_origin(tmp_path):
    leader, follower = expired_then_lower_epoch(tmp_path, txn=False)
    assert txn_state(follower) == txn_state(leader)
    assert follower.producer_state.producers[7].epoch == 3


def _replayed(log: Log) -> Log:
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot") or name.endswith(".txnindex"):
            os.unlink(os.path.join(log.dir, name))
    return Log(log.dir, LogConfig())


def test_replay_takes_a_lower_epoch_transaction_and_its_abort_as_kafkas_load_from_records(tmp_path):
    leader, _ = expired_then_lower_epoch(tmp_path, txn=True)
    live, indexes = txn_state(leader), txn_indexes(leader.dir)
    replayed = _replayed(leader)
    assert txn_state(replayed) == live
    assert txn_indexes(replayed.dir) == indexes
    replayed.close()


def test_replay_takes_a_lower_epoch_idempotent_batch_as_kafkas_load_from_records(tmp_path):
    leader, _ = expired_then_lower_epoch(tmp_path, txn=False)
    live = txn_state(leader)
    replayed = _replayed(leader)
    assert txn_state(replayed) == live
    assert replayed.producer_state.producers[7].epoch == 3
    replayed.close()
