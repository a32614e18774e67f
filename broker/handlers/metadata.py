"""Metadata and DescribeCluster: the cluster as this broker's metadata image shows it.
Metadata may auto-create topics (auto.create.topics.enable) through the controller.

Brokers are named by the listener the request came on (``ctx.listener_name``; the
inter-broker listener for a request that came on none), as Kafka names them by its request
context's listener: a client connected to EXTERNAL is told EXTERNAL endpoints. The brokers
listed are the unfenced ones with that listener.

Each partition lists its leader and leader epoch, replicas, ISR and offline replicas (replicas
on brokers that are not registered, fenced, or without that listener), as Kafka's KRaft metadata
cache does. A partition without a live leader answers LEADER_NOT_AVAILABLE with leader -1, so
clients retry; one whose leader is registered without that listener answers LISTENER_NOT_FOUND
from v6 (a configuration error, which Kafka names so; LEADER_NOT_AVAILABLE before). A partition
whose leader's listener just refused this broker's replica fetcher (a dead process the
controller has not fenced yet) answers LEADER_NOT_AVAILABLE too, but first the answer waits up
to ``GONE_LEADER_HOLD_S`` for the metadata to move that leadership: the controller fences a
killed broker within tens of milliseconds, and a client given the new leader in its first
answer resumes at once, where one told to retry (or given the dead leader) backs off its
next refresh for up to a second.

Authorized operations (v8+; DescribeCluster): asked for with include_topic_authorized_operations,
each topic named (existing or not, but not an unknown topic id) carries the bit set of what the
principal may do to it; with include_cluster_authorized_operations (Metadata v8-v10, then
DescribeCluster's), the cluster's, or 0 without DESCRIBE on it. Not asked: NOT_REQUESTED
(INT32_MIN). broker/authorizer.py computes the sets."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.handlers.services import wait_for_topics
from metadata.security import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from protocol.topics import topic_name_error
from protocol.types import ZERO_UUID

if TYPE_CHECKING:
    from broker.fetch_waiters import FetchWaiters
    from broker.metadata_follower import MetadataFollower
    from metadata.image import MetadataImage
    from replication.manager import ReplicaManager

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}
AUTO_CREATE_WAIT_S = 2.0
GONE_LEADER_HOLD_S = 0.5  # the controller's own grace before fencing a silent broker
METADATA_CHANGED = "metadata"  # the fetch_waiters key notified with every new metadata image


class MetadataHandlers:
    """Metadata, DescribeCluster and DescribeTopicPartitions over the services they use: the
    metadata image, the cluster's id and this broker's, the listener that names endpoints for
    a request that came on none, the ReplicaManager (its replica fetchers see a gone leader),
    the waiters a new image wakes, the controller's channel (auto-creation), the
    configuration they read (auto.create.topics.enable, max.request.partition.size.limit) and
    the authorizer."""

    def __init__(self, image: Callable[[], MetadataImage], cluster_id: str, node_id: int, listener_name: str,
                 replicas: ReplicaManager, waiters: FetchWaiters, controller: MetadataFollower | None,
                 auto_create_topics: bool, partition_size_limit: int,
                 authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.image = image
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.listener_name = listener_name
        self.replicas = replicas
        self.waiters = waiters
        self.controller = controller
        self.auto_create_topics = auto_create_topics
        self.partition_size_limit = partition_size_limit
        self.authorizer = authorizer
        self.pending_auto_create: set[str] = set()  # topics asked of the controller, not yet in the image

    def apis(self) -> list[Api]:
        return [Api(3, 0, 12, self.metadata), Api(60, 0, 1, self.describe_cluster),
                Api(75, 0, 0, self.describe_topic_partitions)]

    async def metadata(self, ctx: RequestContext, req):
        """Authorized as Kafka's handleTopicMetadataRequest: a topic needs DESCRIBE. An
        all-topics answer leaves out those the principal may not describe; one named (or asked
        by id) answers TOPIC_AUTHORIZATION_FAILED without saying whether it exists (by name: no
        topic id). Auto-creation of a missing topic needs CREATE on the cluster or on the topic;
        one that would be created without it answers TOPIC_AUTHORIZATION_FAILED too."""
        R = M.MetadataResponse
        image = self.image()
        version = ctx.api_version
        listener = self.client_listener(ctx)
        authorizer = self.authorizer
        everything = req.topics is None or (version == 0 and not req.topics)
        by_id: set[str] = set()  # the names of the topics asked for by id
        if everything:
            names: list = sorted(image.topics)
        else:
            if version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in req.topics):
                # Topics by id came with v12 (KIP-516); the response's name cannot be null before.
                return R(brokers=self.brokers(R.MetadataResponseBroker, listener),
                         cluster_id=self.cluster_id, controller_id=self.node_id, topics=[
                             R.MetadataResponseTopic(error_code=Error.INVALID_REQUEST, name=t.name or "")
                             for t in req.topics])
            names = []
            for t in req.topics:
                if t.name is None and t.topic_id in image.topics_by_id:
                    names.append(image.topics_by_id[t.topic_id].name)
                    by_id.add(names[-1])
                elif t.name is None:
                    names.append(t.topic_id)  # an unknown topic id: answered UNKNOWN_TOPIC_ID
                else:
                    names.append(t.name)
        asked = {n for n in names if isinstance(n, str)}
        described = authorizer.filter(ctx, DESCRIBE, TOPIC, asked, log_if_denied=not everything)
        not_creatable: set[str] = set()
        if not everything:
            missing = [n for n in names
                       if isinstance(n, str) and n and n not in image.topics and n in described]
            allow = req.allow_auto_topic_creation if version >= 4 else True
            if missing and allow and self.auto_create_topics:
                if not authorizer.authorize(ctx, CREATE, CLUSTER, CLUSTER_NAME, log_if_denied=False):
                    not_creatable = set(missing) - authorizer.filter(ctx, CREATE, TOPIC, missing)
                    missing = [n for n in missing if n not in not_creatable]
                if missing:
                    await self.auto_create(missing)
        await self.hold_while_leaders_gone([n for n in names if n in described])
        image = self.image()
        topics, authorized = [], []
        for name in names:
            if isinstance(name, bytes):
                topics.append(R.MetadataResponseTopic(error_code=Error.UNKNOWN_TOPIC_ID, name=None,
                                                      topic_id=name))
                continue
            refused = Error.TOPIC_AUTHORIZATION_FAILED
            if name not in described:
                if everything:
                    continue
                if name in by_id:  # a topic id is not secret: it is answered with its id
                    known = image.topics.get(name)
                    topics.append(R.MetadataResponseTopic(error_code=refused, name=None,
                                                          topic_id=known.topic_id if known else ZERO_UUID))
                else:
                    topics.append(R.MetadataResponseTopic(error_code=refused, name=name))
                continue
            if name in not_creatable:
                topics.append(R.MetadataResponseTopic(error_code=refused, name=name,
                                                      is_internal=name in INTERNAL_TOPICS))
                continue
            topic = image.topics.get(name)
            if topic is None:
                code = Error.UNKNOWN_TOPIC_OR_PARTITION
                if name and topic_name_error(name):
                    code = Error.INVALID_TOPIC_EXCEPTION
                elif name in self.pending_auto_create:
                    code = Error.LEADER_NOT_AVAILABLE
                topics.append(R.MetadataResponseTopic(error_code=code, name=name))
            else:
                partitions = [self.partition_metadata(R, index, topic.partitions[index], listener, version)
                              for index in sorted(topic.partitions)]
                topics.append(R.MetadataResponseTopic(
                    error_code=Error.NONE, name=name, topic_id=topic.topic_id,
                    is_internal=name in INTERNAL_TOPICS, partitions=partitions))
            authorized.append(topics[-1])
        response = R(brokers=self.brokers(R.MetadataResponseBroker, listener),
                     cluster_id=self.cluster_id, controller_id=self.node_id, topics=topics)
        if version >= 8:
            if version <= 10 and req.include_cluster_authorized_operations:
                response.cluster_authorized_operations = self.cluster_authorized_operations(ctx)
            if req.include_topic_authorized_operations:
                for t in authorized:  # those described: not an unknown id, not one refused
                    t.topic_authorized_operations = authorizer.authorized_operations(ctx, TOPIC, t.name or "")
        return response

    async def describe_cluster(self, ctx: RequestContext, req):
        """Answered to every principal, as Kafka's computeDescribeClusterResponse; the cluster's
        authorized operations, when asked, are 0 without DESCRIBE on it."""
        R = M.DescribeClusterResponse
        response = R(error_code=Error.NONE, cluster_id=self.cluster_id, controller_id=self.node_id,
                     brokers=self.brokers(R.DescribeClusterBroker, self.client_listener(ctx)))
        if req.include_cluster_authorized_operations:
            response.cluster_authorized_operations = self.cluster_authorized_operations(ctx)
        return response

    def cluster_authorized_operations(self, ctx: RequestContext) -> int:
        """The cluster's bit set, or 0 for a principal that may not describe the cluster (Kafka's
        handleTopicMetadataRequest and computeDescribeClusterResponse)."""
        if not self.authorizer.authorize(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME):
            return 0
        return self.authorizer.authorized_operations(ctx, CLUSTER, CLUSTER_NAME)

    async def describe_topic_partitions(self, ctx: RequestContext, req):
        """KIP-966's view of partitions (Kafka's DescribeTopicPartitionsRequestHandler): topics in
        name order from the cursor's, at most response_partition_limit partitions (capped by
        max.request.partition.size.limit) and a next_cursor where they stop. No topics asked:
        every topic, unknown ones left out; named ones that do not exist answer
        UNKNOWN_TOPIC_OR_PARTITION (or INVALID_TOPIC_EXCEPTION for a name that cannot be one).
        A topic needs DESCRIBE: left out of an all-topics answer, else answered
        TOPIC_AUTHORIZATION_FAILED after the others; each topic described carries the
        principal's authorized operations on it."""
        R = M.DescribeTopicPartitionsResponse
        T = R.DescribeTopicPartitionsResponseTopic
        image = self.image()
        listener = self.client_listener(ctx)
        cursor = req.cursor
        everything = not req.topics
        wanted = image.topics if everything else {t.name for t in req.topics}
        names = sorted(n for n in wanted if n >= (cursor.topic_name if cursor is not None else ""))
        outside = cursor is not None and not everything and cursor.topic_name not in names
        if cursor is not None and (cursor.partition_index < 0 or outside):
            # Kafka refuses the whole request: a cursor must point into the topics asked for.
            return R(topics=[T(error_code=Error.INVALID_REQUEST, name=t.name) for t in req.topics])
        remaining = max(min(self.partition_size_limit, req.response_partition_limit), 1)
        authorizer = self.authorizer
        described = authorizer.filter(ctx, DESCRIBE, TOPIC, names)
        topics, next_cursor = [], None
        refused = [] if everything else [T(error_code=Error.TOPIC_AUTHORIZATION_FAILED, name=name)
                                         for name in names if name not in described]
        for name in names:
            if name not in described:
                continue
            if remaining == 0:
                next_cursor = R.Cursor(topic_name=name, partition_index=0)
                break
            topic = image.topics.get(name)
            if topic is None:
                if not everything:
                    code = (Error.INVALID_TOPIC_EXCEPTION if topic_name_error(name)
                            else Error.UNKNOWN_TOPIC_OR_PARTITION)
                    topics.append(T(error_code=code, name=name, is_internal=name in INTERNAL_TOPICS))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            end = min(len(topic.partitions), start + remaining)
            partitions = [self.described_partition(R, index, topic.partitions[index], listener)
                          for index in range(start, end) if index in topic.partitions]
            topics.append(T(error_code=Error.NONE, name=name, topic_id=topic.topic_id,
                            is_internal=name in INTERNAL_TOPICS, partitions=partitions))
            if end < len(topic.partitions):
                next_cursor = R.Cursor(topic_name=name, partition_index=end)
                break
            remaining -= len(partitions)
        for t in topics:
            t.topic_authorized_operations = authorizer.authorized_operations(ctx, TOPIC, t.name or "")
        return R(topics=topics + refused, next_cursor=next_cursor)

    def described_partition(self, R, index: int, p, listener: str):
        """DescribeTopicPartitions' entry: Metadata's (leader -1 without a live leader on this
        listener, the error left NONE as Kafka leaves it) with the ELR and the last known ELR."""
        m = self.partition_metadata(M.MetadataResponse, index, p, listener, 12)
        return R.DescribeTopicPartitionsResponseTopic.DescribeTopicPartitionsResponsePartition(
            error_code=Error.NONE, partition_index=index, leader_id=m.leader_id, leader_epoch=m.leader_epoch,
            replica_nodes=m.replica_nodes, isr_nodes=m.isr_nodes, eligible_leader_replicas=list(p.elr),
            last_known_elr=list(p.last_known_elr), offline_replicas=m.offline_replicas)

    def client_listener(self, ctx: RequestContext) -> str:
        """The listener whose endpoints answer this request: the one it came on, else (a call
        from inside the broker) the inter-broker listener."""
        return ctx.listener_name or self.listener_name

    def leader_gone(self, p) -> bool:
        """Does this broker's replica fetcher find ``p``'s leader (another broker) gone?"""
        fetchers = self.replicas.fetchers
        return p.leader >= 0 and p.leader != self.node_id and fetchers is not None \
            and fetchers.unreachable(p.leader)

    async def hold_while_leaders_gone(self, names: list) -> None:
        """Wait (at most GONE_LEADER_HOLD_S) while a partition of ``names`` has a leader whose
        listener refused this broker's replica fetcher and the metadata still names it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GONE_LEADER_HOLD_S
        while (left := deadline - loop.time()) > 0:
            image = self.image()
            if not any(self.leader_gone(p) for name in names if (t := image.topics.get(name))
                       for p in t.partitions.values()):
                return
            changed = self.waiters.wait([METADATA_CHANGED])
            try:
                await asyncio.wait({changed}, timeout=left)
            finally:
                self.waiters.forget([METADATA_CHANGED], changed)

    def partition_metadata(self, R, index: int, p, listener: str, version: int):
        """Partition ``index`` (state ``p``) for a client on ``listener``."""
        image = self.image()

        def offline(broker_id: int) -> bool:
            b = image.brokers.get(broker_id)
            return b is None or b.fenced or b.endpoint(listener) is None

        leader = image.brokers.get(p.leader) if p.leader >= 0 else None
        if leader is None:
            error = Error.LEADER_NOT_AVAILABLE
        elif leader.endpoint(listener) is None:
            error = Error.LISTENER_NOT_FOUND if version >= 6 else Error.LEADER_NOT_AVAILABLE
        elif self.leader_gone(p):
            error = Error.LEADER_NOT_AVAILABLE  # its listener refused our replica fetcher: it is gone
        else:
            error = Error.NONE
        return R.MetadataResponseTopic.MetadataResponsePartition(
            error_code=error, partition_index=index,
            leader_id=p.leader if error == Error.NONE else -1, leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=[r for r in p.replicas if offline(r)])

    def brokers(self, cls, listener: str) -> list:
        """The unfenced brokers with ``listener``, at their endpoints on it."""
        out = []
        for b in sorted(self.image().brokers.values(), key=lambda b: b.broker_id):
            if b.fenced:
                continue
            endpoint = b.endpoint(listener)
            if endpoint is not None:
                out.append(cls(broker_id=b.broker_id, host=endpoint[0], port=endpoint[1], rack=b.rack)
                           if "broker_id" in cls._fields else
                           cls(node_id=b.broker_id, host=endpoint[0], port=endpoint[1], rack=b.rack))
        return out

    async def auto_create(self, names: list[str]) -> None:
        """Ask the controller to create the missing topics with the broker defaults and wait
        (briefly) until they are in the image."""
        R = M.CreateTopicsRequest
        wanted = [n for n in names if topic_name_error(n) is None and n not in INTERNAL_TOPICS]
        if not wanted or self.controller is None:
            return
        self.pending_auto_create.update(wanted)
        try:
            request = R(topics=[R.CreatableTopic(name=n, num_partitions=-1, replication_factor=-1)
                                for n in wanted], timeout_ms=5000, validate_only=False)
            try:
                await self.controller.forward(19, 7, request)
            except (ConnectionError, TimeoutError):
                return
            await wait_for_topics(self.image, self.controller, wanted, AUTO_CREATE_WAIT_S)
        finally:
            self.pending_auto_create.difference_update(wanted)

