"""offsets.retention.minutes (KIP-211, Kafka 2.1+) in the group coordinator core, under a clock
the test controls: one test per rule of ``cleanup_group_metadata``, then the shell's periodic
pass (offsets.retention.check.interval.ms) against a real in-process coordinator."""
import asyncio
import struct

from broker.groups import storage
from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import Cluster
from tests.groups.coordinator_node import CoordinatorNode, create_offsets_topic, settle
from tests.groups.scenario import Scenario
from tests.groups.test_consumer_group import Cg

MINUTE = 60000
RETENTION = 10 * MINUTE


def subscription(*topics: str) -> bytes:
    """A consumer's JoinGroup metadata: ConsumerProtocolSubscription v1 with its version."""
    return struct.pack(">h", 1) + M.DATA["ConsumerProtocolSubscription"].encode(
        1, M.ConsumerProtocolSubscription(topics=list(topics), owned_partitions=[]))


def scenario(**kw) -> Scenario:
    return Scenario(offsets_retention_ms=RETENTION, **kw)


def expire(s: Scenario, at: int, pending=()) -> list:
    """Run the retention pass at ``at``; the records it wrote."""
    s.now = at
    fx = s.run(s.core.cleanup_group_metadata(at, pending))
    return [record for _, records in fx.appends for record in records]


def tombstones(records) -> set:
    """What the records delete: ("offset", topic, partition), or ("group", key version) for a
    group's own records (2: a classic group's; 3, 4, 6: a consumer group's)."""
    out = set()
    for key, value in records:
        assert value is None, "the retention pass writes tombstones only"
        version, k = storage.parse_key(key)
        out.add(("offset", k.topic, k.partition) if version <= 1 else ("group", version))
    return out


CLASSIC = ("group", 2)
CONSUMER = {("group", 3), ("group", 4), ("group", 6)}


def stable_consumer_group(s: Scenario, topics=("t",)) -> list[str]:
    """Two classic members of protocol type "consumer" subscribed to ``topics``."""
    return s.stable_group(2, protocols=[("range", subscription(*topics))])


def commit_as_member(s: Scenario, member: str, offsets, group: str = "g") -> None:
    errors = s.commit(offsets, group=group, generation=s.core.groups[group].generation_id, member_id=member)
    assert errors == [Error.NONE] * len(offsets)


def replay(s: Scenario) -> storage.GroupState:
    return s.replayed()


# ---- classic groups --------------------------------------------------------------------------

def test_offsets_of_an_empty_group_expire_after_offsets_retention_minutes_from_when_it_emptied():
    s = scenario()
    leader, follower = stable_consumer_group(s)
    commit_as_member(s, leader, [("t", 0, 10), ("t", 1, 20)])
    s.now = 5 * MINUTE
    s.leave((leader, None), (follower, None))
    assert s.state() == "Empty"
    assert expire(s, RETENTION) == []  # retention past the commit, not past the emptying
    assert expire(s, 5 * MINUTE + RETENTION - 1) == []
    assert tombstones(expire(s, 5 * MINUTE + RETENTION)) == {("offset", "t", 0), ("offset", "t", 1), CLASSIC}
    assert s.committed() == {}


def test_an_empty_group_left_with_no_offsets_is_deleted_and_its_tombstone_written():
    s = scenario()
    leader, follower = stable_consumer_group(s)
    commit_as_member(s, leader, [("t", 0, 10)])
    s.leave((leader, None), (follower, None))
    written = tombstones(expire(s, RETENTION))
    assert written == {("offset", "t", 0), CLASSIC}
    assert "g" not in s.core.groups
    assert s.core.list_groups([]) == []


def test_a_subscribed_topics_offsets_never_expire_while_the_group_is_stable():
    s = scenario()
    leader, _ = stable_consumer_group(s, topics=("t",))
    commit_as_member(s, leader, [("t", 0, 10), ("gone", 0, 5)])
    # KIP-496: a Stable consumer group's offsets of topics no member subscribes to expire by
    # commit time; its subscribed topics' never do, and the group lives on.
    assert tombstones(expire(s, 100 * RETENTION)) == {("offset", "gone", 0)}
    assert expire(s, 1000 * RETENTION) == []
    assert s.committed() == {("t", 0): 10} and s.state() == "Stable"


def test_a_stable_group_whose_subscriptions_cannot_be_read_keeps_every_offset():
    s = scenario()
    leader, _ = s.stable_group(2, protocols=[("range", b"not a subscription")])
    commit_as_member(s, leader, [("gone", 0, 5)])
    assert expire(s, 100 * RETENTION) == []


def test_no_offset_expires_while_a_classic_group_rebalances():
    s = scenario()
    leader, follower = stable_consumer_group(s, topics=("t",))
    commit_as_member(s, leader, [("gone", 0, 5)])
    s.join("rejoin", member_id=leader, protocols=[("range", subscription("t", "u"))])
    assert s.state() == "PreparingRebalance"
    assert expire(s, 100 * RETENTION) == []


def test_a_group_of_another_protocol_type_keeps_its_offsets_until_it_is_empty():
    s = scenario()
    leader, follower = s.stable_group(2, protocol_type="connect")
    commit_as_member(s, leader, [("t", 0, 1)])
    assert expire(s, 100 * RETENTION) == []
    s.leave((leader, None), (follower, None))
    assert tombstones(expire(s, 200 * RETENTION)) == {("offset", "t", 0), CLASSIC}


def test_a_standalone_groups_offsets_expire_from_their_commit_time():
    """A group with no protocol (commits through assign(), generation -1) has no emptying to
    count from: each offset lives offsets.retention.minutes past its own last commit."""
    s = scenario()
    s.commit([("t", 0, 1)])
    s.now = 5 * MINUTE
    s.commit([("t", 1, 2)])
    assert expire(s, RETENTION - 1) == []
    assert tombstones(expire(s, RETENTION)) == {("offset", "t", 0)}
    assert s.committed() == {("t", 1): 2} and "g" in s.core.groups
    assert tombstones(expire(s, 5 * MINUTE + RETENTION)) == {("offset", "t", 1), CLASSIC}
    assert "g" not in s.core.groups


def test_an_offset_committed_with_a_retention_time_expires_at_its_expire_timestamp():
    """OffsetCommit v2-v4's retention_time_ms: the old per-offset semantics, as Kafka keeps them."""
    s = scenario()
    errors, fx = s.core.commit_offsets("g", -1, "", None, [("t", 0, 1, -1, "")], 2, 0, retention_ms=1000)
    s.run(fx)
    assert expire(s, 999) == []
    assert tombstones(expire(s, 1000)) == {("offset", "t", 0), CLASSIC}


def test_an_offset_with_a_commit_not_yet_replicated_is_not_expired_under_it():
    """An offset whose newer commit is written but not committed (``pending``) must not get a
    tombstone after that commit in the log; nor is its group deleted."""
    s = scenario()
    s.commit([("t", 0, 1)])
    assert expire(s, RETENTION, pending={("g", "t", 0)}) == []
    assert tombstones(expire(s, RETENTION, pending={("g", "t", 9)})) == {("offset", "t", 0)}
    assert "g" in s.core.groups  # its offset of t-9 is on its way


def test_expired_offsets_and_the_deleted_group_stay_gone_after_a_reload():
    s = scenario()
    leader, follower = stable_consumer_group(s)
    commit_as_member(s, leader, [("t", 0, 10)])
    s.commit([("t", 0, 3)], group="solo")
    s.leave((leader, None), (follower, None))
    expire(s, RETENTION)
    state = replay(s)
    assert state.offsets == {} and state.groups == {}
    again = scenario().core
    again.complete_load(0, state, RETENTION)
    assert again.groups == {} and again.offsets == {}


def test_a_reloaded_empty_group_counts_retention_from_its_recorded_emptying():
    s = scenario()
    leader, follower = stable_consumer_group(s)
    commit_as_member(s, leader, [("t", 0, 10)])
    s.now = 5 * MINUTE
    s.leave((leader, None), (follower, None))
    loaded = scenario()
    loaded.core.complete_load(0, replay(s), 9 * MINUTE)  # a coordinator move, four minutes later
    assert expire(loaded, 5 * MINUTE + RETENTION - 1) == []
    assert tombstones(expire(loaded, 5 * MINUTE + RETENTION)) == {("offset", "t", 0), CLASSIC}


def test_an_empty_group_with_no_recorded_emptying_expires_offsets_from_their_commit_time():
    """A GroupMetadataValue older than v2 has no current_state_timestamp."""
    state = storage.GroupState()
    state.groups["g"] = M.GroupMetadataValue(protocol_type="consumer", generation=3, protocol=None,
                                             leader=None, current_state_timestamp=-1, members=[])
    state.offsets["g"] = {("t", 0): storage.OffsetAndMetadata(1, -1, "", 2 * MINUTE)}
    s = scenario()
    s.core.complete_load(0, state, 50 * MINUTE)
    assert tombstones(expire(s, 2 * MINUTE + RETENTION)) == {("offset", "t", 0), CLASSIC}


# ---- consumer groups (KIP-848) ---------------------------------------------------------------

def _consumer_group_with_offsets() -> Cg:
    cg = Cg(offsets_retention_ms=RETENTION)
    cg.join("a", topics=("t1",))
    errors, fx = cg.core.commit_offsets("g", cg.epoch["a"], "a", None,
                                        [("t1", 0, 10, -1, ""), ("t2", 0, 20, -1, "")], 9, 0)
    cg.s.run(fx)
    assert errors == [Error.NONE, Error.NONE]
    return cg


def test_a_consumer_groups_unsubscribed_offsets_expire_from_their_commit_time_while_it_has_members():
    cg = _consumer_group_with_offsets()
    assert expire(cg.s, RETENTION - 1) == []
    assert tombstones(expire(cg.s, RETENTION)) == {("offset", "t2", 0)}
    assert expire(cg.s, 100 * RETENTION) == []  # t1 is subscribed
    assert cg.s.committed() == {("t1", 0): 10} and "g" in cg.core.consumer.groups


def test_an_empty_consumer_groups_offsets_expire_from_their_commit_time_and_the_group_is_deleted():
    cg = _consumer_group_with_offsets()
    cg.s.now = 8 * MINUTE
    cg.hb("a", epoch=-1)  # leaves: the group is Empty from 8 minutes on
    written = tombstones(expire(cg.s, RETENTION))  # counted from the commits, not the emptying
    assert written == {("offset", "t1", 0), ("offset", "t2", 0), *CONSUMER}
    assert "g" not in cg.core.consumer.groups
    assert replay(cg.s).consumer_groups == {}


def test_an_empty_consumer_group_with_no_offsets_is_deleted():
    cg = Cg(offsets_retention_ms=RETENTION)
    cg.join("a")
    assert expire(cg.s, 0) == []  # it has a member
    cg.hb("a", epoch=-1)
    assert tombstones(expire(cg.s, 0)) == CONSUMER and "g" not in cg.core.consumer.groups


def test_offsets_retention_defaults_to_kafkas_seven_days():
    assert Scenario().core.config.offsets_retention_ms == 10080 * MINUTE


# ---- the shell: offsets.retention.check.interval.ms ------------------------------------------

def test_the_coordinator_expires_offsets_every_offsets_retention_check_interval(tmp_path):
    """A standalone commit with OffsetCommit v2's retention_time_ms of 100 ms: the periodic pass
    writes its tombstone and deletes the group, and OffsetFetch no longer finds the offset."""
    async def main():
        cluster = Cluster(brokers=(1,))
        create_offsets_topic(cluster, replicas=(1,))
        node = CoordinatorNode(tmp_path, 1, cluster, **{"offsets.retention.minutes": 1,
                                                       "offsets.retention.check.interval.ms": 50})
        assert node.core.config.offsets_retention_ms == MINUTE
        await node.sync()
        R = M.OffsetCommitRequest
        request = R(group_id="solo", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=100,
                    topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
                        R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=7, committed_metadata="")])])
        response = await node.call(8, 2, request)
        assert response.topics[0].partitions[0].error_code == Error.NONE
        assert await node.fetch_offsets(group="solo") == (Error.NONE, {0: 7})
        node.runtime.start()
        try:
            async with asyncio.timeout(5):
                while "solo" in node.core.groups or node.core.offsets:
                    await asyncio.sleep(0.02)
            assert await node.fetch_offsets(group="solo") == (Error.NONE, {0: -1})
        finally:
            await node.runtime.stop()
        state = storage.load_partition(node.log())
        assert state.offsets == {} and state.groups == {}
    asyncio.run(main())


def test_a_retention_pass_writes_no_tombstone_behind_a_commit_still_waiting_to_replicate(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        create_offsets_topic(cluster, replicas=(1, 2))
        node = CoordinatorNode(tmp_path, 1, cluster, **{"offsets.retention.check.interval.ms": 20})
        await node.sync()
        R = M.OffsetCommitRequest
        first = asyncio.ensure_future(node.call(8, 2, R(
            group_id="solo", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=50,
            topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
                R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata="")])])))
        await settle()
        await node.replica_fetch(2, node.log().log_end_offset)
        assert (await first).topics[0].partitions[0].error_code == Error.NONE
        second = asyncio.ensure_future(node.commit({0: 2}, group="solo"))  # no expire timestamp
        await settle()
        end = node.log().log_end_offset
        node.runtime.start()
        try:
            await asyncio.sleep(0.3)  # the first commit's 50 ms are long past, several passes ran
            assert node.log().log_end_offset == end, "a tombstone was written behind the newer commit"
            await node.replica_fetch(2, end)
            assert await asyncio.wait_for(second, 1) == [Error.NONE]
            assert await node.fetch_offsets(group="solo") == (Error.NONE, {0: 2})
        finally:
            await node.runtime.stop()
    asyncio.run(main())
