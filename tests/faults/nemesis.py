"""The nemesis of a fault trial: a seeded schedule of faults, and the code that injects and heals
them on a cluster whose nodes each run in their own network namespace (tests/faults/hosts.py).

A schedule is a list of Fault(at, kind, targets, duration), each healed after its duration and
followed by a quiet gap. Most faults come alone, so the history shows the cluster's answer to
each; with probability OVERLAP a process fault (a kill, a pause, a torn write or a lost disk)
starts while a network fault is on, as crashes happen during partitions. Nodes are the
cluster's: controllers 1-3, brokers 4-6.

| kind               | what happens                                                             |
|--------------------|--------------------------------------------------------------------------|
| kill               | kill -9 of a node (controller or broker), restarted after the duration   |
| kill-leader        | kill -9 of a partition's leader, restarted after the duration            |
| kill-controller    | kill -9 of the active controller, restarted after the duration           |
| kill-two           | kill -9 of two brokers at once: acks=all cannot be met until one is back |
| kill-read-replica  | in a trial with racks: kill -9 of the broker in the consumers' rack,     |
|                    | which they fetch the partitions it follows from (KIP-392); restarted     |
|                    | after the duration. The detail names the partitions it followed and led  |
| pause              | SIGSTOP of a node for longer than the session and lag timeouts, SIGCONT  |
| partition          | a random majority and minority of all nodes lose each other              |
| isolate-leader     | a partition's leader loses every other node (clients still reach it)     |
| isolate-controller | the active controller loses every other node                              |
| bridge             | two halves that both keep one node, which sees both sides                |
| one-way            | a partition leader's packets to one follower are lost, not the reverse   |
| loss               | every packet between nodes is lost with probability LOSS_PROBABILITY     |
| latency            | a slow link both ways between a partition leader and a follower, or a    |
|                    | broker and the active controller: every byte through a delaying proxy    |
| torn-write         | kill -9 of a broker, its active segment of one partition cut inside the  |
|                    | last batch and garbage written after it, then restarted                  |
| corrupt            | kill -9 of a broker and bits flipped in one of its files: an offset or   |
|                    | time index, the active segment's last batches, or the high watermark     |
|                    | checkpoint. Restarted: it must rebuild or truncate, or refuse to start   |
|                    | with one line naming the file; then the nemesis, as an operator would,   |
|                    | deletes that file and starts it again                                    |
| wipe               | kill -9 of a broker, its partition directories deleted (a lost disk),    |
|                    | restarted empty                                                          |
| disk-full          | a broker's log dir (its own tmpfs in such a trial) filled to the last    |
|                    | byte: it must halt with exit code 1 (a log dir failure) within           |
|                    | HALT_WAIT_S; the filler is deleted and the broker restarted              |
| kill-txn-coordinator | in a transactional trial: kill -9 of the leader of the __transaction_state |
|                    | partition of one of the producers' transactional ids (its transaction    |
|                    | coordinator), restarted after the duration                               |
| reassign           | not a fault but an operator's move that faults may hit: one replica of a |
|                    | partition reassigned away (kafka-python's alter_partition_reassignments; |
|                    | its broker deletes its copy, a removed leader hands over), then the      |
|                    | original replicas back, the returning one re-replicating from empty      |

The schedule is a pure function of the seed, the kinds and the length; injecting it depends on
the cluster's state at the time (which broker leads, which controller is active), and each
injected fault records the nodes it hit.
"""
from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from tests.faults.hosts import Network
from tests.faults.proxy import DelayProxy
from tests.integration.quorum_cluster import Controller
from tests.integration.replicated_cluster import ReplicatedCluster
from tests.storage import tmpfs

KINDS = ("kill", "kill-leader", "kill-controller", "kill-two", "kill-read-replica", "pause", "partition",
         "isolate-leader", "isolate-controller", "bridge", "one-way", "loss", "latency", "torn-write",
         "corrupt", "wipe", "disk-full", "reassign")
PROCESS_KINDS = {"kill", "kill-leader", "kill-controller", "kill-two", "kill-read-replica", "pause",
                 "torn-write", "corrupt", "wipe", "disk-full"}
TXN_KINDS = ("kill-txn-coordinator",)  # kinds that need a transactional trial (its producers' ids)
PROCESS_KINDS |= set(TXN_KINDS)
TXN_STATE_TOPIC = "__transaction_state"
RACK_KINDS = {"kill-read-replica"}  # kinds that need a trial with racks (trial.py makes one)
BROKER_DISK_KIB = 128 * 1024  # a broker's log dir in a trial with disk-full faults: its own tmpfs
HALT_WAIT_S = 15.0  # how long a broker whose disk is full gets to halt
REFUSAL_WAIT_S = 10.0  # how long a broker restarted on a corrupt file gets to refuse it or answer
OVERLAP = 0.35  # the chance that a process fault starts while a network fault is on
LOSS_PROBABILITY = 0.2
LATENCY_S = (0.05, 0.3)  # a slow link's delay each way, plus up to as much again of jitter
QUIET_S = (1.0, 3.0)
DURATION_S = {"pause": (6.0, 8.0), "kill": (1.0, 4.0), "kill-leader": (1.0, 4.0),
              "kill-controller": (1.0, 4.0), "kill-read-replica": (1.0, 4.0), "kill-two": (2.0, 5.0),
              "torn-write": (1.0, 2.0), "corrupt": (1.0, 2.0), "wipe": (1.0, 2.0), "disk-full": (2.0, 4.0),
              "reassign": (2.0, 5.0), "kill-txn-coordinator": (1.0, 4.0)}
NETWORK_DURATION_S = (4.0, 8.0)
REASSIGN_TIMEOUT_MS = 10_000  # an AlterPartitionReassignments request's
REASSIGN_TRIES = 5  # moving the replicas back, a second apart (faults may be on)


@dataclass
class Fault:
    at: float  # seconds after the workload starts
    kind: str
    duration: float
    choice: int  # the seeded draw that picks targets once the cluster's state is known
    targets: list[int] = field(default_factory=list)  # filled when injected
    detail: str = ""
    started: float | None = None  # workload clock when injected and healed
    healed: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def schedule(seed: int, kinds: list[str], length_s: float) -> list[Fault]:
    """Faults drawn in turn from ``kinds`` (shuffled), until ``length_s`` is used up, sorted by
    start; a process fault may ride on a network fault (OVERLAP)."""
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    faults, at, i = [], rng.uniform(*QUIET_S), 0
    while True:
        kind = order[i % len(order)]
        duration = round(rng.uniform(*DURATION_S.get(kind, NETWORK_DURATION_S)), 2)
        if at + duration > length_s and faults:
            break
        fault = Fault(round(at, 2), kind, duration, rng.randrange(1 << 30))
        faults.append(fault)
        end = at + duration
        i += 1
        following = order[i % len(order)]
        if kind not in PROCESS_KINDS and following in PROCESS_KINDS and rng.random() < OVERLAP:
            rider_at = at + rng.uniform(0.2, 0.7) * duration
            rider = round(rng.uniform(*DURATION_S[following]), 2)
            if rider_at + rider <= length_s:
                faults.append(Fault(round(rider_at, 2), following, rider, rng.randrange(1 << 30)))
                end = max(end, rider_at + rider)
                i += 1
        at = end + rng.uniform(*QUIET_S)
    return sorted(faults, key=lambda f: f.at)


class Nemesis:
    """``read_replica``: in a trial with racks, the broker in the consumers' rack; ``consumers``:
    their client namespace, whose byte counts (hosts.Network.received) a kill-read-replica fault
    reads as it starts and heals."""

    def __init__(self, cluster: ReplicatedCluster, net: Network, topic: str, partitions: int,
                 read_replica: int | None = None, consumers: int | None = None) -> None:
        self.cluster, self.net, self.topic, self.partitions = cluster, net, topic, partitions
        self.read_replica, self.consumers = read_replica, consumers
        self.counted: dict[int, dict[int, int]] = {}  # fault's choice -> bytes received at its start
        self.stopped: set[int] = set()  # nodes the schedule has stopped and not restarted
        self.paused: set[int] = set()
        self.proxies: list[DelayProxy] = []
        self.moved: dict[int, tuple[int, list[int]]] = {}  # reassign fault's choice -> (partition, replicas)
        self.transactional_ids: list[str] = []  # a transactional trial's producers
        self.txn_state_partitions = 50  # transaction.state.log.num.partitions

    # ---- state ---------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[int]:
        return sorted([*self.cluster.controllers, *self.cluster.brokers])

    def _node(self, node_id: int):
        return self.cluster.brokers.get(node_id) or self.cluster.controllers[node_id]

    def _leader(self, rng: random.Random) -> int:
        p = rng.randrange(self.partitions)
        for _ in range(3):
            try:
                leader = self.cluster.leader_of(self.topic, p)
                if leader in self.cluster.brokers:
                    return leader
            except (AssertionError, KeyError, ValueError):
                pass
            time.sleep(0.2)
        return rng.choice(sorted(self.cluster.brokers))

    def _only_in_sync_replica_of(self, broker: int) -> list[int]:
        """The partitions whose ISR is ``broker`` alone, as the live brokers describe them now."""
        alone = []
        for p in range(self.partitions):
            try:
                if self.cluster.isr_of(self.topic, p) == {broker}:
                    alone.append(p)
            except (AssertionError, KeyError, ValueError, OSError):
                pass
        return alone

    def _roles_of(self, broker: int) -> str:
        """The partitions the broker follows and those it leads, as another live broker says."""
        others = [b for b in self.cluster.live_brokers() if b != broker] or [broker]
        view = self.cluster.metadata(others[0])
        if view is None:
            return "its partitions unknown (no metadata)"
        mine = [p for p in view.partitions if p.topic == self.topic and broker in p.replicas]
        follows = sorted(p.partition for p in mine if p.leader != broker)
        leads = sorted(p.partition for p in mine if p.leader == broker)
        return f"follower of partitions {follows}, leader of {leads}"

    def _txn_coordinator(self, rng: random.Random) -> tuple[int, str]:
        """The leader of one producer's __transaction_state partition (Kafka's partitionFor:
        the id's Java hashCode, its sign bit cleared, modulo the partition count) and a detail."""
        if not self.transactional_ids:
            raise ValueError("kill-txn-coordinator needs a transactional trial (its producers' ids)")
        tid = rng.choice(self.transactional_ids)
        partition = txn_state_partition(tid, self.txn_state_partitions)
        for _ in range(10):
            try:
                leader = self.cluster.leader_of(TXN_STATE_TOPIC, partition)
                if leader in self.cluster.brokers:
                    return leader, f"coordinator of {tid} ({TXN_STATE_TOPIC}-{partition})"
            except (AssertionError, KeyError, ValueError, OSError):
                pass
            time.sleep(0.2)
        return rng.choice(sorted(self.cluster.brokers)), f"{TXN_STATE_TOPIC}-{partition} has no leader known"

    def _follower_of(self, leader: int, rng: random.Random) -> int:
        return rng.choice([b for b in sorted(self.cluster.brokers) if b != leader])

    def _active_controller(self, rng: random.Random) -> int:
        view = self.cluster.quorum.leader_view()
        return view.leader_id if view is not None else rng.choice(sorted(self.cluster.controllers))

    # ---- inject and heal -----------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        rng = random.Random(fault.choice)
        kind = fault.kind
        if kind in ("kill", "kill-leader", "kill-controller", "kill-two", "kill-read-replica",
                    "kill-txn-coordinator"):
            if kind == "kill":
                fault.targets = [rng.choice(self.nodes)]
            elif kind == "kill-read-replica":
                if self.read_replica is None:
                    raise ValueError("kill-read-replica needs a trial with racks (a read replica)")
                fault.targets = [self.read_replica]
                fault.detail = self._roles_of(self.read_replica)
                if self.consumers is not None:
                    self.counted[fault.choice] = self.net.received(self.consumers)
            elif kind == "kill-leader":
                fault.targets = [self._leader(rng)]
            elif kind == "kill-controller":
                fault.targets = [self._active_controller(rng)]
            elif kind == "kill-txn-coordinator":
                target, fault.detail = self._txn_coordinator(rng)
                fault.targets = [target]
            else:
                fault.targets = sorted(rng.sample(sorted(self.cluster.brokers), 2))
            for target in fault.targets:
                self._stop(target)
        elif kind == "pause":
            target = rng.choice(self.nodes)
            fault.targets = [target]
            if target in self.stopped:
                fault.detail = "already stopped"
            else:
                os.kill(self._node(target).proc.pid, signal.SIGSTOP)
                self.paused.add(target)
                if target in self.cluster.brokers:
                    self.cluster.paused.add(target)
        elif kind in ("torn-write", "corrupt", "wipe"):
            target = rng.choice(sorted(self.cluster.brokers))
            fault.targets = [target]
            alone = self._only_in_sync_replica_of(target)
            self._stop(target)
            if kind == "corrupt":
                partition = rng.randrange(self.partitions)
                fault.detail = flip_bits(self.cluster, target, self.topic, partition, rng)
            elif kind == "wipe":
                fault.detail = f"deleted {len(self.cluster.wipe_partitions(target))} partition directories"
            else:
                partition = rng.randrange(self.partitions)
                fault.detail = tear_tail(self.cluster, target, self.topic, partition, rng)
            if alone:  # the replication rules protect a record while one in-sync replica keeps it
                fault.detail += (f"; it was the only in-sync replica of partitions {alone}: what only it "
                                 "held is beyond the guarantee")
        elif kind == "disk-full":
            target = rng.choice(sorted(self.cluster.brokers))
            fault.targets = [target]
            fault.detail = self._fill_disk(target)
        elif kind == "partition":
            nodes = self.nodes
            rng.shuffle(nodes)
            cut = rng.randrange(1, len(nodes) // 2 + 1)
            minority, majority = set(nodes[:cut]), set(nodes[cut:])
            fault.targets = sorted(minority)
            fault.detail = f"{sorted(minority)} | {sorted(majority)}"
            self.net.partition([minority, majority])
        elif kind in ("isolate-leader", "isolate-controller"):
            target = self._leader(rng) if kind == "isolate-leader" else self._active_controller(rng)
            fault.targets = [target]
            self.net.partition([{target}, set(self.nodes) - {target}])
        elif kind == "bridge":
            nodes = self.nodes
            rng.shuffle(nodes)
            middle = nodes[0]
            half = (len(nodes) - 1) // 2
            a, b = {middle, *nodes[1:1 + half]}, {middle, *nodes[1 + half:]}
            fault.targets = [middle]
            fault.detail = f"{sorted(a)} | {sorted(b)} through {middle}"
            self.net.partition([a, b])
        elif kind == "one-way":
            leader = self._leader(rng)
            follower = self._follower_of(leader, rng)
            fault.targets = [leader, follower]
            fault.detail = f"{leader} -> {follower} lost"
            self.net.drop(leader, follower)
        elif kind == "latency":
            a = self._leader(rng)
            b = self._follower_of(a, rng) if rng.random() < 0.5 else self._active_controller(rng)
            delay = round(rng.uniform(*LATENCY_S), 3)
            fault.targets = [a, b]
            fault.detail = f"{a} <-> {b} delayed {delay * 1000:.0f}+{delay * 1000:.0f} ms"
            for src, dst in ((a, b), (b, a)):
                to = (self.net.address(dst), self._node(dst).port)
                proxy = DelayProxy(self.net.gateway, to, delay, delay, rng.randrange(1 << 30))
                self.proxies.append(proxy)
                self.net.redirect(src, *to, proxy.port)
        elif kind == "loss":
            fault.targets = self.nodes
            fault.detail = f"p={LOSS_PROBABILITY}"
            self.net.loss(LOSS_PROBABILITY)
        elif kind == "reassign":
            partition = rng.randrange(self.partitions)
            try:
                replicas = list(self.cluster.partition(self.topic, partition).replicas)
            except (AssertionError, AttributeError, KeyError, ValueError, OSError):
                fault.detail = f"partition {partition}: replicas unknown, nothing moved"
                return
            removed = rng.choice(replicas)
            target = [r for r in replicas if r != removed]
            fault.targets = [removed]
            self.moved[fault.choice] = (partition, replicas)
            answer = self._reassign(partition, target)
            fault.detail = f"partition {partition}: {replicas} -> {target}: {answer}"
        else:
            raise ValueError(f"unknown fault kind {kind!r}")

    def _stop(self, node_id: int) -> None:
        """kill -9 (a paused node too: SIGKILL ends a stopped process)."""
        self._node(node_id).kill9()
        self.paused.discard(node_id)
        self.cluster.paused.discard(node_id)
        self.stopped.add(node_id)

    def _reassign(self, partition: int, replicas: list[int]) -> str:
        """AlterPartitionReassignments through kafka-python's admin client, as an operator would
        send it, bootstrapped from the brokers the schedule has not stopped: the partition's
        error name, or why the request got no answer."""
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        up = [b for b in sorted(self.cluster.brokers) if b not in self.stopped and b not in self.paused]
        tp = TopicPartition(self.topic, partition)
        security = self.cluster.security.kafka_python_config() if self.cluster.security else {}
        try:
            admin = KafkaAdminClient(bootstrap_servers=[self.cluster.brokers[b].bootstrap for b in up],
                                     request_timeout_ms=REASSIGN_TIMEOUT_MS, bootstrap_timeout_ms=5000,
                                     **security)
        except Exception as e:  # noqa: BLE001 -- any failure is the answer, reported in the detail
            return f"no admin client ({type(e).__name__})"
        try:
            error = admin.alter_partition_reassignments({tp: replicas}).get(tp, "no answer")
            return "NONE" if error is None else getattr(error, "__name__", str(error))
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
        finally:
            admin.close()

    def _move_back(self, fault: Fault) -> None:
        moved = self.moved.pop(fault.choice, None)
        if moved is None:
            return
        partition, replicas = moved
        for _ in range(REASSIGN_TRIES):
            answer = self._reassign(partition, replicas)
            if answer == "NONE":
                break
            time.sleep(1.0)
        fault.detail += f"; back to {replicas}: {answer}"

    def heal(self, fault: Fault) -> None:
        if fault.kind == "kill-read-replica" and fault.choice in self.counted:
            before, now = self.counted.pop(fault.choice), self.net.received(self.consumers)
            while_down = {b: n - before.get(b, 0) for b, n in sorted(now.items())}
            fault.detail += f"; bytes the consumers got from each broker while it was down: {while_down}"
        if fault.kind == "reassign":
            self._move_back(fault)
        elif fault.kind == "disk-full":
            filler = os.path.join(self.cluster.log_dir(fault.targets[0]), FILLER)
            if os.path.exists(filler):
                os.unlink(filler)
            self._revive(fault.targets[0])
        elif fault.kind == "corrupt":
            fault.detail += "; " + self._revive_corrupted(fault.targets[0])
        elif fault.kind in PROCESS_KINDS:
            for target in fault.targets:
                self._revive(target)
        else:
            self.net.heal()
            self._stop_proxies()

    def _stop_proxies(self) -> None:
        for proxy in self.proxies:
            proxy.stop()  # closes the connections it carried: the nodes reconnect directly
        self.proxies.clear()

    def _revive(self, node_id: int) -> None:
        if node_id in self.paused:
            os.kill(self._node(node_id).proc.pid, signal.SIGCONT)
            self.paused.discard(node_id)
            self.cluster.paused.discard(node_id)
        if node_id in self.stopped:
            # spawn only: a node restarted inside a network fault may not get ready until it
            # heals; the trial waits for the whole cluster to serve once everything has healed
            Controller.start(self._node(node_id))
            self.stopped.discard(node_id)

    def _fill_disk(self, node_id: int) -> str:
        """Fill the broker's log dir; it must halt with exit code 1 once a write fails."""
        broker = self.cluster.brokers[node_id]
        if not broker.running or node_id in self.paused:
            return "not running: nothing written"
        tmpfs.fill(broker.metadata_dir, FILLER)
        deadline = time.monotonic() + HALT_WAIT_S
        while broker.running and time.monotonic() < deadline:
            time.sleep(0.05)
        if broker.running:
            raise AssertionError(broker.failure(f"broker {node_id} kept running on a full disk for "
                                                f"{HALT_WAIT_S}s"))
        self.stopped.add(node_id)
        self.cluster.paused.discard(node_id)
        if broker.proc.returncode != 1:
            raise AssertionError(broker.failure(f"broker {node_id} on a full disk exited "
                                                f"{broker.proc.returncode}, not 1"))
        return "halted with exit code 1"

    def _revive_corrupted(self, node_id: int) -> str:
        """Start a broker whose files were corrupted; if it refuses to start, the file its one
        line names is deleted (it must name one) and it starts again."""
        if node_id not in self.stopped:
            return "already running"
        broker = self.cluster.brokers[node_id]
        mark = os.path.getsize(broker.log_path) if os.path.exists(broker.log_path) else 0
        self._revive(node_id)
        # A broker loads its logs before it opens its listeners: one that answers has not refused.
        deadline = time.monotonic() + REFUSAL_WAIT_S
        while time.monotonic() < deadline and broker.running:
            if broker.metadata(min(1.0, max(0.1, deadline - time.monotonic()))) is not None:
                return "started"
            time.sleep(0.1)
        if broker.running:
            return "started"
        with open(broker.log_path, errors="replace") as f:
            f.seek(mark)
            said = f.read()
        named = [p for p in _paths_in(said) if p.startswith(broker.metadata_dir) and os.path.isfile(p)]
        if not named:
            raise AssertionError(f"broker {node_id} refused to start without naming a file:\n{said[-2000:]}")
        os.unlink(named[0])
        self.stopped.add(node_id)
        self._revive(node_id)
        return f"refused to start naming {os.path.basename(named[0])}, which was deleted"

    def heal_all(self) -> None:
        self.net.heal()
        self._stop_proxies()
        for node_id in sorted(self.paused | self.stopped):
            self._revive(node_id)


FILLER = "disk-full-filler"


def txn_state_partition(transactional_id: str, partitions: int) -> int:
    """The __transaction_state partition of a transactional id, as Kafka places it."""
    h = 0
    for unit in transactional_id.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


@contextlib.contextmanager
def own_disk(data_dir: str, size_kib: int) -> Iterator[None]:
    """A formatted broker's data dir moved onto a tmpfs of its own (unmounted on the way out)."""
    formatted = data_dir + ".formatted"
    shutil.move(data_dir, formatted)
    with tmpfs.mounted(data_dir, size_kib):
        tmpfs.copy_into(formatted, data_dir)
        yield


def _paths_in(text: str) -> list[str]:
    """Absolute paths in a log line, without what follows them (``file:8: why`` names file)."""
    return re.findall(r"/[^\s:'\"(),;]+", text)


def flip_bits(cluster: ReplicatedCluster, broker_id: int, topic: str, partition: int,
              rng: random.Random) -> str:
    """Flip a few bits of one of a stopped broker's files (see the table above)."""
    directory = cluster.partition_dir(broker_id, topic, partition)
    choices = []
    if os.path.isdir(directory):
        stems = sorted(n[:-4] for n in os.listdir(directory) if n.endswith(".log"))
        if stems:
            active = os.path.join(directory, stems[-1])
            choices += [active + ".index", active + ".timeindex", active + ".log"]
    choices.append(os.path.join(cluster.log_dir(broker_id), "replication-offset-checkpoint"))
    path = rng.choice(choices)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return f"{os.path.basename(path)} absent or empty, nothing flipped"
    size = os.path.getsize(path)
    lo, hi = 0, size
    if path.endswith(".log"):  # within the last batches: after the recovery point
        lo = max(0, size - 4096)
    elif path.endswith("index"):  # among the first entries (a preallocated index is zeros after)
        hi = min(size, 8192)
    with open(path, "r+b") as f:
        flips = []
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(lo, hi)
            f.seek(at)
            byte = f.read(1)[0] ^ (1 << rng.randrange(8))
            f.seek(at)
            f.write(bytes([byte]))
            flips.append(at)
    return f"{os.path.relpath(path, cluster.log_dir(broker_id))}: bits flipped at {flips}"


def tear_tail(cluster: ReplicatedCluster, broker_id: int, topic: str, partition: int,
              rng: random.Random) -> str:
    """Cut a stopped broker's active segment inside its last batch and write garbage after the
    cut: the torn write of a crash in the middle of an append."""
    directory = cluster.partition_dir(broker_id, topic, partition)
    try:
        logs = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    except FileNotFoundError:
        return f"{topic}-{partition} not on broker {broker_id}"
    if not logs:
        return f"{topic}-{partition} has no segment on broker {broker_id}"
    path = os.path.join(directory, logs[-1])
    size = os.path.getsize(path)
    if size == 0:
        return f"{path} is empty"
    cut = max(0, size - rng.randrange(1, min(size, 4096) + 1))
    garbage = rng.randbytes(rng.randrange(0, 512))
    with open(path, "r+b") as f:
        f.truncate(cut)
        f.seek(cut)
        f.write(garbage)
    return (f"{os.path.basename(directory)}/{logs[-1]}: cut {size - cut} of {size} bytes, "
            f"{len(garbage)} garbage")
