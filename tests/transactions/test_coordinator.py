"""The transaction coordinator's core against Kafka 4.x's rules (TransactionCoordinator,
TransactionStateManager, KIP-98, KIP-360, KIP-890 transaction.version 2)."""
from broker.transactions import storage
from broker.transactions.coordinator import TransactionConfig
from broker.transactions.state import TxnState
from protocol.errors import Error
from tests.transactions.harness import Allocator, Node

T = "txn-1"


def init(node, now=0, tid=T, timeout=60000, pid=-1, epoch=-1):
    return node.step(node.core.init_producer_id(tid, timeout, pid, epoch, now, waiter="init"), now)


def add(node, pid, epoch, parts=(("a", 0),), now=1, tid=T):
    return node.step(node.core.add_partitions(tid, pid, epoch, list(parts), now, waiter="add"), now)


def end(node, pid, epoch, commit=True, now=2, tid=T, tv=2):
    fx = node.core.end_txn(tid, pid, epoch, commit, now, waiter="end", transaction_version=tv)
    return node.step(fx, now)


def state(node, tid=T):
    return node.core.transactions[tid].state


def persisted(node, tid=T):
    return storage.replay(node.logs[node.core.partition_for(tid)])[tid]


# ---- InitProducerId --------------------------------------------------------------------------

def test_init_producer_id_allocates_an_id_at_epoch_0_and_persists_empty_before_answering():
    node = Node()
    fx = node.core.init_producer_id(T, 60000, -1, -1, 0, waiter="w")
    assert fx.replies == [] and len(fx.writes) == 1  # nothing answered before the write
    assert state(node) is TxnState.EMPTY and node.core.transactions[T].pending is TxnState.EMPTY
    r = node.step(fx, 0)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    assert persisted(node).producer_epoch == 0 and persisted(node).state is TxnState.EMPTY


def test_init_producer_id_bumps_the_epoch_each_time_and_fences_the_old_producer():
    node = Node()
    first = init(node)
    second = init(node, now=5)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert add(node, first.producer_id, 0, now=6).error_code == Error.PRODUCER_FENCED
    assert end(node, first.producer_id, 0, now=6).error_code == Error.PRODUCER_FENCED
    assert add(node, first.producer_id, 1, now=6).error_code == Error.NONE


def test_init_producer_id_above_transaction_max_timeout_is_invalid_transaction_timeout():
    node = Node(config=TransactionConfig(max_timeout_ms=1000))
    assert init(node, timeout=1001).error_code == Error.INVALID_TRANSACTION_TIMEOUT
    assert init(node, timeout=0).error_code == Error.INVALID_TRANSACTION_TIMEOUT
    assert init(node, timeout=1000).error_code == Error.NONE


def test_init_producer_id_with_an_empty_transactional_id_is_invalid_request():
    assert init(Node(), tid="").error_code == Error.INVALID_REQUEST


def test_init_producer_id_with_only_one_of_producer_id_and_epoch_is_invalid_request():
    assert init(Node(), pid=5).error_code == Error.INVALID_REQUEST


def test_a_partition_this_broker_does_not_lead_is_not_coordinator_and_a_loading_one_load_in_progress():
    node = Node()
    p = node.core.partition_for(T)
    node.core.unload(p)
    assert init(node).error_code == Error.NOT_COORDINATOR
    node.core.begin_load(p, 1)
    assert init(node).error_code == Error.COORDINATOR_LOAD_IN_PROGRESS
    assert node.core.describe(T)["error_code"] == Error.COORDINATOR_LOAD_IN_PROGRESS


def test_no_producer_id_block_at_hand_is_coordinator_load_in_progress():
    node = Node(allocator=Allocator())
    node.allocator.exhausted = True
    assert init(node).error_code == Error.COORDINATOR_LOAD_IN_PROGRESS


def test_init_producer_id_on_an_ongoing_transaction_fences_it_aborts_and_answers_concurrent_transactions():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, parts=[("a", 0), ("b", 1)])
    again = init(node, now=10)
    assert again.error_code == Error.CONCURRENT_TRANSACTIONS
    assert state(node) is TxnState.PREPARE_ABORT
    [marker] = node.markers
    assert (marker.commit, marker.producer_id, sorted(marker.partitions)) == (False, r.producer_id,
                                                                              [("a", 0), ("b", 1)])
    # transaction.version 2: the fence bumps to 1, the abort to 2; the zombie (epoch 0) is fenced
    assert marker.producer_epoch == 2
    assert add(node, r.producer_id, 0).error_code == Error.PRODUCER_FENCED
    assert init(node, now=11).error_code == Error.CONCURRENT_TRANSACTIONS  # markers still going out
    node.write_markers(12)
    assert state(node) is TxnState.COMPLETE_ABORT
    retried = init(node, now=13)
    assert (retried.error_code, retried.producer_epoch) == (Error.NONE, 3)


def test_a_fence_on_a_tv1_cluster_aborts_at_the_fenced_epoch():
    node = Node(config=TransactionConfig(transaction_version=1))
    r = init(node)
    node.step(node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 1, "add", transaction_version=0), 1)
    init(node, now=2)
    assert node.markers[0].producer_epoch == 1


def test_a_fence_is_made_at_the_clusters_transaction_version_not_the_clients():
    """Kafka 4.x fences with txnManager.transactionVersionLevel() ("not from client, use server
    TV"): on a transaction.version 2 cluster a TV1 client's transaction is aborted one epoch
    above the fenced one, as every TV2 end bumps."""
    node = Node()
    r = init(node)
    node.step(node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 1, "add", transaction_version=0), 1)
    init(node, now=2)
    assert node.markers[0].producer_epoch == 2


# ---- KIP-360 ---------------------------------------------------------------------------------

def test_kip360_init_with_the_current_producer_id_and_epoch_bumps_the_epoch():
    node = Node()
    r = init(node)
    again = init(node, pid=r.producer_id, epoch=0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, r.producer_id, 1)


def test_kip360_a_retry_with_the_last_epoch_gets_the_same_epoch_again():
    node = Node()
    r = init(node)
    init(node, pid=r.producer_id, epoch=0)
    retry = init(node, pid=r.producer_id, epoch=0)
    assert (retry.error_code, retry.producer_epoch) == (0, 1)


def test_kip360_a_stale_epoch_is_producer_fenced():
    node = Node()
    r = init(node)
    init(node)
    init(node)  # epoch 2, last epoch -1: a new producer took over
    assert init(node, pid=r.producer_id, epoch=1).error_code == Error.PRODUCER_FENCED


def test_kip360_an_unknown_producer_id_is_producer_fenced():
    node = Node()
    init(node)
    assert init(node, pid=4242, epoch=0).error_code == Error.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_to_a_new_producer_id_at_epoch_0():
    node = Node()
    r = init(node)
    node.core.transactions[T].producer_epoch = 32766
    again = init(node)
    assert (again.producer_id, again.producer_epoch) == (r.producer_id + 1, 0)
    assert node.core.transactions[T].previous_producer_id == r.producer_id


def test_end_txn_at_an_exhausted_epoch_answers_the_producer_id_and_epoch_the_transaction_completes_with():
    """TV2: EndTxn at epoch 32766 bumps to Short.MAX_VALUE for the markers and moves to the next
    producer id at epoch 0 on completion; the reply names the latter (Kafka 4.x answers
    newPreSendMetadata's), never 32767, so the producer's next transaction is accepted."""
    node = Node()
    r = init(node)
    node.core.transactions[T].producer_epoch = 32766
    add(node, r.producer_id, 32766)
    reply = end(node, r.producer_id, 32766)
    assert node.markers[0].producer_epoch == 32767
    node.write_markers(3)
    m = node.core.transactions[T]
    assert (reply.error_code, reply.producer_id, reply.producer_epoch) == (0, m.producer_id, m.producer_epoch)
    assert (m.producer_id, m.producer_epoch) == (r.producer_id + 1, 0)
    assert add(node, reply.producer_id, reply.producer_epoch, now=4).error_code == 0


# ---- AddPartitions, AddOffsets -----------------------------------------------------------------

def test_add_partitions_moves_to_ongoing_with_the_start_time_of_the_first_add():
    node = Node()
    r = init(node)
    assert add(node, r.producer_id, 0, now=5).error_code == 0
    assert add(node, r.producer_id, 0, parts=[("b", 0)], now=9).error_code == 0
    m = persisted(node)
    assert (m.state, m.start_ms, m.last_update_ms, m.partitions) == (
        TxnState.ONGOING, 5, 9, {("a", 0), ("b", 0)})


def test_add_partitions_already_in_the_transaction_answers_without_a_write():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0)
    fx = node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 3, "w")
    assert fx.writes == [] and fx.replies[0][1].error_code == 0


def test_add_partitions_errors_as_kafka_orders_them():
    node = Node()
    assert add(node, 1, 0).error_code == Error.INVALID_PRODUCER_ID_MAPPING  # unknown id
    r = init(node)
    assert add(node, r.producer_id + 1, 0).error_code == Error.INVALID_PRODUCER_ID_MAPPING
    assert add(node, r.producer_id, 1).error_code == Error.PRODUCER_FENCED
    add(node, r.producer_id, 0)
    fx = node.core.end_txn(T, r.producer_id, 0, True, 3, "end")
    assert fx.replies == []  # PrepareCommit pending: not yet written
    fx = node.core.add_partitions(T, r.producer_id, 0, [("z", 0)], 3, "w")
    assert fx.replies[0][1].error_code == Error.CONCURRENT_TRANSACTIONS


def test_add_offsets_adds_the_groups_consumer_offsets_partition():
    from broker.groups.storage import partition_for
    node = Node(config=TransactionConfig(offsets_partitions=50))
    r = init(node)
    assert node.step(node.core.add_offsets(T, r.producer_id, 0, "grp", 1, "w"), 1).error_code == 0
    assert persisted(node).partitions == {("__consumer_offsets", partition_for("grp", 50))}


def test_verify_partitions_kip890_answers_per_partition():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0)
    got = node.core.verify_partitions(T, r.producer_id, 0, [("a", 0), ("b", 0)])
    assert got == {("a", 0): Error.NONE, ("b", 0): Error.TRANSACTION_ABORTABLE}
    assert node.core.verify_partitions(T, r.producer_id, 1, [("a", 0)]) == {("a", 0): Error.PRODUCER_FENCED}
    assert node.core.verify_partitions("nope", 1, 0, [("a", 0)]) == {
        ("a", 0): Error.INVALID_PRODUCER_ID_MAPPING}


# ---- EndTxn ----------------------------------------------------------------------------------

def test_kip890_tv2_end_txn_bumps_the_epoch_and_answers_the_new_one():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, parts=[("a", 0), ("a", 1)])
    e = end(node, r.producer_id, 0, commit=True)
    assert (e.error_code, e.producer_id, e.producer_epoch) == (0, r.producer_id, 1)
    assert state(node) is TxnState.PREPARE_COMMIT and persisted(node).state is TxnState.PREPARE_COMMIT
    [m] = node.markers
    assert (m.commit, m.producer_epoch, m.partitions, m.transaction_version) == (
        True, 1, [("a", 0), ("a", 1)], 2)
    # the next transaction uses the bumped epoch
    node.write_markers(3)
    assert persisted(node).state is TxnState.COMPLETE_COMMIT
    assert add(node, r.producer_id, 1, now=4).error_code == 0
    assert end(node, r.producer_id, 1, commit=False, now=5).producer_epoch == 2


def test_tv1_end_txn_keeps_the_epoch():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0)
    e = end(node, r.producer_id, 0, tv=0)
    assert (e.error_code, e.producer_id, e.producer_epoch) == (0, -1, -1)
    assert node.markers[0].producer_epoch == 0


def test_complete_is_written_only_after_every_partitions_marker():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, parts=[("a", 0), ("b", 0)])
    end(node, r.producer_id, 0)
    m = node.markers.pop()
    node.take(node.core.on_markers_written(T, m.coordinator_epoch, [("a", 0)], 3))
    assert node.held == [] and node.core.pending_markers(T) == [("b", 0)]
    node.take(node.core.on_markers_written(T, m.coordinator_epoch, [("b", 0)], 4))
    assert len(node.held) == 1 and node.held[0].target.state is TxnState.COMPLETE_COMMIT
    node.flush(4)
    assert state(node) is TxnState.COMPLETE_COMMIT and persisted(node).partitions == set()


def _complete_write(node):
    """A committed transaction whose last marker is written: the CompleteCommit write, held."""
    r = init(node)
    add(node, r.producer_id, 0)
    end(node, r.producer_id, 0)
    m = node.markers.pop()
    node.take(node.core.on_markers_written(T, m.coordinator_epoch, m.partitions, 3))
    (write,) = node.held
    node.held.clear()
    return write


def test_a_failed_complete_is_appended_again_only_when_the_coordinator_is_not_available():
    """Kafka's TransactionMarkerChannelManager.tryAppendToLog retries the CompleteCommit/
    CompleteAbort append only on COORDINATOR_NOT_AVAILABLE (NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION), keeping
    the pending transition; NOT_COORDINATOR (the partition moved: its next owner's load resumes
    the markers) and any other error end that attempt, and appendTransactionToLog resets the
    pending transition: the transaction stays PrepareCommit, as in the log."""
    for error in (Error.NOT_ENOUGH_REPLICAS, Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Error.REQUEST_TIMED_OUT,
                  Error.UNKNOWN_TOPIC_OR_PARTITION):
        node = Node()
        write = _complete_write(node)
        fx = node.core.complete_write(write, error, 4)
        assert (fx.writes, fx.replies) == ([write], [])
        assert node.core.transactions[T].pending is TxnState.COMPLETE_COMMIT
        node.take(fx)
        node.flush(5)
        assert state(node) is TxnState.COMPLETE_COMMIT and persisted(node).state is TxnState.COMPLETE_COMMIT
    for error in (Error.NOT_LEADER_OR_FOLLOWER, Error.KAFKA_STORAGE_ERROR, Error.MESSAGE_TOO_LARGE,
                  Error.UNKNOWN_SERVER_ERROR, Error.CORRUPT_MESSAGE):
        node = Node()
        write = _complete_write(node)
        fx = node.core.complete_write(write, error, 4)
        assert (fx.writes, fx.replies, fx.markers) == ([], [], [])
        meta = node.core.transactions[T]
        assert (meta.state, meta.pending) == (TxnState.PREPARE_COMMIT, None)
        # the client's retry is told to wait, as it is while the markers go out
        assert end(node, write.target.producer_id, 0, now=5).error_code == Error.CONCURRENT_TRANSACTIONS


def test_end_txn_while_markers_go_out_is_concurrent_transactions():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0)
    end(node, r.producer_id, 0)
    assert end(node, r.producer_id, 0).error_code == Error.CONCURRENT_TRANSACTIONS


def test_tv2_retried_end_txn_after_completion_answers_none_with_the_current_epoch():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0)
    end(node, r.producer_id, 0)
    node.write_markers(3)
    retry = end(node, r.producer_id, 0, now=4)
    assert (retry.error_code, retry.producer_epoch) == (0, 1)
    # the retried commit of a committed transaction, asked as an abort, is invalid
    assert end(node, r.producer_id, 0, commit=False, now=5).error_code == Error.INVALID_TXN_STATE


def test_tv2_abort_of_an_empty_transaction_bumps_the_epoch_and_completes_without_markers():
    node = Node()
    r = init(node)
    e = end(node, r.producer_id, 0, commit=False)
    assert (e.error_code, e.producer_epoch) == (0, 1)
    assert node.markers == [] and state(node) is TxnState.COMPLETE_ABORT


def test_commit_of_an_empty_transaction_is_invalid_txn_state():
    node = Node()
    r = init(node)
    assert end(node, r.producer_id, 0, commit=True).error_code == Error.INVALID_TXN_STATE
    assert end(node, r.producer_id, 0, commit=True, tv=0).error_code == Error.INVALID_TXN_STATE
    assert end(node, r.producer_id, 0, commit=False, tv=0).error_code == Error.INVALID_TXN_STATE


def test_end_txn_of_an_unknown_id_is_invalid_producer_id_mapping():
    assert end(Node(), 5, 0).error_code == Error.INVALID_PRODUCER_ID_MAPPING


def test_a_failed_write_answers_its_error_and_leaves_the_state_as_persisted():
    node = Node()
    r = init(node)
    fx = node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 1, "w")
    got = node.step(fx, 1, error=Error.NOT_LEADER_OR_FOLLOWER)
    assert got.error_code == Error.NOT_COORDINATOR
    assert state(node) is TxnState.EMPTY and node.core.transactions[T].pending is None
    got = node.step(node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 1, "w"), 1,
                    error=Error.NOT_ENOUGH_REPLICAS)
    assert got.error_code == Error.COORDINATOR_NOT_AVAILABLE


def test_a_write_completing_after_the_partition_moved_is_not_coordinator():
    node = Node()
    r = init(node)
    fx = node.core.add_partitions(T, r.producer_id, 0, [("a", 0)], 1, "w")
    p = node.core.partition_for(T)
    node.core.unload(p)
    node.load(p, 1, 1)
    [write] = fx.writes
    out = node.core.complete_write(write, 0, 1)
    assert out.replies[0][1].error_code == Error.NOT_COORDINATOR
    assert state(node) is TxnState.EMPTY


# ---- timers ------------------------------------------------------------------------------------

def test_a_transaction_past_its_timeout_is_aborted_by_tick_with_the_epoch_bumped():
    node = Node()
    r = init(node, timeout=1000)
    add(node, r.producer_id, 0, now=100)
    node.take(node.core.tick(1100))
    assert node.held == []  # not past: start + timeout < now is the rule
    node.take(node.core.tick(1101))
    node.flush(1101)
    assert state(node) is TxnState.PREPARE_ABORT
    [m] = node.markers
    assert m.commit is False and m.producer_epoch > 0
    assert add(node, r.producer_id, 0, now=1102).error_code == Error.PRODUCER_FENCED
    node.write_markers(1103)
    assert persisted(node).state is TxnState.COMPLETE_ABORT


def test_a_timeout_abort_whose_write_fails_keeps_the_fenced_epoch_and_is_retried_without_a_second_bump():
    """Kafka's abortTimedOutTransactions with the quorum of __transaction_state lost: the
    fenced epoch is set in memory before the PrepareAbort is written; the write fails
    (NOT_ENOUGH_REPLICAS), the transaction stays Ongoing at the fenced epoch with
    hasFailedEpochFence, so the producer's EndTxn is PRODUCER_FENCED (fatal to librdkafka, as
    against Kafka) and the next tick fences again without bumping; once the replicas are back
    the abort completes at fenced epoch + 1 (the cluster's transaction version 2)."""
    node = Node()
    r = init(node, timeout=1000)
    add(node, r.producer_id, 0, now=100)
    node.take(node.core.tick(1101))
    node.flush(1101, error=Error.NOT_ENOUGH_REPLICAS)
    meta = node.core.transactions[T]
    assert (meta.state, meta.pending, meta.producer_epoch, meta.has_failed_epoch_fence) == \
        (TxnState.ONGOING, None, 1, True)
    assert node.markers == []
    assert end(node, r.producer_id, 0, commit=False, now=1102, tv=0).error_code == Error.PRODUCER_FENCED
    assert end(node, r.producer_id, 0, commit=False, now=1102, tv=2).error_code == Error.PRODUCER_FENCED
    node.take(node.core.tick(1200))
    node.flush(1200, error=Error.NOT_ENOUGH_REPLICAS)
    assert node.core.transactions[T].producer_epoch == 1  # not bumped again
    node.take(node.core.tick(1300))
    node.flush(1300)
    [m] = node.markers
    assert (m.commit, m.producer_epoch) == (False, 2)
    node.write_markers(1301)
    assert persisted(node).state is TxnState.COMPLETE_ABORT
    assert not node.core.transactions[T].has_failed_epoch_fence


def test_an_idle_transactional_id_expires_with_a_tombstone():
    node = Node(config=TransactionConfig(id_expiration_ms=5000))
    init(node, now=0)
    node.take(node.core.tick(4999))
    assert node.held == []
    node.take(node.core.tick(5000))
    node.flush(5000)
    assert T not in node.core.transactions
    assert node.logs[node.core.partition_for(T)][-1] == (storage.key(T), None)
    assert T not in storage.replay(node.logs[node.core.partition_for(T)])
    assert node.core.describe(T)["error_code"] == Error.TRANSACTIONAL_ID_NOT_FOUND


def test_an_ongoing_transaction_never_expires():
    node = Node(config=TransactionConfig(id_expiration_ms=5000, max_timeout_ms=10**9))
    r = init(node, timeout=10**8)
    add(node, r.producer_id, 0)
    node.take(node.core.tick(10**6))
    assert node.held == []


# ---- load --------------------------------------------------------------------------------------

def test_load_replays_the_partition_and_resumes_a_prepare_commit_left_mid_way():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, parts=[("a", 0), ("b", 0)])
    end(node, r.producer_id, 0)
    m = node.markers.pop()
    node.take(node.core.on_markers_written(T, m.coordinator_epoch, [("a", 0)], 3))  # then a crash
    other = Node(logs=node.logs, coordinator_epoch=5, now_ms=10)
    assert state(other) is TxnState.PREPARE_COMMIT
    [resumed] = other.markers
    # every partition again (a marker is idempotent at the leader), at the new coordinator epoch
    assert (resumed.commit, resumed.producer_epoch, resumed.partitions, resumed.coordinator_epoch) == (
        True, 1, [("a", 0), ("b", 0)], 5)
    assert end(other, r.producer_id, 0, now=11).error_code == Error.CONCURRENT_TRANSACTIONS
    other.write_markers(12)
    assert state(other) is TxnState.COMPLETE_COMMIT
    # the old coordinator's late marker answers change nothing
    assert node.core.on_markers_written(T, 5, [("b", 0)], 13).writes == []


def test_load_keeps_an_ongoing_transaction_for_its_timeout():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, now=1)
    other = Node(logs=node.logs, coordinator_epoch=1)
    assert state(other) is TxnState.ONGOING and other.markers == []
    assert add(other, r.producer_id, 0, parts=[("c", 0)], now=2).error_code == 0


# ---- DescribeTransactions, ListTransactions -------------------------------------------------------

def test_describe_shows_the_state_partitions_and_start_time():
    node = Node()
    r = init(node)
    add(node, r.producer_id, 0, parts=[("b", 1), ("a", 0), ("a", 2)], now=7)
    d = node.core.describe(T)
    assert d == {"transactional_id": T, "error_code": 0, "transaction_state": "Ongoing",
                 "transaction_timeout_ms": 60000, "transaction_start_time_ms": 7,
                 "producer_id": r.producer_id, "producer_epoch": 0,
                 "topics": [("a", [0, 2]), ("b", [1])]}
    assert node.core.describe("unknown")["error_code"] == Error.TRANSACTIONAL_ID_NOT_FOUND
    assert node.core.describe("")["error_code"] == Error.INVALID_REQUEST


def test_list_transactions_filters_by_state_producer_duration_and_pattern():
    node = Node()
    a = init(node, tid="a")
    b = init(node, tid="b")
    add(node, a.producer_id, 0, tid="a", now=10)
    listed = node.core.list_transactions([], [], 100)
    assert listed["transaction_states"] == [("a", a.producer_id, "Ongoing"), ("b", b.producer_id, "Empty")]
    got = node.core.list_transactions(["Ongoing", "Bogus"], [], 100)
    assert got["transaction_states"] == [("a", a.producer_id, "Ongoing")]
    assert got["unknown_state_filters"] == ["Bogus"]
    assert node.core.list_transactions([], [b.producer_id], 100)["transaction_states"] == [
        ("b", b.producer_id, "Empty")]
    assert node.core.list_transactions(["Ongoing"], [], 100, duration_filter=90)["transaction_states"] == []
    assert node.core.list_transactions(["Ongoing"], [], 100, duration_filter=89)["transaction_states"]
    assert [t for t, _, _ in node.core.list_transactions([], [], 100, transactional_id_pattern="b.*")[
        "transaction_states"]] == ["b"]
    node.core.begin_load(0, 3)
    assert node.core.list_transactions([], [], 100)["error_code"] == Error.COORDINATOR_LOAD_IN_PROGRESS
