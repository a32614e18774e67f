"""A cluster of 3 controllers and 3 brokers on loopback for replication tests, built on
quorum_cluster's ControllerQuorum, Controller and Broker (same directories, configs and logs).

    with ReplicatedCluster() as cluster:                 # controllers 1-3, brokers 4-6
        cluster.create_topic("t", partitions=12)          # RF 3, min.insync.replicas 2
        leader = cluster.leader_of("t", 0)
        cluster.kill9(leader); cluster.restart(leader)
        cluster.wait_for_isr("t", 0, {4, 5, 6})
        cluster.assert_acknowledged("t", 0, acked_values, brokers=cluster.isr_of("t", 0))
        cluster.assert_all_acknowledged(acks)            # acks: an AckedRecords delivery callback

``ReplicatedCluster(secure=True)``: SASL_SSL with SCRAM-SHA-512 on every listener, the
controllers' and the inter-broker one included (quorum_cluster's ClusterSecurity); every view
below connects with it, and ``client_config()`` gives a confluent-kafka client the bootstrap
servers and the matching security properties (just the servers on a plaintext cluster).

Nothing here assumes that replication works: every wait names what it waited for and fails with
the last view and the processes' log tails.

| faults               | what it does                                                            |
|----------------------|-------------------------------------------------------------------------|
| kill9(b)             | SIGKILL: a crash; no controlled shutdown, unflushed page cache kept     |
| terminate(b)         | SIGTERM and wait for the exit code (a controlled shutdown)              |
| pause(b) / resume(b) | SIGSTOP / SIGCONT: a hung broker whose sockets stay open                |
| restart(b)           | start again on the same directories and port; wait until every broker   |
|                      | lists it in Metadata                                                    |
| wipe_partitions(b)   | a lost disk (broker stopped): delete its partition directories and      |
|                      | their checkpoint entries; meta.properties stays (no format needed)      |

Views over the wire: ``metadata(b)`` is one broker's Metadata answer (every topic; None if it
does not answer), as strom.cluster_status parses it: the unfenced brokers it lists and each
partition's leader, leader epoch, replicas, ISR and offline replicas. ``leader_of``, ``isr_of``,
``wait_for_leader``, ``wait_for_isr`` and ``wait_for_metadata_agreement`` ask every live broker
(running, not paused) unless told ``on=`` one.

Views on disk: ``replica_records(b, topic, p)`` reads a replica's segment files with
engine.reader (read-only, safe on a live broker: a torn tail batch is left out), CRC checked.
``check_replica`` compares what a replica holds with what the producer saw acknowledged:

| finding      | meaning                                                                      |
|--------------|------------------------------------------------------------------------------|
| missing      | acknowledged values the replica does not hold                                |
| duplicated   | values the replica holds more than once (acknowledged or not)                |
| out_of_order | acknowledged values held at a lower offset than one acknowledged before them |

Values must be unique per partition (put a sequence number in each); ``acked`` for a partition
lists them in the order the delivery reports came, which for an idempotent producer is the order
the leader appended them.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from engine.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from engine.reader import PartitionReader, parse_partition_dir
from ext.batch import decode_records
from protocol.client import ClientSecurity
from strom import cluster_status as status
from strom import topics as topic_admin
from tests.integration.cluster import NodeError
from tests.integration.quorum_cluster import (
    STOP_TIMEOUT_S,
    Broker,
    Controller,
    ControllerQuorum,
    QuorumView,
    broker_metadata,
    format_nodes,
    on_loopback,
)

WAIT_S = 30.0
POLL_S = 0.05
PROBE_TIMEOUT_S = 1.0
CHECKPOINT_FILES = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                    "log-start-offset-checkpoint")
REPLICATED_DEFAULTS = {"default.replication.factor": "3", "min.insync.replicas": "2",
                       "num.partitions": "3"}


# ---- the records a replica holds ---------------------------------------------------------------


@dataclass(frozen=True)
class StoredRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    sequence: int  # -1 for a non-idempotent batch
    leader_epoch: int  # the batch's partitionLeaderEpoch
    producer_epoch: int = -1  # the batch's producerEpoch


def read_partition_dir(partition_dir: str, start_offset: int = 0,
                       end_offset: int | None = None) -> list[StoredRecord]:
    """Every record of a partition directory's segment files in [start_offset, end_offset),
    control batches left out; empty if the directory does not exist."""
    if not os.path.isdir(partition_dir):
        return []
    out = []
    for header, data in PartitionReader(partition_dir).batches(start_offset, end_offset, check_crc=True):
        if header.is_control:
            continue
        for r in decode_records(data, 0, False):
            if r.offset < start_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            sequence = header.base_sequence + r.offset - header.base_offset
            if header.base_sequence < 0:
                sequence = -1
            out.append(StoredRecord(r.offset, r.key, r.value, header.producer_id, sequence,
                                    header.partition_leader_epoch, header.producer_epoch))
    return out


@dataclass
class ReplicaCheck:
    missing: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    out_of_order: list[tuple[bytes, int, bytes, int]] = field(default_factory=list)  # (a, offset, b, offset)
    held: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.out_of_order)

    def summary(self, limit: int = 5) -> str:
        return (f"holds {self.held} records; missing {len(self.missing)} {self.missing[:limit]}, "
                f"duplicated {len(self.duplicated)} {self.duplicated[:limit]}, "
                f"out of order {len(self.out_of_order)} {self.out_of_order[:limit]}")


def check_replica(records: Sequence[StoredRecord], acked: Sequence[bytes]) -> ReplicaCheck:
    """Every acknowledged value held exactly once, in acknowledgement order (see the table)."""
    counts = Counter(r.value for r in records)
    offset_of = {r.value: r.offset for r in records}
    check = ReplicaCheck(held=len(records))
    check.duplicated = sorted(v for v, n in counts.items() if n > 1)
    previous: tuple[bytes, int] | None = None
    for value in acked:
        offset = offset_of.get(value)
        if offset is None:
            check.missing.append(value)
            continue
        if previous is not None and offset < previous[1]:
            check.out_of_order.append((previous[0], previous[1], value, offset))
        previous = (value, offset)
    return check


class AckedRecords:
    """A confluent-kafka ``on_delivery`` callback that keeps, per (topic, partition), the values
    acknowledged in the order the reports came, and every error."""

    def __init__(self) -> None:
        self.acked: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        self.errors: list[tuple[bytes, str]] = []

    def __call__(self, err, msg) -> None:
        if err is None:
            self.acked[(msg.topic(), msg.partition())].append(msg.value())
        else:
            self.errors.append((msg.value(), err.name()))

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


# ---- the cluster -------------------------------------------------------------------------------


def _metadata(port: int, timeout: float, host: str = "127.0.0.1") -> status.BrokerAnswer | None:
    return broker_metadata(host, port, timeout)


class ReplicatedCluster:
    def __init__(self, controllers: int = 3, brokers: int = 3, broker_extra: dict[str, str] | None = None,
                 controller_extra: dict[str, str] | None = None, python: str = sys.executable,
                 hosts: Callable[[int], tuple[str, list[str]]] = on_loopback, secure: bool = False,
                 metrics: bool = False) -> None:
        """``hosts(node_id)``: the node's address and command prefix (quorum_cluster); ``secure``:
        SASL_SSL with SCRAM-SHA-512 on every listener (quorum_cluster's ClusterSecurity);
        ``metrics``: every process serves /metrics at a port of its own (``node.metrics_url``)."""
        self.quorum = ControllerQuorum(controllers, python,
                                       {**REPLICATED_DEFAULTS, **(controller_extra or {})}, hosts, secure,
                                       metrics)
        self.security = self.quorum.security
        extra = {**REPLICATED_DEFAULTS, "offsets.topic.replication.factor": str(min(3, brokers)),
                 **(broker_extra or {})}
        self.brokers: dict[int, Broker] = {}
        for node_id in range(controllers + 1, controllers + brokers + 1):
            self.brokers[node_id] = self.quorum.broker(node_id, extra, formatted=False)
        format_nodes([(b, ()) for b in self.brokers.values()])
        self.paused: set[int] = set()

    # ---- lifecycle -----------------------------------------------------------------------------
    def start(self) -> ReplicatedCluster:
        """Start the controllers, then every broker at once; wait until each broker lists all."""
        for c in self.controllers.values():
            c.start()
        for b in self.brokers.values():
            Controller.start(b)  # spawn only: Broker.start would wait for each in turn
        for b in self.brokers.values():
            b.wait_ready()
        self.wait_for_brokers(set(self.brokers))
        return self

    @property
    def controllers(self) -> dict[int, Controller]:
        return {i: c for i, c in self.quorum.controllers.items() if not isinstance(c, Broker)}

    def close(self) -> None:
        for node_id in list(self.paused):
            self.resume(node_id)
        live = [b for b in self.brokers.values() if b.running]
        for b in live:  # brokers first, all at once, while the controllers can still answer
            os.kill(b.proc.pid, signal.SIGTERM)
        for b in live:
            try:
                b.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                b.kill9()
        self.quorum.close()

    def __enter__(self) -> ReplicatedCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- faults --------------------------------------------------------------------------------
    def kill9(self, broker_id: int) -> None:
        self.paused.discard(broker_id)
        self.brokers[broker_id].kill9()

    def terminate(self, broker_id: int) -> int | None:
        """SIGTERM; the exit code (NodeError with the log tail if it does not stop in 30 s)."""
        return self.brokers[broker_id].stop()

    def pause(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].proc.pid, signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].proc.pid, signal.SIGCONT)
        self.paused.discard(broker_id)

    def restart(self, broker_id: int, timeout: float = WAIT_S) -> None:
        """Start a stopped broker again (same directories and port) and wait until every live
        broker lists it."""
        b = self.brokers[broker_id]
        if b.running:
            raise NodeError(f"broker {broker_id} is running: kill9 or terminate it first")
        b.start()
        self.wait_for_brokers({broker_id}, timeout)

    def log_dir(self, broker_id: int) -> str:
        return self.brokers[broker_id].metadata_dir

    def partition_dir(self, broker_id: int, topic: str, partition: int) -> str:
        return os.path.join(self.log_dir(broker_id), f"{topic}-{partition}")

    def wipe_partitions(self, broker_id: int, topics: Iterable[str] | None = None) -> list[str]:
        """Delete a stopped broker's partition directories (of ``topics``, else all) and their
        entries in its offset checkpoints; the deleted directories' names."""
        if self.brokers[broker_id].running:
            raise NodeError(f"broker {broker_id} is running: stop it before wiping its disk")
        wanted = None if topics is None else set(topics)
        base = self.log_dir(broker_id)
        removed = []
        for name in sorted(os.listdir(base)):
            parsed = parse_partition_dir(name)
            if parsed is None or name.startswith("__cluster_metadata"):
                continue
            if wanted is None or parsed[0] in wanted:
                shutil.rmtree(os.path.join(base, name))
                removed.append(name)
        for name in CHECKPOINT_FILES:
            path = os.path.join(base, name)
            if not os.path.exists(path):
                continue
            if wanted is None:
                os.unlink(path)
            else:
                kept = {tp: o for tp, o in read_offset_checkpoint(path).items() if tp[0] not in wanted}
                write_offset_checkpoint(path, kept)
        return removed

    # ---- views over the wire -------------------------------------------------------------------
    def live_brokers(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running and i not in self.paused]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.brokers[i].bootstrap for i in self.live_brokers())

    def client_config(self, bootstrap: str | None = None) -> dict[str, object]:
        """A confluent-kafka client's bootstrap.servers (``bootstrap``, else every broker, live or
        not) and, on a secure cluster, its security properties."""
        servers = bootstrap or ",".join(b.bootstrap for b in self.brokers.values())
        return {"bootstrap.servers": servers, **(self.security.client_config() if self.security else {})}

    def client_security(self) -> ClientSecurity | None:
        """What the project's client (protocol/client.py) connects with; None: plaintext."""
        return self.quorum.client_security()

    def metadata(self, broker_id: int, timeout: float = PROBE_TIMEOUT_S) -> status.BrokerAnswer | None:
        return self.brokers[broker_id].metadata(timeout)

    def views(self, on: int | None = None) -> dict[int, status.BrokerAnswer | None]:
        ids = [on] if on is not None else self.live_brokers()
        return {i: self.metadata(i) for i in ids}

    def partition(self, topic: str, partition: int, on: int | None = None) -> status.PartitionInfo | None:
        """The partition as the first live broker (or ``on``) that knows it describes it."""
        for view in self.views(on).values():
            for p in view.partitions if view is not None else ():
                if p.topic == topic and p.partition == partition:
                    return p
        return None

    def leader_of(self, topic: str, partition: int, on: int | None = None) -> int:
        p = self.partition(topic, partition, on)
        return status.NO_LEADER if p is None else p.leader

    def isr_of(self, topic: str, partition: int, on: int | None = None) -> set[int]:
        p = self.partition(topic, partition, on)
        return set() if p is None else set(p.isr)

    def wait_until(self, what: str, check: Callable[[dict[int, status.BrokerAnswer | None]], object],
                   timeout: float = WAIT_S, on: int | None = None):
        """Poll the live brokers' views until ``check(views)`` is truthy; its value."""
        deadline = time.monotonic() + timeout
        views: dict = {}
        while time.monotonic() < deadline:
            views = self.views(on)
            result = check(views)
            if result:
                return result
            time.sleep(POLL_S)
        tails = "\n".join(b.failure(f"broker {i}") for i, b in self.brokers.items())
        raise AssertionError(f"{what} within {timeout} s; last views {views}\n{tails}")

    def _on_every(self, topic: str, partition: int, predicate: Callable[[status.PartitionInfo], bool]):
        def check(views):
            found = []
            for view in views.values():
                p = None if view is None else next(
                    (p for p in view.partitions if p.topic == topic and p.partition == partition), None)
                if p is None or not predicate(p):
                    return None
                found.append(p)
            return found[0] if found else None
        return check

    def wait_for_isr(self, topic: str, partition: int, expected: Iterable[int], timeout: float = WAIT_S,
                     on: int | None = None) -> status.PartitionInfo:
        want = set(expected)
        return self.wait_until(f"{topic}-{partition}: ISR not {sorted(want)} on every live broker",
                               self._on_every(topic, partition, lambda p: set(p.isr) == want), timeout, on)

    def wait_for_leader(self, topic: str, partition: int, exclude: Iterable[int] = (),
                        timeout: float = WAIT_S, on: int | None = None) -> status.PartitionInfo:
        """Until every live broker names the same live leader, not one of ``exclude``."""
        banned = set(exclude)

        def check(views):
            live = set(self.live_brokers())
            p = self._on_every(topic, partition, lambda p: p.leader in live - banned)(views)
            leaders = {q.leader for v in views.values() if v is not None
                       for q in v.partitions if q.topic == topic and q.partition == partition}
            return p if p is not None and len(leaders) == 1 else None

        return self.wait_until(f"{topic}-{partition}: no agreed live leader outside {sorted(banned)}",
                               check, timeout, on)

    def wait_for_brokers(self, broker_ids: set[int], timeout: float = WAIT_S) -> None:
        """Until every live broker's Metadata lists ``broker_ids`` (registered and unfenced)."""
        self.wait_until(f"brokers {sorted(broker_ids)} not listed by every live broker",
                        lambda views: all(v is not None and broker_ids <= v.unfenced for v in views.values()),
                        timeout)

    def wait_for_metadata_agreement(self, timeout: float = WAIT_S) -> status.BrokerAnswer:
        """Until every live broker answers Metadata with the same brokers and partitions."""
        def check(views):
            answers = list(views.values())
            if not answers or any(a is None for a in answers):
                return None
            first = answers[0]
            same = all(a.unfenced == first.unfenced and a.partitions == first.partitions for a in answers)
            return first if same else None

        return self.wait_until("the live brokers' Metadata does not agree", check, timeout)

    def create_topic(self, name: str, partitions: int = 12, replication_factor: int = 3,
                     configs: dict[str, str] | None = None, timeout: float = WAIT_S) -> status.BrokerAnswer:
        """CreateTopics through a live broker; waits until every live broker has every partition
        of it with a leader."""
        first = self.brokers[self.live_brokers()[0]]
        topic_admin.create(first.bootstrap, name, partitions, replication_factor, configs or {},
                           security=self.client_security())

        def check(views):
            for view in views.values():
                mine = [p for p in view.partitions if p.topic == name] if view is not None else []
                if len(mine) != partitions or any(p.leader < 0 for p in mine):
                    return None
            return next(iter(views.values()))

        return self.wait_until(f"topic {name} not led everywhere", check, timeout)

    def quorum_leader(self, timeout: float = WAIT_S) -> QuorumView:
        return self.quorum.wait_for_leader(timeout)

    # ---- views on disk -------------------------------------------------------------------------
    def replica_records(self, broker_id: int, topic: str, partition: int, start_offset: int = 0,
                        end_offset: int | None = None) -> list[StoredRecord]:
        return read_partition_dir(self.partition_dir(broker_id, topic, partition), start_offset, end_offset)

    def checkpointed_high_watermark(self, broker_id: int, topic: str, partition: int) -> int | None:
        """The replica's high watermark in its replication-offset-checkpoint, if there."""
        path = os.path.join(self.log_dir(broker_id), "replication-offset-checkpoint")
        return read_offset_checkpoint(path).get((topic, partition))

    def check_acknowledged(self, topic: str, partition: int, acked: Sequence[bytes],
                           brokers: Iterable[int]) -> dict[int, ReplicaCheck]:
        return {b: check_replica(self.replica_records(b, topic, partition), acked) for b in brokers}

    def assert_acknowledged(self, topic: str, partition: int, acked: Sequence[bytes],
                            brokers: Iterable[int]) -> None:
        """Every acknowledged value exactly once and in order on each of ``brokers``."""
        checks = self.check_acknowledged(topic, partition, acked, brokers)
        bad = {b: c.summary() for b, c in checks.items() if not c.ok}
        assert not bad, f"{topic}-{partition} ({len(acked)} acknowledged): {bad}"

    def assert_all_acknowledged(self, acks: AckedRecords, brokers: Iterable[int] | None = None) -> None:
        """``assert_acknowledged`` for every partition ``acks`` saw, on ``brokers`` or else on the
        members of that partition's current ISR (as the live brokers agree on it)."""
        for (topic, partition), acked in sorted(acks.acked.items()):
            where = brokers if brokers is not None else self.wait_for_leader(topic, partition).isr
            self.assert_acknowledged(topic, partition, acked, where)
