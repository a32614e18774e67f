"""The group coordinator's writes under replication (broker/groups/runtime.py): a reply waits
until the high watermark of ``__consumer_offsets`` passed the records it rests on; a write
that fails answers Kafka's mapped error and leaves nothing in the coordinator that the log
does not hold below its high watermark; a single replica answers at once, as before."""
import asyncio
import contextlib

from broker.groups import storage
from broker.groups.storage import OFFSETS_TOPIC
from protocol.errors import Error
from tests.broker.replica_nodes import Cluster
from tests.groups.coordinator_node import OFFSETS_ID, CoordinatorNode, create_offsets_topic, settle


def run(coro):
    return asyncio.run(coro)


async def _leader(tmp_path, cluster, **kw) -> CoordinatorNode:
    node = CoordinatorNode(tmp_path, 1, cluster, **kw)
    await node.sync()
    assert node.core.owned == {0}
    return node


@contextlib.asynccontextmanager
async def _running_leader(tmp_path, **kw):
    """The leader of a two-replica ``__consumer_offsets``, its timers running."""
    cluster = Cluster(brokers=(1, 2))
    create_offsets_topic(cluster, replicas=(1, 2))
    leader = await _leader(tmp_path, cluster, **kw)
    leader.runtime.start()
    try:
        yield leader
    finally:
        await leader.runtime.stop()


def test_offset_commit_is_answered_only_once_the_high_watermark_passes_its_records(tmp_path):
    async def main():
        cluster = Cluster()
        create_offsets_topic(cluster)
        leader = await _leader(tmp_path, cluster)
        commit = asyncio.ensure_future(leader.commit({0: 42, 1: 7}))
        await settle()
        end = leader.log().log_end_offset
        assert end == 2 and leader.log().high_watermark == 0
        assert not commit.done(), "no follower holds the records yet"
        assert await leader.fetch_offsets((0, 1)) == (Error.NONE, {0: -1, 1: -1})  # not committed
        await leader.replica_fetch(2, end)
        assert not commit.done(), "replica 3 of the ISR has not fetched them yet"
        await leader.replica_fetch(3, end)
        assert leader.log().high_watermark == end
        assert await asyncio.wait_for(commit, 1) == [Error.NONE, Error.NONE]
        assert await leader.fetch_offsets((0, 1)) == (Error.NONE, {0: 42, 1: 7})
    run(main())


def test_offset_fetch_with_require_stable_waits_for_the_pending_commit(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        create_offsets_topic(cluster, replicas=(1, 2))
        leader = await _leader(tmp_path, cluster)
        commit = asyncio.ensure_future(leader.commit({0: 42}))
        await settle()
        stable = asyncio.ensure_future(leader.fetch_offsets(require_stable=True))
        await settle()
        assert not stable.done()
        await leader.replica_fetch(2, leader.log().log_end_offset)
        assert await asyncio.wait_for(stable, 1) == (Error.NONE, {0: 42})
        assert await asyncio.wait_for(commit, 1) == [Error.NONE]
    run(main())


def test_offset_commit_under_min_insync_replicas_is_coordinator_not_available_and_leaves_no_trace(tmp_path):
    async def main():
        cluster = Cluster()
        create_offsets_topic(cluster, isr=(1,), configs={"min.insync.replicas": "2"})
        leader = await _leader(tmp_path, cluster)
        errors = await asyncio.wait_for(leader.commit({0: 42}), 1)  # refused before writing
        assert errors == [Error.COORDINATOR_NOT_AVAILABLE]
        assert leader.log().log_end_offset == 0
        assert "g" not in leader.core.offsets and "g" not in leader.core.groups
        assert await leader.fetch_offsets() == (Error.NONE, {0: -1})
    run(main())


def test_commit_not_replicated_within_the_commit_timeout_is_coordinator_not_available_and_unseen(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        create_offsets_topic(cluster, replicas=(1, 2))
        leader = await _leader(tmp_path, cluster, commit_timeout_ms=50)
        assert await asyncio.wait_for(leader.commit({0: 42}), 1) == [Error.COORDINATOR_NOT_AVAILABLE]
        assert "g" not in leader.core.offsets and "g" not in leader.core.groups
        assert await leader.fetch_offsets() == (Error.NONE, {0: -1})
        # The record is in the leader's log: once a follower holds it, it is committed after all.
        await leader.replica_fetch(2, leader.log().log_end_offset)
        assert await leader.fetch_offsets() == (Error.NONE, {0: 42})
        assert "g" in leader.core.groups  # a simple group, as loading the log makes it
    run(main())


def test_leadership_lost_while_waiting_answers_not_coordinator_and_unloads_the_partition(tmp_path):
    async def main():
        cluster = Cluster()
        create_offsets_topic(cluster)
        leader = await _leader(tmp_path, cluster)
        commit = asyncio.ensure_future(leader.commit({0: 42}))
        await settle()
        assert not commit.done()
        cluster.change(leader=2, topic_id=OFFSETS_ID)
        leader.node.sync()  # the ReplicaManager makes it a follower: its waiters are answered
        assert await asyncio.wait_for(commit, 1) == [Error.NOT_COORDINATOR]
        assert leader.core.owned == set() and "g" not in leader.core.offsets
        await leader.sync()
        assert leader.core.owned == set() and not leader.runtime._partitions
    run(main())


def test_heartbeat_and_sync_group_wait_for_the_assignment_record_to_commit(tmp_path):
    async def main():
        async with _running_leader(tmp_path) as leader:
            joined = await asyncio.wait_for(leader.join(), 1)  # nothing written yet: at once
            assert joined.error_code == Error.NONE and joined.generation_id == 1
            me = joined.member_id
            sync = asyncio.ensure_future(leader.sync_group(me, 1, b"assignment"))
            await settle()
            assert leader.log().log_end_offset == 1 and not sync.done()
            heartbeat = asyncio.ensure_future(leader.heartbeat(me, 1))
            await settle()
            assert not heartbeat.done(), "its answer rests on the uncommitted assignment"
            await leader.replica_fetch(2, 1)
            synced = await asyncio.wait_for(sync, 1)
            assert (synced.error_code, synced.assignment) == (Error.NONE, b"assignment")
            assert await asyncio.wait_for(heartbeat, 1) == Error.NONE
    run(main())


def test_sync_group_whose_record_times_out_answers_coordinator_not_available(tmp_path):
    async def main():
        async with _running_leader(tmp_path, commit_timeout_ms=50) as leader:
            joined = await asyncio.wait_for(leader.join(), 1)
            synced = await asyncio.wait_for(leader.sync_group(joined.member_id, 1, b"a"), 1)
            assert (synced.error_code, synced.assignment) == (Error.COORDINATOR_NOT_AVAILABLE, b"")
    run(main())


def test_loaded_offsets_above_the_high_watermark_are_unseen_until_committed(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        create_offsets_topic(cluster, replicas=(1, 2))
        leader = await _leader(tmp_path, cluster, commit_timeout_ms=50)
        assert await leader.commit({0: 42}) == [Error.COORDINATOR_NOT_AVAILABLE]
        assert leader.log().log_end_offset == 1 and leader.log().high_watermark == 0
        cluster.change(leader=1, topic_id=OFFSETS_ID)  # re-elected in a new leader epoch: reloaded
        await leader.sync()
        assert leader.core.owned == {0} and leader.runtime._partitions[0].epoch == 1
        assert await leader.fetch_offsets() == (Error.NONE, {0: -1})
        stable = asyncio.ensure_future(leader.fetch_offsets(require_stable=True))
        await settle()
        assert not stable.done()
        await leader.replica_fetch(2, 1, leader_epoch=1)
        assert await asyncio.wait_for(stable, 1) == (Error.NONE, {0: 42})
        assert await leader.fetch_offsets() == (Error.NONE, {0: 42})
    run(main())


def test_an_append_at_an_offset_the_coordinator_did_not_expect_reloads_the_partition(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        create_offsets_topic(cluster, replicas=(1,))
        leader = await _leader(tmp_path, cluster)
        record = (storage.offset_commit_key("h", "t", 0), storage.offset_commit_value(5, -1, "", 0))
        batch = storage.build_records_batch([record], 0)
        written = leader.node.replicas.append_local(OFFSETS_TOPIC, 0, batch)
        assert written.error == Error.NONE  # behind the coordinator's back
        assert await leader.commit({0: 42}) == [Error.NOT_COORDINATOR]
        await asyncio.gather(*leader.runtime._loads.values())
        assert leader.core.owned == {0}
        assert await leader.fetch_offsets() == (Error.NONE, {0: 42})  # the log has both
        assert await leader.fetch_offsets(group="h") == (Error.NONE, {0: 5})
    run(main())


def test_a_single_replica_offsets_partition_answers_commits_at_once(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        create_offsets_topic(cluster, replicas=(1,))
        leader = await _leader(tmp_path, cluster)
        commit = asyncio.ensure_future(leader.commit({0: 42}))
        await asyncio.sleep(0)  # one step of the loop: nothing to wait for
        assert commit.done() and commit.result() == [Error.NONE]
        assert not leader.runtime._partitions[0].writes
        assert await leader.fetch_offsets() == (Error.NONE, {0: 42})
        assert leader.log().high_watermark == leader.log().log_end_offset == 1
    run(main())


def test_describe_and_list_groups_answer_only_once_the_state_they_show_is_committed(tmp_path):
    """Kafka 4.x's coordinator reads group state as of its last committed offset: an answer
    never shows a member or a state that a failover could take back."""
    async def main():
        async with _running_leader(tmp_path) as leader:
            joined = await asyncio.wait_for(leader.join(), 1)
            me = joined.member_id
            sync = asyncio.ensure_future(leader.sync_group(me, 1, b"assignment"))
            await settle()
            assert leader.log().log_end_offset == 1 and leader.log().high_watermark == 0
            described = asyncio.ensure_future(leader.describe())
            listed = asyncio.ensure_future(leader.list_groups())
            await settle()
            assert not described.done(), "the group and its member rest on an uncommitted record"
            assert not listed.done()
            await leader.replica_fetch(2, 1)
            group = await asyncio.wait_for(described, 1)
            assert (group.error_code, group.group_state) == (Error.NONE, "Stable")
            assert [(m.member_id, m.member_assignment) for m in group.members] == [(me, b"assignment")]
            assert await asyncio.wait_for(listed, 1) == (Error.NONE, [("g", "Stable")])
            await asyncio.wait_for(sync, 1)
    run(main())


def test_describe_and_list_groups_whose_state_does_not_commit_in_time_are_coordinator_not_available(tmp_path):
    async def main():
        async with _running_leader(tmp_path, commit_timeout_ms=50) as leader:
            joined = await asyncio.wait_for(leader.join(), 1)
            sync = asyncio.ensure_future(leader.sync_group(joined.member_id, 1, b"a"))
            await settle()
            group = await asyncio.wait_for(leader.describe(), 1)
            assert (group.error_code, list(group.members)) == (Error.COORDINATOR_NOT_AVAILABLE, [])
            assert await asyncio.wait_for(leader.list_groups(), 1) == (Error.COORDINATOR_NOT_AVAILABLE, [])
            await asyncio.wait_for(sync, 1)
    run(main())
