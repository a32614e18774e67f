"""RaftDriver over real sockets: three voters (and an observer) on 127.0.0.1, one asyncio loop.

Each replica is a RaftDriver on a MemoryRaftLog with an in-memory quorum-state store, served
by a protocol.net.Server whose Dispatcher holds the driver's ``apis()`` and advertises
kraft.version 0..1 in ApiVersions, as a controller's must (the leader probes a joining voter).
Timeouts but the fetch timeout are short (QuorumConfig below), every wait is bounded, and every
test stops its servers and drivers itself.
"""
from __future__ import annotations

import asyncio
import logging
import random

import pytest

from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.dispatch import Dispatcher
from protocol.net import Server
from raft import messages as m
from raft import wire
from raft.accumulator import MAX_BATCH_SIZE, BatchAccumulator, RecordBatchTooLargeError
from raft.driver import RaftDriver, RaftDriverConfig
from raft.errors import NotLeaderError
from raft.log import MemoryRaftLog, OffsetAndEpoch, Snapshot
from raft.purgatory import CommitPurgatory
from raft.quorum_state import QuorumConfig
from raft.records import decode_entries
from raft.voters import Endpoint, Voter, VoterSet, static_voter_set

CLUSTER_ID = "strom-raft-driver-test"
HOST = "127.0.0.1"
# fetch.timeout.ms is a minute: every test here takes the leader it found to stay leader, and on a
# loaded box one stall of the shared loop past a short timeout would make both followers give up
# on it at once and elect another (CI saw node 2 win epoch 3 in the auto-join test that way).
# No wait in these tests comes near a minute, so a successor is elected only because a leader
# resigned, closed its connections or stopped accepting them (test_driver_disconnect.py).
CONFIG = QuorumConfig(election_timeout_ms=200, fetch_timeout_ms=60_000, election_backoff_max_ms=100,
                      retry_backoff_ms=10, request_timeout_ms=300, fetch_max_wait_ms=200,
                      election_backoff_base_ms=10)


class MemoryStore:
    def __init__(self) -> None:
        self.state = None
        self.writes = 0

    def read(self):
        return self.state

    def write(self, state, kraft_version, voter_ids) -> None:
        self.state = state
        self.writes += 1


class Listener:
    def __init__(self) -> None:
        self.committed = []
        self.snapshots = []
        self.leaders = []

    def handle_commit(self, entries) -> None:
        if self.committed:
            assert entries[0].offset == self.committed[-1].offset + 1, "commits out of order"
        self.committed += entries

    def handle_snapshot(self, snapshot) -> None:
        self.snapshots.append(snapshot)

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))

    def data(self) -> list[bytes]:
        return [e.value for e in self.committed if isinstance(e.value, bytes)]


class Node:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.dispatcher: Dispatcher | None = None
        self.server = Server(self._handle, 100 << 20)
        self.port = self.server.bind(HOST, 0)
        self.log = MemoryRaftLog()
        self.store = MemoryStore()
        self.listener = Listener()
        self.driver: RaftDriver | None = None

    async def _handle(self, frame):
        return await self.dispatcher.handle(frame)

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return (Endpoint("CONTROLLER", HOST, self.port),)

    @property
    def directory_id(self) -> bytes:
        return self.node_id.to_bytes(16, "big")

    async def start(self, voters: VoterSet, bootstrap=(), seed: int = 0, auto_join: bool = False,
                    directory_id: bytes | None = None, quorum: QuorumConfig = CONFIG) -> None:
        config = RaftDriverConfig(self.node_id, CLUSTER_ID, voters, self.endpoints, directory_id,
                                  tuple(bootstrap), quorum, append_linger_ms=5, auto_join=auto_join)
        self.driver = RaftDriver(config, self.log, self.store, self.listener, rng=random.Random(seed))
        # A controller advertises its kraft.version range in ApiVersions (KIP-853).
        self.dispatcher = Dispatcher(self.driver.apis(), wire.kraft_supported_features())
        self.server.start()
        await self.driver.start()

    async def stop(self, graceful: bool = True) -> None:
        if self.driver is not None:
            await self.driver.close(graceful)
        await self.server.close()


async def eventually(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def start_voters(n: int = 3, quorum: QuorumConfig = CONFIG) -> tuple[list[Node], VoterSet]:
    nodes = [Node(i) for i in range(1, n + 1)]
    voters = static_voter_set({node.node_id: (HOST, node.port) for node in nodes})
    for node in nodes:
        await node.start(voters, seed=node.node_id, quorum=quorum)
    return nodes, voters


def leaders(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.driver is not None and not n.driver.closed and n.driver.is_leader()]


async def elected(nodes: list[Node], timeout: float = 5.0) -> Node:
    await eventually(lambda: len(leaders(nodes)) == 1, timeout, "one leader")
    return leaders(nodes)[0]


def run(coro, timeout: float = 20.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


@pytest.mark.timeout(40)
def test_three_voters_elect_replicate_and_hand_over(caplog):
    caplog.set_level(logging.INFO, logger="strom.raft")

    async def scenario():
        nodes, _ = await start_voters()
        try:
            leader = await elected(nodes)
            leader_id, epoch = leader.driver.leader_and_epoch()
            assert leader_id == leader.node_id
            first = leader.driver.append([b"a", b"b"])
            last = leader.driver.append([b"c"])
            assert last == first + 1
            await leader.driver.wait_committed(last, 5)
            await eventually(lambda: all(n.listener.data() == [b"a", b"b", b"c"] for n in nodes), 5,
                             "the values committed everywhere")
            for n in nodes:
                offsets = [e.offset for e in n.listener.committed]
                assert offsets == list(range(len(offsets)))
                assert (leader_id, epoch) in n.listener.leaders
            assert all(n.driver.leader_and_epoch() == (leader_id, epoch) for n in nodes)

            # A graceful close resigns: EndQuorumEpoch makes a successor canvass at once.
            pending_offset = leader.driver.append([b"maybe"])
            pending = asyncio.ensure_future(leader.driver.wait_committed(pending_offset + 10, 10))
            await asyncio.sleep(0)
            await leader.stop()
            with pytest.raises(NotLeaderError):
                await pending
            rest = [n for n in nodes if n is not leader]
            successor = await elected(rest, 10)
            new_id, new_epoch = successor.driver.leader_and_epoch()
            assert new_id == successor.node_id and new_epoch > epoch
            with pytest.raises(NotLeaderError):
                leader.driver.append([b"x"])
            last = successor.driver.append([b"d"])
            await successor.driver.wait_committed(last, 5)
            await eventually(lambda: all(n.listener.data()[-1:] == [b"d"] for n in rest), 5, "d everywhere")
            assert all(n.listener.data()[:3] == [b"a", b"b", b"c"] for n in rest)
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())
    assert any("became Leader in epoch" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(40)
def test_observer_with_bootstrap_servers_learns_the_leader_and_replicates():
    async def scenario():
        nodes, _ = await start_voters()
        observer = Node(10)
        try:
            leader = await elected(nodes)
            leader.driver.append([b"before"])
            bootstrap = [(HOST, nodes[0].port), (HOST, nodes[2].port)]
            await observer.start(VoterSet(()), bootstrap, seed=10)
            await eventually(lambda: observer.listener.data() == [b"before"], 5, "the observer caught up")
            assert observer.driver.leader_and_epoch() == leader.driver.leader_and_epoch()
            assert not observer.driver.is_leader()
            with pytest.raises(NotLeaderError):
                observer.driver.append([b"no"])
            last = leader.driver.append([b"after"])
            await leader.driver.wait_committed(last, 5)
            await eventually(lambda: observer.listener.data() == [b"before", b"after"], 5,
                             "the observer follows")
            description = leader.driver.describe()
            assert 10 in [o.replica_id for o in description.observers]
        finally:
            await observer.stop(graceful=False)
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())


@pytest.mark.timeout(40)
def test_a_replica_behind_the_log_start_loads_the_leaders_snapshot():
    """KIP-630 over the wire: the leader snapshots and deletes its log prefix; an observer with an
    empty log is answered a snapshot id, copies it with FetchSnapshot and fetches on from its end."""
    async def scenario():
        nodes, _ = await start_voters()
        observer = Node(10)
        try:
            leader = await elected(nodes)
            last = leader.driver.append([b"a", b"b", b"c"])
            await leader.driver.wait_committed(last, 5)
            snapshot_id = leader.driver.create_snapshot(last + 1, leader.listener.data())
            assert snapshot_id.offset == last + 1 and leader.log.log_start_offset == last + 1
            await observer.start(VoterSet(()), [(HOST, leader.port)], seed=10)
            await eventually(lambda: observer.listener.snapshots, 5, "the snapshot loaded")
            snapshot = observer.listener.snapshots[0]
            assert snapshot.snapshot_id == snapshot_id and snapshot.values == [b"a", b"b", b"c"]
            last = leader.driver.append([b"d"])
            await leader.driver.wait_committed(last, 5)
            await eventually(lambda: observer.listener.data() == [b"d"], 5, "fetching past the snapshot")
            assert observer.listener.committed[0].offset >= snapshot_id.offset
        finally:
            await observer.stop(graceful=False)
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())


async def describe_quorum(port: int, version: int):
    conn = KafkaConnection(HOST, port, "test")
    await conn.connect()
    try:
        R = M.DescribeQuorumRequest
        body = R(topics=[R.TopicData(topic_name=wire.METADATA_TOPIC,
                                     partitions=[R.TopicData.PartitionData(partition_index=0)])])
        return await conn.request(wire.DESCRIBE_QUORUM, version, body, timeout=5)
    finally:
        await conn.close()


@pytest.mark.timeout(40)
def test_describe_quorum_over_the_wire_shows_the_voters():
    async def scenario():
        nodes, _ = await start_voters()
        try:
            leader = await elected(nodes)
            last = leader.driver.append([b"v"])
            await leader.driver.wait_committed(last, 5)
            await eventually(lambda: all(n.listener.data() == [b"v"] for n in nodes), 5, "replicated")
            for version in (0, 1, 2):
                d = wire.parse_describe_quorum_response(await describe_quorum(leader.port, version))
                assert d.leader_id == leader.node_id
                assert d.leader_epoch == leader.driver.leader_and_epoch()[1]
                assert d.high_watermark >= last + 1
                assert sorted(v.replica_id for v in d.voters) == [1, 2, 3]
                if version >= 2:
                    assert {v.id: v.endpoints[0].port for v in d.voter_set.voters} == {
                        n.node_id: n.port for n in nodes}
                if version >= 1:
                    assert all(v.last_fetch_ms > 0 for v in d.voters)
            follower = next(n for n in nodes if n is not leader)
            answer = await describe_quorum(follower.port, 2)
            p = answer.topics[0].partitions[0]
            assert p.error_code == m.NOT_LEADER_OR_FOLLOWER and p.leader_id == leader.node_id
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())


@pytest.mark.timeout(40)
def test_a_request_from_another_cluster_is_fenced():
    async def scenario():
        nodes, _ = await start_voters()
        try:
            await elected(nodes)
            key, body = wire.build_request(m.VoteRequest(7, 100, 0, 0, True, 1), "another-cluster", 2)
            conn = KafkaConnection(HOST, nodes[0].port, "test")
            await conn.connect()
            try:
                answer = await conn.request(key, 2, body, timeout=5)
            finally:
                await conn.close()
            assert answer.error_code == wire.INCONSISTENT_CLUSTER_ID
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())


@pytest.mark.timeout(40)
def test_controllers_auto_join_a_standalone_quorum():
    """KIP-853: node 1 is formatted --standalone (kraft.version 1, voters [1]); nodes 2 and 3 are
    formatted without initial controllers and join with controller.quorum.auto.join.enable, over
    AddRaftVoter (the leader probing them with ApiVersions); then, as voters, each sends
    UpdateRaftVoter to the leader."""
    async def scenario():
        nodes = [Node(i) for i in (1, 2, 3)]
        first = nodes[0]
        checkpoint = VoterSet.of([Voter(1, first.directory_id, first.endpoints)])
        first.log.create_snapshot(Snapshot(OffsetAndEpoch(0, 0), 1, checkpoint, []))
        bootstrap = [(HOST, first.port)]
        try:
            for n in nodes:
                await n.start(VoterSet(()), bootstrap, seed=n.node_id, auto_join=True,
                              directory_id=n.directory_id)
            await elected([first], 3)
            last = first.driver.append([b"hello"])
            await first.driver.wait_committed(last, 5)

            def joined() -> bool:
                voters = first.driver.core.voter_set
                return sorted(voters.ids()) == [1, 2, 3] and first.log.high_watermark > 0 and all(
                    n.driver.core.quorum.is_voter for n in nodes)
            await eventually(joined, 15, "nodes 2 and 3 in the voter set")
            assert {v.id: v.directory_id for v in first.driver.core.voter_set.voters} == {
                n.node_id: n.directory_id for n in nodes}
            d = wire.parse_describe_quorum_response(await describe_quorum(first.port, 2))
            assert sorted(v.replica_id for v in d.voters) == [1, 2, 3]
            assert {v.replica_id: v.directory_id for v in d.voters} == {
                n.node_id: n.directory_id for n in nodes}
            leader = first.driver.leader_and_epoch()
            await eventually(lambda: all(n.driver.voter_client.acknowledged == leader for n in nodes[1:]),
                             5, "UpdateVoter acknowledged by the leader")
            last = first.driver.append([b"world"])
            await first.driver.wait_committed(last, 5)
            await eventually(lambda: all(n.listener.data() == [b"hello", b"world"] for n in nodes), 5,
                             "replicated to the new voters")
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario(), 30)


@pytest.mark.timeout(40)
def test_a_broker_style_fetch_v16_gets_record_batches():
    """broker/metadata_follower.py's Fetch: v16, no cluster id, no current leader epoch."""
    async def scenario():
        nodes, _ = await start_voters()
        try:
            leader = await elected(nodes)
            last = leader.driver.append([b"m1", b"m2"])
            await leader.driver.wait_committed(last, 5)
            R = M.FetchRequest
            body = R(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
                     topics=[R.FetchTopic(topic=wire.METADATA_TOPIC, topic_id=wire.METADATA_TOPIC_ID,
                                          partitions=[R.FetchTopic.FetchPartition(
                                              partition=0, fetch_offset=0, last_fetched_epoch=-1,
                                              partition_max_bytes=8 << 20)])])
            body.replica_state = R.ReplicaState(replica_id=101, replica_epoch=7)
            conn = KafkaConnection(HOST, leader.port, "broker-101")
            await conn.connect()
            try:
                answer = await conn.request(wire.FETCH, 16, body, timeout=5)
            finally:
                await conn.close()
            p = answer.responses[0].partitions[0]
            assert p.error_code == 0 and p.current_leader.leader_id == leader.node_id
            entries = decode_entries(bytes(p.records))
            assert [e.value for e in entries if isinstance(e.value, bytes)] == [b"m1", b"m2"]
            assert entries[-1].offset == last and p.high_watermark == last + 1
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario())


class AppendingListener(Listener):
    """Appends b"pong" when it sees b"ping" committed: an append from inside handle_commit."""

    driver: RaftDriver | None = None
    pong_offset: int | None = None

    def handle_commit(self, entries) -> None:
        super().handle_commit(entries)
        if any(e.value == b"ping" for e in entries):
            self.pong_offset = self.driver.append([b"pong"])


@pytest.mark.timeout(20)
def test_a_single_voter_batches_appends_within_the_linger():
    async def scenario():
        node = Node(1)
        node.listener = AppendingListener()
        try:
            await node.start(static_voter_set({1: (HOST, node.port)}))
            driver = node.listener.driver = node.driver
            await eventually(driver.is_leader, 2, "a single voter leads at once")
            appends = []
            core_append = driver.core.append
            driver.core.append = lambda now, values: appends.append(list(values)) or core_append(now, values)
            offsets = [driver.append([b"a"]), driver.append([b"b", b"c"]), driver.append([b"d"])]
            assert offsets[1] == offsets[0] + 2 and offsets[2] == offsets[0] + 3
            await driver.wait_committed(offsets[-1], 5)
            assert appends == [[b"a", b"b", b"c", b"d"]]
            assert [e.offset for e in node.listener.committed if isinstance(e.value, bytes)] == [
                offsets[0], offsets[0] + 1, offsets[1], offsets[2]]
            with pytest.raises(RecordBatchTooLargeError):
                driver.append([bytes(MAX_BATCH_SIZE + 1)])
            last = driver.append([b"ping"])
            await driver.wait_committed(last, 5)
            await eventually(lambda: node.listener.pong_offset is not None, 2, "the listener appended")
            await driver.wait_committed(node.listener.pong_offset, 5)
            assert node.listener.committed[-1].value == b"pong"
            assert node.listener.committed[-1].offset == node.listener.pong_offset
        finally:
            await node.stop()

    run(scenario())


def test_purgatory_completes_in_offset_order_and_fails_on_a_new_epoch():
    async def scenario():
        p = CommitPurgatory()
        done = []
        futs = {o: p.watch(o, 3) for o in (5, 1, 3, 9)}
        for o, f in futs.items():
            f.add_done_callback(lambda f, o=o: done.append(o))
        p.complete(4)
        await asyncio.sleep(0)
        assert done == [1, 3] and len(p) == 2
        p.fail_from(9, NotLeaderError("displaced"))
        assert isinstance(futs[9].exception(), NotLeaderError) and not futs[5].done()
        later = p.watch(12, 4)  # a new leader epoch: the waiters of epoch 3 fail
        assert isinstance(futs[5].exception(), NotLeaderError) and not later.done()
        p.fail_all(NotLeaderError("closed"))
        assert isinstance(later.exception(), NotLeaderError)

    asyncio.run(scenario())


def test_accumulator_closes_a_batch_at_the_size_limit():
    acc = BatchAccumulator(max_batch_size=10)
    assert acc.append([b"12345", b"123"], 100, 2) == 101
    assert acc.append([b"1234"], 999, 2) == 102  # a full batch opens the next one
    assert acc.is_full()
    assert acc.drain() == (100, 2, [[b"12345", b"123"], [b"1234"]])
    assert not acc
    with pytest.raises(RecordBatchTooLargeError):
        acc.append([bytes(11)], 0, 2)
