"""Transactional offset commits (KIP-98, KIP-447) in the group coordinator's core and in the
replay of ``__consumer_offsets``, each test named after Kafka 4.x's rule
(OffsetMetadataManager: commitTransactionalOffset, replay, replayEndTransactionMarker,
fetchOffsets, deleteAllOffsets, cleanupExpiredOffsets)."""
from broker.groups import storage
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from ext.batch import NO_SEQUENCE, build_batch, iter_batches
from protocol.errors import Error
from tests.groups.scenario import Scenario
from tests.groups.test_consumer_group import Cg

PID, OTHER = 1000, 2000


def test_txn_offset_commit_is_invisible_until_its_commit_marker_as_kafka_does():
    s = Scenario()
    assert s.txn_commit([("t", 0, 5), ("t", 1, 6)]) == [Error.NONE, Error.NONE]
    [(_, records)] = s.appended
    assert len(records) == 2  # the usual offset commit records, one batch
    assert s.committed() == {}
    assert s.core.fetch_offsets("g", [("t", [0, 1])]) == (Error.NONE, [("t", [(0, None), (1, None)])])
    assert s.core.pending_partitions("g") == {("t", 0), ("t", 1)}
    s.end_txn(PID, commit=True)
    assert s.committed() == {("t", 0): 5, ("t", 1): 6}
    assert s.core.pending_partitions("g") == set()


def test_abort_marker_drops_the_producers_pending_offsets_as_kafka_does():
    s = Scenario()
    s.commit([("t", 0, 1)])
    s.txn_commit([("t", 0, 9)])
    s.txn_commit([("t", 1, 3)], producer_id=OTHER)
    s.end_txn(PID, commit=False)
    assert s.committed() == {("t", 0): 1}
    assert s.core.pending_partitions("g") == {("t", 1)}  # the other producer's stays
    s.end_txn(OTHER, commit=True)
    assert s.committed() == {("t", 0): 1, ("t", 1): 3}


def test_an_offset_committed_after_the_transactional_one_wins_at_the_commit_as_kafka_does():
    """replayEndTransactionMarker keeps the offset whose record is later in the log."""
    s = Scenario()
    s.txn_commit([("t", 0, 5), ("t", 1, 5)])
    s.commit([("t", 0, 7)])  # written after the transaction's record
    s.end_txn(PID, commit=True)
    assert s.committed() == {("t", 0): 7, ("t", 1): 5}


def test_a_marker_without_pending_offsets_changes_nothing_as_kafka_does():
    s = Scenario()
    s.commit([("t", 0, 1)])
    s.end_txn(PID, commit=True)
    s.end_txn(PID, commit=False)
    assert s.committed() == {("t", 0): 1}


def test_txn_offset_commit_to_an_unknown_group_creates_a_simple_group_only_without_generation():
    s = Scenario()
    assert s.txn_commit([("t", 0, 1)], group="solo") == [Error.NONE]
    assert s.core.groups["solo"].state == "Empty"  # the group exists while its offsets are pending
    assert s.txn_commit([("t", 0, 1)], group="nobody", generation=3, member_id="m") == \
        [Error.ILLEGAL_GENERATION]


def test_txn_offset_commit_without_member_fields_is_taken_in_any_classic_state_as_kafka_does():
    """TxnOffsetCommit v0-2 carry no member, generation or instance id: ClassicGroup takes
    them even from a group with members; a member's is checked, and a rebalance in progress
    does not refuse it."""
    s = Scenario()
    leader, *_ = s.stable_group(2)
    assert s.txn_commit([("t", 0, 1)], version=2) == [Error.NONE]
    generation = s.core.groups["g"].generation_id
    assert s.txn_commit([("t", 0, 2)], generation=generation, member_id=leader) == [Error.NONE]
    assert s.txn_commit([("t", 0, 3)], generation=generation + 1, member_id=leader) == \
        [Error.ILLEGAL_GENERATION]
    assert s.txn_commit([("t", 0, 3)], generation=generation, member_id="stranger") == \
        [Error.UNKNOWN_MEMBER_ID]
    s.join("rejoin", member_id=leader)  # a rebalance: the leader rejoins first
    assert s.state() == "PreparingRebalance"
    assert s.txn_commit([("t", 0, 4)], generation=generation, member_id=leader) == [Error.NONE]


def test_txn_offset_commit_to_a_consumer_group_answers_a_stale_epoch_illegal_generation():
    cg = Cg()
    cg.join("a")
    epoch = cg.epoch["a"]
    s = cg.s
    assert s.txn_commit([("t1", 0, 1)], generation=epoch, member_id="a") == [Error.NONE]
    assert s.txn_commit([("t1", 0, 1)], generation=epoch + 7, member_id="a") == [Error.ILLEGAL_GENERATION]
    assert s.txn_commit([("t1", 0, 1)], generation=epoch, member_id="b") == [Error.UNKNOWN_MEMBER_ID]
    # no member, epoch or instance id: taken (old clients send none)
    assert s.txn_commit([("t1", 0, 1)]) == [Error.NONE]


def test_txn_offset_commit_refuses_metadata_too_large_per_partition():
    s = Scenario(offset_metadata_max_bytes=2)  # "meta" is 4 bytes
    errors, fx = s.core.commit_transactional_offsets("g", PID, 0, -1, "", None,
                                                     [("t", 0, 1, -1, "meta"), ("t", 1, 1, -1, "")], 5, 0)
    assert errors == [Error.OFFSET_METADATA_TOO_LARGE, Error.NONE]
    assert fx.producer == (PID, 0) and len(fx.appends[0][1]) == 1


def test_delete_groups_writes_a_tombstone_for_a_partition_with_only_pending_offsets():
    """deleteAllOffsets: the committed offsets and the partitions with pending transactional
    offsets only; the tombstone removes the pending offset, so the marker commits nothing."""
    s = Scenario()
    s.commit([("t", 0, 1)])
    s.txn_commit([("t", 0, 2), ("t", 1, 3)])
    errors, fx = s.core.delete_groups(["g"], s.now)
    assert errors == [Error.NONE]
    s.run(fx)
    tombstones = [storage.parse_key(k)[1] for k, v in fx.appends[0][1] if v is None]
    assert [(k.topic, k.partition) for k in tombstones if k.__class__.__name__ == "OffsetCommitKey"] == \
        [("t", 0), ("t", 1)]
    s.end_txn(PID, commit=True)
    assert s.committed() == {}


def test_offset_delete_writes_a_tombstone_for_a_pending_transactional_offset():
    s = Scenario()
    s.txn_commit([("t", 0, 2)])
    code, answered, fx = s.core.delete_offsets("g", [("t", [0])])
    assert (code, answered) == (Error.NONE, [("t", [(0, Error.NONE)])])
    assert [v for _, v in fx.appends[0][1]] == [None]


def test_retention_keeps_a_pending_partitions_offset_and_a_group_with_an_open_transaction():
    """cleanupExpiredOffsets: an offset with a pending transactional one does not expire, and
    a group with an open transaction is not deleted."""
    minute = 60000
    s = Scenario(offsets_retention_ms=minute)
    s.commit([("t", 0, 1)])
    s.txn_commit([("t", 0, 2)])
    s.now = 10 * minute
    fx = s.run(s.core.cleanup_group_metadata(s.now))
    assert fx.appends == [] and "g" in s.core.groups
    s.end_txn(PID, commit=True)
    assert s.committed() == {("t", 0): 2}
    s.now = 20 * minute
    s.run(s.core.cleanup_group_metadata(s.now))
    assert s.committed() == {} and "g" not in s.core.groups


# ---- replay of the log --------------------------------------------------------------------

def _log(*batches) -> bytes:
    """Batches at consecutive offsets: ("data", producer id or -1, [(group, topic, p, offset)])
    or ("marker", producer id, commit)."""
    out, offset = b"", 0
    for kind, producer_id, body in batches:
        if kind == "marker":
            buf = build_end_txn_marker_batch(CONTROL_COMMIT if body else CONTROL_ABORT, producer_id, 0, 3, 0,
                                             base_offset=offset)
            offset += 1
        else:
            records = [(storage.offset_commit_key(g, t, p), storage.offset_commit_value(o, -1, "", 0), (), 0)
                       for g, t, p, o in body]
            buf = build_batch(records, base_offset=offset, producer_id=producer_id,
                              producer_epoch=0 if producer_id >= 0 else -1, base_sequence=NO_SEQUENCE,
                              is_transactional=producer_id >= 0)
            offset += len(records)
        out += buf
    return out


def _committed(state: storage.GroupState, group: str = "g") -> dict:
    return {tp: om.offset for tp, om in state.offsets.get(group, {}).items()}


def test_replay_reads_a_marker_as_the_end_of_the_producers_transaction_not_as_an_offset_record():
    data = _log(("data", -1, [("g", "t", 0, 1)]),
                ("data", PID, [("g", "t", 0, 5), ("g", "t", 1, 5)]),
                ("data", OTHER, [("g", "t", 2, 8)]),
                ("marker", PID, True),
                ("marker", OTHER, False))
    state = storage.GroupState()
    assert storage.replay_batches(state, data) == 6
    assert _committed(state) == {("t", 0): 5, ("t", 1): 5}
    assert state.pending == {} and state.open_txns == {}


def test_a_partition_loaded_mid_transaction_rebuilds_the_pending_offsets_then_the_marker_commits():
    before = _log(("data", -1, [("g", "t", 0, 1)]), ("data", PID, [("g", "t", 0, 5)]))
    state = storage.GroupState()
    storage.replay_batches(state, before)
    assert _committed(state) == {("t", 0): 1}
    assert state.pending_partitions("g") == {("t", 0)} and state.open_txns == {"g": {PID}}
    s = Scenario()
    s.core.complete_load(0, state, 0)
    assert s.core.pending_partitions("g") == {("t", 0)}
    s.end_txn(PID, commit=True)
    assert s.committed() == {("t", 0): 5}


def test_replay_keeps_the_later_non_transactional_offset_over_a_committed_transaction():
    data = _log(("data", PID, [("g", "t", 0, 5)]), ("data", -1, [("g", "t", 0, 7)]), ("marker", PID, True))
    state = storage.GroupState()
    storage.replay_batches(state, data)
    assert _committed(state) == {("t", 0): 7}


def test_a_committed_transaction_replaces_an_offset_only_if_its_record_is_strictly_later_as_kafka_does():
    """replayEndTransactionMarker compares the two records' log offsets with a strict ``>``:
    the committed offset stays unless the transaction's record comes after it."""
    key = storage.offset_commit_key("g", "t", 0)
    for txn_record, kept in ((4, 7), (5, 7), (6, 9)):
        state = storage.GroupState()
        state.replay(key, storage.offset_commit_value(7, -1, "", 0), -1, 5)
        state.replay(key, storage.offset_commit_value(9, -1, "", 0), PID, txn_record)
        state.replay_end_txn(PID, True)
        assert _committed(state) == {("t", 0): kept}, f"transaction's record at {txn_record}"


def test_the_transactional_batch_carries_the_producer_and_epoch_with_base_sequence_minus_one():
    buf = storage.build_records_batch([(storage.offset_commit_key("g", "t", 0),
                                        storage.offset_commit_value(1, -1, "", 0))], 0, PID, 4)
    [header] = iter_batches(bytes(buf))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, 4, -1)
    assert header.is_transactional and not header.is_control
    [plain] = iter_batches(bytes(storage.build_records_batch([(b"\x00\x01k", None)], 0)))
    assert plain.producer_id == -1 and not plain.is_transactional
