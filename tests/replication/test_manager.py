"""ReplicaManager (replication/manager.py): metadata drives roles, logs and fetchers; the core's
outcomes reach the AlterPartition manager, the purgatory and the waiting fetches."""
import asyncio
import os
import re
import uuid

from engine.checkpoint import uuid_to_str
from engine.log import Log
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


async def leader_of_ten(tmp_path, partitions: int = 1) -> Node:
    """Broker 1 leading ``partitions`` partitions of replicas 1-3, each holding offsets 0-9 that no
    follower has fetched yet."""
    cluster = Cluster()
    cluster.create_topic(replicas=(1, 2, 3), partitions=partitions)
    node = Node(tmp_path, 1, cluster)
    for partition in range(partitions):
        await node.produce(10, acks=1, partition=partition)
    return node


def fetched(node: Node, replica: int, offset: int, partition: int = 0) -> None:
    """Follower ``replica`` fetches from ``offset`` (so its log ends there)."""
    node.replicas.read_for_follower(TOPIC, partition, replica, 100 + replica, 0, offset, 0, 0, 1 << 20)


def test_an_acks_all_wait_is_answered_inside_the_follower_fetch_that_commits_it(tmp_path):
    """when_committed: the answer comes from the call that moves the high watermark, with no
    turn of the event loop in between (every acks=all produce waits here)."""
    async def main():
        node = await leader_of_ten(tmp_path)
        answers = []
        wait = node.replicas.when_committed([(TP, 10)], 5000, answers.append)
        assert wait is not None and answers == [] and node.replicas.purgatory.waiting(TP) == [10]
        fetched(node, 2, 10)
        assert answers == []  # one follower of three: the ISR is not there yet
        fetched(node, 3, 10)
        assert answers == [[Error.NONE]] and node.replicas.purgatory.waiting(TP) == []
        assert wait.finished and len(node.replicas.deadlines) == 0  # its timeout is done with
    run(main())


def test_an_acks_all_wait_answers_at_once_what_need_not_wait(tmp_path):
    async def main():
        node = await leader_of_ten(tmp_path)
        answers = []
        missing = ("other", 0)
        assert node.replicas.when_committed([(TP, 0), (missing, 5)], 5000, answers.append) is None
        assert answers == [[Error.NONE, Error.NOT_LEADER_OR_FOLLOWER]]
        assert node.replicas.when_committed([(TP, 10)], 0, answers.append) is None  # timeout 0
        assert answers[-1] == [Error.REQUEST_TIMED_OUT] and node.replicas.purgatory.waiting(TP) == []
    run(main())


def test_an_acks_all_wait_times_out_per_partition_and_leaves_the_purgatory(tmp_path):
    async def main():
        node = await leader_of_ten(tmp_path, partitions=2)
        fetched(node, 2, 10, partition=1)
        fetched(node, 3, 9, partition=1)
        answers = []
        node.replicas.when_committed([(TP, 10), ((TOPIC, 1), 10)], 50, answers.append)
        fetched(node, 3, 10, partition=1)  # partition 1 commits
        assert answers == []
        await asyncio.sleep(0.2)
        assert answers == [[Error.REQUEST_TIMED_OUT, Error.NONE]]
        assert node.replicas.purgatory.waiting(TP) == []
    run(main())


def test_a_cancelled_acks_all_wait_is_never_answered_and_leaves_the_purgatory(tmp_path):
    async def main():
        node = await leader_of_ten(tmp_path)
        answers = []
        wait = node.replicas.when_committed([(TP, 10)], 50, answers.append)
        waiter = asyncio.ensure_future(node.replicas.wait_committed([(TP, 10)], 5000))
        await settle()
        waiter.cancel()  # the awaiting caller's cancellation cancels its wait
        wait.cancel()
        await settle()
        assert node.replicas.purgatory.waiting(TP) == [] and len(node.replicas.deadlines) == 0
        await asyncio.sleep(0.1)  # past the timeout: nothing is answered
        for replica in (2, 3):
            fetched(node, replica, 10)
        assert answers == [] and waiter.cancelled()
    run(main())


def test_an_acks_all_wait_on_a_partition_that_loses_its_leadership_is_answered_so(tmp_path):
    async def main():
        node = await leader_of_ten(tmp_path)
        answers = []
        node.replicas.when_committed([(TP, 10)], 5000, answers.append)
        node.cluster.change(leader=2)
        node.sync()
        assert answers == [[Error.NOT_LEADER_OR_FOLLOWER]]
    run(main())


# ---- stray logs at startup (Kafka's LogManager.isStrayKraftReplica) ----------------------------

async def _holding_ten_records(tmp_path, brokers=(1,)):
    """A cluster of ``brokers`` and broker 1, the only replica of the topic, holding 10 records."""
    cluster = Cluster(brokers=brokers)
    cluster.create_topic(replicas=(1,))
    node = Node(tmp_path, 1, cluster)
    await node.produce(10, acks=1)
    return cluster, node


def _restarted(tmp_path, cluster, node):
    """``node`` stopped cleanly and a new broker 1 started over its log dir, ``cluster``'s image
    the first it applies."""
    node.logs.shutdown()
    return Node(tmp_path, 1, cluster)


def _stray_dirs(node) -> list[str]:
    return [n for n in os.listdir(node.dir) if n.endswith("-stray")]


def test_a_log_whose_topic_the_image_lacks_at_startup_is_moved_aside_as_stray_not_deleted(tmp_path):
    """A topic deleted while the broker was down, or a broker pointed at the wrong metadata: the
    log is renamed <topic>-<partition>.<id>-stray and kept, never deleted (Kafka moves stray
    partitions aside rather than losing what may be the only copy)."""
    async def main():
        cluster, node = await _holding_ten_records(tmp_path)
        cluster.delete_topic()
        node = _restarted(tmp_path, cluster, node)
        assert node.log() is None and TP not in node.replicas.partitions
        [stray] = _stray_dirs(node)
        assert re.fullmatch(rf"{TOPIC}-0\.[0-9a-f]{{32}}-stray", stray)
        kept = Log(os.path.join(node.dir, stray))
        assert kept.log_end_offset == 10
        kept.close()
        # and it stays aside at the next start, neither loaded nor deleted
        node = _restarted(tmp_path, cluster, node)
        assert node.log() is None and _stray_dirs(node) == [stray]
    run(main())


def test_a_replica_reassigned_away_while_the_broker_was_down_is_stray_at_startup(tmp_path):
    async def main():
        cluster, node = await _holding_ten_records(tmp_path, brokers=(1, 2))
        cluster.delete_topic()
        cluster.create_topic(replicas=(2,))  # the same name and id, placed on broker 2 only
        node = _restarted(tmp_path, cluster, node)
        assert node.log() is None and len(_stray_dirs(node)) == 1
    run(main())


def test_a_topic_deleted_while_the_broker_runs_is_still_deleted_not_stray(tmp_path):
    async def main():
        cluster, node = await _holding_ten_records(tmp_path)
        cluster.delete_topic()
        node.sync()
        assert node.log() is None and _stray_dirs(node) == []
        assert [n for n in os.listdir(node.dir) if n.startswith(f"{TOPIC}-0")] == []
    run(main())
