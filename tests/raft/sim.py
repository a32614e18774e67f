"""Seeded simulation of a KRaft quorum: voters and observers under one scheduler.

One ``random.Random(seed)`` drives everything: the network (drops, delays that reorder,
duplicates, partitions), hard kills (the process dies between a step and its persistence, losing
the unpersisted election state and unflushed log tail) and client appends on whichever node
believes it leads. Each node runs the pure ``RaftCore`` behind a driver that follows the Ready
contract (persist, flush, send, apply). After every event the invariants below are checked; a
failure raises ``SimulationFailure`` naming the seed and a one-line replay command.

| invariant                | how it is checked                                                      |
|--------------------------|------------------------------------------------------------------------|
| one leader per epoch     | every (epoch -> leader) ever seen is remembered                        |
| log matching             | hash chain per log; (offset, epoch) maps to one chain hash, globally   |
| leader completeness      | a leader of epoch E holds all entries committed by leaders of epochs < E |
| HW never decreases       | per node and incarnation (the HW lives in memory, as in Kafka)         |
| committed prefixes agree | every node's chain hash at HW - 1 equals the global committed chain    |

Replay one run: ``python3 -m tests.raft.sim --seed 17 --voters 5``.
"""
from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from dataclasses import dataclass, field, replace

from raft.core import RaftCore, Truncate
from raft.log import MemoryRaftLog
from raft.quorum_state import ElectionState, Leader, QuorumConfig

SIM_CONFIG = QuorumConfig(election_timeout_ms=50, fetch_timeout_ms=100, election_backoff_max_ms=50,
                          retry_backoff_ms=5, request_timeout_ms=40, fetch_max_wait_ms=20,
                          fetch_max_entries=20, election_backoff_base_ms=5)


class SimulationFailure(AssertionError):
    pass


@dataclass
class Faults:
    drop: float = 0.05
    duplicate: float = 0.02
    max_delay_ms: int = 8
    crash_mid_step: float = 0.002
    crash_every_ms: int = 400  # mean time between hard kills of a random node; 0 disables
    partition_every_ms: int = 300  # mean time between partitions; 0 disables

    @classmethod
    def none(cls) -> Faults:
        return cls(0.0, 0.0, 3, 0.0, 0, 0)


# Each seed picks a fault profile and a Fetch size (small Fetches split an epoch's entries over
# several answers, which is what the epoch-start-offset rule is about), so the seed alone replays.
PROFILES = (Faults(), Faults(crash_every_ms=100, crash_mid_step=0.01),
            Faults(drop=0.2, duplicate=0.05, max_delay_ms=20, crash_every_ms=150, partition_every_ms=100))
FETCH_MAX_ENTRIES = (1, 3, 20)


@dataclass
class Node:
    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    durable: ElectionState | None = None
    core: RaftCore | None = None
    incarnation: int = 0
    hashes: list[int] = field(default_factory=list)  # chain hash of the log prefix ending at each offset
    last_hw: int = 0
    next_tick: int | None = None


class Simulation:
    def __init__(self, seed: int, voters: int = 3, observers: int = 1, faults: Faults | None = None,
                 config: QuorumConfig | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or PROFILES[seed % len(PROFILES)]
        fetch_max_entries = FETCH_MAX_ENTRIES[seed // len(PROFILES) % len(FETCH_MAX_ENTRIES)]
        self.config = config or replace(SIM_CONFIG, fetch_max_entries=fetch_max_entries)
        self.replay = f"python3 -m tests.raft.sim --seed {seed} --voters {voters} --observers {observers}"
        if faults is not None and faults in PROFILES:
            self.replay += f" --profile {PROFILES.index(faults)}"
        elif faults == Faults.none():
            self.replay += " --no-faults"
        if config is not None:
            self.replay += f" --fetch-max-entries {config.fetch_max_entries}"
        self.voter_ids = frozenset(range(1, voters + 1))
        ids = list(range(1, voters + 1)) + [100 + i for i in range(observers)]
        self.nodes = {i: Node(i) for i in ids}
        self.now = 0
        self._queue: list = []
        self._seq = 0
        self.partition: frozenset[int] | None = None
        self.events = 0
        self.appended = 0
        # invariant state
        self.leader_of_epoch: dict[int, int] = {}
        self.chain_at: dict[tuple[int, int], int] = {}
        self.committed: list[int] = []
        self.committed_by_epoch: dict[int, int] = {}  # leader epoch -> highest HW it reached

    # ---- scheduling ----------------------------------------------------------------------------
    def _at(self, time_ms: int, kind: str, *args) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time_ms, self._seq, kind, args))

    def run(self, duration_ms: int = 2000) -> Simulation:
        try:
            self._run(duration_ms)
        except SimulationFailure:
            raise
        except Exception as exc:  # a RaftInvariantError or a log refusing a write is a failure too
            self._fail(f"{type(exc).__name__}: {exc}")
        return self

    def _run(self, duration_ms: int) -> None:
        for node in self.nodes.values():
            self._start(node)
        self._at(10, "append")
        if self.faults.crash_every_ms:
            self._at(self.rng.randrange(2 * self.faults.crash_every_ms), "crash")
        if self.faults.partition_every_ms:
            self._at(self.rng.randrange(2 * self.faults.partition_every_ms), "partition")
        while self._queue:
            t, _, kind, args = heapq.heappop(self._queue)
            if t > duration_ms:
                break
            self.now = t
            self.events += 1
            getattr(self, "_on_" + kind)(*args)
            self._check()

    # ---- events --------------------------------------------------------------------------------
    def _start(self, node: Node) -> None:
        node.incarnation += 1
        node.last_hw = node.log.high_watermark
        core_rng = random.Random(self.seed * 1_000_003 + node.node_id * 1009 + node.incarnation)
        node.core = RaftCore(node.node_id, self.voter_ids, node.log, core_rng, node.durable, self.now,
                             self.config)
        node.next_tick = None
        self._process(node, node.core.tick(self.now))

    def _on_tick(self, node_id: int, incarnation: int, when: int) -> None:
        node = self.nodes[node_id]
        if node.core is None or node.incarnation != incarnation or node.next_tick != when:
            return
        node.next_tick = None
        self._process(node, node.core.tick(self.now))

    def _on_deliver(self, src: int, dst: int, message) -> None:
        node = self.nodes[dst]
        if node.core is None or self._blocked(src, dst):
            return
        self._process(node, node.core.step(self.now, src, message))

    def _on_append(self) -> None:
        for node in self.nodes.values():
            if node.core is not None and isinstance(node.core.state, Leader):
                self.appended += 1
                self._process(node, node.core.append(self.now, [f"v{self.appended}"]))
        self._at(self.now + self.rng.randint(5, 30), "append")

    def _on_crash(self) -> None:
        live = [n for n in self.nodes.values() if n.core is not None]
        if live:
            self._kill(self.rng.choice(live))
        self._at(self.now + self.rng.randrange(2 * self.faults.crash_every_ms), "crash")

    def _on_restart(self, node_id: int) -> None:
        self._start(self.nodes[node_id])

    def _on_partition(self) -> None:
        ids = sorted(self.nodes)
        self.partition = frozenset(self.rng.sample(ids, self.rng.randint(1, len(ids) // 2)))
        self._at(self.now + self.rng.randint(50, 400), "heal")

    def _on_heal(self) -> None:
        self.partition = None
        self._at(self.now + self.rng.randrange(2 * self.faults.partition_every_ms), "partition")

    def _kill(self, node: Node) -> None:
        node.core = None
        node.log.crash()
        del node.hashes[len(node.log.entries):]
        self._at(self.now + self.rng.randint(20, 150), "restart", node.node_id)

    # ---- the driver: carry out a Ready -----------------------------------------------------------
    def _process(self, node: Node, ready) -> None:
        if self.rng.random() < self.faults.crash_mid_step:
            self._kill(node)  # died before the quorum-state write and the flush
            return
        if ready.persist is not None:
            node.durable = ready.persist
        node.log.flush()
        self._record_log(node, ready.log_ops)
        for dst, message in ready.messages:
            self._send(node.node_id, dst, message)
        self._record_high_watermark(node)
        deadline = max(node.core.next_deadline_ms(), self.now + 1)
        if node.next_tick is None or deadline < node.next_tick:
            node.next_tick = deadline
            self._at(deadline, "tick", node.node_id, node.incarnation, deadline)

    def _send(self, src: int, dst: int, message) -> None:
        f = self.faults
        if self._blocked(src, dst) or self.rng.random() < f.drop:
            return
        copies = 2 if self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            self._at(self.now + self.rng.randint(1, f.max_delay_ms), "deliver", src, dst, message)

    def _blocked(self, a: int, b: int) -> bool:
        return self.partition is not None and ((a in self.partition) != (b in self.partition))

    # ---- invariants ------------------------------------------------------------------------------
    def _record_log(self, node: Node, log_ops) -> None:
        for op in log_ops:
            if isinstance(op, Truncate):
                del node.hashes[op.offset:]
        del node.hashes[len(node.log.entries):]
        for entry in node.log.entries[len(node.hashes):]:
            prev = node.hashes[-1] if node.hashes else 0
            h = hash((prev, entry.epoch, repr(entry.value)))
            node.hashes.append(h)
            known = self.chain_at.setdefault((entry.offset, entry.epoch), h)
            if known != h:
                self._fail(f"log matching: node {node.node_id} holds a different entry or prefix at "
                           f"(offset {entry.offset}, epoch {entry.epoch})")

    def _record_high_watermark(self, node: Node) -> None:
        hw = node.log.high_watermark
        if hw < node.last_hw:
            self._fail(f"high watermark of node {node.node_id} went from {node.last_hw} to {hw}")
        if hw > len(node.hashes):
            self._fail(f"high watermark {hw} of node {node.node_id} past its log end {len(node.hashes)}")
        node.last_hw = hw
        if hw == 0:
            return
        if hw <= len(self.committed):
            if self.committed[hw - 1] != node.hashes[hw - 1]:
                self._fail(f"committed prefixes disagree: node {node.node_id} at offset {hw - 1}")
        else:
            n = len(self.committed)
            if n and self.committed[n - 1] != node.hashes[n - 1]:
                self._fail(f"committed prefixes disagree: node {node.node_id} at offset {n - 1}")
            self.committed.extend(node.hashes[n:hw])
        state = node.core.state
        if isinstance(state, Leader):
            self.committed_by_epoch[state.epoch] = max(hw, self.committed_by_epoch.get(state.epoch, 0))

    def _check(self) -> None:
        for node in self.nodes.values():
            state = node.core.state if node.core is not None else None
            if not isinstance(state, Leader):
                continue
            leader = self.leader_of_epoch.setdefault(state.epoch, node.node_id)
            if leader != node.node_id:
                self._fail(f"two leaders in epoch {state.epoch}: {leader} and {node.node_id}")
            must_hold = max((h for e, h in self.committed_by_epoch.items() if e < state.epoch), default=0)
            if must_hold and (len(node.hashes) < must_hold or node.hashes[must_hold - 1]
                              != self.committed[must_hold - 1]):
                self._fail(f"leader completeness: leader {node.node_id} of epoch {state.epoch} lacks "
                           f"committed offsets below {must_hold}")

    def _fail(self, what: str) -> None:
        raise SimulationFailure(
            f"seed {self.seed}, {len(self.voter_ids)} voters, t={self.now} ms, event {self.events}: {what}\n"
            f"replay: {self.replay}")

    def summary(self) -> str:
        epochs = max(self.leader_of_epoch, default=0)
        return (f"seed {self.seed}: {self.events} events, {len(self.leader_of_epoch)} leaders up to epoch "
                f"{epochs}, {len(self.committed)} committed of {self.appended} appended")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="run seeds seed .. seed + SEEDS - 1")
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=1)
    parser.add_argument("--duration-ms", type=int, default=2000)
    parser.add_argument("--profile", type=int, help="fault profile (index into PROFILES); default: by seed")
    parser.add_argument("--fetch-max-entries", type=int, help="default: by seed")
    parser.add_argument("--no-faults", action="store_true")
    args = parser.parse_args(argv)
    parser_faults = Faults.none() if args.no_faults else None
    faults = PROFILES[args.profile] if args.profile is not None else parser_faults
    config = replace(SIM_CONFIG, fetch_max_entries=args.fetch_max_entries) if args.fetch_max_entries else None
    started = time.perf_counter()
    for seed in range(args.seed, args.seed + args.seeds):
        sim = Simulation(seed, args.voters, args.observers, faults, config).run(args.duration_ms)
        print(sim.summary())
    print(f"{args.seeds} seeds in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
