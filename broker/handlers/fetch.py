"""Fetch, for consumers and for the replica fetchers of other brokers: file slices of each
partition (protocol/net.py sends large ones with sendfile), read through the ReplicaManager.

A consumer (replica id -1) reads below the high watermark; its current_leader_epoch is checked
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Below v11 it reads from the leader only. From v11
its Fetch carries client metadata (rack_id, and the listener it came on), and as in Kafka any
replica serves it, a follower up to its own high watermark (fetch from the closest replica,
KIP-392); a leader with replica.selector.class set may instead answer a partition with
preferred_read_replica (a follower in the client's rack), its high watermark and log start
offset, and no records: that answer goes out at once, like a diverging epoch, and an incremental
fetch session always carries it. A follower never redirects. A follower names
itself with replica_id (up to v14) or replica_state (v15+, with its broker epoch); it reads up to
the log end offset, gets a diverging_epoch (and no records) when its last fetched epoch ends
earlier in the leader's log, and each of its fetches records its log end offset on the leader
(ISR, high watermark). NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the current leader
and, from v16, its endpoint on the listener the request came on (KIP-951), so clients move at
once. v17's replica_directory_id names a raft voter's directory; partitions of topics ignore it.
A follower learns the leader's high watermark from the answers to its fetches: with the next
records, or at replica.fetch.wait.max.ms when none come. A move of the high watermark (its own
fetch's, or one while it waited) does not answer a waiting follower fetch early, and neither does
v18's high_watermark saying the follower lags (KIP-1166 is KRaft's: raft/ serves it). That is
Kafka's ReplicaManager since KAFKA-9952, which removed the early answers because they double a
follower's fetches under load: with records flowing every answer carries the high watermark anyway,
and an acks=all produce waits for the leader's high watermark, never a follower's.

A fetch waits (up to max_wait_ms) until min_bytes are available; it is woken by an append to,
or (a consumer's) a high watermark move of, one of its partitions (broker/fetch_waiters.py), not
by a timer.
Responses respect max_bytes and each partition's partition_max_bytes, but always carry at least
one whole batch of the first partition with data (KIP-74). The broker's fetch.max.bytes caps
max_bytes, and min_bytes with it, for consumers and followers alike (Kafka's
KafkaApis.handleFetchRequest: only its fetch quota's cap is a consumer's alone). Incremental
fetch sessions (KIP-227) are served from broker/fetch_session.py.

Replication quotas (broker/replication_quota.py, the leader's): a follower's read of a partition
throttled here is answered with no records while the follower is out of the partition's ISR
and the leader's replication rate is over leader.replication.throttled.rate (Kafka's
ReplicaManager.shouldLeaderThrottle; its fetch state is still recorded, and an empty read does
not count toward min_bytes, so the fetch waits); the bytes of throttled partitions each answer
carries are recorded in the rate when it goes out.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.fetch_session import FetchSessionCache, FetchSessionError
from metadata.security import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from replication.manager import ClientMetadata

if TYPE_CHECKING:
    from broker.fetch_waiters import FetchWaiters
    from replication.manager import ReplicaManager

LEADER_HINT_ERRORS = (Error.NOT_LEADER_OR_FOLLOWER, Error.FENCED_LEADER_EPOCH)


def _now_ms() -> int:
    return int(asyncio.get_running_loop().time() * 1000)


def _complete(fut) -> None:
    if not fut.done():
        fut.set_result(None)


R = M.FetchResponse


class LeaderQuota(Protocol):
    """The leader's replication quota as the fetch path uses it (broker/replication_quota.py)."""

    @property
    def active(self) -> bool: ...

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def exceeded(self, now_ms: int) -> bool: ...

    def record(self, size: int, now_ms: int) -> None: ...


class FetchHandler:
    """Fetch over the services it uses: the ReplicaManager, the fetch session cache
    (max.incremental.fetch.session.cache.slots), the waiters that appends wake, the
    broker's fetch.max.bytes and the authorizer."""

    def __init__(self, replicas: ReplicaManager, sessions: FetchSessionCache, waiters: FetchWaiters,
                 fetch_max_bytes: int, authorizer: BrokerAuthorizer = ALLOW_ALL,
                 leader_quota: LeaderQuota | None = None):
        self.replicas = replicas
        self.leader_quota = leader_quota
        self.sessions = sessions
        self.waiters = waiters
        self.fetch_max_bytes = fetch_max_bytes
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(1, 4, 18, self.fetch)]

    def denied(self, ctx: RequestContext, wanted, version: int, follower) -> set | None:
        """Kafka's KafkaApis.handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster
        (without it every partition answers TOPIC_AUTHORIZATION_FAILED: None here), a consumer
        READ on each topic; the names of the topics it may not read."""
        authorizer = self.authorizer
        if not authorizer.enabled:
            return set()
        if follower is not None:
            return set() if authorizer.authorize(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME) else None
        names: set[str] = {name for w in wanted
                           if (name := self.replicas.topic_name(w[0]) if version >= 13 else w[0]) is not None}
        return names - authorizer.filter(ctx, READ, TOPIC, names)

    def read_partitions(self, wanted, req, version, follower, budget, listener, first, client, denied):
        """[(key, partition, PartitionData)] for the wanted entries (``budget`` bytes in all), the
        bytes read, the (topic name, partition) pairs read, the leaders to name, and whether to
        answer without waiting (a diverging epoch, a preferred read replica). ``client``: a
        consumer's client metadata (v11+), else None. A follower's fetch state is recorded on the
        ``first`` read of its request only: a read after a wait answers the same fetch (Kafka's
        DelayedFetch reads with updateFetchState off). ``denied``: the topics the principal may
        not read (None: none of them). Also the bytes read of partitions the leader's replication
        quota throttles, which the caller records when the answer goes out."""
        replicas = self.replicas
        total = throttled = 0
        out, names, leaders = [], [], {}
        urgent = False
        quota = self.leader_quota
        if follower is None or quota is None or not quota.active:
            quota = None
        for key, index, fetch_offset, max_bytes, current_epoch, last_epoch, log_start in wanted:
            name = replicas.topic_name(key) if version >= 13 else key
            # Empty records are sent as zero bytes, never null (clients index into them).
            # aborted_transactions: null but for a read_committed read, as Kafka's KafkaApis.
            pd = R.PartitionData(partition_index=index, high_watermark=-1, last_stable_offset=-1,
                                 log_start_offset=-1, records=b"", aborted_transactions=None)
            out.append((key, index, pd))
            names.append((name, index))
            if denied is None:
                pd.error_code = Error.TOPIC_AUTHORIZATION_FAILED
                continue
            if name is None:
                pd.error_code = Error.UNKNOWN_TOPIC_ID
                continue
            if name in denied:
                pd.error_code = Error.TOPIC_AUTHORIZATION_FAILED
                continue
            part_bytes = max(min(max_bytes, budget - total), 0)
            if follower is None:
                res = replicas.read(name, index, fetch_offset, part_bytes, current_leader_epoch=current_epoch,
                                    read_committed=req.isolation_level == 1, min_one_message=total == 0,
                                    client=client)
            else:
                res = replicas.read_for_follower(name, index, follower[0], follower[1], current_epoch,
                                                 fetch_offset, last_epoch, log_start, part_bytes,
                                                 min_one_message=total == 0, update_fetch_state=first)
            pd.error_code = res.error
            pd.high_watermark = res.high_watermark
            pd.last_stable_offset = res.last_stable_offset
            pd.log_start_offset = res.log_start_offset
            if res.aborted_transactions is not None:  # read_committed: a list, maybe empty
                pd.aborted_transactions = [R.AbortedTransaction(producer_id=pid, first_offset=first)
                                           for pid, first in res.aborted_transactions]
            if res.diverging_epoch is not None:
                pd.diverging_epoch = R.PartitionData.EpochEndOffset(
                    epoch=res.diverging_epoch[0], end_offset=res.diverging_epoch[1])
                urgent = True
            if res.preferred_read_replica >= 0:
                pd.preferred_read_replica = res.preferred_read_replica
                urgent = True
            if res.error in LEADER_HINT_ERRORS and version >= 12:
                leader_id, leader_epoch = replicas.current_leader(name, index)
                pd.current_leader = R.PartitionData.LeaderIdAndEpoch(leader_id=leader_id,
                                                                      leader_epoch=leader_epoch)
                node = replicas.leader_node(leader_id, listener)
                if node is not None:
                    leaders[leader_id] = node
            if res.records is not None and res.size:
                if quota is not None and quota.is_throttled(name, index):
                    if not self._in_sync(name, index, follower[0]) and quota.exceeded(_now_ms()):
                        continue  # shouldLeaderThrottle: no records while over the rate
                    throttled += res.size
                pd.records = res.records
                total += res.size
        return out, total, names, leaders, urgent, throttled

    def _in_sync(self, topic: str, index: int, replica_id: int) -> bool:
        partition = self.replicas.partitions.get((topic, index))
        return partition is not None and replica_id in partition.in_sync_replica_ids

    def respond(self, results, session, incremental, version, leaders):
        cache = self.sessions
        topics: dict = {}
        for key, index, pd in results:
            news = bool(pd.records) or pd.diverging_epoch.epoch >= 0 or pd.preferred_read_replica >= 0
            if incremental:
                entry = session.partitions.get((key, index))
                if entry is not None and not cache.changed(
                        entry, news, pd.error_code, pd.high_watermark,
                        pd.last_stable_offset, pd.log_start_offset):
                    continue
            elif session is not None:
                entry = session.partitions.get((key, index))
                if entry is not None:
                    cache.changed(entry, True, 0, pd.high_watermark, pd.last_stable_offset,
                                  pd.log_start_offset)
            topic = topics.get(key)
            if topic is None:
                topic = topics[key] = R.FetchableTopicResponse(
                    topic=key if version < 13 else "", topic_id=key if version >= 13 else bytes(16))
            topic.partitions.append(pd)
        endpoints = [R.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                     for node_id, (host, port, rack) in sorted(leaders.items())] if version >= 16 else []
        return R(error_code=Error.NONE, session_id=session.session_id if session else 0,
                 responses=list(topics.values()), node_endpoints=endpoints)

    async def fetch(self, ctx: RequestContext, req):
        version = ctx.api_version
        replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
        follower = client = None
        if replica_id >= 0:
            follower = (replica_id, req.replica_state.replica_epoch if version >= 15 else -1)
        elif version >= 11:  # Kafka's ClientMetadata: fetch from the closest replica (KIP-392)
            client = ClientMetadata(req.rack_id or "", ctx.listener_name)
        keyed = (lambda t: t.topic_id) if version >= 13 else (lambda t: t.topic)
        # (key, partition, fetch offset, max bytes, current leader epoch, last fetched epoch,
        #  the fetcher's log start offset)
        requested = [(keyed(t), p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                      p.last_fetched_epoch, p.log_start_offset)
                     for t in req.topics for p in t.partitions]
        forgotten = [(keyed(f), p) for f in (req.forgotten_topics_data or []) for p in f.partitions]
        try:
            session, incremental = self.sessions.begin(req.session_id, req.session_epoch, requested,
                                                       forgotten)
        except FetchSessionError as e:
            return R(error_code=e.code, session_id=0, responses=[])
        if session is not None:
            wanted = [(k, p, e.fetch_offset, e.max_bytes, *(e.extra or (-1, -1, -1)))
                      for (k, p), e in session.partitions.items()]
        else:
            wanted = requested
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        max_bytes = min(req.max_bytes if req.max_bytes > 0 else 2**31 - 1, self.fetch_max_bytes)
        min_bytes = max(min(req.min_bytes, max_bytes), 1)
        waiters = self.waiters
        denied = self.denied(ctx, wanted, version, follower)
        first = True
        while True:
            results, total, names, leaders, urgent, throttled = self.read_partitions(
                wanted, req, version, follower, max_bytes, ctx.listener_name, first, client, denied)
            first = False
            remaining = deadline - loop.time()
            failed = any(pd.error_code for _, _, pd in results)
            if total >= min_bytes or remaining <= 0 or failed or urgent:
                if throttled and self.leader_quota is not None:
                    self.leader_quota.record(throttled, _now_ms())
                return self.respond(results, session, incremental, version, leaders)
            replica = follower is not None
            waiter = waiters.wait(names, replica)
            timer = loop.call_later(remaining, _complete, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                waiters.forget(names, waiter, replica)
