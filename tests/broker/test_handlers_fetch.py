"""Fetch through the ReplicaManager (broker/handlers/fetch.py): consumers read below the high
watermark of the leader only; followers read to the log end offset, get a diverging epoch
instead of records, and move the high watermark with their fetches."""
import asyncio

from ext.batch import iter_batches
from protocol import messages as M
from protocol.errors import Error
from replication import follower
from replication.replica_selector import RACK_AWARE
from tests.broker.replica_nodes import LISTENER, Cluster, Node, broker_epoch, endpoint_port, records, settle


def run(coro):
    return asyncio.run(coro)


def wire(pd) -> bytes:
    """A partition's records as they cross the wire (the handler answers with file slices)."""
    return pd.records.read() if hasattr(pd.records, "read") else bytes(pd.records or b"")


def offsets_of(pd) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in a fetched partition."""
    return [(h.base_offset, h.last_offset) for h in iter_batches(wire(pd))]


def test_a_consumer_never_reads_at_or_past_the_high_watermark(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        pd, _ = await leader.fetch(0)
        assert (pd.error_code, pd.high_watermark, offsets_of(pd)) == (Error.NONE, 0, [])
        await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        await leader.produce(5, acks=1)
        pd, _ = await leader.fetch(0)
        assert pd.high_watermark == 10 and offsets_of(pd) == [(0, 9)]
        pd, _ = await leader.fetch(10)  # between the HW and the LEO: nothing, and no error
        assert (pd.error_code, offsets_of(pd)) == (Error.NONE, [])
    run(main())


def test_a_follower_reads_up_to_the_log_end_offset(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        pd = await leader.replica_fetch(2, 0)
        assert (pd.error_code, pd.high_watermark, offsets_of(pd)) == (Error.NONE, 0, [(0, 9)])
    run(main())


def test_a_waiting_consumer_fetch_is_answered_when_the_high_watermark_moves(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        consumer = asyncio.ensure_future(leader.fetch(0, max_wait_ms=5000))
        await settle()
        assert not consumer.done()
        await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        pd, _ = await asyncio.wait_for(consumer, 1)
        assert offsets_of(pd) == [(0, 9)]
    run(main())


def test_a_follower_with_a_diverging_epoch_gets_the_epoch_end_and_no_records(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)  # epoch 0: offsets 0..9
        cluster.change(leader=1)  # re-elected: epoch 1 starts at 10
        leader.sync()
        await leader.produce(5, acks=1)  # epoch 1: offsets 10..14
        # The follower wrote epoch 0 up to offset 12 under an old leadership: it diverged at 10.
        pd = await leader.replica_fetch(2, 12, last_fetched_epoch=0, current_leader_epoch=1)
        assert pd.error_code == Error.NONE
        assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 10)
        assert offsets_of(pd) == []
        assert leader.partition().remote_replicas[2].state.log_end_offset == -1, \
            "a diverging fetch says nothing of the follower's log end offset"
        pd = await leader.replica_fetch(2, 10, last_fetched_epoch=0, current_leader_epoch=1)
        assert pd.diverging_epoch.epoch == -1 and offsets_of(pd) == [(10, 14)]
    run(main())


def test_a_follower_fetch_with_an_older_broker_epoch_is_refused(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        pd = await leader.replica_fetch(2, 10, last_fetched_epoch=0, replica_epoch=broker_epoch(2) - 1)
        assert pd.error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert leader.log().high_watermark == 0
    run(main())


def test_a_stale_current_leader_epoch_is_fenced_and_names_the_leader(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        cluster.change(leader=1)
        leader.sync()  # leader epoch 1
        pd, response = await leader.fetch(0, current_leader_epoch=0)
        assert pd.error_code == Error.FENCED_LEADER_EPOCH
        assert (pd.current_leader.leader_id, pd.current_leader.leader_epoch) == (1, 1)
        assert [(e.node_id, e.port) for e in response.node_endpoints] == [(1, endpoint_port(1))]
        pd, _ = await leader.fetch(0, current_leader_epoch=2)
        assert pd.error_code == Error.UNKNOWN_LEADER_EPOCH
        pd, _ = await leader.fetch(0, current_leader_epoch=1)
        assert pd.error_code == Error.NONE
    run(main())


def test_a_consumer_fetch_on_a_broker_without_a_replica_names_the_leader_and_its_endpoint(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(1, 2), leader=1)
        node = Node(tmp_path, 3, cluster)
        pd, response = await node.fetch(0, version=16)
        assert pd.error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert pd.current_leader.leader_id == 1
        assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [
            (1, "127.0.0.1", endpoint_port(1))]
        pd, response = await node.fetch(0, version=12)  # current_leader from v12, endpoints from v16
        assert pd.current_leader.leader_id == 1 and response.node_endpoints == []
    run(main())


def test_a_consumer_fetch_below_v11_on_a_follower_is_not_leader_or_follower_as_in_kafka(tmp_path):
    """No client metadata before v11: Kafka's fetchOnlyLeader."""
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2), leader=1)
        node = Node(tmp_path, 2, cluster)
        pd, _ = await node.fetch(0, version=10)
        assert pd.error_code == Error.NOT_LEADER_OR_FOLLOWER
        pd, _ = await node.fetch(0, version=11)
        assert pd.error_code == Error.NONE
    run(main())


# ---- fetch from the closest replica (KIP-392) --------------------------------------------------

def with_racks(cluster: Cluster, racks: dict[int, str]) -> None:
    """Register each broker again, now in its rack (broker.rack)."""
    R = M.RegisterBrokerRecord
    for broker_id, rack in racks.items():
        cluster.replay(R(broker_id=broker_id, incarnation_id=bytes(16), broker_epoch=broker_epoch(broker_id),
                         end_points=[R.BrokerEndpoint(name=LISTENER, host="127.0.0.1",
                                                      port=endpoint_port(broker_id), security_protocol=0)],
                         rack=rack, fenced=False))


def consumer_request(node: Node, fetch_offset: int, rack: str, **kw):
    request = node.fetch_request(fetch_offset, **kw)
    request.rack_id = rack
    return request


async def replicate(leader: Node, follower_node: Node, rounds: int = 3):
    """Broker ``follower_node`` fetches from ``leader`` with the follower core, ``rounds`` times."""
    (_, target), = follower_node.fetchers.started
    state = follower.initial_fetch_state(target.log, 0)
    for _ in range(rounds):
        pd = await leader.replica_fetch(follower_node.node_id, state.fetch_offset, state.last_fetched_epoch)
        state, _ = follower.handle_records(target.log, state, wire(pd), pd.high_watermark,
                                           pd.log_start_offset, 0)


def test_a_follower_serves_a_consumer_fetch_up_to_its_own_high_watermark_as_kafka_does(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader, other = Node(tmp_path, 1, cluster), Node(tmp_path, 2, cluster)
        await leader.produce(10, acks=1)
        await replicate(leader, other, rounds=2)  # the records, then the fetch that moves the HW
        await leader.produce(5, acks=1)
        await replicate(leader, other, rounds=1)  # 15 held; the follower's HW is still 10
        assert (other.log().log_end_offset, other.log().high_watermark) == (15, 10)
        pd, _ = await other.fetch(0, version=11)
        assert (pd.error_code, pd.high_watermark, offsets_of(pd)) == (Error.NONE, 10, [(0, 9)])
        assert wire(pd) == leader.log().read(0, 1 << 20, "high_watermark").records.read()[:len(wire(pd))]
        assert pd.preferred_read_replica == -1  # a follower never redirects
        pd, _ = await other.fetch(12)  # above its high watermark, within its log: empty
        assert (pd.error_code, pd.high_watermark, offsets_of(pd)) == (Error.NONE, 10, [])
        pd, _ = await other.fetch(16)  # past its log end offset
        assert pd.error_code == Error.OFFSET_OUT_OF_RANGE
    run(main())


def test_a_consumer_fetch_waiting_on_a_follower_is_answered_when_its_high_watermark_moves(tmp_path):
    """Kafka's fetcher completes the follower's delayed fetches on a new high watermark; the
    fetcher reports it through on_follower_appended (tests/replication/test_fetcher.py)."""
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader, other = Node(tmp_path, 1, cluster), Node(tmp_path, 2, cluster)
        await leader.produce(10, acks=1)
        await replicate(leader, other, rounds=1)  # the records; the follower's HW is still 0
        waiting = asyncio.ensure_future(other.fetch(0, max_wait_ms=30000))
        await settle()
        assert not waiting.done()
        await replicate(leader, other, rounds=2)  # the leader's HW, then the follower learns it
        other.replicas.on_follower_appended("t", 0)  # what its fetcher calls on the move
        await settle()
        assert waiting.done()
        pd, _ = waiting.result()
        assert (pd.error_code, pd.high_watermark, offsets_of(pd)) == (Error.NONE, 10, [(0, 9)])
    run(main())


def test_a_follower_checks_a_consumers_current_leader_epoch_as_a_leader_does(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        other = Node(tmp_path, 2, cluster)
        cluster.change(leader=1)
        other.sync()  # leader epoch 1
        pd, response = await other.fetch(0, current_leader_epoch=0)
        assert pd.error_code == Error.FENCED_LEADER_EPOCH
        assert (pd.current_leader.leader_id, pd.current_leader.leader_epoch) == (1, 1)
        assert [e.node_id for e in response.node_endpoints] == [1]
        pd, _ = await other.fetch(0, current_leader_epoch=2)
        assert pd.error_code == Error.UNKNOWN_LEADER_EPOCH
        pd, _ = await other.fetch(0, current_leader_epoch=1)
        assert pd.error_code == Error.NONE
    run(main())


def test_the_leader_answers_a_consumer_in_a_followers_rack_with_that_preferred_read_replica(tmp_path):
    """Kafka's readFromLog: no records, the high watermark and log start, and at once."""
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        with_racks(cluster, {1: "a", 2: "b", 3: "c"})
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        leader.replicas.replica_selector = RACK_AWARE
        await leader.produce(10, acks=1)
        await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        await leader.replica_fetch(3, 10, last_fetched_epoch=0)
        request = consumer_request(leader, 10, "b", max_wait_ms=5000)
        waiting = asyncio.ensure_future(leader.call(1, 11, request))
        await settle()
        assert waiting.done(), "a preferred read replica is answered without waiting"
        pd = waiting.result().responses[0].partitions[0]
        assert (pd.error_code, pd.preferred_read_replica, pd.high_watermark, pd.log_start_offset,
                offsets_of(pd)) == (Error.NONE, 2, 10, 0, [])
        response = await leader.call(1, 16, consumer_request(leader, 0, "c"))
        assert response.responses[0].partitions[0].preferred_read_replica == 3
        for rack in ("a", "", "z"):  # the leader's own rack, none, a rack with no replica
            pd = (await leader.call(1, 16, consumer_request(leader, 0, rack))).responses[0].partitions[0]
            assert (rack, pd.preferred_read_replica, offsets_of(pd)) == (rack, -1, [(0, 9)])
        request = consumer_request(leader, 0, "b")
        pd = (await leader.call(1, 10, request)).responses[0].partitions[0]  # no client metadata
        assert (pd.preferred_read_replica, offsets_of(pd)) == (-1, [(0, 9)])
        leader.replicas.replica_selector = None
        pd = (await leader.call(1, 16, consumer_request(leader, 0, "b"))).responses[0].partitions[0]
        assert (pd.preferred_read_replica, offsets_of(pd)) == (-1, [(0, 9)])
    run(main())


def test_the_leader_names_no_follower_that_left_the_isr_or_lacks_the_fetch_offset(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        with_racks(cluster, {1: "a", 2: "b", 3: "c"})
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        leader.replicas.replica_selector = RACK_AWARE
        await leader.produce(10, acks=1)
        await leader.replica_fetch(2, 5, last_fetched_epoch=0)  # broker 2's log ends at 5
        await leader.replica_fetch(3, 10, last_fetched_epoch=0)
        pd = (await leader.call(1, 16, consumer_request(leader, 7, "b"))).responses[0].partitions[0]
        assert pd.preferred_read_replica == -1
        pd = (await leader.call(1, 16, consumer_request(leader, 5, "b"))).responses[0].partitions[0]
        assert pd.preferred_read_replica == 2
        cluster.change(isr=[1, 2])  # broker 3 leaves the ISR
        leader.sync()
        pd = (await leader.call(1, 16, consumer_request(leader, 0, "c"))).responses[0].partitions[0]
        assert (pd.error_code, pd.preferred_read_replica) == (Error.NONE, -1)
        cluster.fence(2)  # fenced: no endpoint
        leader.sync()
        pd = (await leader.call(1, 16, consumer_request(leader, 0, "b"))).responses[0].partitions[0]
        assert pd.preferred_read_replica == -1
    run(main())


def test_an_incremental_fetch_session_always_carries_a_preferred_read_replica(tmp_path):
    """Kafka's CachedPartition.maybeUpdateResponseData: a preferred replica must be sent."""
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        with_racks(cluster, {1: "a", 2: "b", 3: "c"})
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        leader.replicas.replica_selector = RACK_AWARE
        await leader.produce(10, acks=1)
        await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        await leader.replica_fetch(3, 10, last_fetched_epoch=0)
        request = consumer_request(leader, 10, "b")
        request.session_epoch = 0  # open a session
        first = await leader.call(1, 16, request)
        assert first.session_id > 0 and first.responses[0].partitions[0].preferred_read_replica == 2
        again = consumer_request(leader, 10, "b")
        again.session_id, again.session_epoch, again.topics = first.session_id, 1, []
        second = await leader.call(1, 16, again)
        assert [p.preferred_read_replica for t in second.responses for p in t.partitions] == [2]
    run(main())


def test_replica_fetch_versions_up_to_18_are_served(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        assert leader.apis[1].max_version == 18
        await leader.produce(10, acks=1)
        for version in (12, 14, 15, 17, 18):
            pd = await leader.replica_fetch(2, 0, version=version)
            assert (version, offsets_of(pd)) == (version, [(0, 9)])
    run(main())


def test_a_follower_replicates_byte_for_byte_and_commits_acks_all(tmp_path):
    """Two brokers, the follower applying the leader's answers with the follower core."""
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        other = Node(tmp_path, 2, cluster)
        (tp, target), = other.fetchers.started
        assert (target.leader_id, target.leader_epoch) == (1, 0)
        assert target.topic_id == other.replicas.topic_ids[tp]
        produce = asyncio.ensure_future(leader.produce(10, acks=-1))
        await settle()
        state = follower.initial_fetch_state(target.log, 0)
        for _ in range(3):  # records, then the fetch that moves the HW, then the HW itself
            pd = await leader.replica_fetch(2, state.fetch_offset, state.last_fetched_epoch)
            state, _ = follower.handle_records(target.log, state, wire(pd), pd.high_watermark,
                                               pd.log_start_offset, 0)
        assert (await asyncio.wait_for(produce, 1)).error_code == Error.NONE
        assert other.log().log_end_offset == other.log().high_watermark == 10
        mine, theirs = leader.log(), other.log()
        assert mine.read(0, 1 << 20).records.read() == theirs.read(0, 1 << 20).records.read()
        assert theirs.leader_epoch_cache.entries() == mine.leader_epoch_cache.entries() == [(0, 0)]
    run(main())


def test_a_high_watermark_move_does_not_answer_a_waiting_follower_fetch_as_in_kafka(tmp_path):
    """KAFKA-9952: a follower learns the high watermark with its next records (or at its
    max wait), not from an answer of its own: its own fetch that moves the high watermark
    waits, a fetch already waiting is not woken, and v18's high_watermark saying the follower
    lags answers nothing early either (KIP-1166 is KRaft's). A consumer's waiting fetch is
    answered by the move."""
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        parked = asyncio.ensure_future(leader.replica_fetch(2, 10, last_fetched_epoch=0, max_wait_ms=5000))
        consumer = asyncio.ensure_future(leader.fetch(0, max_wait_ms=5000))
        await settle()
        moving = asyncio.ensure_future(leader.replica_fetch(3, 10, last_fetched_epoch=0, max_wait_ms=5000,
                                                            version=18, high_watermark=0))
        await settle()
        assert leader.log().high_watermark == 10  # replica 3's fetch moved it
        pd, _ = await asyncio.wait_for(consumer, 1)
        assert (pd.high_watermark, offsets_of(pd)) == (10, [(0, 9)])
        assert not parked.done() and not moving.done()
        await leader.produce(5, acks=1)  # the next records carry the high watermark
        for fetch in (parked, moving):
            pd = await asyncio.wait_for(fetch, 1)
            assert (pd.high_watermark, offsets_of(pd)) == (10, [(10, 14)])
    run(main())


def test_a_follower_fetch_that_waited_is_recorded_once_at_its_arrival_as_in_kafka(tmp_path):
    """Kafka's DelayedFetch reads with updateFetchState off: the follower's fetch state (its log
    end, fetch time, the leader's log end at the fetch) is what the fetch found on arrival, not
    what the read that answers it after the wait finds."""
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        arrived = leader.clock.now
        parked = asyncio.ensure_future(leader.replica_fetch(2, 10, last_fetched_epoch=0, max_wait_ms=5000))
        await settle()
        leader.clock.now += 1000
        await leader.produce(5, acks=1)
        pd = await asyncio.wait_for(parked, 1)
        assert offsets_of(pd) == [(10, 14)]
        state = leader.partition().remote_replicas[2].state
        assert (state.log_end_offset, state.last_fetch_time_ms, state.last_fetch_leader_log_end_offset,
                state.last_caught_up_time_ms) == (10, arrived, 10, arrived)
    run(main())


def test_a_follower_learns_the_high_watermark_at_its_max_wait_when_no_records_come(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(10, acks=1)
        pd = await asyncio.wait_for(leader.replica_fetch(2, 10, last_fetched_epoch=0, max_wait_ms=50), 1)
        assert leader.log().high_watermark == 10 and (pd.high_watermark, offsets_of(pd)) == (10, [])
    run(main())


BATCH = len(records(10))  # every batch these tests produce has this size
SIX_BATCHES = [(0, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, 59)]


async def leader_of_six_batches(tmp_path, fetch_max_bytes: int, replicas=(1,)) -> Node:
    """A leader with six batches below its high watermark (a single replica commits at once)
    and the given fetch.max.bytes."""
    cluster = Cluster(brokers=(1, 2))
    cluster.create_topic(replicas=replicas)
    leader = Node(tmp_path, 1, cluster, fetch_max_bytes=fetch_max_bytes)
    for _ in range(6):
        await leader.produce(10, acks=1)
    return leader


def test_a_consumer_fetch_is_capped_at_the_brokers_fetch_max_bytes(tmp_path):
    async def main():
        leader = await leader_of_six_batches(tmp_path, fetch_max_bytes=3 * BATCH)
        pd, _ = await leader.fetch(0)  # the consumer asks for up to 1 MiB
        assert offsets_of(pd) == SIX_BATCHES[:3]
        pd, _ = await leader.fetch(0, max_bytes=2 * BATCH)  # the smaller of the two wins
        assert offsets_of(pd) == SIX_BATCHES[:2]
        pd, _ = await leader.fetch(0, max_bytes=BATCH // 2)  # still one whole batch (KIP-74)
        assert offsets_of(pd) == SIX_BATCHES[:1]
    run(main())


def test_a_fetch_is_not_capped_while_fetch_max_bytes_is_above_what_it_asks_for(tmp_path):
    async def main():
        leader = await leader_of_six_batches(tmp_path, fetch_max_bytes=57671680)
        pd, _ = await leader.fetch(0)
        assert offsets_of(pd) == SIX_BATCHES
    run(main())


def test_a_follower_fetch_is_capped_at_fetch_max_bytes_too_as_in_kafka(tmp_path):
    # KafkaApis.handleFetchRequest caps every fetch at fetch.max.bytes; only the fetch quota's
    # window is a consumer's alone.
    async def main():
        leader = await leader_of_six_batches(tmp_path, fetch_max_bytes=3 * BATCH, replicas=(1, 2))
        pd = await leader.replica_fetch(2, 0)
        assert offsets_of(pd) == SIX_BATCHES[:3]
    run(main())


def test_min_bytes_above_fetch_max_bytes_is_capped_so_a_full_answer_does_not_wait(tmp_path):
    async def main():
        leader = await leader_of_six_batches(tmp_path, fetch_max_bytes=3 * BATCH)
        # Waiting out max_wait_ms would time out here.
        pd, _ = await asyncio.wait_for(leader.fetch(0, min_bytes=1 << 20, max_wait_ms=10000), 5)
        assert offsets_of(pd) == SIX_BATCHES[:3]
    run(main())
