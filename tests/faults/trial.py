"""One fault trial: a cluster of 3 controllers and 3 brokers, each in its own network namespace,
a workload of idempotent acks=all producers and consumers, a seeded schedule of faults, and the
checker's verdict on the history once the faults heal.

    python -m tests.faults.trial --seed 7 [--kinds kill,partition] [--length 40]   # a replay
    python -m tests.faults.trial --seed 7 --kinds kill-read-replica,loss --racks   # with racks
    python -m tests.faults.trial --seed 6 --secure   # SASL_SSL on every listener
    STROM_KEEP_CLUSTER_DIR=1 python -m tests.faults.trial ...   # and keep every node's log and data

The steps, each bounded in time:

1. Hosts (tests/faults/hosts.py) and the cluster (tests/integration/replicated_cluster.py, with
   short timeouts so faults bite within seconds: TRIAL_BROKER_CONFIG); a topic of PARTITIONS
   partitions, RF=3, min.insync.replicas=2. A trial with racks (``--racks``, and any trial with
   a kind of nemesis.RACK_KINDS) gives every broker a rack of its own (``rack-<id>``) and Kafka's
   rack-aware replica selector (RACK_BROKER_CONFIG); its consumers set client.rack to the read
   replica's rack (a broker the seed picks), so they fetch from it the partitions it follows
   (KIP-392), and they run in a client namespace where the bytes each broker sends them are
   counted (``read_bytes``; ``read_share``: the read replica's part). A secure trial
   (``--secure``) has SASL_SSL on every listener, the controllers' and the inter-broker one
   included (quorum_cluster's ClusterSecurity: SCRAM-SHA-512 on the brokers', PLAIN on the
   controllers'), and every client of the trial connects with it; the namespaces' addresses are
   not in the test certificate, so the certificate chain is checked but not the host name.
2. The workload (tests/faults/workload.py) runs while the nemesis (tests/faults/nemesis.py)
   injects the schedule's faults one at a time and heals each.
3. Everything heals; the cluster must serve again within RECOVERY_BOUND_S: every partition takes
   an acks=all write and every live broker agrees on its leader (``recovery_s``).
4. The producers stop and wait for every outcome; the consumers read on until they reach the
   high watermark of every partition (or CATCH_UP_S passes: what they did not reach is unseen).
5. What exists is read: every partition from offset 0 to its high watermark through a fresh
   consumer (FinalRead), every replica's segment files (ReplicaLog, with its ISR membership and
   the leader's high watermark), and the group's committed offsets (Committed).
6. The checker (tests/faults/checker.py) judges the history; processes that died outside the
   schedule are reported too.

A failed trial's result names its seed, schedule and the command that replays it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import sys
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.faults import checker as C
from tests.faults.hosts import Network, exit_on_sigterm
from tests.faults.nemesis import BROKER_DISK_KIB, KINDS, RACK_KINDS, Fault, Nemesis, own_disk, schedule
from tests.faults.workload import CLIENT_TIMEOUTS, TxnWorkload, Workload, close_producer
from tests.integration.cluster import render_properties
from tests.integration.replicated_cluster import ReplicatedCluster

log = logging.getLogger("strom.faults")

PARTITIONS = 6
PROBE = b"probe"  # the recovery probe's value: not the workload's, left out of what is checked
TOPIC = "jepsen"
RECOVERY_BOUND_S = 45.0
CATCH_UP_S = 30.0
FINAL_READ_S = 30.0
TRIAL_BROKER_CONFIG = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
}
TRIAL_CONTROLLER_CONFIG = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500"}
# A trial with racks: one rack a broker, and the selector that answers a consumer in a follower's
# rack with that follower as its preferred read replica.
RACK_BROKER_CONFIG = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
CONSUMERS = 7  # the client namespace of a trial with racks: the workload's consumers, counted
# Small segments: every partition rolls every few seconds, so the roll's flush, its producer
# snapshot and recovery from the last roll all meet every kind of fault.
TRIAL_TOPIC_CONFIG = {"segment.bytes": "16384"}


@dataclass
class TrialResult:
    seed: int
    kinds: list[str]
    length_s: float
    schedule: list[dict] = field(default_factory=list)
    sent: int = 0
    acked: int = 0
    unknown: int = 0
    checked: int = 0  # acknowledged records the final read could judge (present, or lost)
    recovery_s: float | None = None
    failovers: list[dict] = field(default_factory=list)  # per fault: the longest stall it caused
    racks: bool = False
    read_replica: int | None = None  # with racks: the broker in the consumers' rack
    read_bytes: dict[int, int] = field(default_factory=dict)  # with racks: bytes each broker sent them
    dead: list[int] = field(default_factory=list)  # nodes not running that the schedule did not stop
    dead_why: dict[int, str] = field(default_factory=dict)  # each dead node's exit code and log tail
    fatal: list[str] = field(default_factory=list)  # producers' fatal errors
    crashed: list[str] = field(default_factory=list)  # workload threads an unexpected exception ended
    check: dict = field(default_factory=dict)
    ok: bool = False
    error: str = ""
    transactional: bool = False
    secure: bool = False  # SASL_SSL on every listener
    transactions: dict = field(default_factory=dict)  # a transactional trial's: outcome -> count
    phases: dict = field(default_factory=dict)  # a transactional trial's: seconds each step took
    history: list = field(default_factory=list, repr=False)  # what the checker saw, for a post-mortem

    @property
    def replay(self) -> str:
        return (f"python -m tests.faults.trial --seed {self.seed} --kinds {','.join(self.kinds)} "
                f"--length {self.length_s:g}" + (" --racks" if self.racks else "")
                + (" --transactional" if self.transactional else "")
                + (" --secure" if self.secure else ""))

    @property
    def read_share(self) -> float | None:
        """With racks: the part of the bytes the brokers sent the consumers that the read replica
        sent (record data, and the group's and metadata answers it gave)."""
        total = sum(self.read_bytes.values())
        if self.read_replica is None or not total:
            return None
        return round(self.read_bytes.get(self.read_replica, 0) / total, 4)

    def summary(self) -> str:
        faults = "\n".join(f"  {f['at']:6.2f}s {f['kind']:<18} {f['targets']} {f['detail']} "
                           f"({f['duration']:.1f}s)" for f in self.schedule)
        if self.transactional:
            return (f"transactional trial seed {self.seed}: {'ok' if self.ok else 'FAILED'}; records "
                    f"written {self.sent}, in committed transactions {self.acked}; transactions "
                    f"{self.transactions}; recovery {self.recovery_s}s, dead {self.dead}, fatal "
                    f"errors {len(self.fatal)}; seconds at each step {self.phases}\n{faults}\n"
                    f"{self.check.get('summary', '')}{self._deaths()}"
                    f"{self.error}\nreplay: {self.replay}")
        return (f"trial seed {self.seed}: {'ok' if self.ok else 'FAILED'}; sent {self.sent}, acked "
                f"{self.acked}, unknown {self.unknown}, read back {self.checked}, recovery "
                f"{self.recovery_s}s, dead {self.dead}, producers' fatal errors {self.fatal}\n"
                f"{faults}\n{self.check.get('summary', '')}"
                f"{self._reads()}{self._deaths()}{self.error}\nreplay: {self.replay}")

    def _deaths(self) -> str:
        return ("".join(f"\nnode {n} died outside the schedule, {why}" for n, why in self.dead_why.items())
                + "".join(f"\nworkload thread crashed: {why}" for why in self.crashed))

    def _reads(self) -> str:
        if self.read_replica is None:
            return ""
        each = ", ".join(f"{b}: {n}" for b, n in sorted(self.read_bytes.items()))
        return (f"\nconsumers in rack-{self.read_replica}: bytes from each broker {{{each}}}, "
                f"read replica's share {self.read_share}")

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "history"}
        d["replay"] = self.replay
        d["read_share"] = self.read_share
        return d


def _wait_until_serving(cluster: ReplicatedCluster, topic: str, partitions: int, bound_s: float) -> float:
    """Seconds until every partition acknowledged an acks=all probe and the brokers agree."""
    start = time.monotonic()
    producer = Producer({**cluster.client_config(),
                         "acks": "all", "enable.idempotence": True, **CLIENT_TIMEOUTS,
                         "message.timeout.ms": int(bound_s * 1000), "logger": log})
    pending = set(range(partitions))
    done: set[int] = set()
    try:
        while pending and time.monotonic() - start < bound_s:
            for p in sorted(pending):
                producer.produce(topic, PROBE, partition=p,
                                 on_delivery=lambda err, msg, p=p: err is None and done.add(p))
            producer.flush(max(1.0, bound_s - (time.monotonic() - start)))
            pending -= done
    finally:
        close_producer(producer)
    if pending:
        raise AssertionError(f"partitions {sorted(pending)} took no acks=all write within {bound_s}s")
    cluster.wait_for_metadata_agreement(timeout=max(1.0, bound_s - (time.monotonic() - start)))
    return round(time.monotonic() - start, 3)


def _final_reads(client: dict, topic: str, partitions: int) -> list:
    """Every partition from its log start to its high watermark (as listed once the producers
    stopped), through one fresh consumer assigned them all."""
    consumer = Consumer({**client, "group.id": f"{topic}-final",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": log})
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        bounds = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                  for p in range(partitions)}
        next_offset = {p: low for p, (low, _) in bounds.items()}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in bounds.items()])
        deadline = time.monotonic() + FINAL_READ_S * partitions
        while (any(next_offset[p] < high for p, (_, high) in bounds.items())
               and time.monotonic() < deadline):
            for msg in consumer.consume(1000, 0.2):
                p = msg.partition()
                if msg.error() is not None or p is None:
                    continue
                if msg.value() != PROBE:
                    records[p].append((msg.offset(), msg.value().decode()))
                next_offset[p] = max(next_offset[p], msg.offset() + 1)
    finally:
        consumer.close()
    return [C.FinalRead(topic, p, records[p], min(next_offset[p], bounds[p][1])) for p in range(partitions)]


def _committed(client: dict, topic: str, partitions: int) -> list:
    consumer = Consumer({**client, "group.id": f"{topic}-g", "logger": log})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [C.Committed(f"{topic}-g", topic, tp.partition, tp.offset) for tp in tps if tp.offset >= 0]
    finally:
        consumer.close()


def _producer_epochs(stored: list) -> list[tuple[int, int, int]]:
    """(first offset, producer id, producer epoch) at each change of them along a replica's log."""
    runs: list[tuple[int, int, int]] = []
    for r in stored:
        if not runs or runs[-1][1:] != (r.producer_id, r.producer_epoch):
            runs.append((r.offset, r.producer_id, r.producer_epoch))
    return runs


def _replicas(cluster: ReplicatedCluster, topic: str, partitions: int, client: dict) -> list:
    consumer = Consumer({**client, "group.id": f"{topic}-hw", "logger": log})
    out = []
    try:
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            isr = cluster.isr_of(topic, p)
            for b in sorted(cluster.brokers):
                stored = cluster.replica_records(b, topic, p)
                held = [(r.offset, r.value.decode()) for r in stored
                        if r.value is not None and r.value != PROBE]
                # an ISR member holds everything below the leader's high watermark; another replica
                # only what its own checkpoint says was committed when it last wrote it
                own = high if b in isr else min(high, cluster.checkpointed_high_watermark(b, topic, p) or 0)
                out.append(C.ReplicaLog(b, topic, p, b in isr, own, held, _producer_epochs(stored)))
    finally:
        consumer.close()
    return out


def _failovers(faults: list[Fault], history: list) -> list[dict]:
    """Per fault: the longest time, over partitions, from the fault to the first acknowledgement
    of a value sent after it."""
    acks = {(e.producer, e.value): e.time for e in history if isinstance(e, C.Ack)}
    sends = [e for e in history if isinstance(e, C.Send)]
    out = []
    for f in faults:
        if f.started is None:
            continue
        stall = 0.0
        for p in {s.partition for s in sends}:
            after = [acks[(s.producer, s.value)] for s in sends
                     if s.partition == p and s.time >= f.started and (s.producer, s.value) in acks]
            if after:
                stall = max(stall, min(after) - f.started)
        out.append({"kind": f.kind, "targets": f.targets, "stall_s": round(stall, 3)})
    return out


def _give_racks(cluster: ReplicatedCluster) -> None:
    """A rack of its own for every (formatted, not started) broker: ``rack-<id>``."""
    for node_id, broker in cluster.brokers.items():
        with open(broker.config_path, "a") as f:
            f.write(render_properties({"broker.rack": f"rack-{node_id}"}))


def run_trial(seed: int, kinds: list[str] | None = None, length_s: float = 30.0, producers: int = 2,
              rate: float = 100.0, racks: bool | None = None, secure: bool = False) -> TrialResult:
    """``racks``: None gives racks to a trial whose kinds need them (nemesis.RACK_KINDS);
    ``secure``: SASL_SSL on every listener."""
    kinds = list(kinds or KINDS)
    racks = bool(RACK_KINDS & set(kinds)) if racks is None else racks
    result = TrialResult(seed, kinds, length_s, racks=racks, secure=secure)
    faults = schedule(seed, kinds, length_s)
    clients = [CONSUMERS] if racks else []
    with Network(range(1, 7), random.Random(seed), clients) as net, contextlib.ExitStack() as disks:
        hosts = lambda n: (net.address(n), net.prefix(n))  # noqa: E731
        cluster = ReplicatedCluster(hosts=hosts, broker_extra={**TRIAL_BROKER_CONFIG,
                                                               **(RACK_BROKER_CONFIG if racks else {})},
                                    controller_extra=TRIAL_CONTROLLER_CONFIG, secure=secure)
        if racks:
            _give_racks(cluster)
            result.read_replica = sorted(cluster.brokers)[seed % len(cluster.brokers)]
            for node_id, broker in cluster.brokers.items():
                net.count_from(CONSUMERS, node_id, broker.port)
        if "disk-full" in kinds:  # each broker's log dir its own small filesystem
            for broker in cluster.brokers.values():
                disks.enter_context(own_disk(broker.metadata_dir, BROKER_DISK_KIB))
        with cluster:
            client = cluster.client_config()  # every broker, and the cluster's security
            cluster.create_topic(TOPIC, PARTITIONS, configs=TRIAL_TOPIC_CONFIG)
            nemesis = Nemesis(cluster, net, TOPIC, PARTITIONS, result.read_replica,
                              CONSUMERS if racks else None)
            rack = None if result.read_replica is None else f"rack-{result.read_replica}"
            workload = Workload(client, TOPIC, PARTITIONS, producers, rate, rack=rack,
                                enter=(lambda: net.enter(CONSUMERS)) if racks else None)
            try:  # every client of the workload ends with the trial, passed or failed
                workload.start()
                _run_schedule(nemesis, workload, faults, length_s, cluster, result)
                result.unknown = workload.stop_producers()
                result.fatal = workload.fatal()
                _catch_up(workload, client)
                workload.stop_consumers()
            finally:
                workload.close()
                result.crashed = workload.crashed()
            if racks:
                result.read_bytes = net.received(CONSUMERS)
            history = list(workload.history)
            reads = _final_reads(client, TOPIC, PARTITIONS)
            replicas = _replicas(cluster, TOPIC, PARTITIONS, client)
            committed = _committed(client, TOPIC, PARTITIONS)
    checked = C.check(history, reads, replicas, committed, ignore={PROBE.decode()})
    result.sent = sum(1 for e in history if isinstance(e, C.Send))
    result.acked = sum(1 for e in history if isinstance(e, C.Ack))
    result.checked = checked.checked
    result.failovers = _failovers(faults, history)
    result.history = [*history, *reads, *replicas, *committed]  # all the checker saw
    result.check = checked.to_dict()
    result.ok = (checked.ok and not result.dead and not result.error and not result.fatal
                 and not result.crashed)
    return result


def _run_schedule(nemesis: Nemesis, workload, faults: list[Fault], length_s: float,
                  cluster: ReplicatedCluster, result: TrialResult) -> None:
    """Inject and heal ``faults`` on the workload's clock, every start and every heal in time
    order (a process fault may ride on a network one), until ``length_s``; then heal what is
    left and record the schedule, the nodes dead outside it (with their exit code and log
    tail), and how soon the cluster serves again."""
    events = sorted([(f.at, 0, i) for i, f in enumerate(faults)]
                    + [(f.at + f.duration, 1, i) for i, f in enumerate(faults)])
    try:
        for at, heal, i in events:
            _sleep_until(workload, at)
            if heal:
                nemesis.heal(faults[i])
                faults[i].healed = workload.clock()
            else:
                faults[i].started = workload.clock()
                nemesis.inject(faults[i])
        _sleep_until(workload, length_s)
    finally:
        nemesis.heal_all()
    result.schedule = [f.as_dict() for f in faults]
    result.dead = [n for n in nemesis.nodes if not nemesis._node(n).running]
    result.dead_why = {n: f"exit {nemesis._node(n).proc.returncode}:\n{nemesis._node(n).log_tail(20)}"
                       for n in result.dead}
    try:
        result.recovery_s = _wait_until_serving(cluster, TOPIC, PARTITIONS, RECOVERY_BOUND_S)
    except AssertionError as e:
        result.error = f"cluster did not serve again: {e}"


def _sleep_until(workload: Workload, at: float) -> None:
    delay = at - workload.clock()
    if delay > 0:
        time.sleep(delay)


def _catch_up(workload: Workload, client: dict) -> None:
    consumer = Consumer({**client, "group.id": f"{TOPIC}-hw", "logger": log})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()
    deadline = time.monotonic() + CATCH_UP_S
    while time.monotonic() < deadline:
        reached = workload.polled_up_to()
        if all(reached.get((c.name, p), 0) >= end for c in workload.consumers for p, end in ends.items()):
            return
        time.sleep(0.2)


# ---- the transactional trial ------------------------------------------------------------------
# The same cluster and nemesis, the transactional workload (workload.py's TxnWorkload) and
# checker.check_transactions. After the heal: the cluster must serve again, the producers end
# their transactions, then every partition's last stable offset must reach its high watermark
# within STABLE_S (a transaction left open is aborted by its timeout, 10 s), and each partition
# is read whole at both isolation levels.
TXN_BROKER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
STABLE_S = 40.0


def _admin(client: dict):
    from confluent_kafka.admin import AdminClient

    return AdminClient({**client, "logger": log})


def _stable(client: dict, topic: str, partitions: int, bound_s: float) -> list:
    """ListOffsets latest at both isolation levels, again until they agree for every partition
    or ``bound_s`` passes: the last answer, as Stable events."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(client)
    deadline = time.monotonic() + bound_s
    found: dict[int, C.Stable] = {}
    while True:
        ends: dict[IsolationLevel, dict[int, int]] = {}
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            ask = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
            try:
                answers = admin.list_offsets(ask, isolation_level=level, request_timeout=10)
                ends[level] = {tp.partition: f.result(timeout=15).offset for tp, f in answers.items()}
            except Exception as e:  # noqa: BLE001 -- a fault's tail: asked again until the bound
                log.info("list_offsets: %s", e)
        if len(ends) == 2:
            found = {p: C.Stable(topic, p, ends[IsolationLevel.READ_COMMITTED][p],
                                 ends[IsolationLevel.READ_UNCOMMITTED][p]) for p in range(partitions)}
            if all(s.last_stable >= s.high_watermark for s in found.values()):
                break
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return list(found.values())


def _read_whole(client: dict, topic: str, partitions: int, isolation: str, ends: dict[int, int]) -> list:
    """Every partition from its start up to ``ends[p]`` at one isolation level, through one
    consumer assigned them all (its position passes control batches and aborted records, so it
    is what says a partition's read is done)."""
    consumer = Consumer({**client, "group.id": f"{topic}-final-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "logger": log})
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    position = {p: 0 for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + FINAL_READ_S * partitions
        while any(position[p] < ends.get(p, 0) for p in range(partitions)) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                p = msg.partition()
                if msg.error() is None and p is not None and msg.value() != PROBE:
                    records[p].append((msg.offset(), msg.value().decode()))
            for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)]):
                position[tp.partition] = max(position[tp.partition], tp.offset)
    finally:
        consumer.close()
    return [C.TxnRead(isolation, topic, p, records[p], min(position[p], ends.get(p, 0)))
            for p in range(partitions)]


def run_txn_trial(seed: int, kinds: list[str], length_s: float = 30.0, producers: int = 2,
                  secure: bool = False) -> TrialResult:
    """A trial of the transactional workload: ``kinds`` may hold kill-txn-coordinator."""
    result = TrialResult(seed, list(kinds), length_s, transactional=True, secure=secure)
    faults = schedule(seed, list(kinds), length_s)
    t0 = time.monotonic()
    mark = lambda step: result.phases.__setitem__(step, round(time.monotonic() - t0, 1))  # noqa: E731
    with Network(range(1, 7), random.Random(seed)) as net:
        hosts = lambda n: (net.address(n), net.prefix(n))  # noqa: E731
        cluster = ReplicatedCluster(hosts=hosts, broker_extra={**TRIAL_BROKER_CONFIG, **TXN_BROKER_CONFIG},
                                    controller_extra=TRIAL_CONTROLLER_CONFIG, secure=secure)
        with cluster:
            client = cluster.client_config()  # every broker, and the cluster's security
            cluster.create_topic(TOPIC, PARTITIONS, configs=TRIAL_TOPIC_CONFIG)
            nemesis = Nemesis(cluster, net, TOPIC, PARTITIONS)
            workload = TxnWorkload(client, TOPIC, PARTITIONS, seed, producers)
            nemesis.transactional_ids = workload.transactional_ids
            mark("cluster up")
            try:  # every client of the workload ends with the trial, passed or failed
                workload.start()
                _run_schedule(nemesis, workload, faults, length_s, cluster, result)
                mark("faults healed")
                workload.stop_producers()
                result.fatal = workload.fatal()
                mark("producers stopped")
                stable = _stable(client, TOPIC, PARTITIONS, STABLE_S)
                ends = {s.partition: s.high_watermark for s in stable}
                mark("stable")
                reads = [*_read_whole(client, TOPIC, PARTITIONS, "read_committed",
                                      {s.partition: s.last_stable for s in stable}),
                         *_read_whole(client, TOPIC, PARTITIONS, "read_uncommitted", ends)]
                mark("read")
                # what a read_committed consumer can poll ends at the last committed record, which
                # markers and aborted records may leave well below the last stable offset
                _catch_up_to(workload, {r.partition: max((o for o, _ in r.records), default=-1) + 1
                                        for r in reads if r.isolation == "read_committed"})
                workload.stop_consumers()
                mark("consumers caught up")
            finally:
                workload.close()
                result.crashed = workload.crashed()
            history = list(workload.history)
        mark("cluster down")
    checked = C.check_transactions(history, reads, stable, ignore={PROBE.decode()})
    result.sent = sum(len(e.records) for e in history if isinstance(e, C.Txn))
    result.acked = checked.acknowledged
    result.checked = checked.checked
    result.transactions = {o: checked.counts[f"txn_{o}"] for o in C.OUTCOMES}
    result.history = [*history, *reads, *stable]
    result.check = checked.to_dict()
    # fatal errors are expected here (a zombie is fenced, a coordinator's loss may fence a
    # producer): the checker judges what they left; a thread of the workload that died is not
    result.ok = checked.ok and not result.dead and not result.error and not result.crashed
    return result


def _catch_up_to(workload: TxnWorkload, ends: dict[int, int]) -> None:
    deadline = time.monotonic() + CATCH_UP_S
    while time.monotonic() < deadline:
        reached = workload.polled_up_to()
        if all(reached.get((c.name, p), 0) >= end for c in workload.consumers for p, end in ends.items()):
            return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one fault trial (a replay, given a failed seed)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--length", type=float, default=30.0)
    parser.add_argument("--racks", action="store_true",
                        help="a rack a broker and consumers in one of them (implied by kill-read-replica)")
    parser.add_argument("--transactional", action="store_true",
                        help="the transactional workload and checker (kinds may add kill-txn-coordinator)")
    parser.add_argument("--secure", action="store_true",
                        help="SASL_SSL on every listener, the controllers' and the inter-broker one included")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--verbose", action="store_true", help="show the clients' own log lines")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("strom.faults.client").setLevel(logging.INFO if args.verbose else logging.CRITICAL)
    exit_on_sigterm()
    if args.transactional:
        result = run_txn_trial(args.seed, args.kinds.split(","), args.length, secure=args.secure)
    else:
        result = run_trial(args.seed, args.kinds.split(","), args.length, racks=args.racks or None,
                           secure=args.secure)
    print(result.summary())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.as_dict(), f, indent=1, default=str)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
