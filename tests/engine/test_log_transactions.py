"""Transactions on a partition (engine/log.py, engine/producer_state.py, engine/txn_index.py):
each test is named after the rule of Kafka's it checks (ProducerAppendInfo, ProducerStateManager,
UnifiedLog, LogSegment).

A transaction's data batches carry attributes bit 4; the coordinator ends it with a marker
control batch (engine/control.py) written by ``append_as_leader(origin=ORIGIN_COORDINATOR)``.
"""
from __future__ import annotations

import os
import random
import struct

import pytest

from engine.config import LogConfig
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import FETCH_HIGH_WATERMARK, FETCH_TXN_COMMITTED, ORIGIN_COORDINATOR, Log
from engine.producer_state import (
    CoordinatorFencedError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
)
from engine.reader import iter_file_batches
from engine.txn_index import AbortedTxn, read_aborted_txns, txn_index_file_name
from ext.batch import build_batch, decode_records, scan
from tests.engine.batches import BASE_TS
from tests.engine.test_recovery import abandon

NOW = BASE_TS + 1000


def data(n: int, pid: int = -1, epoch: int = 0, seq: int = 0, txn: bool = True,
         tag: bytes = b"") -> bytearray:
    records = [(b"k%d" % i, tag + b"v%d" % i, [], BASE_TS + i) for i in range(n)]
    return bytearray(build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=txn))


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> bytearray:
    return bytearray(build_end_txn_marker_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, pid, epoch,
                                                coordinator_epoch, BASE_TS))


class Writer:
    """A leader log and the producers writing to it (their next sequence)."""

    def __init__(self, log: Log):
        self.log = log
        self.seqs: dict[int, int] = {}

    def send(self, pid: int, n: int = 2, epoch: int = 0, txn: bool = True,
             tag: bytes = b"") -> tuple[int, int]:
        seq = self.seqs.get(pid, 0)
        info = self.log.append_as_leader(data(n, pid, epoch, seq, txn, tag), 0, NOW)
        self.seqs[pid] = seq + n
        return info.first_offset, info.last_offset

    def end(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0,
            transaction_version: int = 0) -> int:
        info = self.log.append_as_leader(marker(pid, epoch, commit, coordinator_epoch), 0, NOW,
                                         origin=ORIGIN_COORDINATOR, transaction_version=transaction_version)
        if transaction_version >= 2:
            self.seqs[pid] = 0  # the bumped epoch starts at sequence 0
        return info.first_offset

    def commit_all(self) -> None:
        self.log.update_high_watermark(self.log.log_end_offset)


def positions(raw: bytes) -> list[int]:
    return list(scan(raw, 0).positions)


def new_log(tmp_path, name: str = "t-0", **config) -> Log:
    return Log(str(tmp_path / name), LogConfig(**config))


def test_a_transactional_batch_opens_the_producers_transaction_at_its_first_offset(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(7, txn=False)
    first, _ = w.send(7)
    w.send(7)
    assert log.producer_state.producers[7].current_txn_first_offset == first == 2
    w.commit_all()
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset == 2 and log.high_watermark == 6


def test_a_commit_marker_ends_the_transaction_and_the_lso_moves_once_the_hw_passes_the_marker(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(7)
    at = w.end(7, commit=True)
    log.update_high_watermark(at)  # the marker itself not yet replicated
    assert log.producer_state.producers[7].current_txn_first_offset == -1
    assert log.last_stable_offset == 0, "Kafka's unreplicated transaction holds the LSO"
    log.update_high_watermark(at + 1)
    assert log.first_unstable_offset is None and log.last_stable_offset == at + 1


def test_the_lso_is_the_first_offset_of_the_earliest_open_transaction(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.send(2)
    w.send(1)
    w.end(1, commit=True)
    w.commit_all()
    assert log.last_stable_offset == 2, "producer 2's transaction began at 2"
    w.end(2, commit=False)
    w.commit_all()
    assert log.last_stable_offset == log.log_end_offset


def test_an_abort_marker_appends_kafkas_aborted_txn_entry_to_the_txnindex_of_its_segment(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)                      # 0-1, producer 1 open
    w.send(2)                      # 2-3, producer 2 open
    at = w.end(2, commit=False)    # 4: aborts 2..4; producer 1 still open at 0
    path = os.path.join(log.dir, txn_index_file_name(0))
    raw = open(path, "rb").read()
    assert raw == struct.pack(">hqqqq", 0, 2, 2, at, 0), "AbortedTxn v0: pid, first, last, LSO"
    w.end(1, commit=False)         # 5: aborts 0..5, nothing else open: LSO = 6
    assert read_aborted_txns(path) == [AbortedTxn(2, 2, 4, 0), AbortedTxn(1, 0, 5, 6)]


def test_a_segment_without_aborted_transactions_has_no_txnindex_file_as_in_kafka(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.end(1, commit=True)
    log.roll()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".txnindex")]


def test_a_marker_with_no_open_transaction_completes_nothing(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1, txn=False)
    w.end(1, commit=False)
    assert log.first_unstable_offset is None
    assert not os.path.exists(os.path.join(log.dir, txn_index_file_name(0)))


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.end(1, commit=True, coordinator_epoch=5)
    w.send(1)
    end = log.log_end_offset
    with pytest.raises(CoordinatorFencedError):
        w.end(1, commit=True, coordinator_epoch=4)
    assert log.log_end_offset == end, "nothing written"
    w.end(1, commit=True, coordinator_epoch=5)


def test_a_marker_of_an_older_producer_epoch_is_refused(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1, epoch=3)
    with pytest.raises(ProducerFencedError):
        w.end(1, commit=False, epoch=2)


def test_with_transaction_version_2_a_marker_must_carry_the_bumped_epoch(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1, epoch=3)
    with pytest.raises(ProducerFencedError):
        w.end(1, commit=True, epoch=3, transaction_version=2)
    w.end(1, commit=True, epoch=4, transaction_version=2)
    entry = log.producer_state.producers[1]
    assert entry.epoch == 4 and entry.current_txn_first_offset == -1
    with pytest.raises(OutOfOrderSequenceError):  # the new epoch starts at sequence 0
        log.append_as_leader(data(1, 1, 4, seq=2), 0, NOW)
    w.send(1, epoch=4)
    assert log.producer_state.producers[1].current_txn_first_offset >= 0


def test_a_non_transactional_write_while_a_transaction_is_open_is_invalid_txn_state(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    with pytest.raises(InvalidTxnStateError):
        w.send(1, txn=False)


def test_a_coordinator_write_skips_sequence_checks_and_opens_a_transaction(tmp_path):
    log = new_log(tmp_path)
    for _ in range(2):  # base sequence -1 twice: no sequence check for the coordinator
        log.append_as_leader(data(1, 9, 0, seq=-1), 0, NOW, origin=ORIGIN_COORDINATOR)
    assert log.producer_state.producers[9].current_txn_first_offset == 0
    with pytest.raises(ProducerFencedError):  # a marker's epoch is still checked
        log.append_as_leader(marker(9, 0, True), 0, NOW, origin=ORIGIN_COORDINATOR, transaction_version=2)
    log.append_as_leader(marker(9, 0, True), 0, NOW, origin=ORIGIN_COORDINATOR)
    assert log.producer_state.producers[9].current_txn_first_offset == -1


def test_a_producer_with_an_open_transaction_never_expires(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.send(2, txn=False)
    assert log.remove_expired_producers(NOW + 10**9, 1000) == 1
    assert list(log.producer_state.producers) == [1]


def txn_state(log: Log) -> tuple:
    ps = log.producer_state
    return ({pid: (e.epoch, list(e.batches), e.coordinator_epoch, e.current_txn_first_offset)
             for pid, e in ps.producers.items()}, dict(ps.ongoing))


def random_history(w: Writer, rng: random.Random, steps: int) -> None:
    """Producers 1-4 writing transactions, committing and aborting them, with rolls."""
    open_ = set()
    for _ in range(steps):
        pid = rng.randint(1, 4)
        if pid in open_ and rng.random() < 0.4:
            w.end(pid, commit=rng.random() < 0.5, coordinator_epoch=1)
            open_.discard(pid)
        else:
            w.send(pid, n=rng.randint(1, 3))
            open_.add(pid)


def txn_indexes(directory: str) -> dict[str, bytes]:
    return {n: open(os.path.join(directory, n), "rb").read()
            for n in sorted(os.listdir(directory)) if n.endswith(".txnindex")}


@pytest.mark.parametrize("seed", range(3))
def test_the_state_is_the_same_from_a_snapshot_and_replay_from_a_full_replay_and_on_a_follower(
        tmp_path, seed):
    leader = new_log(tmp_path, "leader-0", segment_bytes=2048)
    w = Writer(leader)
    random_history(w, random.Random(seed), 120)
    assert len(leader.segments) > 3
    live = txn_state(leader)
    assert live[1], "some transaction is open"
    # A follower appends the leader's bytes, in fetches of arbitrary size.
    follower = new_log(tmp_path, "follower-0", segment_bytes=2048)
    batches = [bytes(b) for s in leader.segments for _, b in iter_file_batches(s.fd, 0, s.size)]
    rng = random.Random(seed)
    i = 0
    while i < len(batches):
        n = rng.randint(1, 5)
        follower.append_as_follower(b"".join(batches[i:i + n]), NOW)
        i += n
    assert txn_state(follower) == live
    # Its segments roll where its own appends make them roll; the entries are the same bytes.
    assert b"".join(txn_indexes(follower.dir).values()) == b"".join(txn_indexes(leader.dir).values())
    leader.close()
    from_snapshot = Log(leader.dir, LogConfig(segment_bytes=2048))
    assert txn_state(from_snapshot) == live
    from_snapshot.close()
    for name in os.listdir(leader.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(leader.dir, name))
    replayed = Log(leader.dir, LogConfig(segment_bytes=2048))
    assert txn_state(replayed) == live
    replayed.close()


def test_the_snapshot_writes_the_coordinator_epoch_and_current_txn_first_offset(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.end(1, commit=True, coordinator_epoch=3)
    first, _ = w.send(1)
    log.close()
    [name] = [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    rows = open(os.path.join(log.dir, name), "rb").read()[10:]
    row = struct.unpack(">qhiqiqiq", rows[-46:])  # Kafka's ProducerSnapshot v1 entry
    assert (row[0], row[6], row[7]) == (1, 3, first), "CoordinatorEpoch, CurrentTxnFirstOffset"


def test_recovery_rebuilds_a_lost_txnindex_from_the_log(tmp_path):
    log = new_log(tmp_path, segment_bytes=2048)
    w = Writer(log)
    random_history(w, random.Random(7), 150)
    expected = txn_indexes(log.dir)
    assert expected
    abandon(log)
    for name in expected:
        os.unlink(os.path.join(log.dir, name))
    reopened = Log(log.dir, LogConfig(segment_bytes=2048), recovery_point=0, had_clean_shutdown=False)
    assert txn_indexes(reopened.dir) == expected
    reopened.close()


def test_truncation_truncates_the_txnindex(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.end(1, commit=False)
    w.send(1)
    cut = log.log_end_offset
    w.end(1, commit=False)
    path = os.path.join(log.dir, txn_index_file_name(0))
    assert len(read_aborted_txns(path)) == 2
    log.truncate_to(cut)
    assert read_aborted_txns(path) == [AbortedTxn(1, 0, 2, 3)]
    assert log.producer_state.producers[1].current_txn_first_offset == 3, "the transaction reopens"


def test_deleted_segments_take_their_txnindex_along(tmp_path):
    log = new_log(tmp_path, retention_ms=1, file_delete_delay_ms=0)
    w = Writer(log)
    w.send(1)
    w.end(1, commit=False)
    log.roll()
    w.commit_all()
    assert log.delete_old_segments(NOW + 10**9) == 1
    assert os.path.exists(os.path.join(log.dir, txn_index_file_name(0) + ".deleted"))
    log.delete_pending_segments(force=True)
    assert not [n for n in os.listdir(log.dir) if ".txnindex" in n]


def test_retention_never_deletes_past_the_first_unstable_offset(tmp_path):
    log = new_log(tmp_path, retention_ms=1)
    w = Writer(log)
    w.send(2, txn=False)
    log.roll()
    w.send(1)          # open at 2
    log.roll()
    w.send(2, txn=False)
    log.roll()
    w.commit_all()
    deleted = log.delete_old_segments(NOW + 10**9)
    assert deleted == 1 and log.log_start_offset == 2


def test_delete_records_past_an_open_transaction_moves_the_lso_to_the_log_start_as_kafka(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)
    w.send(2, txn=False)
    w.commit_all()
    log.maybe_increment_log_start_offset(3)
    assert log.last_stable_offset == 3, "Kafka: the first unstable offset is at least the log start"


def test_read_committed_stops_at_the_lso_and_returns_the_aborted_transactions_of_the_range(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1, tag=b"a")        # 0-1 aborted
    w.send(2, tag=b"c")        # 2-3 committed
    w.end(1, commit=False)     # 4
    w.end(2, commit=True)      # 5
    w.send(3, tag=b"o")        # 6-7 open
    w.commit_all()
    assert log.last_stable_offset == 6
    info = log.read(0, 1 << 20, FETCH_TXN_COMMITTED)
    raw = info.records.read()
    assert {r.offset for pos in positions(raw) for r in decode_records(raw, pos)} == set(range(6))
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(1, 0)]
    assert log.read(6, 1 << 20, FETCH_TXN_COMMITTED).records is None
    assert log.read(6, 1 << 20, FETCH_TXN_COMMITTED).aborted_transactions == []
    assert log.read(0, 1 << 20, FETCH_HIGH_WATERMARK).aborted_transactions is None
    # From past the aborted transaction's marker, it is not in the range.
    assert log.read(5, 1 << 20, FETCH_TXN_COMMITTED).aborted_transactions == []


def test_collect_aborted_spans_segments_until_the_search_is_complete(tmp_path):
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1)                  # 0-1
    log.roll()
    w.send(2)                  # 2-3
    log.roll()
    w.end(1, commit=False)     # 4: LSO after it 2 (producer 2 open)
    w.end(2, commit=False)     # 5
    assert log.collect_aborted(0, 2) == [AbortedTxn(1, 0, 4, 2)]
    assert log.collect_aborted(0, 6) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted(5, 6) == [AbortedTxn(2, 2, 5, 6)]


def test_with_transaction_version_2_a_resent_marker_at_the_bumped_epoch_is_a_successful_retry(tmp_path):
    # KAFKA-19999 (checkProducerEpoch): a coordinator resuming PrepareCommit after a failover,
    # or retrying after a lost WriteTxnMarkers answer, sends the marker again at the epoch it
    # already bumped the producer to; with no transaction open that is a retry, written again
    # and ending nothing, not INVALID_PRODUCER_EPOCH (which left the transaction hanging).
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(1, epoch=3)
    w.end(1, commit=True, epoch=4, transaction_version=2)
    end = log.log_end_offset
    again = w.end(1, commit=True, epoch=4, transaction_version=2)
    assert again == end and log.log_end_offset == end + 1
    entry = log.producer_state.producers[1]
    assert entry.epoch == 4 and entry.current_txn_first_offset == -1 and not log.producer_state.ongoing
    w.commit_all()
    assert log.last_stable_offset == log.log_end_offset
    # A transaction open again at the bumped epoch: a marker at that epoch is no retry.
    w.send(1, epoch=4)
    with pytest.raises(ProducerFencedError):
        w.end(1, commit=True, epoch=4, transaction_version=2)
    with pytest.raises(CoordinatorFencedError):  # the coordinator epoch is still checked
        w.end(1, commit=True, epoch=5, coordinator_epoch=-2, transaction_version=2)


def test_a_marker_landing_while_a_transactional_batch_is_verified_voids_the_verification(tmp_path):
    # KIP-890's VerificationGuard (UnifiedLog.maybeStartTransactionVerification,
    # analyzeAndValidateProducerState): the guard is taken before the coordinator is asked; a
    # marker of the producer landing meanwhile (a transaction.timeout.ms abort at the same
    # epoch) clears it, and the late batch is refused instead of opening a transaction no
    # coordinator knows, which would hold the LSO (and retention) forever.
    log = new_log(tmp_path)
    w = Writer(log)
    w.send(7, epoch=0)
    w.end(7, commit=True)  # the previous transaction
    w.commit_all()
    state = log.producer_state
    guard = state.start_verification(7, 0, NOW)
    w.end(7, commit=False)  # the coordinator's timeout abort lands while the request waits
    w.commit_all()
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(2, 7, 0, seq=2), 0, NOW, verification_guard=guard)
    assert log.log_end_offset == end and not state.ongoing
    assert log.last_stable_offset == log.high_watermark == end
    # Verified again with no marker in between: appended, and the guard is spent.
    guard = state.start_verification(7, 0, NOW)
    assert state.start_verification(7, 0, NOW) is guard  # verifications under way share it
    log.append_as_leader(data(2, 7, 0, seq=2), 0, NOW, verification_guard=guard)
    assert state.ongoing == {7: end} and 7 not in state.verifications
    # Its transaction is open: no verification needed, until a marker ends it.
    open_guard = state.start_verification(7, 0, NOW)
    log.append_as_leader(data(1, 7, 0, seq=4), 0, NOW, verification_guard=open_guard)
    w.end(7, commit=True)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(1, 7, 0, seq=5), 0, NOW, verification_guard=open_guard)


def test_a_coordinator_transactional_write_is_refused_when_a_marker_voided_its_verification(tmp_path):
    # The group coordinator's TxnOffsetCommit path (AppendOrigin.COORDINATOR) under the same guard.
    log = new_log(tmp_path)
    guard = log.producer_state.start_verification(9, 0, NOW)
    log.append_as_leader(marker(9, 0, False), 0, NOW, origin=ORIGIN_COORDINATOR)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(1, 9, 0, seq=-1), 0, NOW, origin=ORIGIN_COORDINATOR,
                             verification_guard=guard)
    guard = log.producer_state.start_verification(9, 0, NOW)
    log.append_as_leader(data(1, 9, 0, seq=-1), 0, NOW, origin=ORIGIN_COORDINATOR, verification_guard=guard)
    assert log.producer_state.ongoing == {9: 1}


def test_a_guard_left_by_a_failed_verification_expires_with_the_idle_producers(tmp_path):
    log = new_log(tmp_path)
    log.producer_state.start_verification(3, 0, NOW)
    log.remove_expired_producers(NOW + 999, 1000)
    assert 3 in log.producer_state.verifications
    log.remove_expired_producers(NOW + 1000, 1000)
    assert log.producer_state.verifications == {}
