"""TxnOffsetCommit and the transaction markers of ``__consumer_offsets`` through the group
coordinator's shell and handlers over real logs (tests/groups/coordinator_node.py): the
transactional batch in the log, OffsetFetch before and after the marker, require_stable,
``complete_transaction`` as WriteTxnMarkers uses it, and a load mid-transaction."""
import asyncio

from ext.batch import iter_batches
from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import LISTENER, Cluster, endpoint_host, endpoint_port
from tests.groups.coordinator_node import OFFSETS_ID, CoordinatorNode, create_offsets_topic, settle

PID = 4000


def run(coro):
    return asyncio.run(coro)


async def _single_replica_leader(tmp_path) -> tuple[Cluster, CoordinatorNode]:
    cluster = Cluster()
    create_offsets_topic(cluster, replicas=(1,))
    node = CoordinatorNode(tmp_path, 1, cluster)
    await node.sync()
    return cluster, node


async def _txn_commit(node, offsets: dict[int, int], producer_id: int = PID, epoch: int = 0, group: str = "g",
                      topic: str = "t", version: int = 3) -> dict[tuple[str, int], int]:
    R = M.TxnOffsetCommitRequest
    T = R.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    request = R(transactional_id="tx", group_id=group, producer_id=producer_id, producer_epoch=epoch,
                generation_id=-1, member_id="", group_instance_id=None,
                topics=[T(name=topic, partitions=[
                    P(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in offsets.items()])])
    response = await node.call(28, version, request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def _fetch(node, partitions=(0, 1), require_stable=False) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7: {partition: (committed offset, error)}."""
    R = M.OffsetFetchRequest
    request = R(group_id="g", require_stable=require_stable, topics=[
        R.OffsetFetchRequestTopic(name="t", partition_indexes=list(partitions))])
    response = await node.call(9, 7, request)
    assert response.error_code == Error.NONE
    return {p.partition_index: (p.committed_offset, p.error_code)
            for t in response.topics for p in t.partitions}


def test_txn_offset_commit_is_one_transactional_batch_of_its_producer_unseen_until_its_marker(tmp_path):
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        assert await _txn_commit(node, {0: 5, 1: 6}) == {("t", 0): Error.NONE, ("t", 1): Error.NONE}
        info = node.log().read(0, 1 << 20)
        data = info.records.read() if hasattr(info.records, "read") else bytes(info.records)
        [header] = iter_batches(data)
        assert (header.producer_id, header.producer_epoch, header.records_count) == (PID, 0, 2)
        assert header.is_transactional and not header.is_control
        assert await _fetch(node) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
        assert await _fetch(node, require_stable=True) == \
            {0: (-1, Error.UNSTABLE_OFFSET_COMMIT), 1: (-1, Error.UNSTABLE_OFFSET_COMMIT)}
        code = await node.runtime.complete_transaction(0, PID, 0, 7, True, 1)
        assert code == Error.NONE
        assert await _fetch(node, require_stable=True) == {0: (5, Error.NONE), 1: (6, Error.NONE)}
        assert node.log().log_end_offset == 3  # the marker is one control batch
    run(main())


def test_abort_marker_drops_the_offsets_and_a_later_transaction_commits_its_own(tmp_path):
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        await _txn_commit(node, {0: 5})
        assert await node.runtime.complete_transaction(0, PID, 0, 7, False, 1) == Error.NONE
        assert await _fetch(node, require_stable=True) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
        await _txn_commit(node, {0: 8}, epoch=1)
        assert await node.runtime.complete_transaction(0, PID, 1, 7, True, 1) == Error.NONE
        assert await _fetch(node) == {0: (8, Error.NONE), 1: (-1, Error.NONE)}
    run(main())


def test_a_transaction_version_2_marker_carries_the_bumped_epoch_as_kafka_checks_it(tmp_path):
    """With transaction.version 2 the coordinator bumps the epoch at each end and writes the
    marker at the new one: the partition refuses a TV2 marker at the transaction's own epoch
    (INVALID_PRODUCER_EPOCH, Kafka's ProducerAppendInfo) and takes the bumped one."""
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        await _txn_commit(node, {0: 5})
        assert await node.runtime.complete_transaction(0, PID, 0, 7, True, 2) == Error.INVALID_PRODUCER_EPOCH
        assert await _fetch(node) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
        assert await node.runtime.complete_transaction(0, PID, 1, 7, True, 2) == Error.NONE
        assert await _fetch(node) == {0: (5, Error.NONE), 1: (-1, Error.NONE)}
    run(main())


def test_a_coordinator_loading_mid_transaction_rebuilds_the_pending_offsets(tmp_path):
    async def main():
        cluster, node = await _single_replica_leader(tmp_path)
        await node.commit({1: 2})
        await _txn_commit(node, {0: 5, 1: 6})
        cluster.change(leader=1, topic_id=OFFSETS_ID)  # re-elected in a new leader epoch: reloaded
        await node.sync()
        assert node.core.pending_partitions("g") == {("t", 0), ("t", 1)}
        assert await _fetch(node, require_stable=True) == \
            {0: (-1, Error.UNSTABLE_OFFSET_COMMIT), 1: (-1, Error.UNSTABLE_OFFSET_COMMIT)}
        assert await _fetch(node) == {0: (-1, Error.NONE), 1: (2, Error.NONE)}
        assert await node.runtime.complete_transaction(0, PID, 0, 8, True, 1) == Error.NONE
        cluster.change(leader=1, topic_id=OFFSETS_ID)  # and loaded once more, after the marker
        await node.sync()
        assert node.core.pending_partitions("g") == set()
        assert await _fetch(node, require_stable=True) == {0: (5, Error.NONE), 1: (6, Error.NONE)}
    run(main())


def test_txn_offset_commit_answers_unknown_topic_or_partition_for_what_the_image_lacks(tmp_path):
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        assert await _txn_commit(node, {0: 1, 9: 1}) == \
            {("t", 0): Error.NONE, ("t", 9): Error.UNKNOWN_TOPIC_OR_PARTITION}
        assert await _txn_commit(node, {0: 1}, topic="nope") == \
            {("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        assert node.log().log_end_offset == 1  # only the known partition was written
    run(main())


def test_complete_transaction_on_a_partition_not_led_here_is_not_leader_or_follower(tmp_path):
    """KafkaApis answers NOT_LEADER_OR_FOLLOWER for the coordinator errors, so the transaction
    coordinator retries the marker at the partition's new leader."""
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        assert await node.runtime.complete_transaction(3, PID, 0, 1, True, 2) == Error.NOT_LEADER_OR_FOLLOWER
    run(main())


def test_complete_transaction_answers_once_the_marker_is_committed(tmp_path):
    async def main():
        cluster = Cluster()
        create_offsets_topic(cluster)
        node = CoordinatorNode(tmp_path, 1, cluster)
        await node.sync()
        commit = asyncio.ensure_future(_txn_commit(node, {0: 5}))
        await settle()
        end = node.log().log_end_offset
        await node.replica_fetch(2, end)
        await node.replica_fetch(3, end)
        assert await asyncio.wait_for(commit, 1) == {("t", 0): Error.NONE}
        marker = asyncio.ensure_future(node.runtime.complete_transaction(0, PID, 0, 7, True, 1))
        await settle()
        assert not marker.done(), "no follower holds the marker yet"
        assert await _fetch(node) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
        end = node.log().log_end_offset
        await node.replica_fetch(2, end)
        await node.replica_fetch(3, end)
        assert await asyncio.wait_for(marker, 1) == Error.NONE
        assert await _fetch(node) == {0: (5, Error.NONE), 1: (-1, Error.NONE)}
    run(main())


class _TransactionCoordinatorOf:
    """The two calls FindCoordinator makes of ``broker.transactions``: the state topic exists
    once asked ``ready_after`` times, and every id is coordinated by ``node``."""

    def __init__(self, node: int, ready_after: int = 0):
        self.node, self.asked, self.ready_after = node, 0, ready_after

    def ensure_state_topic(self) -> bool:
        self.asked += 1
        return self.asked > self.ready_after

    def coordinator_of(self, transactional_id: str) -> tuple[int, int]:
        return Error.NONE, self.node


def test_find_coordinator_for_a_transaction_names_its_coordinator_on_the_requests_listener(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        create_offsets_topic(cluster)
        node = CoordinatorNode(tmp_path, 1, cluster)
        R = M.FindCoordinatorRequest
        v4 = await node.call(10, 4, R(key_type=1, coordinator_keys=["tx"]), listener_name=LISTENER)
        assert [c.error_code for c in v4.coordinators] == [Error.INVALID_REQUEST]  # none runs here
        node.handlers.transactions = _TransactionCoordinatorOf(3, ready_after=1)
        v3 = await node.call(10, 3, R(key="tx", key_type=1), listener_name=LISTENER)
        assert v3.error_code == Error.COORDINATOR_NOT_AVAILABLE  # the state topic is being created
        v4 = await node.call(10, 4, R(key_type=1, coordinator_keys=["tx", "ty"]), listener_name=LISTENER)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in v4.coordinators] == [
            (k, Error.NONE, 3, endpoint_host(3), endpoint_port(3)) for k in ("tx", "ty")]
    run(main())


# ---- KIP-890 verification of TxnOffsetCommit ----------------------------------------------

class _TransactionCoordinator:
    """What the group coordinator asks of ``broker.transactions`` before a TxnOffsetCommit is
    written: ``verify``, answering as the transaction coordinator's verify_partitions does
    (the id unknown or of another producer INVALID_PRODUCER_ID_MAPPING, an older epoch
    PRODUCER_FENCED, a partition the transaction does not hold TRANSACTION_ABORTABLE), or
    ``unreachable`` for every partition when set. ``hold``: each verification waits for it."""

    def __init__(self, verification_enabled: bool = True):
        self.verification_enabled = verification_enabled
        self.transactions: dict[str, tuple[int, int, set]] = {}
        self.unreachable: int | None = None
        self.hold: asyncio.Event | None = None
        self.asked = 0

    def begin(self, transactional_id: str, producer_id: int, epoch: int, *partitions) -> None:
        self.transactions[transactional_id] = (producer_id, epoch, set(partitions))

    def end(self, transactional_id: str) -> None:
        producer_id, epoch, _ = self.transactions[transactional_id]
        self.transactions[transactional_id] = (producer_id, epoch, set())

    async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
        self.asked += 1
        if self.hold is not None:
            await self.hold.wait()
        if self.unreachable is not None:
            return dict.fromkeys(partitions, self.unreachable)
        known = self.transactions.get(transactional_id)
        if known is None or known[0] != producer_id:
            return dict.fromkeys(partitions, Error.INVALID_PRODUCER_ID_MAPPING)
        if known[1] != producer_epoch:
            return dict.fromkeys(partitions, Error.PRODUCER_FENCED)
        return {tp: Error.NONE if tp in known[2] else Error.TRANSACTION_ABORTABLE for tp in partitions}


OFFSETS_0 = ("__consumer_offsets", 0)


async def _verified_leader(tmp_path, **properties) -> tuple[CoordinatorNode, _TransactionCoordinator]:
    cluster = Cluster()
    create_offsets_topic(cluster, replicas=(1,))
    node = CoordinatorNode(tmp_path, 1, cluster, **properties)
    await node.sync()
    node.broker.transactions = _TransactionCoordinator()
    return node, node.broker.transactions


def test_txn_offset_commit_without_add_offsets_to_txn_is_refused_as_kafka_verifies_it(tmp_path):
    """Kafka's GroupCoordinatorService writes a TxnOffsetCommit only once the transaction
    coordinator says the transaction holds the group's partition (KIP-890); below v4 a
    partition the transaction lacks is INVALID_TXN_STATE (AddPartitionsToTxnManager's
    defaultError), from v4 TRANSACTION_ABORTABLE. Nothing is written, so no transaction is
    left open on ``__consumer_offsets`` for no marker to end."""
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.begin("tx", PID, 0)  # InitProducerId done, AddOffsetsToTxn not
        assert await _txn_commit(node, {0: 5}, version=3) == {("t", 0): Error.INVALID_TXN_STATE}
        assert await _txn_commit(node, {0: 5}, version=4) == {("t", 0): Error.TRANSACTION_ABORTABLE}
        assert node.log().log_end_offset == 0
        assert node.core.pending_partitions("g") == set()
        assert await _fetch(node, require_stable=True) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
    run(main())


def test_txn_offset_commit_of_a_fenced_epoch_is_invalid_producer_epoch_as_kafka_maps_it(tmp_path):
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.begin("tx", PID, 1, OFFSETS_0)  # the zombie's epoch 0 was fenced by epoch 1
        assert await _txn_commit(node, {0: 5}, epoch=0) == {("t", 0): Error.INVALID_PRODUCER_EPOCH}
        assert await _txn_commit(node, {0: 5}, producer_id=PID + 1) == \
            {("t", 0): Error.INVALID_PRODUCER_ID_MAPPING}
        assert node.log().log_end_offset == 0
        assert await _txn_commit(node, {0: 5}, epoch=1) == {("t", 0): Error.NONE}
        assert node.log().log_end_offset == 1
    run(main())


def test_a_txn_offset_commit_retried_after_the_marker_is_refused_and_opens_no_transaction(tmp_path):
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.begin("tx", PID, 0, OFFSETS_0)
        assert await _txn_commit(node, {0: 5}) == {("t", 0): Error.NONE}
        assert txns.asked == 1
        assert await _txn_commit(node, {1: 6}) == {("t", 1): Error.NONE}
        assert txns.asked == 1, "the transaction is open on the partition: no need to ask again"
        txns.end("tx")
        assert await node.runtime.complete_transaction(0, PID, 0, 7, True, 1) == Error.NONE
        end = node.log().log_end_offset
        assert await _txn_commit(node, {0: 9}) == {("t", 0): Error.INVALID_TXN_STATE}  # the late retry
        assert node.log().log_end_offset == end
        assert await _fetch(node, require_stable=True) == {0: (5, Error.NONE), 1: (6, Error.NONE)}
    run(main())


def test_a_marker_landing_while_a_txn_offset_commit_is_verified_refuses_the_commit(tmp_path):
    """Kafka's VerificationGuard: a marker written while the verification was under way makes
    the verified append INVALID_TXN_STATE instead of opening a transaction no marker ends."""
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.begin("tx", PID, 0, OFFSETS_0)
        txns.hold = asyncio.Event()
        commit = asyncio.ensure_future(_txn_commit(node, {0: 5}))
        await settle()
        assert txns.asked == 1 and not commit.done()
        assert await node.runtime.complete_transaction(0, PID, 0, 7, False, 1) == Error.NONE
        end = node.log().log_end_offset
        txns.hold.set()
        assert await asyncio.wait_for(commit, 1) == {("t", 0): Error.INVALID_TXN_STATE}
        assert node.log().log_end_offset == end
        assert await _fetch(node, require_stable=True) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
    run(main())


def test_a_verification_that_cannot_be_made_answers_what_kafka_answers_for_txn_offset_commit(tmp_path):
    """CoordinatorOperationExceptionHelper: NETWORK_EXCEPTION is COORDINATOR_LOAD_IN_PROGRESS
    (COORDINATOR_NOT_AVAILABLE before v2, as any loading answer there); the coordinator's own
    retriable errors are answered as they are."""
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.begin("tx", PID, 0, OFFSETS_0)
        txns.unreachable = Error.NETWORK_EXCEPTION
        assert await _txn_commit(node, {0: 5}, version=3) == {("t", 0): Error.COORDINATOR_LOAD_IN_PROGRESS}
        assert await _txn_commit(node, {0: 5}, version=1) == {("t", 0): Error.COORDINATOR_NOT_AVAILABLE}
        txns.unreachable = Error.CONCURRENT_TRANSACTIONS
        assert await _txn_commit(node, {0: 5}, version=3) == {("t", 0): Error.CONCURRENT_TRANSACTIONS}
        txns.unreachable = Error.NOT_COORDINATOR
        assert await _txn_commit(node, {0: 5}, version=3) == {("t", 0): Error.NOT_COORDINATOR}
        assert node.log().log_end_offset == 0
    run(main())


def test_txn_offset_commit_is_not_verified_when_transaction_partition_verification_is_disabled(tmp_path):
    async def main():
        node, txns = await _verified_leader(tmp_path)
        txns.verification_enabled = False  # transaction.partition.verification.enable=false
        assert await _txn_commit(node, {0: 5}) == {("t", 0): Error.NONE}
        assert txns.asked == 0 and node.log().log_end_offset == 1
    run(main())
