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
        code = await node.runtime.complete_transaction(0, PID, 0, 7, True, 2)
        assert code == Error.NONE
        assert await _fetch(node, require_stable=True) == {0: (5, Error.NONE), 1: (6, Error.NONE)}
        assert node.log().log_end_offset == 3  # the marker is one control batch
    run(main())


def test_abort_marker_drops_the_offsets_and_a_later_transaction_commits_its_own(tmp_path):
    async def main():
        _, node = await _single_replica_leader(tmp_path)
        await _txn_commit(node, {0: 5})
        assert await node.runtime.complete_transaction(0, PID, 0, 7, False, 2) == Error.NONE
        assert await _fetch(node, require_stable=True) == {0: (-1, Error.NONE), 1: (-1, Error.NONE)}
        await _txn_commit(node, {0: 8}, epoch=1)
        assert await node.runtime.complete_transaction(0, PID, 1, 7, True, 2) == Error.NONE
        assert await _fetch(node) == {0: (8, Error.NONE), 1: (-1, Error.NONE)}
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
        assert await node.runtime.complete_transaction(0, PID, 0, 8, True, 2) == Error.NONE
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
        marker = asyncio.ensure_future(node.runtime.complete_transaction(0, PID, 0, 7, True, 2))
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
        node.broker.transactions = _TransactionCoordinatorOf(3, ready_after=1)
        v3 = await node.call(10, 3, R(key="tx", key_type=1), listener_name=LISTENER)
        assert v3.error_code == Error.COORDINATOR_NOT_AVAILABLE  # the state topic is being created
        v4 = await node.call(10, 4, R(key_type=1, coordinator_keys=["tx", "ty"]), listener_name=LISTENER)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in v4.coordinators] == [
            (k, Error.NONE, 3, endpoint_host(3), endpoint_port(3)) for k in ("tx", "ty")]
    run(main())
