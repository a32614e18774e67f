"""`strom reassign-partitions` and `strom leader-election`: kafka-reassign-partitions.sh and
kafka-leader-election.sh over the Kafka protocol (Metadata, AlterPartitionReassignments,
ListPartitionReassignments, IncrementalAlterConfigs, ElectLeaders), with their options and their
output.

The reassignment JSON is Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[2,3,4],"log_dirs":["any","any","any"]}]}``; a topics-to-move file is
``{"version":1,"topics":[{"topic":"t"}]}``. ``--throttle B`` sets, as Kafka's tool, the broker configs
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` on every broker of
the moves and the topic configs ``leader.replication.throttled.replicas`` (partition:source for
each current replica) / ``follower.replication.throttled.replicas`` (partition:destination for each
new one); ``--verify`` clears them all once no partition of the file is still moving.

A ``log_dirs`` entry other than "any" moves that replica into that log dir of its broker:
``--execute`` sends AlterReplicaLogDirs to the broker (again until it holds the replica, for a
replica it is about to get), ``--replica-alter-log-dirs-throttle B`` sets
``replica.alter.log.dirs.io.max.bytes.per.second`` on those brokers, and ``--verify`` reports each
such move from the brokers' DescribeLogDirs, as Kafka's tool.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from dataclasses import dataclass

from engine.errors import ConfigError
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error
from strom.kafka_errors import exception_message, exception_text

TopicPartition = tuple[str, int]

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
ANY_LOG_DIR = "any"
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
Replica = tuple[str, int, int]  # topic, partition, broker (Kafka's TopicPartitionReplica)
PREFERRED, UNCLEAN = 0, 1

VERIFY_MESSAGE = ("Warning: You must run --verify periodically, until the reassignment completes, to "
                  "ensure the throttle is removed.")
EXISTING_MESSAGE = ("Cannot execute because there is an existing partition assignment.  Use --additional "
                    "to override this and create a new partition assignment in addition to the existing one.")


def tp_text(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# --- the JSON files, pure --------------------------------------------------------------------


class TerseError(Exception):
    """Kafka's TerseException: the tool prints its message alone."""


class KafkaCallError(RuntimeError):
    """An admin call's error, as ExecutionException.getMessage() reads: the admin client's
    exception class and the broker's message, else Errors' default."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(exception_text(code, message))
        self.code = code


def failure_text(e: BaseException) -> str:
    """What ReassignPartitionsCommand.main prints for a failure: a TerseException's message
    alone, any other as 'Error: ' and its message (a malformed file's without the option)."""
    if isinstance(e, TerseError):
        return str(e)
    if isinstance(e, ConfigError):
        return "Error: " + str(e)[len(e.name) + 2:]
    return f"Error: {e}"


def _java_set(items) -> str:
    """A Java set of the duplicates as AbstractCollection.toString prints it, in order."""
    return "[" + ", ".join(map(str, sorted(set(items)))) + "]"


def _load(text: str, what: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(what, f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(what, "must be a JSON object")
    return data


def parse_topics_to_move(text: str) -> list[str]:
    data = _load(text, "--topics-to-move-json-file")
    topics = [t.get("topic") for t in data.get("topics", []) if isinstance(t, dict)]
    if not topics or not all(isinstance(t, str) for t in topics):
        raise ConfigError("--topics-to-move-json-file", 'expected {"topics":[{"topic":"NAME"},...]}')
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ConfigError("--topics-to-move-json-file",
                          f"List of topics to reassign contains duplicate entries: {_java_set(duplicates)}")
    return topics


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's parsePartitionReassignmentData: each partition once, its replicas distinct, as many
    log_dirs as replicas (``parse_log_dirs`` reads them)."""
    data = _load(text, "--reassignment-json-file")
    parts = data.get("partitions")
    if not isinstance(parts, list) or not parts:
        raise ConfigError("--reassignment-json-file", "Partition reassignment list cannot be empty")
    out: dict[TopicPartition, list[int]] = {}
    for p in parts:
        try:
            tp = (str(p["topic"]), int(p["partition"]))
            replicas = [int(r) for r in p["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise ConfigError("--reassignment-json-file",
                              f"each partition needs topic, partition and replicas: {p}") from None
        if tp in out:
            raise ConfigError("--reassignment-json-file", f"contains multiple entries for {tp_text(tp)}")
        if len(set(replicas)) != len(replicas):
            raise ConfigError("--reassignment-json-file",
                              f"Partition replica lists may not contain duplicate entries: {tp_text(tp)}")
        dirs = p.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise ConfigError("--reassignment-json-file",
                              f"Size of replicas list {_java_list(replicas)} is different from size of "
                              f"log dirs list {_java_list(dirs)} for partition {tp_text(tp)}")
        out[tp] = replicas
    return out


def _java_list(items) -> str:
    return "[" + ", ".join(map(str, items)) + "]" if isinstance(items, list) else str(items)


def parse_log_dirs(text: str) -> dict[Replica, str]:
    """The replicas the file moves into a log dir of their broker (a log_dirs entry other than
    "any"), as Kafka's replicaAssignment."""
    parse_reassignment(text)
    out: dict[Replica, str] = {}
    for p in _load(text, "--reassignment-json-file")["partitions"]:
        for broker, d in zip(p["replicas"], p.get("log_dirs", [])):
            if d != ANY_LOG_DIR:
                out[(str(p["topic"]), int(p["partition"]), int(broker))] = str(d)
    return out


def replica_text(r: Replica) -> str:
    """Kafka's TopicPartitionReplica.toString: topic-partition-broker."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def _replica_order(r: Replica) -> tuple[int, str, int]:
    return r[2], r[0], r[1]  # Kafka's compareTopicPartitionReplicas: broker, topic, partition


def log_dir_move_states(targets: dict[Replica, str],
                        found: dict[Replica, tuple[str | None, str | None]]) -> tuple[str, bool]:
    """Kafka's findLogDirMoveStates and replicaMoveStatesToString: each replica's move from what
    its broker's DescribeLogDirs shows (current dir, future dir; absent: not on the broker);
    whether any is still moving."""
    lines, moving = [], False
    for r in sorted(targets, key=_replica_order):
        target, (t, p, b) = targets[r], r
        if r not in found:
            lines.append(f"Partition {t}-{p} cannot be found in any live log directory on broker {b}.")
            continue
        current, future = found[r]
        if current is None:
            lines.append(f"Partition {t}-{p} is not found in any live log dir on broker {b}. There is likely "
                         "an offline log directory on the broker.")
        elif future is not None:
            moving = True
            if future == target:
                lines.append(f"Reassignment of replica {replica_text(r)} is still in progress.")
            else:
                lines.append(f"Partition {t}-{p} on broker {b} is being moved to log dir {future} instead of "
                             f"{target}.")
        elif current == target:
            lines.append(f"Reassignment of replica {replica_text(r)} completed successfully.")
        else:
            lines.append(f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} to "
                         f"{target}.")
    return "\n".join(lines), moving


def reassignment_json(parts: dict[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions in topic then partition order."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(parts.items())]}, separators=(",", ":"))


def assign_replicas(partitions: int, replication_factor: int, brokers: list[int],
                    rng: random.Random) -> list[list[int]]:
    """Kafka's rack-unaware assignment: the first replica of each partition round robin from a
    random broker, the others after it at a shift that grows each time the brokers wrap."""
    n = len(brokers)
    if replication_factor > n:
        raise ConfigError("--broker-list", f"Replication factor: {replication_factor} larger than "
                                           f"available brokers: {n}.")
    start, shift = rng.randrange(n), rng.randrange(n)
    out = []
    for partition in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out


def propose(current: dict[TopicPartition, list[int]], brokers: list[int],
            rng: random.Random) -> dict[TopicPartition, list[int]]:
    """Each topic's partitions spread over the brokers, each at the replication factor its
    partition 0 has (Kafka's calculateAssignment)."""
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        parts = sorted(p for t, p in current if t == topic)
        for p, replicas in zip(parts, assign_replicas(len(parts), len(current[(topic, parts[0])]),
                                                      sorted(brokers), rng)):
            proposed[(topic, p)] = replicas
    return proposed


@dataclass(frozen=True)
class Move:
    sources: list[int]
    destinations: list[int]


def throttled_replicas(moves: dict[TopicPartition, Move]) -> dict[str, tuple[str, str]]:
    """Kafka's calculateLeaderThrottles / calculateFollowerThrottles: per topic, partition:broker
    for every current replica (the leaders that may serve the move) and for every new one."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), move in moves.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in move.sources)
        follower.setdefault(topic, set()).update(f"{p}:{b}" for b in move.destinations
                                                 if b not in move.sources)
    return {t: (",".join(sorted(leader[t])), ",".join(sorted(follower.get(t, ())))) for t in leader}


def reassignment_states(targets: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]],
                        ongoing: set[TopicPartition]) -> str:
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp_text(tp)} is still in progress.")
        elif current.get(tp) == targets[tp]:
            lines.append(f"Reassignment of partition {tp_text(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_text(tp)}, but replica set is "
                         f"{','.join(map(str, current.get(tp, [])))} rather than "
                         f"{','.join(map(str, targets[tp]))}.")
    return "\n".join(lines)


def _plural(items) -> str:
    return "" if len(items) == 1 else "s"


# --- the requests ----------------------------------------------------------------------------


class Admin:
    def __init__(self, bootstrap: str, security: ClientSecurity | None) -> None:
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        try:
            self.address = (host or "127.0.0.1", int(port))
        except ValueError:
            raise ConfigError("--bootstrap-server", f"expected HOST:PORT, got {bootstrap!r}") from None
        self.security = security
        self.conn: KafkaConnection | None = None

    async def __aenter__(self) -> Admin:
        self.conn = KafkaConnection(*self.address, client_id="strom-reassign", security=self.security)
        await self.conn.connect()
        return self

    async def __aexit__(self, *_exc) -> None:
        assert self.conn is not None
        await self.conn.close()

    async def request(self, api_key: int, version: int, body):
        assert self.conn is not None
        return await self.conn.request(api_key, version, body, timeout=60.0)

    def brokers_admin(self):
        """An admin client that reaches each broker (AlterReplicaLogDirs and DescribeLogDirs go
        to the broker holding the replica)."""
        from strom.admin_client import Admin as BrokersAdmin
        return BrokersAdmin(f"{self.address[0]}:{self.address[1]}", self.security, "strom-reassign")

    async def alter_log_dirs(self, moves: dict[Replica, str]) -> set[Replica]:
        """Kafka's alterReplicaLogDirs: the replicas whose move started; REPLICA_NOT_AVAILABLE
        (the broker does not hold it yet) is left for another try, any other error stops."""
        started: set[Replica] = set()
        R = M.AlterReplicaLogDirsRequest
        async with self.brokers_admin() as admin:
            for broker in sorted({b for _, _, b in moves}):
                dirs: dict[str, dict[str, list[int]]] = {}
                for (t, p, b), d in moves.items():
                    if b == broker:
                        dirs.setdefault(d, {}).setdefault(t, []).append(p)
                body = R(dirs=[R.AlterReplicaLogDir(path=d, topics=[
                    R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=t, partitions=ps)
                    for t, ps in topics.items()]) for d, topics in dirs.items()])
                answer = await admin.request(ALTER_REPLICA_LOG_DIRS, 1, 2, body, node=broker)
                for topic in answer.results:
                    for part in topic.partitions:
                        r = (topic.topic_name, part.partition_index, broker)
                        if part.error_code == Error.NONE:
                            started.add(r)
                        elif part.error_code != Error.REPLICA_NOT_AVAILABLE:
                            raise RuntimeError(f"Failed to alter dir for {replica_text(r)}: "
                                               f"{_error_text(part.error_code, None)}")
        return started

    async def replica_log_dirs(self, replicas: set[Replica]) -> dict[Replica, tuple[str | None, str | None]]:
        """Kafka's describeReplicaLogDirs: (current dir, future dir) of each replica its broker
        holds, from the broker's DescribeLogDirs."""
        found: dict[Replica, tuple[str | None, str | None]] = {}
        async with self.brokers_admin() as admin:
            for broker in sorted({b for _, _, b in replicas}):
                answer = await admin.request(DESCRIBE_LOG_DIRS, 1, 4, M.DescribeLogDirsRequest(topics=None),
                                             node=broker)
                for result in answer.results:
                    if result.error_code != Error.NONE:
                        continue
                    for topic in result.topics:
                        for part in topic.partitions:
                            r = (topic.name, part.partition_index, broker)
                            if r not in replicas:
                                continue
                            current, future = found.get(r, (None, None))
                            if part.is_future_key:
                                future = result.log_dir
                            else:
                                current = result.log_dir
                            found[r] = (current, future)
        return found

    async def cluster(self) -> tuple[list[int], dict[TopicPartition, list[int]]]:
        """The brokers and every partition's replicas (Metadata of every topic)."""
        md = await self.request(3, 12, M.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        parts = {(t.name, p.partition_index): list(p.replica_nodes) for t in md.topics for p in t.partitions}
        return sorted(b.node_id for b in md.brokers), parts

    async def ongoing(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        resp = await self.request(46, 0, M.ListPartitionReassignmentsRequest(topics=None))
        _check(resp.error_code, resp.error_message, "listing partition reassignments")
        return {(t.name, p.partition_index):
                (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    async def alter(self, parts: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
        R = M.AlterPartitionReassignmentsRequest
        topics: dict[str, list] = {}
        for (t, p), replicas in sorted(parts.items()):
            topics.setdefault(t, []).append(R.ReassignableTopic.ReassignablePartition(
                partition_index=p, replicas=replicas))
        resp = await self.request(45, 0, R(topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                   for t, ps in topics.items()]))
        _check(resp.error_code, resp.error_message, "reassigning partitions")
        return {(t.name, p.partition_index): exception_message(p.error_code, p.error_message)
                for t in resp.responses for p in t.partitions if p.error_code != Error.NONE}

    async def alter_configs(self, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
                            ) -> None:
        """IncrementalAlterConfigs: a BROKER resource goes to that broker (a broker answers only
        for itself, as Kafka's), the others to the bootstrap broker."""
        R = M.IncrementalAlterConfigsRequest

        def body(of):
            return R(resources=[R.AlterConfigsResource(
                resource_type=kind, resource_name=name,
                configs=[R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])
                for kind, name, ops in of], validate_only=False)

        answers = []
        others = [res for res in resources if res[0] != BROKER_RESOURCE]
        if others:
            answers += (await self.request(44, 1, body(others))).responses
        brokers = [res for res in resources if res[0] == BROKER_RESOURCE]
        if brokers:
            md = await self.request(3, 12, M.MetadataRequest(topics=[], allow_auto_topic_creation=False))
            where = {str(b.node_id): (b.host, b.port) for b in md.brokers}
            for res in brokers:
                if res[1] not in where:
                    raise RuntimeError(f"Unknown broker id {res[1]}")
                conn = KafkaConnection(*where[res[1]], client_id="strom-reassign", security=self.security)
                await conn.connect()
                try:
                    answers += (await conn.request(44, 1, body([res]), timeout=60.0)).responses
                finally:
                    await conn.close()
        errors = [f"{'broker' if r.resource_type == BROKER_RESOURCE else 'topic'} {r.resource_name}: "
                  f"{_error_text(r.error_code, r.error_message)}"
                  for r in answers if r.error_code != Error.NONE]
        if errors:
            raise RuntimeError("altering the throttle configs: " + "; ".join(errors))

    async def elect(self, election_type: int, partitions: list[TopicPartition] | None):
        R = M.ElectLeadersRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [R.TopicPartitions(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())]
        resp = await self.request(43, 2, R(election_type=election_type, topic_partitions=topics))
        if resp.error_code != Error.NONE:
            raise KafkaCallError(resp.error_code)
        return {(t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in resp.replica_election_results for p in t.partition_result}


def _error_text(code: int, message: str | None) -> str:
    return f"{Error(code).name}{': ' + message if message else ''}"


def _check(code: int, message: str | None, what: str) -> None:
    if code != Error.NONE:
        raise KafkaCallError(code, message)


# --- the actions ------------------------------------------------------------------------------


async def generate(admin: Admin, topics: list[str], broker_list: list[int], rng: random.Random) -> str:
    brokers, parts = await admin.cluster()
    unknown = [b for b in broker_list if b not in brokers]
    if unknown:
        raise RuntimeError(f"Unknown broker id {unknown[0]}")
    missing = [t for t in topics if not any(pt == t for pt, _ in parts)]
    if missing:
        raise KafkaCallError(Error.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {missing[0]} not found.")
    current = {tp: r for tp, r in parts.items() if tp[0] in topics}
    proposed = propose(current, broker_list, rng)
    return (f"Current partition replica assignment\n{reassignment_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")


async def execute(admin: Admin, targets: dict[TopicPartition, list[int]], throttle: int,
                  additional: bool, out, log_dirs: dict[Replica, str] | None = None,
                  log_dir_throttle: int = -1, timeout_ms: int = 10000) -> None:
    ongoing = await admin.ongoing()
    if ongoing and not additional:
        raise TerseError(EXISTING_MESSAGE)
    brokers, parts = await admin.cluster()
    for replicas in targets.values():
        for b in replicas:
            if b not in brokers:
                raise RuntimeError(f"Unknown broker id {b}")
    missing = [tp for tp in sorted(targets) if tp not in parts]
    if missing:
        raise KafkaCallError(Error.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Unable to find partition: {tp_text(missing[0])}")
    current = {tp: parts[tp] for tp in targets}
    out(f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback")
    log_dirs = log_dirs or {}
    if throttle >= 0 or log_dir_throttle >= 0:
        out(VERIFY_MESSAGE)
    if throttle >= 0:
        moves = {}
        for tp, target in targets.items():
            # A partition already moving keeps its original replicas as sources (Kafka's
            # calculateProposedMoveMap).
            sources = ongoing[tp][0] if tp in ongoing else current[tp]
            sources = [b for b in sources if tp not in ongoing or b not in ongoing[tp][1]]
            moves[tp] = Move(sources, target)
        lists = throttled_replicas(moves)
        # The brokers' rates first: a broker that refuses them leaves no topic changed.
        moving = sorted({b for m in moves.values() for b in m.sources + m.destinations})
        await admin.alter_configs([
            (BROKER_RESOURCE, str(b), [(LEADER_RATE, SET, str(throttle)),
                                       (FOLLOWER_RATE, SET, str(throttle))]) for b in moving])
        await admin.alter_configs([
            (TOPIC_RESOURCE, t, [(LEADER_REPLICAS, SET, lead), (FOLLOWER_REPLICAS, SET, follow)])
            for t, (lead, follow) in sorted(lists.items())])
        out(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0:
        rate = [(ALTER_LOG_DIRS_RATE, SET, str(log_dir_throttle))]
        moving_brokers = sorted({b for _, _, b in log_dirs})
        await admin.alter_configs([(BROKER_RESOURCE, str(b), rate) for b in moving_brokers])
        out(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = await admin.alter(dict(targets))
    if errors:
        raise TerseError("Error reassigning partition(s):\n" + "\n".join(
            f"{tp_text(tp)}: {e}" for tp, e in sorted(errors.items())))
    out(f"Successfully started partition reassignment{_plural(targets)} for "
        f"{','.join(tp_text(tp) for tp in sorted(targets))}")
    if log_dirs:
        await execute_moves(admin, log_dirs, timeout_ms, out)


async def execute_moves(admin: Admin, log_dirs: dict[Replica, str], timeout_ms: int, out) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs until every replica's broker has taken its move
    (a replica the reassignment is still bringing to its broker is tried again every 100 ms)."""
    pending = dict(log_dirs)
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    while True:
        started = await admin.alter_log_dirs(pending)
        for r in sorted(started, key=_replica_order):
            out(f"Successfully started moving log directory to {pending[r]} for replica {r[0]}-{r[1]} "
                f"with broker {r[2]} ")
            del pending[r]
        if not pending:
            return
        if asyncio.get_running_loop().time() >= deadline:
            raise TerseError(f"Timed out before log directory move{_plural(pending)} could be started for: "
                               + ",".join(replica_text(r) for r in sorted(pending, key=_replica_order)))
        await asyncio.sleep(0.1)


async def verify(admin: Admin, targets: dict[TopicPartition, list[int]], preserve_throttles: bool,
                 out, log_dirs: dict[Replica, str] | None = None) -> bool:
    """Prints each partition's state; once none of the file's partitions (nor any other) is
    moving, clears every throttle as Kafka's (it cannot tell which brokers served earlier moves).
    True when done."""
    ongoing = await admin.ongoing()
    brokers, parts = await admin.cluster()
    out(reassignment_states(targets, parts, set(ongoing) & set(targets)))
    moving = False
    if log_dirs:
        text, moving = log_dir_move_states(log_dirs, await admin.replica_log_dirs(set(log_dirs)))
        out(text)
    done = not ongoing and not moving
    if done and not preserve_throttles:
        all_brokers = sorted(set(brokers) | {b for r in targets.values() for b in r})
        out(f"Clearing broker-level throttles on broker{_plural(all_brokers)} "
            f"{','.join(map(str, all_brokers))}")
        await admin.alter_configs([(BROKER_RESOURCE, str(b), [(n, DELETE, None) for n in BROKER_THROTTLES])
                                   for b in all_brokers])
        topics = sorted({t for t, _ in targets})
        out(f"Clearing topic-level throttles on topic{_plural(topics)} {','.join(topics)}")
        await admin.alter_configs([(TOPIC_RESOURCE, t, [(n, DELETE, None) for n in TOPIC_THROTTLES])
                                   for t in topics])
    return done


async def cancel(admin: Admin, targets: dict[TopicPartition, list[int]], out) -> None:
    active = sorted(tp for tp in await admin.ongoing() if tp in targets)
    if not active:
        out("None of the specified partition reassignments are active.")
        return
    errors = await admin.alter({tp: None for tp in active})
    if errors:
        raise TerseError(f"Error cancelling partition reassignment{_plural(errors)} for:\n" + "\n".join(
            f"{tp_text(tp)}: {e}" for tp, e in sorted(errors.items())))
    out(f"Successfully cancelled partition reassignment{_plural(active)} for: "
        f"{','.join(tp_text(tp) for tp in active)}")


def list_text(ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]]) -> str:
    lines = []
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        lines.append(f"{tp_text(tp)}: replicas: {','.join(map(str, replicas))}."
                     + (f" adding: {','.join(map(str, adding))}." if adding else "")
                     + (f" removing: {','.join(map(str, removing))}." if removing else ""))
    if not lines:
        return "No partition reassignments found."
    return "Current partition reassignments:\n" + "\n".join(lines)


def election_text(election: str, results: dict[TopicPartition, tuple[int, str | None]]) -> tuple[str, int]:
    """kafka-leader-election's output and the number of partitions that failed."""
    done = [tp for tp, (code, _) in sorted(results.items()) if code == Error.NONE]
    noop = [tp for tp, (code, _) in sorted(results.items()) if code == Error.ELECTION_NOT_NEEDED]
    failed = {tp: r for tp, r in sorted(results.items())
              if r[0] not in (Error.NONE, Error.ELECTION_NOT_NEEDED)}
    lines = []
    if done:
        lines.append(f"Successfully completed leader election ({election}) for partitions "
                     f"{', '.join(map(tp_text, done))}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(map(tp_text, noop))}")
    for tp, (code, message) in failed.items():
        lines.append(f"Error completing leader election ({election}) for partition: {tp_text(tp)}: "
                     f"{exception_text(code, message)}")
    return "\n".join(lines), len(failed)


def parse_election_file(text: str) -> list[TopicPartition]:
    data = _load(text, "--path-to-json-file")
    try:
        parts = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise ConfigError("--path-to-json-file",
                          'expected {"partitions":[{"topic":"NAME","partition":N},...]}') from None
    duplicates = sorted({tp for tp in parts if parts.count(tp) > 1})
    if duplicates:
        raise ConfigError("--path-to-json-file", "Replica election data contains duplicate partitions: "
                                                 + ",".join(map(tp_text, duplicates)))
    return parts


# --- the command line -------------------------------------------------------------------------

REASSIGN_EXAMPLE = """example:
  strom reassign-partitions --bootstrap-server 127.0.0.1:9092 --generate \\
      --topics-to-move-json-file topics.json --broker-list 2,3,4
  strom reassign-partitions --bootstrap-server 127.0.0.1:9092 --execute \\
      --reassignment-json-file plan.json --throttle 10000000
  strom reassign-partitions --bootstrap-server 127.0.0.1:9092 --execute \
      --reassignment-json-file plan.json --replica-alter-log-dirs-throttle 50000000
  strom reassign-partitions --bootstrap-server 127.0.0.1:9092 --verify --reassignment-json-file plan.json
"""

ELECTION_EXAMPLE = """example:
  strom leader-election --bootstrap-server 127.0.0.1:9092 --election-type preferred --all-topic-partitions
  strom leader-election --bootstrap-server 127.0.0.1:9092 --election-type unclean --topic T --partition 0
"""


def add_parsers(sub) -> None:
    help_fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("reassign-partitions", help="move partitions' replicas to other brokers",
                       description="Partition reassignment, like kafka-reassign-partitions.",
                       epilog=REASSIGN_EXAMPLE, formatter_class=help_fmt)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment of the topics to move")
    action.add_argument("--execute", action="store_true", help="start the reassignment of the JSON file")
    action.add_argument("--verify", action="store_true",
                        help="the state of the file's reassignments; clears the throttles once done")
    action.add_argument("--cancel", action="store_true", help="cancel the file's reassignments in progress")
    action.add_argument("--list", action="store_true", help="the reassignments in progress")
    p.add_argument("--topics-to-move-json-file", metavar="FILE")
    p.add_argument("--broker-list", metavar="ID,ID,...")
    p.add_argument("--reassignment-json-file", metavar="FILE")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: the replication rate limit of the brokers moving replicas")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: the rate limit of moving replicas between a broker's log "
                        "directories (replica.alter.log.dirs.io.max.bytes.per.second)")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="with --execute: how long to wait for the log directory moves to start")
    p.add_argument("--additional", action="store_true",
                   help="with --execute: start it while other reassignments are in progress")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: leave the throttles in place")
    e = sub.add_parser("leader-election", help="elect the preferred or any live replica as leader",
                       description="Leader election, like kafka-leader-election.",
                       epilog=ELECTION_EXAMPLE, formatter_class=help_fmt)
    e.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    e.add_argument("--admin.config", "--command-config", dest="command_config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    e.add_argument("--election-type", required=True, type=str.lower, choices=["preferred", "unclean"])
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--path-to-json-file", metavar="FILE")
    e.add_argument("--partition", type=int)


def _read(path: str | None, option: str) -> str:
    if path is None:
        raise ConfigError(option, "is required for this action")
    with open(path) as f:
        return f.read()


def _check_options(args) -> None:
    """The usage errors, before anything is read or asked."""
    if args.replica_alter_log_dirs_throttle >= 0 and not args.execute:
        raise ConfigError("--replica-alter-log-dirs-throttle", "only with --execute")
    if args.throttle >= 0 and not args.execute:
        raise ConfigError("--throttle", "only with --execute")
    if args.generate:
        if args.topics_to_move_json_file is None:
            raise ConfigError("--topics-to-move-json-file", "is required with --generate")
        if not args.broker_list:
            raise ConfigError("--broker-list", "is required with --generate")
    elif not args.list and args.reassignment_json_file is None:
        raise ConfigError("--reassignment-json-file", "is required for this action")


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise ConfigError("--broker-list", f"expected ID,ID,..., got {text!r}") from None
    duplicates = [b for b in brokers if brokers.count(b) > 1]
    if duplicates:
        raise ConfigError("--broker-list", f"Broker list contains duplicate entries: {_java_set(duplicates)}")
    return brokers


def run_reassign(args, security: ClientSecurity | None) -> int:
    """Kafka's ReassignPartitionsCommand.main: a failure printed on stdout (failure_text), exit 1."""
    _check_options(args)
    admin = Admin(args.bootstrap_server, security)

    async def go() -> int:
        if args.generate:
            brokers = _broker_list(args.broker_list)
            topics = parse_topics_to_move(_read(args.topics_to_move_json_file, "--topics-to-move-json-file"))
            async with admin:
                print(await generate(admin, topics, brokers, random.Random()))
            return 0
        if args.list:
            async with admin:
                print(list_text(await admin.ongoing()))
            return 0
        text = _read(args.reassignment_json_file, "--reassignment-json-file")
        targets, log_dirs = parse_reassignment(text), parse_log_dirs(text)
        async with admin:
            if args.execute:
                await execute(admin, targets, args.throttle, args.additional, print, log_dirs,
                              args.replica_alter_log_dirs_throttle, args.timeout)
            elif args.verify:
                await verify(admin, targets, args.preserve_throttles, print, log_dirs)
            else:
                await cancel(admin, targets, print)
        return 0

    try:
        return asyncio.run(go())
    except (TerseError, RuntimeError, ValueError, OSError) as e:
        print(failure_text(e))
        return 1


def run_election(args, security: ClientSecurity | None) -> int:
    election = args.election_type.upper()
    partitions: list[TopicPartition] | None = None
    if args.topic is not None:
        if args.partition is None:
            raise ConfigError("--partition", "is required with --topic")
        partitions = [(args.topic, args.partition)]
    elif args.partition is not None:
        raise ConfigError("--partition", "only with --topic")
    elif args.path_to_json_file is not None:
        partitions = parse_election_file(_read(args.path_to_json_file, "--path-to-json-file"))
    admin = Admin(args.bootstrap_server, security)

    async def go():
        async with admin:
            return await admin.elect(PREFERRED if election == "PREFERRED" else UNCLEAN, partitions)

    # LeaderElectionCommand: a timeout or a refusal said on stdout too; every failure's message
    # on stderr, exit 1.
    try:
        results = asyncio.run(go())
    except KafkaCallError as e:
        said = _ELECTION_FAILURES.get(e.code)
        if said is not None:
            print(said)
        print(said or str(e), file=sys.stderr)
        return 1
    text, failed = election_text(election, results)
    if text:
        print(text)
    if failed:
        print(f"{failed} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


_ELECTION_FAILURES = {Error.REQUEST_TIMED_OUT: "Timeout waiting for election results",
                      Error.CLUSTER_AUTHORIZATION_FAILED: "Not authorized to perform leader election"}
