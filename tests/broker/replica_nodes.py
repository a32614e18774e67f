"""Brokers without sockets for handler tests: each a ReplicaManager over tmp-dir logs, the
produce/fetch/offsets handlers it serves, and a metadata image the test changes by replaying
Kafka's metadata records (as a broker does).

The replica fetcher and the AlterPartition manager are recorders here: a test plays the
follower by sending Fetch requests itself, and answers AlterPartition proposals itself.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.fetch_session import FetchSessionCache
from broker.fetch_waiters import FetchWaiters
from broker.handlers.fetch import FetchHandler
from broker.handlers.metadata import MetadataHandlers
from broker.handlers.offsets import OffsetsHandlers
from broker.handlers.produce import ProduceHandlers
from engine.config import LogConfig
from engine.manager import LogManager
from ext.batch import build_batch
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.context import ANONYMOUS, KafkaPrincipal, RequestContext, Session
from protocol.dispatch import resolve
from protocol.headers import RequestHeader
from replication.manager import ReplicaManager

TOPIC = "t"
TOPIC_ID = uuid.UUID("7f3c8f0e-3a55-4d5e-9d43-0a1b2c3d4e5f").bytes
LISTENER = "PLAINTEXT"  # every test broker's inter-broker listener
EXTERNAL = "EXTERNAL"  # a second listener, registered where a test asks for it
BASE_TS = int(time.time() * 1000)
FETCH_MAX_BYTES = 57671680  # the broker's fetch.max.bytes: Kafka's default


def endpoint_port(broker_id: int, listener: str = LISTENER) -> int:
    return (19000 if listener == LISTENER else 29000) + broker_id


def endpoint_host(broker_id: int, listener: str = LISTENER) -> str:
    return "127.0.0.1" if listener == LISTENER else f"broker-{broker_id}.example"


def broker_epoch(broker_id: int) -> int:
    return 100 + broker_id


class Cluster:
    """The metadata image every node shares, changed by replaying records. Each broker
    registers ``listeners`` (its endpoints: ``endpoint_host``, ``endpoint_port``)."""

    def __init__(self, brokers=(1, 2, 3), listeners=(LISTENER,)):
        self.image = MetadataImage()
        self.offset = 0
        self.listeners = tuple(listeners)
        for b in brokers:
            self.register(b)

    def replay(self, record) -> None:
        self.image.replay(self.offset, record)
        self.offset += 1

    def register(self, broker_id: int, epoch: int | None = None, fenced: bool = False,
                 listeners=None) -> None:
        R = M.RegisterBrokerRecord
        self.replay(R(broker_id=broker_id, incarnation_id=bytes(16),
                      broker_epoch=broker_epoch(broker_id) if epoch is None else epoch,
                      end_points=[R.BrokerEndpoint(name=name, host=endpoint_host(broker_id, name),
                                                   port=endpoint_port(broker_id, name), security_protocol=0)
                                  for name in (self.listeners if listeners is None else listeners)],
                      rack=None, fenced=fenced))

    def fence(self, broker_id: int) -> None:
        self.replay(M.FenceBrokerRecord(id=broker_id, epoch=self.image.brokers[broker_id].broker_epoch))

    def unfence(self, broker_id: int) -> None:
        self.replay(M.UnfenceBrokerRecord(id=broker_id, epoch=self.image.brokers[broker_id].broker_epoch))

    def create_topic(self, replicas=(1, 2, 3), isr=None, leader=None, partitions=1, name=TOPIC,
                     topic_id=TOPIC_ID, configs=None) -> None:
        self.replay(M.TopicRecord(name=name, topic_id=topic_id))
        for key, value in (configs or {}).items():
            self.replay(M.ConfigRecord(resource_type=2, resource_name=name, name=key, value=value))
        for p in range(partitions):
            self.replay(M.PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=list(replicas),
                isr=list(replicas if isr is None else isr),
                leader=replicas[0] if leader is None else leader, leader_epoch=0, partition_epoch=0))

    def change(self, partition: int = 0, isr=None, leader: int = -2, topic_id=TOPIC_ID) -> None:
        """A PartitionChangeRecord: a new leader (or the same one, re-elected) bumps the epoch."""
        self.replay(M.PartitionChangeRecord(partition_id=partition, topic_id=topic_id,
                                            isr=None if isr is None else list(isr), leader=leader))

    def delete_topic(self, topic_id=TOPIC_ID) -> None:
        self.replay(M.RemoveTopicRecord(topic_id=topic_id))


class RecordingFetchers:
    def __init__(self):
        self.fetching: dict = {}
        self.started: list = []
        self.refused: set[int] = set()  # leaders whose listener refused the replica fetcher

    def unreachable(self, broker_id: int) -> bool:
        return broker_id in self.refused

    def add_partitions(self, partitions) -> None:
        self.fetching.update(partitions)
        self.started.extend(partitions.items())

    def remove_partitions(self, tps) -> None:
        for tp in tps:
            self.fetching.pop(tuple(tp), None)

    async def close(self) -> None:
        self.fetching.clear()


class RecordingAlterPartition:
    def __init__(self):
        self.submitted: list = []

    def submit(self, topic_id, partition, leader_and_isr) -> None:
        self.submitted.append((topic_id, partition, leader_and_isr))

    async def close(self) -> None:
        pass


class Clock:
    def __init__(self, now: int = BASE_TS):
        self.now = now

    def __call__(self) -> int:
        return self.now


class Node:
    """One broker: its logs, its ReplicaManager and the handlers it serves."""

    def __init__(self, tmp_path, node_id: int, cluster: Cluster, clock: Clock | None = None,
                 replica_lag_time_max_ms: int = 10000, log_config: LogConfig | None = None,
                 fetch_max_bytes: int = FETCH_MAX_BYTES, authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.node_id = node_id
        self.authorizer = authorizer
        self.next_producer_id = 1000
        self.cluster = cluster
        self.clock = clock or Clock()
        self.log_config = log_config or LogConfig()
        self.dir = str(tmp_path / f"broker-{node_id}")
        self.logs = LogManager([self.dir], self.log_config, cluster_id="test-cluster", node_id=node_id)
        self.logs.startup()
        self.waiters = FetchWaiters()
        self.replicas = ReplicaManager(
            node_id, self.logs, self.topic_config, listener_name=LISTENER,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            on_changed=lambda topic, partition: self.waiters.notify((topic, partition)), clock=self.clock)
        self.fetchers = self.replicas.fetchers = RecordingFetchers()
        self.alter = self.replicas.alter_partition = RecordingAlterPartition()
        # No transaction coordinator runs here: a test gives the produce handlers one by
        # setting broker.transactions.
        self.broker = SimpleNamespace(transactions=None)
        self.apis = {api.key: api for api in [
            *ProduceHandlers(self.replicas, lambda: self.broker.transactions,
                             self.allocate_producer_id, authorizer).apis(),
            *FetchHandler(self.replicas, FetchSessionCache(10), self.waiters, fetch_max_bytes,
                          authorizer).apis(),
            *OffsetsHandlers(self.replicas, self.waiters, authorizer).apis()]}
        self.sync(startup=True)

    async def allocate_producer_id(self) -> int:
        """The next producer id, as the controller's blocks would give it."""
        self.next_producer_id += 1
        return self.next_producer_id - 1

    def topic_config(self, topic: str) -> LogConfig:
        overrides = self.cluster.image.topic_config(topic)
        return self.log_config.with_overrides(overrides) if overrides else self.log_config

    def sync(self, startup: bool = False) -> None:
        """The metadata changed: the broker applies the image and wakes what waits for it
        (``startup``: its first image since its logs were loaded)."""
        self.replicas.apply_image(self.cluster.image, startup=startup)
        self.waiters.notify_all()

    def log(self, partition: int = 0):
        return self.logs.get_log(TOPIC, partition)

    def partition(self, partition: int = 0):
        return self.replicas.partitions[(TOPIC, partition)]

    async def call(self, api_key: int, version: int, request, listener_name: str | None = None,
                   principal: KafkaPrincipal = ANONYMOUS):
        """The handler's answer to a request that came on ``listener_name`` (None: on no
        listener, as a call from inside the broker) from ``principal``."""
        return await resolve(await self.apis[api_key].fn(
            context(api_key, version, listener_name, principal), request))

    # ---- requests ---------------------------------------------------------------------------

    async def produce(self, n: int = 10, acks: int = -1, timeout_ms: int = 5000, version: int = 11,
                      partition: int = 0, **batch):
        R = M.ProduceRequest
        data = R.PartitionProduceData(index=partition, records=memoryview(records(n, **batch)))
        request = R(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            R.TopicProduceData(name=TOPIC, topic_id=TOPIC_ID, partition_data=[data])])
        response = await self.call(0, version, request)
        return None if response is None else response.responses[0].partition_responses[0]

    def fetch_request(self, fetch_offset: int, replica_id: int = -1, last_fetched_epoch: int = -1,
                      current_leader_epoch: int = -1, max_wait_ms: int = 0, min_bytes: int = 1,
                      replica_epoch: int | None = None, log_start_offset: int = 0, partition: int = 0,
                      max_bytes: int = 1 << 20, high_watermark: int = 2**63 - 1):
        R = M.FetchRequest
        if replica_epoch is None:
            replica_epoch = broker_epoch(replica_id) if replica_id >= 0 else -1
        return R(replica_id=replica_id, replica_state=R.ReplicaState(replica_id=replica_id,
                                                                   replica_epoch=replica_epoch),
                 max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
                 session_id=0, session_epoch=-1,
                 topics=[R.FetchTopic(topic=TOPIC, topic_id=TOPIC_ID, partitions=[R.FetchPartition(
                     partition=partition, current_leader_epoch=current_leader_epoch,
                     fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                     log_start_offset=log_start_offset, partition_max_bytes=1 << 20,
                     high_watermark=high_watermark)])],
                 forgotten_topics_data=[], rack_id="")

    async def fetch(self, fetch_offset: int, version: int = 16, **kw):
        """One partition's answer (and the whole response)."""
        response = await self.call(1, version, self.fetch_request(fetch_offset, **kw))
        return response.responses[0].partitions[0], response

    async def replica_fetch(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int = -1,
                            current_leader_epoch: int = 0, version: int = 17, **kw):
        pd, _ = await self.fetch(fetch_offset, version=version, replica_id=replica_id,
                                 last_fetched_epoch=last_fetched_epoch,
                                 current_leader_epoch=current_leader_epoch, **kw)
        return pd

    async def list_offsets(self, timestamp: int, replica_id: int = -1, current_leader_epoch: int = -1,
                           version: int = 7, partition: int = 0):
        R = M.ListOffsetsRequest
        request = R(replica_id=replica_id, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=TOPIC, partitions=[R.ListOffsetsPartition(partition_index=partition,
                                                         current_leader_epoch=current_leader_epoch,
                                                         timestamp=timestamp)])])
        return (await self.call(2, version, request)).topics[0].partitions[0]

    async def offset_for_leader_epoch(self, leader_epoch: int, current_leader_epoch: int = -1,
                                      replica_id: int = -1, partition: int = 0):
        R = M.OffsetForLeaderEpochRequest
        request = R(replica_id=replica_id, topics=[R.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
        return (await self.call(23, 4, request)).topics[0].partitions[0]

    async def delete_records(self, offset: int, partition: int = 0):
        R = M.DeleteRecordsRequest
        request = R(topics=[R.DeleteRecordsTopic(name=TOPIC, partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
            timeout_ms=1000)
        return (await self.call(21, 2, request)).topics[0].partitions[0]

    def metadata_handlers(self, controller=None) -> MetadataHandlers:
        """The Metadata handlers over this broker's image; auto-creation on with a
        ``controller`` (its ``forward`` and ``wait_for_change``), else off."""
        return MetadataHandlers(lambda: self.cluster.image, "test-cluster", self.node_id, LISTENER,
                                self.replicas, self.waiters, controller,
                                auto_create_topics=controller is not None, partition_size_limit=2000,
                                authorizer=self.authorizer)

    async def metadata(self, version: int = 12, listener_name: str | None = None):
        api = {a.key: a for a in self.metadata_handlers().apis()}[3]
        R = M.MetadataRequest
        request = R(topics=None, allow_auto_topic_creation=False)
        return await resolve(await api.fn(context(3, version, listener_name), request))

    async def describe_topic_partitions(self, topics=(), limit: int = 2000, cursor=None,
                                        listener_name: str | None = None):
        """DescribeTopicPartitions of ``topics`` (none: all); ``cursor`` (topic, partition)."""
        api = {a.key: a for a in self.metadata_handlers().apis()}[75]
        R = M.DescribeTopicPartitionsRequest
        at = None if cursor is None else R.Cursor(topic_name=cursor[0], partition_index=cursor[1])
        request = R(topics=[R.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
                    cursor=at)
        return await resolve(await api.fn(context(75, 0, listener_name), request))

    async def describe_cluster(self, listener_name: str | None = None):
        api = {a.key: a for a in self.metadata_handlers().apis()}[60]
        return await resolve(await api.fn(context(60, 1, listener_name), M.DescribeClusterRequest()))


def context(api_key: int, version: int, listener_name: str | None = None,
            principal: KafkaPrincipal = ANONYMOUS) -> RequestContext:
    """A request's context: its header (flexible from the API's first flexible version,
    near enough for these APIs) and a PLAINTEXT session of ``principal`` on ``listener_name``."""
    header = RequestHeader(api_key, version, 1, "test", 2 if version >= 9 else 1, listener_name)
    return RequestContext(header, Session(listener_name=listener_name, client_address="127.0.0.1",
                                          principal=principal))


def records(n: int = 10, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
            tag: int = 0, ts: int = BASE_TS) -> bytearray:
    """A producer's batch of n records (base offset 0, as a producer sends it), timestamps
    ts, ts + 1, ..."""
    return bytearray(build_batch(
        [(b"k", b"%d-%d" % (tag, i), [], ts + i) for i in range(n)],
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence))


async def settle() -> None:
    """Let parked tasks run up to their next wait."""
    for _ in range(5):
        await asyncio.sleep(0)
