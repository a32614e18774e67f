"""A deterministic little cluster for scenario tests: instant delivery, explicit partitions.

``Cluster.run(ms)`` advances time one millisecond at a time, ticks every node whose deadline has
come and delivers every queued message (in send order) before the next millisecond, dropping
those that cross ``isolated``. Nodes follow the Ready contract like the real driver will.

``stop(node)`` freezes a node silently (as a partition would look); ``kill(node)`` is a crashed
process: every node that can reach it sees its connection closed (``handle_leader_disconnect``)
and, until it restarts, a Fetch sent to it is refused (the same, ``refused=True``).
"""
from __future__ import annotations

import random

from raft import messages as m
from raft.core import RaftCore
from raft.log import Entry, MemoryRaftLog, OffsetAndEpoch, Snapshot
from raft.quorum_state import ElectionState, Leader, QuorumConfig
from raft.voters import Endpoint, Voter, VoterSet

CONFIG = QuorumConfig(election_timeout_ms=50, fetch_timeout_ms=100, election_backoff_max_ms=50,
                      retry_backoff_ms=5, request_timeout_ms=40, fetch_max_wait_ms=20,
                      election_backoff_base_ms=5)


def directory_id(node_id: int, incarnation: int = 0) -> bytes:
    return bytes([node_id % 256, incarnation]) * 8


def voter(node_id: int, incarnation: int = 0) -> Voter:
    endpoint = Endpoint("CONTROLLER", f"node-{node_id}", 9093)
    return Voter(node_id, directory_id(node_id, incarnation), (endpoint,))


def bootstrap_log(voter_ids) -> MemoryRaftLog:
    """A log formatted with the KIP-853 bootstrap checkpoint: kraft.version 1 and these voters."""
    log = MemoryRaftLog()
    voters = VoterSet.of(voter(i) for i in voter_ids) if voter_ids else None
    log.create_snapshot(Snapshot(OffsetAndEpoch(0, 0), 1, voters, []))
    return log


def make_log(epochs: list[int]) -> MemoryRaftLog:
    """A flushed log holding one entry per element of ``epochs`` (each element is that entry's epoch)."""
    log = MemoryRaftLog()
    log.append([Entry(i, e, f"e{e}o{i}") for i, e in enumerate(epochs)])
    log.flush()
    return log


class Cluster:
    def __init__(self, voters: int = 3, observers: int = 0, seed: int = 0, config: QuorumConfig = CONFIG,
                 logs: dict[int, MemoryRaftLog] | None = None,
                 stored: dict[int, ElectionState] | None = None, kraft_version: int = 0) -> None:
        """``kraft_version`` 1: every log starts from the bootstrap checkpoint (KIP-853) and each
        node has a directory id; 0: the static voter set of replica ids."""
        self.voters = frozenset(range(1, voters + 1))
        self.ids = sorted(self.voters) + [100 + i for i in range(observers)]
        self.config = config
        self.seed = seed
        self.now = 0
        self.kraft_version = kraft_version
        self.incarnations: dict[int, int] = {i: 0 for i in self.ids}  # a wiped disk is a new one
        # controller.quorum.bootstrap.servers: the initial voters, as the driver's negative ids.
        self.bootstrap_ids = tuple(-2 - i for i in range(voters))
        self.replies: list[tuple[object, object]] = []  # answers to admin clients: (token, response)
        if kraft_version:
            logs = {i: (logs or {}).get(i) or bootstrap_log(self.voters) for i in self.ids}
        self.logs = {i: (logs or {}).get(i) or MemoryRaftLog() for i in self.ids}
        self.durable: dict[int, ElectionState | None] = {i: (stored or {}).get(i) for i in self.ids}
        self.persisted: dict[int, list[ElectionState]] = {i: [] for i in self.ids}
        self.sent: list[tuple[int, int, object]] = []  # every message ever sent: (src, dst, message)
        self.queue: list[tuple[int, int, object]] = []
        self.isolated: set[int] = set()
        self.down: set[int] = set()
        self.closed: set[int] = set()  # killed: their connections close, connecting is refused
        self.drop = None  # optional predicate (src, dst, message) -> bool: lose that message
        self.committed: dict[int, object] = {}  # offset -> value, from every node's high watermark
        self.cores: dict[int, RaftCore] = {}
        for i in self.ids:
            self.start(i)

    def start(self, node_id: int) -> None:
        self.down.discard(node_id)
        self.closed.discard(node_id)
        rng = random.Random(self.seed * 7919 + node_id + 1000 * len(self.persisted[node_id]))
        directory = directory_id(node_id, self.incarnations[node_id]) if self.kraft_version else None
        static = VoterSet(()) if self.kraft_version else self.voters  # kraft.version 1: from the log
        self.cores[node_id] = RaftCore(node_id, static, self.logs[node_id], rng, self.durable[node_id],
                                       self.now, self.config, directory_id=directory,
                                       bootstrap_ids=self.bootstrap_ids if self.kraft_version else ())
        self.process(node_id, self.cores[node_id].tick(self.now))

    def add_node(self, node_id: int, log: MemoryRaftLog | None = None) -> None:
        """Start a new replica (an observer until it is added); a known id gets a wiped disk."""
        if node_id in self.ids:
            self.incarnations[node_id] += 1
        else:
            self.ids.append(node_id)
            self.incarnations[node_id] = 0
            self.persisted[node_id] = []
        self.logs[node_id] = log or (bootstrap_log(()) if self.kraft_version else MemoryRaftLog())
        self.durable[node_id] = None
        self.start(node_id)

    def request(self, node_id: int, message, token: str = "admin") -> None:
        """An admin client's request (AddVoter, RemoveVoter, UpdateVoter) to a node."""
        self.process(node_id, self.cores[node_id].step(self.now, token, message))
        self.replies += [(dst, msg) for _, dst, msg in self.queue if not isinstance(dst, int)]
        self.queue = [q for q in self.queue if isinstance(q[1], int)]

    def stop(self, node_id: int) -> None:
        self.down.add(node_id)
        self.logs[node_id].crash()

    def kill(self, node_id: int) -> None:
        """The process dies and its sockets close: each node that can reach it hears so."""
        self.stop(node_id)
        self.closed.add(node_id)
        for i in self.ids:
            if i not in self.down and (i in self.isolated) == (node_id in self.isolated):
                self.disconnect(i, node_id)

    def disconnect(self, node_id: int, peer: int, refused: bool = False) -> None:
        """``peer`` closed ``node_id``'s connection to it (a crash, or a reset of a live peer's),
        or ``refused`` a new one."""
        self.process(node_id, self.cores[node_id].handle_leader_disconnect(self.now, peer, refused))

    def process(self, node_id: int, ready) -> None:
        if ready.persist is not None:
            self.durable[node_id] = ready.persist
            self.persisted[node_id].append(ready.persist)
        log = self.logs[node_id]
        log.flush()
        for entry in log.entries[:log.high_watermark - log.log_start_offset]:
            value = self.committed.setdefault(entry.offset, (entry.epoch, entry.value))
            assert value == (entry.epoch, entry.value), f"node {node_id} committed {entry}, another {value}"
        for dst, message in ready.messages:
            self.sent.append((node_id, dst, message))
            self.queue.append((node_id, dst, message))

    def deliver(self) -> None:
        while self.queue:
            src, dst, message = self.queue.pop(0)
            if not isinstance(dst, int):
                self.replies.append((dst, message))
                continue
            if dst < 0:
                dst = sorted(self.voters)[-dst - 2]
            if isinstance(message, m.ApiVersionsProbe):
                # The driver's ApiVersions round trip: the probed replica supports kraft.version 0-1.
                if dst not in self.down and (src in self.isolated) == (dst in self.isolated):
                    self.queue.append((dst, src, m.ApiVersionsProbeResponse(m.NONE, 0, 1)))
                continue
            reachable = (src in self.isolated) == (dst in self.isolated)
            if (dst in self.closed and src not in self.down and reachable
                    and isinstance(message, m.FetchRequest | m.FetchSnapshotRequest)):
                self.disconnect(src, dst, refused=True)  # the driver reports it for Fetches
                continue
            if dst in self.down or ((src in self.isolated) != (dst in self.isolated)):
                continue
            if self.drop is not None and self.drop(src, dst, message):
                continue
            self.process(dst, self.cores[dst].step(self.now, src, message))

    def run(self, ms: int) -> None:
        for _ in range(ms):
            self.now += 1
            for i in self.ids:
                if i not in self.down and self.cores[i].next_deadline_ms() <= self.now:
                    self.process(i, self.cores[i].tick(self.now))
            self.deliver()

    def leaders(self) -> list[int]:
        return [i for i in self.ids if i not in self.down and isinstance(self.cores[i].state, Leader)]

    def leader(self) -> int:
        leaders = self.leaders()
        assert len(leaders) == 1, f"leaders: {leaders}"
        return leaders[0]

    def epochs(self) -> dict[int, int]:
        return {i: self.cores[i].state.epoch for i in self.ids if i not in self.down}

    def append(self, values: list) -> None:
        leader = self.leader()
        self.process(leader, self.cores[leader].append(self.now, values))
