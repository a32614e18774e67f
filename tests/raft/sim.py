"""Seeded simulation of a KRaft quorum: voters and observers under one scheduler.

One ``random.Random(seed)`` drives everything: the network (drops, delays that reorder,
duplicates, partitions), hard kills (the process dies between a step and its persistence, losing
the unpersisted election state and unflushed log tail) and client appends on whichever node
believes it leads. A killed process closes its connections: each node that can reach it hears so
(``handle_leader_disconnect``, most of the time: some closes are lost), and a Fetch sent to it
until it restarts is refused; a partition carries neither. Connections of live leaders are reset
now and then too, and sometimes refused (a firewall's reset), so that a follower wrongly sure its
leader is gone is exercised as well. A second ``random.Random`` draws these, so a run without
kills or resets replays as before. Each node runs the pure ``RaftCore`` behind a driver that follows the Ready
contract (persist, flush, send, apply). After every event the invariants below are checked; a
failure raises ``SimulationFailure`` naming the seed and a one-line replay command.

| invariant                | how it is checked                                                      |
|--------------------------|------------------------------------------------------------------------|
| one leader per epoch     | every (epoch -> leader) ever seen is remembered                        |
| log matching             | hash chain per log; (offset, epoch) maps to one chain hash, globally   |
| leader completeness      | a leader of epoch E holds all entries committed by leaders of epochs < E |
| HW never decreases       | per node and incarnation (the HW lives in memory, as in Kafka)         |
| committed prefixes agree | every node's chain hash at HW - 1 equals the global committed chain    |
| snapshots are committed  | a snapshot's content is the committed chain hash at its end offset     |
| one voter change at once | each VotersRecord differs from the set before it by one voter at most  |
| concurrent changes fail  | of two voter changes sent to a leader at once, at most one succeeds    |

With ``--reconfig`` (kraft.version 1, KIP-853) the logs start from the bootstrap checkpoint,
spare replicas start as observers, and the scheduler also adds and removes voters (sometimes two
requests at once), wipes a replica's disk (it comes back with a new directory id) and takes
snapshots. Replay one run: ``python3 -m tests.raft.sim --seed 17 --voters 5``.
"""
from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from dataclasses import dataclass, field, replace

from raft import messages as m
from raft.core import RaftCore, Truncate
from raft.log import MemoryRaftLog
from raft.quorum_state import ElectionState, Follower, Leader, Prospective, QuorumConfig
from raft.voters import VoterSet
from tests.raft.harness import bootstrap_log, directory_id, voter

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
    close_on_kill: float = 0.9  # chance a reachable node hears a killed one close; 0: no closes
    reset_every_ms: int = 250  # mean time between resets of a live leader's connection; 0 disables

    @classmethod
    def none(cls) -> Faults:
        return cls(0.0, 0.0, 3, 0.0, 0, 0, 0.0, 0)

    def without_closes(self) -> Faults:
        return replace(self, close_on_kill=0.0, reset_every_ms=0)


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
    disk: int = 0  # bumped when the disk is wiped: a new directory id
    hashes: list[int] = field(default_factory=list)  # chain hash of the log prefix ending at each offset
    last_hw: int = 0
    next_tick: int | None = None


class Simulation:
    def __init__(self, seed: int, voters: int = 3, observers: int = 1, faults: Faults | None = None,
                 config: QuorumConfig | None = None, reconfig: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or PROFILES[seed % len(PROFILES)]
        fetch_max_entries = FETCH_MAX_ENTRIES[seed // len(PROFILES) % len(FETCH_MAX_ENTRIES)]
        self.config = config or replace(SIM_CONFIG, fetch_max_entries=fetch_max_entries)
        self.close_rng = random.Random(seed * 1_000_033 + 17)
        self.replay = f"python3 -m tests.raft.sim --seed {seed} --voters {voters} --observers {observers}"
        if faults is not None and faults in PROFILES:
            self.replay += f" --profile {PROFILES.index(faults)}"
        elif faults is not None and faults in [p.without_closes() for p in PROFILES]:
            self.replay += f" --profile {[p.without_closes() for p in PROFILES].index(faults)} --no-closes"
        elif faults == Faults.none():
            self.replay += " --no-faults"
        if config is not None:
            self.replay += f" --fetch-max-entries {config.fetch_max_entries}"
        self.reconfig = reconfig
        if reconfig:
            self.replay += " --reconfig"
        self.voter_ids = frozenset(range(1, voters + 1))
        ids = list(range(1, voters + 1)) + [100 + i for i in range(observers)]
        self.nodes = {i: Node(i) for i in ids}
        if reconfig:
            for node in self.nodes.values():
                node.log = bootstrap_log(self.voter_ids if node.node_id in self.voter_ids else ())
        self.requests = 0
        self.stats = {"voter changes": 0, "refused": 0, "snapshots": 0, "snapshot loads": 0, "wipes": 0}
        self.closes = {"closes": 0, "resets": 0, "canvasses": 0}  # canvasses: closes that made a Prospective
        self.pairs: dict[int, list[int]] = {}  # concurrent voter change pair -> error codes answered
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
        if self.faults.reset_every_ms:
            self._at(self.close_rng.randrange(2 * self.faults.reset_every_ms), "reset")
        if self.reconfig:
            self._at(self.rng.randint(150, 300), "voter_change")
            self._at(self.rng.randint(100, 400), "snapshot")
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
        directory = directory_id(node.node_id, node.disk) if self.reconfig else None
        bootstrap = tuple(-2 - i for i in range(len(self.voter_ids))) if self.reconfig else ()
        static = VoterSet(()) if self.reconfig else self.voter_ids  # kraft.version 1: from the log
        node.core = RaftCore(node.node_id, static, node.log, core_rng, node.durable, self.now,
                             self.config, directory_id=directory, bootstrap_ids=bootstrap)
        node.next_tick = None
        self._process(node, node.core.tick(self.now))

    def _on_tick(self, node_id: int, incarnation: int, when: int) -> None:
        node = self.nodes[node_id]
        if node.core is None or node.incarnation != incarnation or node.next_tick != when:
            return
        node.next_tick = None
        self._process(node, node.core.tick(self.now))

    def _on_deliver(self, src: int, dst, message) -> None:
        if not isinstance(dst, int):
            return self._on_client_answer(dst, message)
        addressed = dst
        if dst < 0:  # a bootstrap server: the initial voters, in order
            dst = sorted(self.voter_ids)[-dst - 2]
        if (self.nodes[dst].core is None and self.faults.close_on_kill and not self._blocked(src, dst)
                and isinstance(message, m.FetchRequest | m.FetchSnapshotRequest)):
            self._close_later(src, addressed, refused=True)  # the driver reports it for Fetches
            return
        if isinstance(message, m.ApiVersionsProbe):
            if self.nodes[dst].core is not None and not self._blocked(src, dst):
                self._send(dst, src, m.ApiVersionsProbeResponse(m.NONE, 0, 1))
            return
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

    def _on_voter_change(self) -> None:
        """Ask whichever node leads to add or remove a voter; sometimes two changes at once."""
        self._at(self.now + self.rng.randint(100, 300), "voter_change")
        leaders = [n for n in self.nodes.values() if n.core is not None and isinstance(n.core.state, Leader)]
        if not leaders:
            return
        leader = self.rng.choice(leaders)
        pair = self.rng.random() < 0.3
        self.requests += 1
        for i in range(2 if pair else 1):
            request = self._voter_change_request(leader)
            if request is None:
                return
            token = ("pair" if pair else "single", self.requests, i)
            if pair:
                self.pairs.setdefault(self.requests, [])
            self._process(leader, leader.core.step(self.now, token, request))
            if leader.core is None:
                return

    def _voter_change_request(self, leader: Node):
        voters = leader.core.voter_set
        spares = [n for n in self.nodes.values() if n.node_id not in voters.ids()]
        if len(voters.voters) > 2 and (not spares or self.rng.random() < 0.5):
            target = self.rng.choice(voters.voters)
            return m.RemoveVoterRequest(target.id, target.directory_id)
        if spares:
            spare = self.rng.choice(spares)
            return m.AddVoterRequest(voter(spare.node_id, spare.disk), self.rng.randint(50, 300))
        return None

    def _on_client_answer(self, token, answer) -> None:
        kind, request, _ = token
        self.stats["voter changes" if answer.error_code == m.NONE else "refused"] += 1
        if kind == "pair":
            answered = self.pairs[request]
            answered.append(answer.error_code)
            if answered.count(m.NONE) > 1:
                self._fail(f"two concurrent voter changes both succeeded (request {request})")

    def _on_snapshot(self) -> None:
        self._at(self.now + self.rng.randint(100, 400), "snapshot")
        live = [n for n in self.nodes.values() if n.core is not None]
        node = self.rng.choice(live) if live else None
        if node is None or node.log.high_watermark <= node.log.log_start_offset:
            return
        hw = node.log.high_watermark
        node.core.create_snapshot(hw, [node.hashes[hw - 1]])
        self.stats["snapshots"] += 1

    def _on_crash(self) -> None:
        live = [n for n in self.nodes.values() if n.core is not None]
        if live:
            self._kill(self.rng.choice(live))
        self._at(self.now + self.rng.randrange(2 * self.faults.crash_every_ms), "crash")

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if self.reconfig and self.rng.random() < 0.1 and not any(n.disk for n in self.nodes.values()):
            # The disk is replaced: empty log, no quorum state, a new directory id (observer).
            node.disk += 1
            self.stats["wipes"] += 1
            node.log = bootstrap_log(())
            node.durable = None
            node.hashes = []
        self._start(node)

    def _on_closed(self, node_id: int, incarnation: int, peer: int, refused: bool) -> None:
        node = self.nodes[node_id]
        if node.core is None or node.incarnation != incarnation:
            return  # that connection died with the process
        self.closes["closes"] += 1
        was_following = isinstance(node.core.state, Follower)
        self._process(node, node.core.handle_leader_disconnect(self.now, peer, refused))
        if was_following and node.core is not None and isinstance(node.core.state, Prospective):
            self.closes["canvasses"] += 1

    def _on_reset(self) -> None:
        """A live leader's connection to one follower is reset (sometimes refused)."""
        self._at(self.now + self.close_rng.randrange(2 * self.faults.reset_every_ms), "reset")
        following = [n for n in self.nodes.values()
                     if n.core is not None and isinstance(n.core.state, Follower)]
        if not following:
            return
        node = self.close_rng.choice(following)
        self.closes["resets"] += 1
        refused = self.close_rng.random() < 0.3
        self._at(self.now, "closed", node.node_id, node.incarnation, node.core.state.leader_id, refused)

    def _close_later(self, node_id: int, peer: int, refused: bool = False) -> None:
        delay = self.close_rng.randint(1, self.faults.max_delay_ms)
        self._at(self.now + delay, "closed", node_id, self.nodes[node_id].incarnation, peer, refused)

    def _on_partition(self) -> None:
        ids = sorted(self.nodes)
        self.partition = frozenset(self.rng.sample(ids, self.rng.randint(1, len(ids) // 2)))
        self._at(self.now + self.rng.randint(50, 400), "heal")

    def _on_heal(self) -> None:
        self.partition = None
        self._at(self.now + self.rng.randrange(2 * self.faults.partition_every_ms), "partition")

    def _kill(self, node: Node) -> None:
        node.core = None
        if self.faults.close_on_kill:  # its sockets close: those that can reach it hear so
            for other in self.nodes.values():
                if (other is not node and other.core is not None
                        and not self._blocked(node.node_id, other.node_id)
                        and self.close_rng.random() < self.faults.close_on_kill):
                    self._close_later(other.node_id, node.node_id)
        node.log.crash()
        start = node.log.log_start_offset
        if start > len(node.hashes):  # died right after completing a snapshot download
            self._check_snapshot(node, node.log.latest_snapshot_id())
        del node.hashes[start + len(node.log.entries):]
        self._at(self.now + self.rng.randint(20, 150), "restart", node.node_id)

    # ---- the driver: carry out a Ready -----------------------------------------------------------
    def _process(self, node: Node, ready) -> None:
        if self.rng.random() < self.faults.crash_mid_step:
            self._kill(node)  # died before the quorum-state write and the flush
            return
        if ready.persist is not None:
            node.durable = ready.persist
        node.log.flush()
        self._record_log(node, ready)
        for dst, message in ready.messages:
            self._send(node.node_id, dst, message)
        self._record_high_watermark(node)
        deadline = max(node.core.next_deadline_ms(), self.now + 1)
        if node.next_tick is None or deadline < node.next_tick:
            node.next_tick = deadline
            self._at(deadline, "tick", node.node_id, node.incarnation, deadline)

    def _send(self, src: int, dst, message) -> None:
        if not isinstance(dst, int):  # an answer to the admin client: always delivered
            self._at(self.now + 1, "deliver", src, dst, message)
            return
        f = self.faults
        if self._blocked(src, dst) or self.rng.random() < f.drop:
            return
        copies = 2 if self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            self._at(self.now + self.rng.randint(1, f.max_delay_ms), "deliver", src, dst, message)

    def _blocked(self, a, b) -> bool:
        if not isinstance(b, int):
            return False
        if b < 0:
            b = sorted(self.voter_ids)[-b - 2]
        return self.partition is not None and ((a in self.partition) != (b in self.partition))

    # ---- invariants ------------------------------------------------------------------------------
    def _record_log(self, node: Node, ready) -> None:
        log = node.log
        start = log.log_start_offset
        if ready.snapshot_loaded is not None:
            self._check_snapshot(node, ready.snapshot_loaded)
        for op in ready.log_ops:
            if isinstance(op, Truncate):
                del node.hashes[op.offset:]
        del node.hashes[start + len(log.entries):]
        if len(node.hashes) < start:
            self._fail(f"node {node.node_id} has a log start {start} past what it knows ({len(node.hashes)})")
        previous = None
        for entry in log.entries[len(node.hashes) - start:]:
            if isinstance(entry.value, VoterSet):
                previous = previous or node.core.voter_history.at(entry.offset)
                if previous.voters and len(previous.ids() ^ entry.value.ids()) > 1:
                    self._fail(f"VotersRecord at {entry.offset}: {previous.ids()} -> {entry.value.ids()}")
                previous = entry.value
            prev = node.hashes[-1] if node.hashes else 0
            h = hash((prev, entry.epoch, repr(entry.value)))
            node.hashes.append(h)
            known = self.chain_at.setdefault((entry.offset, entry.epoch), h)
            if known != h:
                self._fail(f"log matching: node {node.node_id} holds a different entry or prefix at "
                           f"(offset {entry.offset}, epoch {entry.epoch})")

    def _check_snapshot(self, node: Node, snapshot_id) -> None:
        end = snapshot_id.offset
        content = node.log.read_snapshot(snapshot_id).values
        if end > len(self.committed) or (end and content != [self.committed[end - 1]]):
            self._fail(f"node {node.node_id} loaded uncommitted snapshot {snapshot_id}")
        node.hashes = list(self.committed[:end])
        self.stats["snapshot loads"] += 1

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
        summary = (f"seed {self.seed}: {self.events} events, {len(self.leader_of_epoch)} leaders up to epoch "
                   f"{epochs}, {len(self.committed)} committed of {self.appended} appended")
        if self.reconfig:
            summary += ", " + ", ".join(f"{v} {k}" for k, v in self.stats.items())
        if self.closes["closes"]:
            summary += ", " + ", ".join(f"{v} {k}" for k, v in self.closes.items())
        return summary


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
    parser.add_argument("--no-closes", action="store_true",
                        help="kills close no connections and no resets (runs pinned before closes)")
    parser.add_argument("--reconfig", action="store_true",
                        help="kraft.version 1: voter changes, wiped disks, snapshots")
    args = parser.parse_args(argv)
    parser_faults = Faults.none() if args.no_faults else None
    faults = PROFILES[args.profile] if args.profile is not None else parser_faults
    config = replace(SIM_CONFIG, fetch_max_entries=args.fetch_max_entries) if args.fetch_max_entries else None
    started = time.perf_counter()
    for seed in range(args.seed, args.seed + args.seeds):
        seed_faults = faults
        if args.no_closes:
            seed_faults = (faults or PROFILES[seed % len(PROFILES)]).without_closes()
        sim = Simulation(seed, args.voters, args.observers, seed_faults, config, args.reconfig)
        sim.run(args.duration_ms)
        print(sim.summary())
    print(f"{args.seeds} seeds in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
