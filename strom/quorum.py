"""The operator's side of the KRaft quorum (KIP-853): what ``strom format`` bootstraps, and
``strom quorum`` (Kafka's kafka-metadata-quorum: describe, add-controller, remove-controller).

Bootstrapping a controller (``strom format``); a broker-only node bootstraps nothing:

| flags                   | controller.quorum.voters | metadata directory.id | bootstrap checkpoint          |
|-------------------------|--------------------------|-----------------------|-------------------------------|
| --standalone            | unset, or only this node | new                   | kraft.version 1, [this node]  |
| --initial-controllers L | unset, or L's ids        | L's for node.id (*)   | kraft.version 1, L            |
| none (**)               | set                      | new                   | none: kraft.version 0, static |
| none (**)               | unset                    | new                   | none: an observer until added |

(*) new if node.id is not in L.  (**) or --no-initial-controllers.

No checkpoint for a static quorum or an observer, as Kafka's formatter: an absent bootstrap
checkpoint means kraft.version 0 with controller.quorum.voters (or, with no voters, a replica
that learns the voter set from the leader's log). The checkpoint
(``<metadata.log.dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``:
SnapshotHeader, KRaftVersion, Voters, SnapshotFooter) is written by raft.engine_log before
meta.properties, which is the commit point of a format: a crash in between leaves a directory
that formats again.

``--initial-controllers`` entries, comma-separated; uuid is a Kafka Uuid (22 characters of
URL-safe base64), host may be ``[ipv6]``:

    id-uuid@host:port      KIP-853's --controller-quorum-voters syntax
    id@host:port:uuid      Kafka 3.9+'s --initial-controllers syntax

``strom quorum`` talks to controllers (--bootstrap-controller) or to brokers
(--bootstrap-server: a broker forwards DescribeQuorum, AddRaftVoter and RemoveRaftVoter to the
active controller, as Kafka 4's do) over the Kafka protocol: ApiVersions picks each request's
version, and a NOT_LEADER_OR_FOLLOWER answer is followed to the leader when an answer names it
(DescribeQuorum v2 carries the voters' endpoints). Building requests and formatting answers are
pure functions below; ``send_to_leader`` is the only IO.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.checkpoint import uuid_from_str, uuid_to_str
from engine.errors import ConfigError
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error
from protocol.types import ProtocolError
from raft.voters import Endpoint, Voter, VoterSet
from strom.config import ServerConfig

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
ADD_VOTER_TIMEOUT_MS = 30_000  # KIP-853: the tool sets AddVoter's TimeoutMs to 30 s
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0

API_VERSIONS, DESCRIBE_QUORUM, DESCRIBE_CLUSTER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 18, 55, 60, 80, 81
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster endpoint_type (KIP-919)
ZERO_UUID = bytes(16)


class QuorumError(RuntimeError):
    """A failed quorum request: a Kafka error name (NETWORK_EXCEPTION if unreachable) and message."""

    def __init__(self, error: str, message: str | None = None):
        super().__init__(f"{error}: {message}" if message else error)
        self.error = error


# ---- strom format: the bootstrap plan ----------------------------------------------------------


@dataclass(frozen=True)
class BootstrapPlan:
    """What ``strom format`` writes for the metadata log of one node."""

    mode: str  # "standalone", "initial-controllers", "static", "observer" or "broker"
    kraft_version: int  # 1 for an observer controller: only a kraft.version 1 quorum can add it
    voters: VoterSet | None  # the VotersRecord of the bootstrap checkpoint; None: no checkpoint
    directory_id: str | None  # the metadata dir's directory.id; None: a new one

    def describe(self) -> str:
        if self.voters is not None:
            return (f"bootstrap checkpoint with kraft.version {self.kraft_version} and voters "
                    + ", ".join(format_voter(v) for v in self.voters.voters))
        if self.mode == "static":
            return "no bootstrap checkpoint: a kraft.version 0 quorum of controller.quorum.voters"
        if self.mode == "observer":
            return ("no voters: this controller starts as an observer; add it with "
                    "`strom quorum --bootstrap-controller HOST:PORT add-controller --config FILE`")
        return "no metadata quorum bootstrap (broker)"


def format_voter(voter: Voter) -> str:
    endpoints = ",".join(format_endpoint(e.name, e.host, e.port) for e in voter.endpoints)
    uuid = "" if voter.directory_id is None else f"-{uuid_to_str(voter.directory_id)}"
    return f"{voter.id}{uuid}@{endpoints}"


def format_endpoint(name: str, host: str, port: int) -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def parse_directory_id(flag: str, text: str) -> bytes:
    """A Kafka Uuid string, in its canonical spelling, not one of Kafka's reserved ids."""
    try:
        return _directory_id(text)
    except ValueError as e:
        raise ConfigError(flag, str(e)) from None


def _directory_id(text: str) -> bytes:
    raw = uuid_from_str(text) if re.fullmatch(r"[A-Za-z0-9_-]{22}", text) else None
    if raw is None or uuid_to_str(raw) != text:
        raise ValueError(f"{text!r} is not a directory id (22 characters of URL-safe base64)")
    if int.from_bytes(raw, "big") < 100:
        raise ValueError(f"{text!r} is a reserved directory id")
    return raw


_HOST = r"(?P<host>\[[^\]]+\]|[^:@\[\]/,]+)"
_KIP_VOTER = re.compile(rf"^(?P<id>\d+)-(?P<uuid>[^@]+)@{_HOST}:(?P<port>\d+)$")
_KAFKA_VOTER = re.compile(rf"^(?P<id>\d+)@{_HOST}:(?P<port>\d+):(?P<uuid>.+)$")


def parse_initial_controllers(text: str, listener: str,
                              flag: str = "--initial-controllers") -> VoterSet:
    """``id-uuid@host:port,...`` (or ``id@host:port:uuid,...``) as kraft.version 1 voters on
    the controller listener ``listener``; ConfigError naming the flag and the bad entry."""
    voters: dict[int, Voter] = {}
    entries = [e.strip() for e in text.split(",")]
    if not any(entries):
        raise ConfigError(flag, "expected id-uuid@host:port,... (no entries given)")
    for entry in entries:
        m = _KIP_VOTER.match(entry) or _KAFKA_VOTER.match(entry)
        if m is None:
            raise ConfigError(flag, f"bad entry {entry!r}: expected id-uuid@host:port "
                                    "(or id@host:port:uuid)")
        port = int(m.group("port"))
        if not 0 < port < 65536:
            raise ConfigError(flag, f"bad entry {entry!r}: port {port} out of range")
        voter_id = int(m.group("id"))
        if voter_id in voters:
            raise ConfigError(flag, f"bad entry {entry!r}: voter {voter_id} is listed twice")
        try:
            directory_id = _directory_id(m.group("uuid"))
        except ValueError as e:
            raise ConfigError(flag, f"bad entry {entry!r}: {e}") from None
        host = m.group("host").strip("[]")
        voters[voter_id] = Voter(voter_id, directory_id, (Endpoint(listener, host, port),), 0, 1)
    return VoterSet.of(voters.values())


def controller_endpoints(config: ServerConfig) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(lsn.name, lsn.host, lsn.port) for lsn in config.advertised_controller_listeners())


def plan_bootstrap(config: ServerConfig, new_directory_id: str, *, standalone: bool = False,
                   initial_controllers: str | None = None,
                   no_initial_controllers: bool = False) -> BootstrapPlan:
    """The table in the module docstring; ``new_directory_id`` is used when the node makes its
    own (it must be known before the standalone VotersRecord is written)."""
    if standalone and initial_controllers is not None:
        raise ConfigError("--standalone", "cannot be used together with --initial-controllers")
    if no_initial_controllers and (standalone or initial_controllers is not None):
        other = "--standalone" if standalone else "--initial-controllers"
        raise ConfigError("--no-initial-controllers", f"cannot be used together with {other}")
    if "controller" not in config.roles:
        if standalone or initial_controllers is not None:
            flag = "--standalone" if standalone else "--initial-controllers"
            raise ConfigError(flag, "only for a controller (process.roles has no controller)")
        return BootstrapPlan("broker", 0, None, None)
    if standalone:
        me = Voter(config.node_id, uuid_from_str(new_directory_id), controller_endpoints(config), 0, 1)
        plan = BootstrapPlan("standalone", 1, VoterSet.of([me]), new_directory_id)
        flag = "--standalone"
    elif initial_controllers is not None:
        voters = parse_initial_controllers(initial_controllers, config.controller_listener_names[0])
        mine = voters.get(config.node_id)
        directory_id = uuid_to_str(mine.directory_id) if mine is not None else None
        plan = BootstrapPlan("initial-controllers", 1, voters, directory_id)
        flag = "--initial-controllers"
    elif config.voters:
        return BootstrapPlan("static", 0, None, None)
    else:
        return BootstrapPlan("observer", 1, None, None)
    if config.voters and set(config.voters) != plan.voters.ids():
        raise ConfigError(flag, f"controller.quorum.voters names voters {sorted(config.voters)} but "
                                f"{flag} bootstraps {sorted(plan.voters.ids())}: for a dynamic quorum "
                                "remove controller.quorum.voters and set controller.quorum.bootstrap.servers")
    return plan


# ---- strom quorum: requests -------------------------------------------------------------------


def parse_addresses(flag: str, text: str) -> list[tuple[str, int]]:
    out = []
    for item in (i.strip() for i in text.split(",")):
        m = re.fullmatch(r"(\[[^\]]+\]|[^:\[\]]*):(\d+)", item)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise ConfigError(flag, f"expected host:port,..., got {item!r}")
        out.append((m.group(1).strip("[]") or "localhost", int(m.group(2))))
    return out


def build_describe_quorum():
    R = M.DescribeQuorumRequest
    return R(topics=[R.TopicData(topic_name=METADATA_TOPIC,
                                 partitions=[R.TopicData.PartitionData(partition_index=0)])])


def build_add_raft_voter(cluster_id: str | None, voter_id: int, directory_id: bytes,
                         endpoints: tuple[Endpoint, ...], timeout_ms: int = ADD_VOTER_TIMEOUT_MS):
    R = M.AddRaftVoterRequest
    return R(cluster_id=cluster_id, timeout_ms=timeout_ms, voter_id=voter_id,
             voter_directory_id=directory_id,
             listeners=[R.Listener(name=e.name, host=e.host, port=e.port) for e in endpoints])


def build_remove_raft_voter(voter_id: int, directory_id: bytes, cluster_id: str | None = None):
    return M.RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=voter_id, voter_directory_id=directory_id)


@dataclass(frozen=True)
class NewController:
    """What add-controller reads from the new controller's config file and meta.properties."""

    voter_id: int
    directory_id: bytes
    endpoints: tuple[Endpoint, ...]
    cluster_id: str


def read_new_controller(config_path: str) -> NewController:
    from engine.manager import read_meta_properties
    from strom.config import read_config_file

    config = read_config_file(config_path)
    if "controller" not in config.roles:
        raise ConfigError("process.roles", f"has no controller in {config_path}: "
                                           "is this a controller's configuration?")
    props = read_meta_properties(config.metadata_log_dir)
    if props is None:
        raise ConfigError("--config", f"{config.metadata_log_dir} (the metadata log dir of {config_path}) "
                                      "is not formatted: run `strom format` first")
    if not props.get("directory.id"):
        raise ConfigError("--config", f"no directory.id in {config.metadata_log_dir}/meta.properties")
    directory_id = parse_directory_id("directory.id", props["directory.id"])
    return NewController(config.node_id, directory_id, controller_endpoints(config), props["cluster.id"])


def format_added(c: NewController, dry_run: bool = False) -> str:
    verb = "DRY RUN of adding" if dry_run else "Added"
    endpoints = ", ".join(format_endpoint(e.name, e.host, e.port) for e in c.endpoints)
    return (f"{verb} controller {c.voter_id} with directory id {uuid_to_str(c.directory_id)} "
            f"and endpoints: {endpoints}")


def format_removed(voter_id: int, directory_id: bytes, dry_run: bool = False) -> str:
    """MetadataQuorumCommand.handleRemoveController's printf("%s KRaft controller ...") of
    "DRY RUN of removing " or "Removed ": two spaces before KRaft, as Kafka prints (and its
    MetadataQuorumCommandUnitTest expects)."""
    verb = "DRY RUN of removing " if dry_run else "Removed "
    return f"{verb} KRaft controller {voter_id} with directory id {uuid_to_str(directory_id)}"


# ---- strom quorum: answers --------------------------------------------------------------------


def _error_name(code: int) -> str:
    try:
        return Error(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def check_error(code: int, message: str | None = None) -> None:
    if code != Error.NONE:
        raise QuorumError(_error_name(code), message)


def metadata_partition(response):
    """The __cluster_metadata-0 entry of a DescribeQuorum answer; QuorumError for any error."""
    check_error(response.error_code, getattr(response, "error_message", None))
    for topic in response.topics:
        for p in topic.partitions:
            if topic.topic_name == METADATA_TOPIC and p.partition_index == 0:
                check_error(p.error_code, getattr(p, "error_message", None))
                return p
    raise QuorumError("UNKNOWN_TOPIC_OR_PARTITION", f"no {METADATA_PARTITION_DIR} in the answer")


def response_error(api_key: int, response) -> int:
    if response.error_code != Error.NONE or api_key != DESCRIBE_QUORUM:
        return response.error_code
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != Error.NONE:
                return p.error_code
    return Error.NONE


def leader_address(response) -> tuple[str, int] | None:
    """The leader a DescribeQuorum answer names with an endpoint (v2 ``nodes``), if any."""
    for topic in response.topics or []:
        for p in topic.partitions:
            if p.leader_id < 0:
                continue
            for node in response.nodes or []:
                if node.node_id == p.leader_id and node.listeners:
                    return node.listeners[0].host, node.listeners[0].port
    return None


def _endpoints(response, replica_id: int) -> list[str]:
    for node in response.nodes or []:
        if node.node_id == replica_id:
            return [format_endpoint(lsn.name, lsn.host, lsn.port) for lsn in node.listeners]
    return []


def _json_replica(response, r) -> str:
    """Kafka's ``{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h:9093"]}``: the
    directory id only when known (not zero), endpoints only when the answer has any."""
    text = f'{{"id": {r.replica_id}'
    if r.replica_directory_id and r.replica_directory_id != ZERO_UUID:
        text += f', "directoryId": "{uuid_to_str(r.replica_directory_id)}"'
    endpoints = _endpoints(response, r.replica_id)
    if endpoints:
        text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]"
    return text + "}"


def _leader_state(p):
    for r in [*p.current_voters, *p.observers]:
        if r.replica_id == p.leader_id:
            return r
    raise QuorumError("LEADER_NOT_AVAILABLE", f"the leader {p.leader_id} is not among the replicas")


def format_status(response, cluster_id: str) -> str:
    """``describe --status``, as kafka-metadata-quorum prints it (labels padded to 24)."""
    p = metadata_partition(response)
    leader = _leader_state(p)
    if p.current_voters:
        laggard = min(p.current_voters, key=lambda r: r.log_end_offset)
    else:
        laggard = leader
    max_lag = leader.log_end_offset - laggard.log_end_offset
    if laggard is leader:
        max_lag_ms = 0
    elif leader.last_caught_up_timestamp != -1 and laggard.last_caught_up_timestamp != -1:
        max_lag_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        max_lag_ms = -1
    rows = [
        ("ClusterId:", cluster_id),
        ("LeaderId:", p.leader_id),
        ("LeaderEpoch:", p.leader_epoch),
        ("HighWatermark:", p.high_watermark),
        ("MaxFollowerLag:", max_lag),
        ("MaxFollowerLagTimeMs:", max_lag_ms),
        ("CurrentVoters:", "[" + ", ".join(_json_replica(response, r) for r in p.current_voters) + "]"),
        ("CurrentObservers:", "[" + ", ".join(_json_replica(response, r) for r in p.observers) + "]"),
    ]
    return "\n".join(f"{label:<24}{value}" for label, value in rows)


REPLICATION_HEADERS = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status")


def format_replication(response, now_ms: int | None = None) -> str:
    """``describe --replication``: the leader, then the other voters, then the observers, as
    kafka-metadata-quorum's table (each cell padded to its column and followed by a tab).
    With ``now_ms`` (--human-readable) timestamps read ``N ms ago``."""
    p = metadata_partition(response)
    leader = _leader_state(p)

    def when(ts: int) -> str:
        if ts == -1:
            return "-1"
        return str(ts) if now_ms is None else f"{max(0, now_ms - ts)} ms ago"

    def row(r, status: str) -> list[str]:
        return [str(r.replica_id), uuid_to_str(r.replica_directory_id or ZERO_UUID), str(r.log_end_offset),
                str(leader.log_end_offset - r.log_end_offset), when(r.last_fetch_timestamp),
                when(r.last_caught_up_timestamp), status]

    rows = [row(leader, "Leader")]
    rows += [row(r, "Follower") for r in p.current_voters if r is not leader]
    rows += [row(r, "Observer") for r in p.observers if r is not leader]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(REPLICATION_HEADERS)]
    return "\n".join("".join(f"{cell:<{w}}\t" for cell, w in zip(line, widths))
                     for line in [list(REPLICATION_HEADERS), *rows])


# ---- strom quorum: the network ----------------------------------------------------------------


def pick_version(served: dict[int, tuple[int, int]], api_key: int, lo: int, hi: int) -> int | None:
    """The highest version both sides speak, or None."""
    if api_key not in served:
        return None
    s_lo, s_hi = served[api_key]
    version = min(hi, s_hi)
    return version if version >= max(lo, s_lo) else None


async def _connect(address: tuple[str, int], timeout: float, security: ClientSecurity | None = None):
    conn = KafkaConnection(*address, client_id="strom-quorum", security=security)
    await conn.connect(min(timeout, CONNECT_TIMEOUT_S))
    try:
        answer = await conn.request(API_VERSIONS, 0, M.ApiVersionsRequest(), timeout)
        check_error(answer.error_code)
    except BaseException:
        await conn.close()
        raise
    return conn, {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}


@dataclass
class Reply:
    response: Any
    version: int
    address: tuple[str, int]


async def send_to_leader(addresses: list[tuple[str, int]], api_key: int, lo: int, hi: int,
                         body_for: Callable[[int], Any], timeout: float = REQUEST_TIMEOUT_S,
                         security: ClientSecurity | None = None) -> Reply:
    """Send to each address in turn until one answers without NOT_LEADER_OR_FOLLOWER; an
    answer (or, for other requests, a DescribeQuorum asked of the same node) that names the
    leader's endpoint puts the leader next. Every address is tried at most once; an error
    other than NOT_LEADER_OR_FOLLOWER is the answer. QuorumError if nobody answered."""
    pending, tried = list(addresses), set()
    last: QuorumError | None = None
    name = M.API_NAMES[api_key]
    while pending:
        address = pending.pop(0)
        if address in tried:
            continue
        tried.add(address)
        where = f"{address[0]}:{address[1]}"
        try:
            conn, served = await _connect(address, timeout, security)
        except (OSError, QuorumError) as e:
            last = QuorumError("NETWORK_EXCEPTION", f"{where}: {str(e) or type(e).__name__}")
            continue
        try:
            version = pick_version(served, api_key, lo, hi)
            if version is None:
                last = QuorumError("UNSUPPORTED_VERSION", f"{where} does not serve {name} v{lo}-{hi}")
                continue
            response = await conn.request(api_key, version, body_for(version), timeout)
            if response_error(api_key, response) != Error.NOT_LEADER_OR_FOLLOWER:
                return Reply(response, version, address)
            leader = leader_address(response) if api_key == DESCRIBE_QUORUM else None
            dq = pick_version(served, DESCRIBE_QUORUM, 0, 2)
            if leader is None and api_key != DESCRIBE_QUORUM and dq is not None:
                answer = await conn.request(DESCRIBE_QUORUM, dq, build_describe_quorum(), timeout)
                leader = leader_address(answer)
            if leader is not None:
                pending.insert(0, leader)
            last = QuorumError("NOT_LEADER_OR_FOLLOWER", f"{where} is not the quorum leader"
                               + ("" if leader is not None else " and did not name it"))
        except (OSError, ProtocolError) as e:
            last = QuorumError("NETWORK_EXCEPTION", f"{where}: {str(e) or type(e).__name__}")
        finally:
            await conn.close()
    raise last or QuorumError("NETWORK_EXCEPTION", "no address to send to")


async def fetch_cluster_id(address: tuple[str, int], timeout: float = REQUEST_TIMEOUT_S,
                           security: ClientSecurity | None = None) -> str:
    """ClusterId for --status, from DescribeCluster: a controller answers endpoint_type 2, a
    broker (--bootstrap-server) endpoint_type 1; a node that does not serve it gives "unknown"."""
    try:
        conn, served = await _connect(address, timeout, security)
    except (OSError, QuorumError):
        return "unknown"
    try:
        version = pick_version(served, DESCRIBE_CLUSTER, 0, 1)
        if version is None:
            return "unknown"
        for endpoint_type in (CONTROLLER_ENDPOINTS, BROKER_ENDPOINTS):
            body = M.DescribeClusterRequest(endpoint_type=endpoint_type)
            answer = await conn.request(DESCRIBE_CLUSTER, version, body, timeout)
            if answer.error_code == Error.NONE:
                return answer.cluster_id
        return "unknown"
    except (OSError, ProtocolError):
        return "unknown"
    finally:
        await conn.close()


async def describe(addresses: list[tuple[str, int]], replication: bool, now_ms: int | None = None,
                   security: ClientSecurity | None = None) -> str:
    reply = await send_to_leader(addresses, DESCRIBE_QUORUM, 0, 2, lambda v: build_describe_quorum(),
                                 security=security)
    metadata_partition(reply.response)
    if replication:
        return format_replication(reply.response, now_ms)
    return format_status(reply.response, await fetch_cluster_id(reply.address, security=security))


async def add_controller(addresses: list[tuple[str, int]], controller: NewController,
                         security: ClientSecurity | None = None) -> None:
    body = build_add_raft_voter(controller.cluster_id, controller.voter_id, controller.directory_id,
                                controller.endpoints)
    reply = await send_to_leader(addresses, ADD_RAFT_VOTER, 0, 0, lambda v: body,
                                 timeout=ADD_VOTER_TIMEOUT_MS / 1000 + CONNECT_TIMEOUT_S, security=security)
    check_error(reply.response.error_code, reply.response.error_message)


async def remove_controller(addresses: list[tuple[str, int]], voter_id: int, directory_id: bytes,
                            security: ClientSecurity | None = None) -> None:
    body = build_remove_raft_voter(voter_id, directory_id)
    reply = await send_to_leader(addresses, REMOVE_RAFT_VOTER, 0, 0, lambda v: body,
                                 timeout=ADD_VOTER_TIMEOUT_MS / 1000 + CONNECT_TIMEOUT_S, security=security)
    check_error(reply.response.error_code, reply.response.error_message)
