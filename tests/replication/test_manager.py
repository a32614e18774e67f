"""ReplicaManager (replication/manager.py): metadata drives roles, logs and fetchers; the core's
outcomes reach the AlterPartition manager, the purgatory and the waiting fetches."""
import asyncio
import os
import uuid

from engine.checkpoint import uuid_to_str
from protocol import messages as M
from protocol.errors import Error
from replication.isr import LeaderAndIsr
from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster, Node, settle

TP = (TOPIC, 0)


def run(coro):
    return asyncio.run(coro)


def test_a_deleted_topic_loses_its_log_and_answers_its_waiters(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        node = Node(tmp_path, 1, cluster)
        directory = node.log().dir
        produce = asyncio.ensure_future(node.produce(10, acks=-1))
        await settle()
        cluster.delete_topic()
        node.sync()
        assert (await asyncio.wait_for(produce, 1)).error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert node.log() is None and TP not in node.replicas.partitions
        assert not os.path.exists(directory)
    run(main())


def test_a_topic_recreated_under_the_same_name_starts_with_an_empty_log(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        await node.produce(10, acks=1)
        cluster.delete_topic()
        new_id = uuid.uuid4().bytes
        cluster.create_topic(replicas=(1,), topic_id=new_id)
        node.sync()  # both changes in one image: the deletion is still seen
        assert node.log().log_end_offset == 0
        assert node.replicas.topic_ids[TP] == new_id
        assert node.log().topic_id == uuid_to_str(new_id)
    run(main())


def test_a_partition_moved_off_this_broker_is_deleted_and_stops_fetching(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        node = Node(tmp_path, 3, cluster)
        assert TP in node.fetchers.fetching
        moved = M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2])
        cluster.replay(moved)
        node.sync()
        assert node.log() is None and TP not in node.fetchers.fetching
    run(main())


def test_a_follower_fetches_from_the_leader_in_its_epoch_and_a_leader_fetches_nothing(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        node = Node(tmp_path, 2, cluster)
        target = node.fetchers.fetching[TP]
        assert (target.topic_id, target.leader_id, target.leader_epoch) == (TOPIC_ID, 1, 0)
        assert target.log is node.log()
        cluster.change(leader=2)
        node.sync()
        assert TP not in node.fetchers.fetching and node.partition().is_leader
        cluster.change(leader=1)
        node.sync()
        target = node.fetchers.fetching[TP]
        assert (target.leader_id, target.leader_epoch) == (1, 2)
    run(main())


def test_the_fetcher_restarts_when_the_same_leader_gets_a_new_epoch(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        node = Node(tmp_path, 2, cluster)
        cluster.change(isr=(1, 2))  # an ISR change alone: the fetcher keeps going
        node.sync()
        cluster.change(leader=1)
        node.sync()
        assert [(t.leader_id, t.leader_epoch) for _, t in node.fetchers.started] == [(1, 0), (1, 1)]
    run(main())


def test_no_fetcher_while_the_leader_is_fenced_or_there_is_none(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        cluster.fence(1)
        node = Node(tmp_path, 2, cluster)
        assert TP not in node.fetchers.fetching
        cluster.unfence(1)
        node.sync()
        assert node.fetchers.fetching[TP].leader_id == 1
        cluster.change(leader=-1, isr=(2,))
        node.sync()
        assert TP not in node.fetchers.fetching
    run(main())


def test_a_follower_left_behind_is_dropped_from_the_isr_and_acks_all_then_completes(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        node = Node(tmp_path, 1, cluster, replica_lag_time_max_ms=1000)
        produce = asyncio.ensure_future(node.produce(10, acks=-1))
        await settle()
        node.clock.now += 1001
        await node.replica_fetch(2, 10, last_fetched_epoch=0)  # replica 3 never fetches
        node.replicas.maybe_shrink_isr()
        (topic_id, index, sent), = node.alter.submitted
        assert (topic_id, index, sent.isr, sent.partition_epoch) == (TOPIC_ID, 0, (1, 2), 0)
        assert not produce.done(), "the HW waits for replica 3 until the shrink is committed"
        committed = LeaderAndIsr.build(1, 0, [(1, -1), (2, -1)], 0, 1)
        node.replicas.handle_alter_partition_result(TOPIC_ID, 0, sent, Error.NONE, committed)
        assert node.log().high_watermark == 10
        assert (await asyncio.wait_for(produce, 1)).error_code == Error.NONE
    run(main())


def test_a_caught_up_follower_is_proposed_back_into_the_isr(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), isr=(1, 2))
        node = Node(tmp_path, 1, cluster)
        await node.produce(10, acks=1)
        await node.replica_fetch(2, 10, last_fetched_epoch=0)
        assert node.alter.submitted == []
        await node.replica_fetch(3, 10, last_fetched_epoch=0)
        (_, _, sent), = node.alter.submitted
        assert sent.isr == (1, 2, 3)
    run(main())


def test_min_insync_replicas_follows_the_topic_config(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), isr=(1,))
        node = Node(tmp_path, 1, cluster)
        assert (await node.produce(1, acks=-1)).error_code == Error.NONE
        cluster.replay(M.ConfigRecord(resource_type=2, resource_name=TOPIC, name="min.insync.replicas",
                                      value="2"))
        node.sync()
        assert node.partition().min_insync_replicas == 2
        assert (await node.produce(1, acks=-1)).error_code == Error.NOT_ENOUGH_REPLICAS
    run(main())


def test_a_restarted_broker_starts_from_its_checkpointed_high_watermark(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        node = Node(tmp_path, 1, cluster)
        await node.produce(10, acks=1)
        await node.replica_fetch(2, 10, last_fetched_epoch=0)
        await node.produce(5, acks=1)
        await node.replicas.close()
        node.logs.shutdown()
        cluster.change(leader=2, isr=(2,))
        restarted = Node(tmp_path, 1, cluster)
        assert (restarted.log().high_watermark, restarted.log().log_end_offset) == (10, 15)
        assert restarted.fetchers.fetching[TP].leader_id == 2
    run(main())


def test_a_single_replica_leader_commits_its_whole_log_on_becoming_leader(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        await node.produce(10, acks=1)
        node.logs.checkpoint_high_watermarks()
        node.log().update_high_watermark(0)  # as a crash before the checkpoint would leave it
        node.logs.shutdown()
        restarted = Node(tmp_path, 1, cluster)
        assert restarted.log().high_watermark == restarted.log().log_end_offset == 10
    run(main())


def test_a_pending_isr_change_survives_metadata_changes_of_other_partitions(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        node = Node(tmp_path, 1, cluster, replica_lag_time_max_ms=1000)
        await node.produce(10, acks=1)
        node.clock.now += 1001
        await node.replica_fetch(2, 10, last_fetched_epoch=0)
        node.replicas.maybe_shrink_isr()
        (_, _, sent), = node.alter.submitted
        cluster.create_topic(name="other", topic_id=uuid.uuid4().bytes, replicas=(2, 3))
        node.sync()
        assert node.partition().partition_state.is_inflight
        committed = LeaderAndIsr.build(1, 0, [(1, -1), (2, -1)], 0, 1)
        node.replicas.handle_alter_partition_result(TOPIC_ID, 0, sent, Error.NONE, committed)
        assert node.log().high_watermark == 10
    run(main())
