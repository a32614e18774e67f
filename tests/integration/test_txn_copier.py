"""Exactly-once consume-transform-produce under kill -9 (KIP-98, KIP-447): 3 controllers and
3 brokers (ReplicatedCluster), topics of replication factor 3 with min.insync.replicas 2,
``__transaction_state`` replicated 3 ways (min.isr 2, the defaults).

A copier (clients/txn_copier.py: confluent-kafka, a transactional producer, a read_committed
consumer in a group, ``send_offsets_to_transaction``) runs as its own process and copies every
record of ``in`` to ``out`` (value + b"!", same key, same partition), committing a transaction
every few hundred records. While it runs the test kills with SIGKILL, and starts again:

| fault                        | what must hold                                                 |
|------------------------------|----------------------------------------------------------------|
| a leader of ``out``          | the open transaction's writes go to the new leader, or it is   |
|                              | aborted and redone; the markers reach the new leader           |
| a leader of ``in``           | the consumer follows the new leader; offsets stay committed    |
| the transaction coordinator  | the leader of the copier's ``__transaction_state`` partition:  |
|                              | a new coordinator loads the state and finishes or aborts the   |
|                              | transaction it finds                                           |
| the copier                   | the same transactional id fences the dead one and aborts its   |
|                              | open transaction; the group resumes from the committed offsets |

The copier is also started again when its watchdog ends it (exit code 3, a commit that did not
return within its HUNG_S): librdkafka 2.10 and later can wait forever in
send_offsets_to_transaction once the group coordinator's broker left the cluster's metadata
(confluentinc/librdkafka#5511), which a kill -9 of that broker makes happen. A restart is what
an application's liveness check does; it is one more copier kill as far as exactly-once goes,
and the report counts them.

At the end a read_committed reader of ``out`` sees, in each partition, exactly the records of
the same partition of ``in`` in their order (nothing lost, nothing twice) and reaches the high
watermark (no transaction left hanging); a read_uncommitted reader may see more: the aborted
copies, which are the evidence that the faults cut transactions short. The default test copies
a few thousand records with one fault of each kind; the slow one copies 100,000 with the faults
repeated.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter

import pytest

from broker.transactions.storage import partition_for
from protocol import messages as M
from protocol.client import KafkaConnection
from tests.integration.replicated_cluster import ReplicatedCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(600)

BROKERS = (4, 5, 6)
PARTITIONS = 6
TXN_STATE_PARTITIONS = 5
TXN_STATE = "__transaction_state"
COPIER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "txn_copier.py")
HUNG_EXIT = 3  # clients/txn_copier.py's watchdog
PROGRESS_WAIT_S = 90.0
ISR_WAIT_S = 60.0
DOWN_WAIT_S = 15.0


@pytest.fixture(scope="module")
def cluster():
    with ReplicatedCluster(broker_extra={"transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
                                         "replica.lag.time.max.ms": "4000"}) as c:
        yield c


@pytest.fixture(autouse=True)
def all_brokers_back(cluster):
    yield
    for b in BROKERS:
        if not cluster.brokers[b].running:
            cluster.restart(b)


# ---- the copier process ----------------------------------------------------------------------


class CopierProcess:
    """clients/txn_copier.py as a child process, started again after each kill with the same
    transactional id and group; what every run printed, summed."""

    def __init__(self, cluster: ReplicatedCluster, source: str, sink: str, commit_every: int,
                 max_rate: float) -> None:
        self.args = [sys.executable, COPIER, "--max-rate", str(max_rate),
                     "--bootstrap", ",".join(cluster.brokers[b].bootstrap for b in BROKERS),
                     "--transactional-id", f"copier-{uuid.uuid4().hex[:8]}",
                     "--group", f"copier-{uuid.uuid4().hex[:8]}",
                     "--source", source, "--sink", sink, "--commit-every", str(commit_every)]
        self.transactional_id = self.args[self.args.index("--transactional-id") + 1]
        self.progress = 0
        self.aborts = 0
        self.commits = 0
        self.runs = 0
        self.kills = 0
        self.hung_restarts = 0
        self.proc: subprocess.Popen | None = None
        self._stderr = None
        self._reader: threading.Thread | None = None
        self._lines: list[str] = []

    def start(self) -> CopierProcess:
        assert self.proc is None or self.proc.poll() is not None
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.runs += 1
        self.progress = 0  # this run's sums: absolute positions, but of the partitions it holds
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        return self

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            word, _, rest = line.strip().partition(" ")
            self._lines.append(line.strip())
            if word == "progress":
                self.commits += 1
                self.progress = max(self.progress, int(rest))
            elif word == "aborted":
                self.aborts += 1

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(10)
        self.kills += 1

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def failure(self, what: str) -> str:
        rc = None if self.proc is None else self.proc.poll()
        return (f"{what}; copier exit code {rc}, progress {self.progress}, last lines {self._lines[-10:]}\n"
                f"stderr: {self.stderr()}")

    def restart_if_hung(self) -> bool:
        """Start the copier again if its watchdog ended it; whether it did."""
        if self.proc.poll() != HUNG_EXIT:
            return False
        self._reader.join(10)
        self.hung_restarts += 1
        self.start()
        return True

    def wait_for_progress(self, at_least: int, timeout: float = PROGRESS_WAIT_S,
                          or_done: bool = False) -> None:
        """Until a run printed ``at_least`` (a sum over the partitions that run holds: a run
        that started beside its killed predecessor's lingering membership holds some of them
        until the group's session timeout), or with ``or_done`` until the copier finished."""
        deadline = time.monotonic() + timeout
        while self.progress < at_least:
            if self.restart_if_hung():
                continue
            if or_done and self.proc.poll() == 0:
                return
            if self.proc.poll() is not None:
                raise AssertionError(self.failure(f"the copier stopped before copying {at_least}"))
            if time.monotonic() > deadline:
                raise AssertionError(self.failure(f"no progress to {at_least} within {timeout} s"))
            time.sleep(0.02)

    def wait_for_exit(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while True:
            try:
                rc = self.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(self.failure(f"the copier did not finish within {timeout} s")) from None
            if not self.restart_if_hung():
                break
        self._reader.join(10)
        return rc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill9()


# ---- the cluster side ------------------------------------------------------------------------


def transaction_coordinator(cluster: ReplicatedCluster, transactional_id: str) -> int:
    """The broker FindCoordinator (key type TRANSACTION) names for the id."""
    async def ask(port):
        conn = KafkaConnection("127.0.0.1", port)
        await conn.connect()
        try:
            return await conn.request(10, 4, M.FindCoordinatorRequest(key_type=1,
                                                                      coordinator_keys=[transactional_id]))
        finally:
            await conn.close()

    deadline = time.monotonic() + ISR_WAIT_S
    while True:
        answer = asyncio.run(ask(cluster.brokers[cluster.live_brokers()[0]].port)).coordinators[0]
        if answer.error_code == 0:
            return answer.node_id
        assert time.monotonic() < deadline, f"FindCoordinator(TRANSACTION) kept answering {answer}"
        time.sleep(0.1)


def wait_for_full_isrs(cluster: ReplicatedCluster, partitions: list[tuple[str, int]]) -> None:
    for topic, p in partitions:
        cluster.wait_for_isr(topic, p, BROKERS, ISR_WAIT_S)


def kill_and_restart(cluster: ReplicatedCluster, broker: int, copier: CopierProcess, advance: int,
                     watched: list[tuple[str, int]]) -> bool:
    """SIGKILL ``broker``, wait until its partitions have new leaders and (for a while) for the
    copier to commit ``advance`` more offsets without it; start it again, wait until it is back
    in every watched ISR and the copier has advanced. Whether the copier advanced while the
    broker was down."""
    before = copier.progress
    cluster.kill9(broker)
    for topic, p in watched:
        cluster.wait_for_leader(topic, p, exclude={broker}, timeout=ISR_WAIT_S)
    try:
        copier.wait_for_progress(before + advance, timeout=DOWN_WAIT_S)
        advanced = True
    except AssertionError:
        advanced = False
    cluster.restart(broker)
    wait_for_full_isrs(cluster, watched)
    copier.wait_for_progress(before + advance)
    return advanced


def produce_source(cluster: ReplicatedCluster, topic: str, n: int) -> dict[int, list[bytes]]:
    """``n`` records (idempotent, acks=all) round-robin over the partitions; each partition's
    values in offset order."""
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 20, "broker.address.family": "v4"})
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(n):
        p = i % PARTITIONS
        value = b"rec-%07d" % i
        while True:
            try:
                producer.produce(topic, value=value, key=b"key-%d" % (i % 101), partition=p,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        sent[p].append(value)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    return sent


def read_all(cluster: ReplicatedCluster, topic: str,
             isolation: str) -> tuple[dict[int, list[bytes]], dict[int, int]]:
    """Every partition of ``topic`` from offset 0 to where the reader's end of partition is
    (the last stable offset under read_committed): the values and that end offset."""
    c = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                                  "isolation.level": isolation, "enable.auto.commit": False,
                                  "enable.partition.eof": True, "broker.address.family": "v4"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        ends: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(ends) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic} not read to its end in 60 s: ends {ends}"
            for m in c.consume(1000, timeout=0.5):
                if m.error() and m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    ends[m.partition()] = m.offset()
                elif m.error():
                    raise confluent_kafka.KafkaException(m.error())
                else:
                    values[m.partition()].append(m.value())
                    ends.pop(m.partition(), None)
        return values, ends
    finally:
        c.close()


def high_watermarks(cluster: ReplicatedCluster, topic: str) -> dict[int, int]:
    c = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw",
                                  "broker.address.family": "v4"})
    try:
        return {p: c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def assert_copied_exactly_once(cluster: ReplicatedCluster, sent: dict[int, list[bytes]], sink: str) -> int:
    """Each partition of ``sink`` read_committed holds the source partition's records + b"!",
    each once and in order, up to its high watermark; the number of records a read_uncommitted
    reader sees besides them (the aborted copies)."""
    committed, ends = read_all(cluster, sink, "read_committed")
    for p in range(PARTITIONS):
        want = [v + b"!" for v in sent[p]]
        got = committed[p]
        if got != want:
            counts = Counter(got)
            missing = sorted(set(want) - set(got))
            doubled = sorted(v for v, n in counts.items() if n > 1)
            extra = sorted(set(got) - set(want))
            raise AssertionError(f"{sink}-{p}: {len(got)} records read_committed, {len(want)} sent; "
                                 f"missing {len(missing)} {missing[:5]}, duplicated {len(doubled)} "
                                 f"{doubled[:5]}, unknown {extra[:5]}")
    assert ends == high_watermarks(cluster, sink), "a read_committed reader stops below the high " \
        f"watermark (a transaction left open): ends {ends}"
    uncommitted, _ = read_all(cluster, sink, "read_uncommitted")
    for p in range(PARTITIONS):
        assert set(uncommitted[p]) == {v + b"!" for v in sent[p]}, f"{sink}-{p}: records never copied"
    return sum(len(v) for v in uncommitted.values()) - sum(len(v) for v in sent.values())


# ---- the runs -------------------------------------------------------------------------------


LEADERS = "leaders"  # a leader of ``out``, then one of ``in``
COORDINATOR = "coordinator"
COPIER_KILL = "copier"


def copy_under_faults(cluster: ReplicatedCluster, n: int, commit_every: int, rounds: int,
                      max_rate: float, faults: tuple[str, ...] = (LEADERS, COORDINATOR, COPIER_KILL)) -> dict:
    """Copy ``n`` records while killing, ``rounds`` times over, each of ``faults`` in turn: a
    leader of ``out`` and one of ``in``, the transaction coordinator, the copier; what
    happened, for the report."""
    tag = uuid.uuid4().hex[:6]
    source, sink = f"in-{tag}", f"out-{tag}"
    for topic in (source, sink):
        cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    sent = produce_source(cluster, source, n)
    started = time.monotonic()
    copier = CopierProcess(cluster, source, sink, commit_every, max_rate).start()
    state_partition = partition_for(copier.transactional_id, TXN_STATE_PARTITIONS)
    watched = [(t, p) for t in (source, sink) for p in range(PARTITIONS)] + [(TXN_STATE, state_partition)]
    step = max(1, n // (4 * rounds + 2))
    coordinators = []
    stalled = []  # the brokers whose absence stopped the copier until they came back
    try:
        copier.wait_for_progress(step)
        for r in range(rounds):
            if LEADERS in faults:
                for topic, p in ((sink, r % PARTITIONS), (source, (r + 1) % PARTITIONS)):
                    victim = cluster.leader_of(topic, p)
                    if not kill_and_restart(cluster, victim, copier, step // 2, watched):
                        stalled.append(victim)
            if COORDINATOR in faults:
                coordinator = transaction_coordinator(cluster, copier.transactional_id)
                assert coordinator == cluster.leader_of(TXN_STATE, state_partition)
                coordinators.append(coordinator)
                if not kill_and_restart(cluster, coordinator, copier, step // 2, watched):
                    stalled.append(coordinator)
                assert transaction_coordinator(cluster, copier.transactional_id) in BROKERS
            if COPIER_KILL in faults:
                copier.wait_for_progress(copier.progress + step // 4)
                assert copier.proc.poll() is None, "the copier finished before its kill: nothing was tested"
                copier.kill9()
                copier.start()
                copier.wait_for_progress(step // 2, or_done=True)
        rc = copier.wait_for_exit(PROGRESS_WAIT_S * 2)
        assert rc == 0, copier.failure("the copier failed")
    finally:
        copier.stop()
    aborted_copies = assert_copied_exactly_once(cluster, sent, sink)
    return {"records": n, "faults": faults, "copier_kills": copier.kills,
            "coordinators_killed": coordinators, "stalled_until_restart": stalled,
            "copier_restarts_after_its_watchdog": copier.hung_restarts,
            "transactions_committed": copier.commits,
            "transactions_aborted_by_the_copier": copier.aborts,
            "aborted_copies_read_uncommitted": aborted_copies,
            "wall_s": round(time.monotonic() - started, 1)}


@pytest.mark.slow
def test_consume_transform_produce_copies_every_record_once_through_a_coordinator_and_a_copier_kill(
        cluster):
    """The short version (about 35-60 s): the transaction coordinator's broker and the copier
    killed once each. Slow like the long one, to keep the default run within its budget: there
    transactions under kill -9 of the coordinator and of leaders are the transactional fault
    trial's (tests/faults), send_offsets_to_transaction is tests/integration/test_transactions.py's."""
    report = copy_under_faults(cluster, n=1200, commit_every=40, rounds=1, max_rate=40,
                               faults=(COORDINATOR, COPIER_KILL))
    print(report)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_consume_transform_produce_copies_100000_records_once_under_repeated_kills(cluster):
    report = copy_under_faults(cluster, n=100_000, commit_every=500, rounds=4, max_rate=800)
    print(report)
