"""A seeded random walk over many transactional ids: requests with current, stale and unknown
producer ids and epochs, writes that commit or fail, markers delivered piecemeal or late, timeouts,
and coordinator failovers (the partition reloaded from its log at the next coordinator epoch),
with Kafka's invariants checked after every step."""
import random

import pytest

from broker.transactions import storage
from broker.transactions.coordinator import TransactionConfig
from broker.transactions.state import TxnState
from protocol.errors import Error
from tests.transactions.harness import Node

S = TxnState
IDS = [f"tx-{i}" for i in range(12)]
TOPIC_PARTITIONS = [(t, p) for t in ("a", "b", "c") for p in range(3)]
WRITE_ERRORS = [Error.NOT_LEADER_OR_FOLLOWER, Error.NOT_ENOUGH_REPLICAS, Error.REQUEST_TIMED_OUT]


class Walk:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.now = 0
        self.node = Node(partitions=4, config=TransactionConfig(max_timeout_ms=5000, id_expiration_ms=20000))
        self.epochs = {p: 0 for p in range(4)}
        self.known: dict[str, tuple[int, int]] = {}  # what each producer last heard: (pid, epoch)
        self.last: dict = {}  # transactional id -> its last record's (pid, epoch, state)
        self.durable: dict = {}  # transactional id -> its last record

    @property
    def core(self):
        return self.node.core

    def pid_epoch(self, tid):
        pid, epoch = self.known.get(tid, (self.rng.randrange(900, 1100), 0))
        roll = self.rng.random()
        if roll < 0.1:
            epoch = max(0, epoch - 1)  # a zombie
        elif roll < 0.15:
            epoch += 1
        return pid, epoch

    def heard(self, tid, reply):
        if reply is not None and reply.error_code == 0 and getattr(reply, "producer_id", -1) >= 0:
            self.known[tid] = (reply.producer_id, reply.producer_epoch)

    def run_writes(self):
        """Commit or fail some of the held writes, in order."""
        n = self.rng.randrange(len(self.node.held) + 1)
        moved = set()
        for _ in range(n):
            if not self.node.held:
                break
            w = self.node.held.pop(0)
            error = 0 if self.rng.random() < 0.85 else self.rng.choice(WRITE_ERRORS)
            if not error:
                self.node.logs[w.partition].append(w.record)
            elif error == Error.NOT_LEADER_OR_FOLLOWER:
                moved.add(w.partition)  # the leader moved: its resignation follows
            before = len(self.node.replies)
            self.node.take(self.core.complete_write(w, error, self.now))
            for waiter, reply in self.node.replies[before:]:
                self.heard(waiter, reply)
        for p in sorted(moved):
            self.failover(p)

    def deliver_markers(self, all_of_them=False):
        keep = []
        for m in self.node.markers:
            if not all_of_them and self.rng.random() < 0.5:
                keep.append(m)
                continue
            some = self.rng.randrange(1, len(m.partitions) + 1)
            parts = m.partitions if all_of_them else self.rng.sample(m.partitions, some)
            self.node.take(self.core.on_markers_written(m.transactional_id, m.coordinator_epoch, parts,
                                                        self.now))
            rest = [tp for tp in m.partitions if tp not in parts]
            if rest:
                m.partitions = rest
                keep.append(m)
        self.node.markers = keep

    def failover(self, p=None):
        """The partition's leadership moves: some held writes committed, the rest lost; the new
        coordinator loads the log. The old coordinator's late answers must change nothing."""
        p = self.rng.randrange(4) if p is None else p
        late = [w for w in self.node.held if w.partition == p]
        self.node.held = [w for w in self.node.held if w.partition != p]
        for w in late:
            if self.rng.random() < 0.5:
                self.node.logs[p].append(w.record)
        self.core.unload(p)
        self.epochs[p] += 1
        self.node.load(p, self.epochs[p], self.now)
        for w in late:  # the old owner's writes complete after the move
            assert self.core.complete_write(w, 0, self.now).writes == []

    def step(self):
        self.now += self.rng.randrange(0, 400)
        tid = self.rng.choice(IDS)
        op = self.rng.random()
        if op < 0.15:
            pid, epoch = self.known.get(tid, (-1, -1)) if self.rng.random() < 0.3 else (-1, -1)
            fx = self.core.init_producer_id(tid, self.rng.choice([1000, 3000]), pid, epoch, self.now, tid)
            self.node.take(fx)
            for waiter, reply in fx.replies:
                self.heard(waiter, reply)
        elif op < 0.35:
            pid, epoch = self.pid_epoch(tid)
            parts = self.rng.sample(TOPIC_PARTITIONS, self.rng.randrange(1, 4))
            self.node.take(self.core.add_partitions(tid, pid, epoch, parts, self.now, tid))
        elif op < 0.4:
            pid, epoch = self.pid_epoch(tid)
            self.node.take(self.core.add_offsets(tid, pid, epoch, "g", self.now, tid))
        elif op < 0.55:
            pid, epoch = self.pid_epoch(tid)
            fx = self.core.end_txn(tid, pid, epoch, self.rng.random() < 0.6, self.now, tid)
            self.node.take(fx)
            for waiter, reply in fx.replies:
                self.heard(waiter, reply)
        elif op < 0.75:
            self.run_writes()
        elif op < 0.9:
            self.deliver_markers()
        elif op < 0.97:
            self.node.take(self.core.tick(self.now))
        else:
            self.failover()

    def heal(self):
        """Every write commits, every marker lands: nothing is left prepared."""
        for _ in range(20):
            self.node.flush(self.now)
            self.deliver_markers(all_of_them=True)
            self.node.flush(self.now)
            if not self.node.held and not self.node.markers:
                break

    def check(self, history):
        core = self.core
        self.check_log(history)
        pids = {}
        for tid, meta in core.transactions.items():
            durable = self.durable.get(tid)
            if durable is None:
                # created by InitProducerId, its first write not committed yet
                assert meta.state is S.EMPTY and meta.producer_epoch == -1, (tid, meta)
            else:
                # the state held is the one persisted
                held, persisted = (meta.state, meta.producer_id), (durable.state, durable.producer_id)
                assert held == persisted, (tid, meta, durable)
                assert meta.producer_epoch >= durable.producer_epoch
            assert meta.state not in (S.DEAD, S.PREPARE_EPOCH_FENCE)
            # a producer id belongs to one transactional id: a partition is in at most one
            # transaction of a producer
            assert pids.setdefault(meta.producer_id, tid) == tid

    def check_log(self, history):
        """The records appended since the last check: epochs never go backwards for a producer
        id, and a PrepareX is followed by its CompleteX."""
        for p, log in self.node.logs.items():
            for k, v in log[history.get(p, 0):]:
                tid = storage.parse_key(k)
                meta = storage.parse_value(tid, v)
                if meta is None:
                    self.last.pop(tid, None)
                    self.durable.pop(tid, None)
                    continue
                self.durable[tid] = meta
                prev = self.last.get(tid)
                if prev is not None and prev[0] == meta.producer_id:
                    assert meta.producer_epoch >= prev[1], (tid, prev, meta)
                if prev is not None and prev[2] in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    # a PrepareX is followed by its CompleteX and nothing else
                    done = S.COMPLETE_COMMIT if prev[2] is S.PREPARE_COMMIT else S.COMPLETE_ABORT
                    assert meta.state is done, (tid, prev, meta)
                self.last[tid] = (meta.producer_id, meta.producer_epoch, meta.state)
            history[p] = len(log)


@pytest.mark.parametrize("seed", range(8))
def test_random_walk_keeps_kafkas_invariants(seed):
    walk = Walk(seed)
    history: dict[int, int] = {}
    for _ in range(1500):
        walk.step()
        walk.check(history)
    walk.heal()
    walk.check(history)
    # every PrepareX was followed by its CompleteX once the markers were written
    for tid, meta in walk.core.transactions.items():
        assert meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT), (tid, meta)
        assert meta.pending is None
    states = {meta.state for meta in walk.core.transactions.values()}
    assert states, "the walk created transactions"


def test_the_walk_reaches_every_persisted_state():
    seen = set()
    for seed in range(8):
        walk = Walk(seed)
        for _ in range(1500):
            walk.step()
        for log in walk.node.logs.values():
            for k, v in log:
                m = storage.parse_value(storage.parse_key(k), v)
                seen.add(S.DEAD if m is None else m.state)
    assert seen == set(S) - {S.PREPARE_EPOCH_FENCE}
