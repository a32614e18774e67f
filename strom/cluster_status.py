"""What ``strom cluster up`` tells of each process: one status line, from what the processes
themselves answer over the Kafka protocol.

| role       | asked, each poll                           | the line says                               |
|------------|--------------------------------------------|---------------------------------------------|
| controller | DescribeQuorum v0-2, that controller       | leader (epoch, voters, observers), follower |
|            |                                            | of L (epoch), or no leader (epoch)          |
| broker     | Metadata (every topic) and DescribeCluster | unfenced / fenced / not registered; the     |
|            | v2 where served, each broker               | partitions it leads; the ISRs it is in of   |
|            |                                            | the partitions it holds a replica of        |

A controller that is not the raft leader answers DescribeQuorum with NOT_LEADER_OR_FOLLOWER and
the leader and leader epoch it knows, so each controller's line is its own view (a restarted
leader that has not yet handed over names itself: it reads ``resigned``). A broker's line is its
own answer; a broker that gives none (stopped, hung, starting) is described by the **reference
view**: the answer of the lowest-numbered broker that answered this poll (every broker replays
the same metadata log into its image; a lagging one catches up). Metadata lists unfenced
brokers only; DescribeCluster v2 (KIP-1073) with ``include_fenced_brokers`` also lists the
fenced ones, so without v2 a broker missing from the list reads ``fenced or not registered``.
Broker epochs are in no client-facing answer (nor in Kafka's), so the line has none.

Lines are made by pure functions (``controller_line``, ``broker_line``) from parsed answers;
``NodeProbe`` is the IO: one connection per process, ApiVersions once per connection, dropped
and remade after any failure.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error
from protocol.types import ProtocolError

METADATA, API_VERSIONS, DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 3, 18, 55, 60
METADATA_TOPIC = "__cluster_metadata"
PROBE_TIMEOUT_S = 1.0
NO_LEADER = -1


class ProbeFailed(Exception):
    """The process did not answer (refused, timed out, closed, or does not serve the API)."""


@dataclass(frozen=True)
class QuorumAnswer:
    """One controller's DescribeQuorum answer: voters and observers only from the leader."""

    leader_id: int
    leader_epoch: int
    is_leader: bool  # answered as the leader (no NOT_LEADER_OR_FOLLOWER)
    voters: tuple[int, ...] = ()
    observers: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()
    error_code: int = Error.NONE  # LEADER_NOT_AVAILABLE while it has no leader


@dataclass(frozen=True)
class BrokerAnswer:
    """One broker's Metadata (every topic) and, where served, DescribeCluster v2 answer."""

    unfenced: frozenset[int]
    fenced: frozenset[int] | None  # None: DescribeCluster v2 not served, fenced brokers unknown
    partitions: tuple[PartitionInfo, ...]


# ---- the lines ---------------------------------------------------------------------------------


def _ids(ids) -> str:
    return ",".join(str(i) for i in sorted(ids)) or "none"


def controller_line(node_id: int, answer: QuorumAnswer | None) -> str:
    if answer is None:
        return "not answering"
    if answer.is_leader:
        return (f"leader, epoch {answer.leader_epoch}, voters {_ids(answer.voters)}, "
                f"observers {_ids(answer.observers)}")
    if answer.leader_id == node_id:
        return f"resigned, epoch {answer.leader_epoch}"
    if answer.leader_id >= 0:
        return f"follower of {answer.leader_id}, epoch {answer.leader_epoch}"
    return f"no leader, epoch {answer.leader_epoch}"


def registration(node_id: int, view: BrokerAnswer) -> str:
    if node_id in view.unfenced:
        return "unfenced"
    if view.fenced is None:
        return "fenced or not registered"
    return "fenced" if node_id in view.fenced else "not registered"


def broker_line(node_id: int, own: BrokerAnswer | None, reference: tuple[int, BrokerAnswer] | None,
                down: str = "not answering") -> str:
    """From the broker's ``own`` answer; when it gave none, ``down`` says why and the
    ``reference`` view (the broker that gave it, its answer) tells the rest."""
    if own is not None:
        view, head = own, ""
    elif reference is not None:
        view, head = reference[1], f"{down}; per broker {reference[0]}: "
    else:
        return f"{down}; no broker answers Metadata"
    led = sum(1 for p in view.partitions if p.leader == node_id)
    held = [p for p in view.partitions if node_id in p.replicas]
    in_isr = sum(1 for p in held if node_id in p.isr)
    return f"{head}{registration(node_id, view)}, leader of {led} partitions, in {in_isr} of {len(held)} ISRs"


def reference_view(answers: dict[int, BrokerAnswer | None]) -> tuple[int, BrokerAnswer] | None:
    for node_id in sorted(answers):
        if answers[node_id] is not None:
            return node_id, answers[node_id]
    return None


def offline_partitions(view: BrokerAnswer) -> list[PartitionInfo]:
    return [p for p in view.partitions if p.leader == NO_LEADER]


# ---- parsing answers ---------------------------------------------------------------------------


def parse_describe_quorum(response) -> QuorumAnswer:
    if response.error_code != Error.NONE:
        raise ProbeFailed(f"DescribeQuorum: error {response.error_code}")
    for topic in response.topics:
        for p in topic.partitions:
            if topic.topic_name != METADATA_TOPIC or p.partition_index != 0:
                continue
            if p.error_code not in (Error.NONE, Error.NOT_LEADER_OR_FOLLOWER):
                raise ProbeFailed(f"DescribeQuorum: error {p.error_code}")
            return QuorumAnswer(p.leader_id, p.leader_epoch, p.error_code == Error.NONE,
                                tuple(r.replica_id for r in p.current_voters or ()),
                                tuple(r.replica_id for r in p.observers or ()))
    raise ProbeFailed(f"DescribeQuorum: no {METADATA_TOPIC}-0 in the answer")


def parse_metadata(response, fenced: frozenset[int] | None = None) -> BrokerAnswer:
    partitions = []
    for topic in response.topics:
        if topic.error_code != Error.NONE:
            continue
        for p in topic.partitions:
            partitions.append(PartitionInfo(topic.name, p.partition_index, p.leader_id, p.leader_epoch,
                                            tuple(p.replica_nodes), tuple(p.isr_nodes),
                                            tuple(p.offline_replicas or ()), p.error_code))
    partitions.sort(key=lambda p: (p.topic, p.partition))
    return BrokerAnswer(frozenset(b.node_id for b in response.brokers), fenced, tuple(partitions))


def parse_fenced(response) -> frozenset[int]:
    if response.error_code != Error.NONE:
        raise ProbeFailed(f"DescribeCluster: error {response.error_code}")
    return frozenset(b.broker_id for b in response.brokers if b.is_fenced)


# ---- the network -------------------------------------------------------------------------------


def pick_version(served: dict[int, tuple[int, int]], api_key: int, lo: int, hi: int) -> int | None:
    if api_key not in served:
        return None
    s_lo, s_hi = served[api_key]
    version = min(hi, s_hi)
    return version if version >= max(lo, s_lo) else None


class NodeProbe:
    """One connection to one process, made on first use and after any failure."""

    def __init__(self, host: str, port: int, timeout: float = PROBE_TIMEOUT_S,
                 security: ClientSecurity | None = None) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.security = security  # a secured listener's TLS and SASL (protocol/client.py)
        self._conn: KafkaConnection | None = None
        self.served: dict[int, tuple[int, int]] = {}

    async def _connection(self) -> KafkaConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        await self.close()
        conn = KafkaConnection(self.host, self.port, client_id="strom-cluster", security=self.security)
        await conn.connect(self.timeout)
        self._conn = conn
        answer = await conn.request(API_VERSIONS, 0, M.ApiVersionsRequest(), self.timeout)
        if answer.error_code != Error.NONE:
            raise ProbeFailed(f"ApiVersions: error {answer.error_code}")
        self.served = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        return conn

    def serves(self, api_key: int, lo: int, hi: int) -> int | None:
        return pick_version(self.served, api_key, lo, hi)

    async def request(self, api_key: int, lo: int, hi: int, body_for: Callable[[int], Any]) -> Any:
        """The answer at the highest version in [lo, hi] both sides speak; ProbeFailed if none."""
        try:
            conn = await self._connection()
            version = self.serves(api_key, lo, hi)
            if version is None:
                raise ProbeFailed(f"{M.API_NAMES[api_key]} v{lo}-{hi} not served")
            return await conn.request(api_key, version, body_for(version), self.timeout)
        except (OSError, EOFError, TimeoutError, ProtocolError, ProbeFailed) as e:
            await self.close()
            raise ProbeFailed(str(e) or type(e).__name__) from None

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def describe_quorum_request(version: int):
    R = M.DescribeQuorumRequest
    return R(topics=[R.TopicData(topic_name=METADATA_TOPIC,
                                 partitions=[R.TopicData.PartitionData(partition_index=0)])])


def describe_cluster_request(version: int):
    return M.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1,
                                    include_fenced_brokers=True)


async def ask_controller(probe: NodeProbe) -> QuorumAnswer | None:
    try:
        return parse_describe_quorum(await probe.request(DESCRIBE_QUORUM, 0, 2, describe_quorum_request))
    except ProbeFailed:
        return None


async def ask_broker(probe: NodeProbe) -> BrokerAnswer | None:
    """Metadata for every topic, and the fenced brokers when DescribeCluster v2 is served."""
    try:
        metadata = await probe.request(METADATA, 1, 12, lambda v: M.MetadataRequest(
            topics=None, allow_auto_topic_creation=False))
        fenced = None
        if probe.serves(DESCRIBE_CLUSTER, 2, 2) is not None:
            fenced = parse_fenced(await probe.request(DESCRIBE_CLUSTER, 2, 2, describe_cluster_request))
        return parse_metadata(metadata, fenced)
    except ProbeFailed:
        return None
