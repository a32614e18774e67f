"""The controller's shell in one asyncio loop: a single-voter RaftDriver on a MemoryRaftLog, the
QuorumController on it, a protocol.net.Server on 127.0.0.1 serving both, and KafkaConnections
playing brokers. What only the shell does: commit through raft before answering, bootstrap
features on activation, learn of a closed heartbeat connection, and run the session timer."""
from __future__ import annotations

import asyncio
import random

from broker.metadata_follower import registration_features
from controller.quorum_controller import QuorumController
from metadata.image import NO_LEADER
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.dispatch import Dispatcher
from protocol.errors import Error
from protocol.headers import RequestHeader
from protocol.net import Server
from raft import wire
from raft.driver import RaftDriver, RaftDriverConfig
from raft.log import MemoryRaftLog
from raft.quorum_state import QuorumConfig
from raft.voters import Endpoint, static_voter_set

CLUSTER_ID = "controller-shell-test"
HOST = "127.0.0.1"
QUORUM = QuorumConfig(election_timeout_ms=100, fetch_timeout_ms=200, election_backoff_max_ms=50,
                      retry_backoff_ms=10, request_timeout_ms=200, fetch_max_wait_ms=100,
                      election_backoff_base_ms=10)
FENCE_MS = 800  # wide, so a fast path and the grace period stay apart on a loaded machine


class MemoryStore:
    state = None

    def read(self):
        return self.state

    def write(self, state, kraft_version, voter_ids) -> None:
        self.state = state


class Controller:
    """One controller process, in-process."""

    def __init__(self, session_ms: int = 60000, fence_ms: int = FENCE_MS):
        self.server = Server(self._handle, 100 << 20)
        self.port = self.server.bind(HOST, 0)
        self.controller = QuorumController(1, CLUSTER_ID, {
            "num.partitions": 1, "default.replication.factor": 1,
            "broker.session.timeout.ms": session_ms, "strom.broker.disconnect.fence.ms": fence_ms,
        }, rng=random.Random(0))
        config = RaftDriverConfig(1, CLUSTER_ID, static_voter_set({1: (HOST, self.port)}),
                                  (Endpoint("CONTROLLER", HOST, self.port),), None, (), QUORUM,
                                  append_linger_ms=5)
        self.raft = RaftDriver(config, MemoryRaftLog(), MemoryStore(), self.controller, rng=random.Random(1))
        self.controller.attach(self.raft)
        self.dispatcher = Dispatcher(self.controller.apis() + self.raft.apis(),
                                     wire.kraft_supported_features())

    async def _handle(self, frame):
        return await self.dispatcher.handle(frame)

    async def __aenter__(self) -> Controller:
        self.server.start()
        await self.raft.start()
        self.controller.start()
        await eventually(self.controller._active, what="an active controller")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.controller.stop()
        await self.raft.close(graceful=False)
        await self.server.close()

    @property
    def image(self):
        return self.controller.state

    async def connect(self) -> KafkaConnection:
        conn = KafkaConnection(HOST, self.port, client_id="broker")
        await conn.connect()
        return conn


async def eventually(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused."""
    import socket
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


async def register(conn: KafkaConnection, broker_id: int, image, port: int | None = None) -> int:
    R = M.BrokerRegistrationRequest
    response = await conn.request(62, 3, R(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=bytes([broker_id]) * 16,
        listeners=[R.Listener(name="PLAINTEXT", host=HOST, port=port or closed_port())],
        features=registration_features()))
    assert response.error_code == Error.NONE
    epoch = response.broker_epoch
    assert (await heartbeat(conn, broker_id, epoch, image)).is_fenced is False
    return epoch


async def heartbeat(conn: KafkaConnection, broker_id: int, epoch: int, image, want_shut_down=False):
    return await conn.request(63, 1, M.BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=image.last_offset,
        want_shut_down=want_shut_down))


def run(coro, timeout: float = 20.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


def test_activation_bootstraps_metadata_version_eligible_leader_replicas_and_transaction_version_2():
    # Kafka 4.x bootstraps a new cluster with transaction.version 2 (KIP-890 part 2).
    async def body():
        async with Controller() as c:
            await eventually(lambda: "transaction.version" in c.image.features)
            return dict(c.image.features)
    assert run(body()) == {"metadata.version": 25, "eligible.leader.replicas.version": 1,
                           "transaction.version": 2, "group.version": 1}


def test_answers_come_after_the_records_are_committed_and_replayed():
    async def body():
        async with Controller() as c:
            conn = await c.connect()
            epoch = await register(conn, 1, c.image)
            assert not c.image.brokers[1].fenced and c.image.brokers[1].broker_epoch == epoch
            R = M.CreateTopicsRequest
            created = await conn.request(19, 7, R(topics=[R.CreatableTopic(
                name="t", num_partitions=2, replication_factor=1)], timeout_ms=5000))
            assert created.topics[0].error_code == Error.NONE
            assert sorted(c.image.topics["t"].partitions) == [0, 1], "replayed before the answer"
            await conn.close()
    run(body())


async def fence_after_close(listening: bool, fence_ms: int = FENCE_MS, wait_s: float = 5.0) -> float:
    """Broker 2 leads a partition and its heartbeat connection closes; its listener is a live
    socket or a refused port. The time from the close until it is fenced (within ``wait_s``)."""
    async with Controller(fence_ms=fence_ms) as c:
        listener = await asyncio.start_server(lambda r, w: w.close(), HOST, 0) if listening else None
        port = listener.sockets[0].getsockname()[1] if listener else closed_port()
        one, two = await c.connect(), await c.connect()
        await register(one, 1, c.image)
        await register(two, 2, c.image, port)
        R = M.CreateTopicsRequest
        await one.request(19, 7, R(topics=[R.CreatableTopic(
            name="t", num_partitions=-1, replication_factor=-1, assignments=[
                R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=[2, 1])])],
            timeout_ms=5000))
        assert c.image.topics["t"].partitions[0].leader == 2
        closed_at = asyncio.get_running_loop().time()
        await two.close()  # what the kernel does for a process killed with -9
        await eventually(lambda: c.image.brokers[2].fenced, wait_s, what="broker 2 fenced")
        waited = asyncio.get_running_loop().time() - closed_at
        p = c.image.topics["t"].partitions[0]
        assert p.leader == 1 and p.isr == [1]
        await one.close()
        if listener is not None:
            listener.close()
        return waited


def test_closing_the_heartbeat_connection_fences_the_broker_and_moves_its_leaderships():
    # Its listener still accepts (a live process, or one we cannot tell): the grace period runs.
    waited = run(fence_after_close(listening=True))
    assert waited >= FENCE_MS / 1000 * 0.9, "not before the grace period"


def test_a_closed_connection_and_a_refused_listener_fence_without_the_grace_period():
    # A grace period (and a session) of a minute: fenced within the 20 s wait only through the
    # refused listener.
    run(fence_after_close(listening=False, fence_ms=60_000, wait_s=20.0), timeout=40.0)


def test_reconnected_broker_that_heartbeats_at_once_is_not_fenced():
    async def body():
        async with Controller() as c:
            conn = await c.connect()
            epoch = await register(conn, 1, c.image)
            await conn.close()
            again = await c.connect()
            await heartbeat(again, 1, epoch, c.image)
            await asyncio.sleep(FENCE_MS * 3 / 1000)
            fenced = c.image.brokers[1].fenced
            await again.close()
            return fenced
    assert run(body()) is False


def test_session_timer_fences_a_silent_broker_without_any_close():
    async def body():
        async with Controller(session_ms=400) as c:
            conn = await c.connect()
            await register(conn, 1, c.image)
            await eventually(lambda: c.image.brokers[1].fenced, what="session expiry")
            await conn.close()
    run(body())


def test_controlled_shutdown_through_the_shell_moves_leaders_before_granting():
    async def body():
        async with Controller() as c:
            one, two = await c.connect(), await c.connect()
            await register(one, 1, c.image)
            epoch = await register(two, 2, c.image)
            R = M.CreateTopicsRequest
            await one.request(19, 7, R(topics=[R.CreatableTopic(
                name="t", num_partitions=-1, replication_factor=-1, assignments=[
                    R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=[2, 1])])],
                timeout_ms=5000))
            answers = []
            for _ in range(50):
                answer = await heartbeat(two, 2, epoch, c.image, want_shut_down=True)
                answers.append(answer.should_shut_down)
                if answer.should_shut_down:
                    break
                await heartbeat(one, 1, c.image.brokers[1].broker_epoch, c.image)
            p = c.image.topics["t"].partitions[0]
            assert answers[0] is False and answers[-1] is True
            assert p.leader == 1 and 2 not in p.isr and c.image.brokers[2].fenced
            await one.close()
            await two.close()
    run(body())


def test_alter_partition_and_elect_leaders_are_served_by_the_active_controller():
    async def body():
        async with Controller() as c:
            conn = await c.connect()
            await register(conn, 1, c.image)
            epoch2 = await register(conn, 2, c.image)
            R = M.CreateTopicsRequest
            await conn.request(19, 7, R(topics=[R.CreatableTopic(
                name="t", num_partitions=-1, replication_factor=-1, assignments=[
                    R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])],
                timeout_ms=5000))
            topic = c.image.topics["t"]
            p = topic.partitions[0]
            A = M.AlterPartitionRequest
            D = A.TopicData.PartitionData
            shrink = await conn.request(56, 3, A(broker_id=1, broker_epoch=c.image.brokers[1].broker_epoch,
                                                 topics=[A.TopicData(topic_id=topic.topic_id, partitions=[D(
                                                     partition_index=0, leader_epoch=p.leader_epoch,
                                                     partition_epoch=p.partition_epoch,
                                                     new_isr_with_epochs=[D.BrokerState(broker_id=1)])])]))
            assert shrink.topics[0].partitions[0].error_code == Error.NONE
            assert topic.partitions[0].isr == [1]
            E = M.ElectLeadersRequest
            elected = await conn.request(43, 2, E(election_type=0, topic_partitions=[
                E.TopicPartitions(topic="t", partitions=[0])], timeout_ms=1000))
            assert elected.replica_election_results[0].partition_result[0].error_code \
                == Error.ELECTION_NOT_NEEDED
            assert epoch2 > 0 and topic.partitions[0].leader != NO_LEADER
            await conn.close()
    run(body())


def test_a_broker_metadata_follower_registers_reconnects_and_shuts_down_under_control():
    """The broker side of the lifecycle (broker.metadata_follower) against this shell: it is
    unfenced once caught up, heartbeats at once on a new connection (so a reconnect is never
    fenced), and controlled_shutdown() returns once its leaderships have moved."""
    from collections import namedtuple

    from broker.metadata_follower import MetadataFollower

    Listener = namedtuple("Listener", "name host port")

    async def body():
        async with Controller() as c:
            voters = static_voter_set({1: (HOST, c.port)})
            followers = []
            for broker_id in (11, 12):
                config = RaftDriverConfig(broker_id, CLUSTER_ID, voters, (), None, (), QUORUM,
                                          append_linger_ms=5, observer=True)
                listeners = [Listener("PLAINTEXT", HOST, 9000 + broker_id)]
                # Broker 12 heartbeats far less often than the grace period lasts.
                f = MetadataFollower(broker_id, CLUSTER_ID, config, listeners, None, lambda image: None,
                                     heartbeat_ms=200 if broker_id == 11 else 5000)
                await f.start(timeout=10)
                followers.append(f)
            one, two = followers
            assert not c.image.brokers[11].fenced and not c.image.brokers[12].fenced
            R = M.CreateTopicsRequest
            await one.forward(19, 7, R(topics=[R.CreatableTopic(
                name="t", num_partitions=-1, replication_factor=-1, assignments=[
                    R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=[12, 11])])],
                timeout_ms=5000))
            # A reconnect: the old connection closes, the heartbeat on the new one comes at once
            # (the heartbeat interval here is far longer than the fencing grace period).
            await two._drop_connection()
            await two.forward(19, 7, R(topics=[R.CreatableTopic(name="other", num_partitions=1,
                                                                  replication_factor=1)], timeout_ms=5000))
            await asyncio.sleep(FENCE_MS * 3 / 1000)
            assert not c.image.brokers[12].fenced, "a broker that reconnected is not fenced"
            granted = await two.controlled_shutdown(timeout=10)
            p = c.image.topics["t"].partitions[0]
            state = (granted, p.leader, 12 in p.isr, c.image.brokers[12].fenced)
            for f in followers:
                await f.close()
            return state
    assert run(body(), timeout=30) == (True, 11, False, True)


def test_records_past_one_metadata_batch_are_a_policy_violation_and_the_controller_serves_on():
    """90 topics each with a 100 KB config value (whitespace around a number is a valid value):
    9 MB of records, past the 8 MiB a metadata batch holds. Kafka answers an operation past its
    record bound with POLICY_VIOLATION; before, the append's error escaped the handler."""
    async def body():
        async with Controller() as c:
            conn = await c.connect()
            await register(conn, 1, c.image)
            R = M.CreateTopicsRequest
            padded = " " * 100_000 + "5"
            big = await conn.request(19, 7, R(topics=[R.CreatableTopic(
                name=f"t{i}", num_partitions=1, replication_factor=1,
                configs=[R.CreatableTopic.CreatableTopicConfig(name="retention.ms", value=padded)])
                for i in range(90)], timeout_ms=5000))
            assert {(t.error_code, t.error_message) for t in big.topics} == \
                {(Error.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")}
            assert len(big.topics) == 90 and not c.image.topics
            small = await conn.request(19, 7, R(topics=[R.CreatableTopic(
                name="t", num_partitions=1, replication_factor=1)], timeout_ms=5000))
            assert small.topics[0].error_code == Error.NONE and "t" in c.image.topics
            await conn.close()
    run(body())


def test_delete_topics_is_refused_by_any_controller_active_or_not_when_delete_topic_enable_is_false():
    """As Kafka's ControllerApis, which refuses before it asks the quorum controller anything: a
    controller that is not active answers TOPIC_DELETION_DISABLED too, not NOT_CONTROLLER."""
    async def body(enabled: bool):
        controller = QuorumController(1, CLUSTER_ID, {"num.partitions": 1, "default.replication.factor": 1,
                                                      "delete.topic.enable": enabled})
        delete = {api.key: api for api in controller.apis()}[20]
        R = M.DeleteTopicsRequest
        request = R(topics=[R.DeleteTopicState(name="t", topic_id=bytes(16))], timeout_ms=1000)
        return await delete.fn(RequestHeader(20, 6, 1, "broker", 2), request)
    refused = run(body(False))
    assert [(r.name, r.error_code) for r in refused.responses] == [("t", Error.TOPIC_DELETION_DISABLED)]
    not_active = run(body(True))
    assert [(r.name, r.error_code) for r in not_active.responses] == [("t", Error.NOT_CONTROLLER)]
