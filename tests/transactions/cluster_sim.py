"""A seeded, in-process simulation of transactions across a small cluster: transaction
coordinators whose ``__transaction_state`` partitions move between brokers, data partitions
replicated on every broker whose leaders move, the marker channel between them, and
transactional producers (zombies among them).

Theory of operation. Nothing here sleeps, sends or reads a clock: the caller hands in a seeded
``random.Random`` and calls ``step`` (one random event) and ``check`` (the invariants) in turn,
then ``heal`` (no more faults; time runs on until every transaction ended) and ``check_end``.
The real code decides everything a broker decides:

- each broker's transaction coordinator is broker/transactions/coordinator.py's core, loaded
  from the committed records of its ``__transaction_state`` partition (storage.replay) at the
  partition's coordinator epoch. A record in flight when its partition moves may or may not have
  landed; the old coordinator may go on for a while (a zombie coordinator) before it unloads;
- each replica of a data partition keeps engine/producer_state.py's ProducerStateManager: the
  leader takes a transactional batch or a marker only if ``check`` / ``check_marker`` (with
  KIP-890's verification guard) let it, followers and a rebuilt replica replay what the leader
  wrote, and the last stable offset is the manager's ``first_unstable_offset`` bounded by the
  high watermark; an aborted transaction goes to the replica's aborted list (its .txnindex);
- the marker channel is broker/transactions/markers.py's pure functions: ``group_by_leader``
  over the sending broker's (possibly stale) view of the leaders, ``build_request`` (a real
  WriteTxnMarkersRequest), ``partition_errors`` over a real WriteTxnMarkersResponse and
  ``outcome``, the sender's bookkeeping following MarkerChannel's ``_send_round``/``_send``.

Messages travel in FIFO order per connection and are delivered one at a time in a random
order across connections, so leaders move between a marker's grouping and its delivery; an
answer may be lost after its request was handled (the marker written, then sent again).
Acknowledgements (produce and markers, acks=all) come once the high watermark passes the
write on the same leader epoch, else NOT_LEADER_OR_FOLLOWER.

Every prepared outcome (a PrepareCommit or PrepareAbort record committed to the transaction
log) is a *decision*, numbered in log order. Each marker a coordinator asks for carries the
decision it comes from (a bookkeeping tag beside the wire request, never read by the code
under test), so the checks can tell which transaction each marker in a log ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.transactions import storage
from broker.transactions.coordinator import (
    EndTxnReply,
    InitProducerIdReply,
    TransactionConfig,
    TransactionCoordinator,
    TxnReply,
)
from broker.transactions.markers import (
    ABORT,
    GONE,
    RETRY,
    WRITTEN,
    Pending,
    build_request,
    group_by_leader,
    outcome,
    partition_errors,
)
from broker.transactions.state import TxnState
from engine.producer_state import (
    SENTINEL_GUARD,
    CoordinatorFencedError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateManager,
    UnknownProducerIdError,
)
from protocol import messages as M
from protocol.errors import Error

BROKERS = (0, 1, 2)
STATE_PARTITIONS = 2
DATA = [("a", 0), ("a", 1), ("b", 0)]
TXN_TIMEOUT_MS = 3000
RETRIABLE = {Error.CONCURRENT_TRANSACTIONS, Error.COORDINATOR_LOAD_IN_PROGRESS, Error.NOT_COORDINATOR,
             Error.COORDINATOR_NOT_AVAILABLE, Error.REQUEST_TIMED_OUT}
_APPEND_ERRORS = [(ProducerFencedError, Error.INVALID_PRODUCER_EPOCH),
                  (OutOfOrderSequenceError, Error.OUT_OF_ORDER_SEQUENCE_NUMBER),
                  (UnknownProducerIdError, Error.UNKNOWN_PRODUCER_ID),
                  (InvalidTxnStateError, Error.INVALID_TXN_STATE)]


class Violation(AssertionError):
    pass


# ---- data partitions ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Entry:
    """One batch in a data partition's log, shared by identity between the replicas that hold
    it (a follower copies the object, so ``is`` tells the same append)."""
    base: int
    last: int
    pid: int
    epoch: int
    marker: bool
    first_seq: int = -1
    last_seq: int = -1
    batch: tuple = ()  # data: (transactional id, incarnation, transaction number, batch number)
    commit: bool = False  # marker
    coordinator_epoch: int = -1
    decision: int = -1
    timestamp: int = 0
    generation: int = -1  # data: which of its transactional id's transactions it belongs to


class Replica:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.state = ProducerStateManager()
        self.aborted: list[tuple[int, int, int]] = []  # the .txnindex: (pid, first, last offset)
        self.hw = 0

    @property
    def leo(self) -> int:
        return self.entries[-1].last + 1 if self.entries else 0

    def apply(self, e: Entry) -> None:
        """What Log._update_producers does with a written batch (leader, follower or replay)."""
        self.entries.append(e)
        if e.marker:
            done = self.state.complete(e.pid, e.epoch, e.coordinator_epoch, e.commit, e.base, e.timestamp)
            if done is not None and done.is_aborted:
                self.aborted.append((done.producer_id, done.first_offset, done.last_offset))
        else:
            self.state.update(e.pid, e.epoch, e.first_seq, e.last_seq, e.base, e.last, e.timestamp,
                              transactional=True)

    def truncate(self, keep: int) -> None:
        """Keep the first ``keep`` entries; the producer state and .txnindex are rebuilt from
        them, as a truncation reloads them."""
        entries = self.entries[:keep]
        self.entries, self.state, self.aborted = [], ProducerStateManager(), []
        for e in entries:
            self.apply(e)
        self.set_hw(min(self.hw, self.leo))

    def set_hw(self, hw: int) -> None:
        self.hw = hw
        self.state.on_high_watermark_updated(hw)

    @property
    def lso(self) -> int:
        first = self.state.first_unstable_offset(self.hw)
        return self.hw if first is None or first > self.hw else first

    def read_committed(self) -> list[Entry]:
        """The data batches a read_committed fetch from the log start returns: below the last
        stable offset, less those of the aborted ranges."""
        lso = self.lso
        out = []
        for e in self.entries:
            if e.base >= lso:
                break
            if e.marker:
                continue
            if any(pid == e.pid and first <= e.base <= last for pid, first, last in self.aborted):
                continue
            out.append(e)
        return out


@dataclass
class Partition:
    tp: tuple[str, int]
    leader: int
    leader_epoch: int = 0
    replicas: dict[int, Replica] = field(default_factory=lambda: {b: Replica() for b in BROKERS})

    @property
    def lead(self) -> Replica:
        return self.replicas[self.leader]


@dataclass
class Ack:
    """A write waiting for acks=all on the leader epoch it was appended at."""
    tp: tuple[str, int]
    leader_epoch: int
    entry: Entry
    done: Any  # called with the error


# ---- producers ----------------------------------------------------------------------------


@dataclass
class Txn:
    number: int
    partitions: list = field(default_factory=list)
    batches: list = field(default_factory=list)  # batch ids sent
    acked: list = field(default_factory=list)
    in_flight: int = 0
    failed: bool = False
    commit: bool | None = None  # what EndTxn asks
    given_up: int = 0  # the writes below this batch number whose answers no longer count
    generation: int = -1  # the coordinator's transaction it is: see Sim.land


class Producer:
    def __init__(self, sim: Sim, tid: str, incarnation: int):
        self.sim, self.tid, self.incarnation = sim, tid, incarnation
        self.pid, self.epoch = -1, -1
        self.state = "init"  # init, idle, adding, txn, ending, waiting
        self.recover = False  # KIP-360: InitProducerId with the current id and epoch
        self.token = 0
        self.txn: Txn | None = None
        self.txns = 0
        self.seqs: dict[tuple[str, int], int] = {}
        self.zombie = False

    def name(self) -> tuple:
        return self.tid, self.incarnation

    def _send(self, state: str) -> tuple:
        self.token += 1
        self.state = state
        return (self, self.token)

    def coordinator(self) -> TransactionCoordinator:
        sim = self.sim
        p = storage.partition_for(self.tid, STATE_PARTITIONS)
        b = sim.tleader[p] if sim.rng.random() < 0.85 or sim.healing else sim.rng.choice(BROKERS)
        return sim.cores[b], b

    def act(self) -> None:
        sim = self.sim
        if self.zombie:
            self.act_zombie()
            return
        if self.state == "init":
            core, b = self.coordinator()
            pid, epoch = (self.pid, self.epoch) if self.recover and self.pid >= 0 else (-1, -1)
            sim.effects(b, core.init_producer_id(self.tid, TXN_TIMEOUT_MS, pid, epoch, sim.now,
                                                 self._send("waiting")))
        elif self.state == "idle":
            if sim.healing and sim.heal_rounds > 3:
                return  # no new transaction once the faults healed
            self.txns += 1
            self.txn = Txn(self.txns, sim.rng.sample(DATA, sim.rng.randrange(1, len(DATA) + 1)))
            self.add()
        elif self.state == "txn":
            txn = self.txn
            roll = sim.rng.random()
            if txn.in_flight:
                if sim.healing or roll > 0.1:
                    return
                # its requests time out: the client gives up on them and aborts
                txn.in_flight, txn.failed = 0, True
                txn.given_up = len(txn.batches)
            if not sim.healing and roll < 0.05:
                return  # stalls: its transaction may time out
            if not sim.healing and len(txn.batches) < 4 and roll < 0.55:
                self.write(sim.rng.choice(txn.partitions))
            else:
                txn.commit = not txn.failed and (sim.healing or sim.rng.random() < 0.7)
                self.end()

    def add(self) -> None:
        core, b = self.coordinator()
        self.sim.effects(b, core.add_partitions(self.tid, self.pid, self.epoch, self.txn.partitions,
                                                self.sim.now, self._send("adding"), self.sim.tv))

    def end(self) -> None:
        core, b = self.coordinator()
        self.sim.effects(b, core.end_txn(self.tid, self.pid, self.epoch, self.txn.commit, self.sim.now,
                                         self._send("ending"), self.sim.tv))

    def write(self, tp: tuple[str, int], epoch: int | None = None) -> None:
        sim, txn = self.sim, self.txn
        n = sim.rng.randrange(1, 4)
        seq = self.seqs.get(tp, 0)
        self.seqs[tp] = seq + n
        batch = (self.tid, self.incarnation, txn.number, len(txn.batches))
        txn.batches.append(batch)
        txn.in_flight += 1
        part = sim.partitions[tp]
        to = part.leader if sim.healing or sim.rng.random() < 0.85 else sim.rng.choice(BROKERS)
        sim.send(("produce", self.name()), to, ("produce", self, tp, self.pid,
                                                self.epoch if epoch is None else epoch, seq, n, batch,
                                                txn.generation))

    def on_write(self, batch: tuple, error: int) -> None:
        txn = self.txn
        if txn is None or batch[2] != txn.number or batch[3] < txn.given_up:
            return
        txn.in_flight -= 1
        if error:
            txn.failed = True
        else:
            txn.acked.append(batch)

    def on_reply(self, token: int, reply: Any) -> None:
        if token != self.token or self.state not in ("waiting", "adding", "ending"):
            return
        sim, code = self.sim, reply.error_code
        if self.zombie:
            if self.state == "ending" and code == Error.NONE:
                sim.zombie_commit(self, self.txn)
            self.state = "done"
            return
        if self.state == "waiting":
            if code == Error.NONE:
                if (reply.producer_id, reply.producer_epoch) != (self.pid, self.epoch):
                    self.seqs = {}
                self.pid, self.epoch = reply.producer_id, reply.producer_epoch
                self.state, self.recover = "idle", False
                sim.initialised(self)
            else:
                self.state = "init"
                self.recover = self.recover and code in RETRIABLE
        elif self.state == "adding":
            if code == Error.NONE:
                self.state = "txn"
                self.txn.generation = sim.generation.get(self.tid, 0)
            elif code in RETRIABLE:
                self.state = "adding-retry"
            else:
                self.state, self.recover, self.txn = "init", False, None
        elif self.state == "ending":
            txn = self.txn
            if code == Error.NONE:
                sim.told[(self.tid, self.incarnation, txn.number)] = (txn.commit, list(txn.acked))
                if sim.tv >= 2:
                    if (reply.producer_id, reply.producer_epoch) != (self.pid, self.epoch):
                        self.seqs = {}
                    self.pid, self.epoch = reply.producer_id, reply.producer_epoch
                    self.state = "idle"
                else:
                    # an abort after a failed write bumps the epoch (KIP-360) so the sequences
                    # start again
                    self.state, self.recover = ("idle", False) if txn.commit else ("init", True)
                self.txn = None
            elif code in RETRIABLE:
                self.state = "ending-retry"
            else:
                self.state, self.recover, self.txn = "init", False, None

    def retry(self) -> None:
        if self.state == "adding-retry":
            self.add()
        elif self.state == "ending-retry":
            self.end()

    def act_zombie(self) -> None:
        """A producer instance replaced by a new one with the same transactional id: it goes on
        writing at its old epoch, and may try to commit."""
        sim, txn = self.sim, self.txn
        if txn is None or self.state == "done" or sim.healing:
            return
        if sim.rng.random() < 0.7:
            txn.in_flight = 0
            self.write(sim.rng.choice(DATA))
        else:
            txn.commit = True
            self.end()


# ---- the simulation ---------------------------------------------------------------------


class Sim:
    def __init__(self, rng: Any, tv: int = 2, producers: int = 4):
        self.rng = rng
        self.tv = tv
        self.now = 0
        self.healing = False
        self.heal_rounds = 0
        self.next_pid = 1000
        config = TransactionConfig(max_timeout_ms=TXN_TIMEOUT_MS * 2, transaction_version=2 if tv >= 2 else 1)
        self.cores = {b: TransactionCoordinator(self._allocate, config, num_partitions=STATE_PARTITIONS)
                      for b in BROKERS}
        self.tlog: dict[int, list] = {p: [] for p in range(STATE_PARTITIONS)}
        self.tleader = {p: p % len(BROKERS) for p in range(STATE_PARTITIONS)}
        self.tepoch = {p: 0 for p in range(STATE_PARTITIONS)}
        self.twrites: list = []  # (broker, write)
        self.loads: list = []  # (broker, partition, coordinator epoch)
        self.resigns: list = []  # (broker, partition, coordinator epoch): a zombie coordinator
        self.partitions = {tp: Partition(tp, i % len(BROKERS)) for i, tp in enumerate(DATA)}
        self.views = {b: {tp: p.leader for tp, p in self.partitions.items()} for b in BROKERS}
        self.channels: dict[int, dict[str, Pending]] = {b: {} for b in BROKERS}
        self.tags: dict[int, int] = {}  # id(MarkerRequest) -> decision
        self.requests: list = []  # the MarkerRequests tagged, kept alive for their ids
        self.net: list = []  # (connection, message)
        self.acks: list[Ack] = []
        # decisions: number -> (transactional id, pid, epoch, commit, partitions, generation)
        self.decisions: list[tuple] = []
        self.latest_decision: dict[str, int] = {}
        self.generation: dict[str, int] = {}
        self.landed_state: dict[str, TxnState] = {}
        self.write_decision: dict[int, int] = {}
        self.held_writes: list = []  # the writes tagged, kept alive for their ids
        self.producers = {f"tx-{i}": Producer(self, f"tx-{i}", 0) for i in range(producers)}
        self.zombies: list[Producer] = []
        self.fenced_by: dict[str, int] = {}  # transactional id -> newest incarnation initialised
        self.told: dict[tuple, tuple] = {}  # (tid, incarnation, txn number) -> (commit, acked batches)
        self.zombie_writes = 0
        self.stats = {"moves": 0, "data_moves": 0, "lost_answers": 0, "refused_markers": 0,
                      "zombie_refused": 0, "resent_markers": 0}
        for p in range(STATE_PARTITIONS):
            core = self.cores[self.tleader[p]]
            core.begin_load(p, 0)
            self.effects(self.tleader[p], core.complete_load(p, 0, {}, self.now))

    def _allocate(self) -> int:
        self.next_pid += 1
        return self.next_pid - 1

    # ---- the coordinators' effects ------------------------------------------------------

    def effects(self, b: int, fx: Any, decision: int | None = None) -> None:
        for w in fx.writes:
            self.twrites.append((b, w))
        for m in fx.markers:
            tag = decision if decision is not None else self.latest_decision.get(m.transactional_id)
            d = self.decisions[tag]
            if (d[0], d[1], d[2], d[3], set(d[4])) != (m.transactional_id, m.producer_id, m.producer_epoch,
                                                       m.commit, set(m.partitions)):
                raise Violation(f"broker {b} asks for markers {m} of no decision: the last is {d}")
            self.tags[id(m)] = tag
            self.requests.append(m)
            self.channels[b][m.transactional_id] = Pending(m, set(m.partitions))
        for waiter, reply in fx.replies:
            if waiter is None:
                continue
            producer, token = waiter
            if isinstance(reply, EndTxnReply) and not self.healing and self.rng.random() < 0.05:
                self.stats["lost_answers"] += 1
                producer.state = "ending-retry" if token == producer.token else producer.state
                continue
            assert isinstance(reply, (EndTxnReply, InitProducerIdReply, TxnReply))
            producer.on_reply(token, reply)

    def land(self, b: int, w: Any) -> None:
        """A __transaction_state record is committed to its partition's log. Each Ongoing
        record after a state that is not Ongoing starts a transaction of its transactional id:
        its *generation*, which the data written in it and its decision share."""
        self.tlog[w.partition].append(w.record)
        t = w.target
        tid = t.transactional_id
        if t.state is TxnState.ONGOING and self.landed_state.get(tid) is not TxnState.ONGOING:
            self.generation[tid] = self.generation.get(tid, 0) + 1
        self.landed_state[tid] = t.state
        if t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self.decisions.append((t.transactional_id, t.producer_id, t.producer_epoch,
                                   t.state is TxnState.PREPARE_COMMIT, sorted(t.partitions),
                                   self.generation.get(tid, 0)))
            number = len(self.decisions) - 1
            self.latest_decision[t.transactional_id] = number
            self.write_decision[id(w)] = number
            self.held_writes.append(w)

    def deliver_write(self, i: int) -> None:
        b, w = self.twrites.pop(i)
        landed = getattr(w, "_sim_landed", None)
        if landed is None:
            p = w.partition
            if self.tleader[p] != b or self.tepoch[p] != w.coordinator_epoch:
                error = Error.NOT_LEADER_OR_FOLLOWER
            elif not self.healing and self.rng.random() < 0.08:
                error = self.rng.choice([Error.NOT_ENOUGH_REPLICAS, Error.REQUEST_TIMED_OUT])
            else:
                self.land(b, w)
                error = Error.NONE
        else:
            error = Error.NONE if landed else Error.NOT_LEADER_OR_FOLLOWER
        self.effects(b, self.cores[b].complete_write(w, error, self.now), self.write_decision.get(id(w)))

    def move_coordinator(self) -> None:
        """A __transaction_state partition's leader moves: its writes in flight land or not;
        the new leader loads the log at the next coordinator epoch; the old one unloads later."""
        p = self.rng.randrange(STATE_PARTITIONS)
        old, new = self.tleader[p], self.rng.choice(BROKERS)
        for b, w in self.twrites:
            if w.partition == p and b == old and w.coordinator_epoch == self.tepoch[p] \
                    and getattr(w, "_sim_landed", None) is None:
                landed = self.rng.random() < 0.5
                if landed:
                    self.land(b, w)
                w._sim_landed = landed
        self.tepoch[p] += 1
        self.tleader[p] = new
        self.stats["moves"] += 1
        if old != new:
            self.resigns.append((old, p, self.tepoch[p] - 1))
        self.cores[new].begin_load(p, self.tepoch[p])
        self.loads.append((new, p, self.tepoch[p]))

    def complete_load(self, i: int) -> None:
        b, p, epoch = self.loads.pop(i)
        core = self.cores[b]
        self.effects(b, core.complete_load(p, epoch, storage.replay(self.tlog[p]), self.now))

    def resign(self, i: int) -> None:
        b, p, epoch = self.resigns.pop(i)
        core = self.cores[b]
        if core.owned.get(p) == epoch or core.loading.get(p) == epoch:
            core.unload(p)
        for tid in [t for t in self.channels[b] if core.partition_for(t) == p
                    and self.channels[b][t].request.coordinator_epoch == epoch]:
            del self.channels[b][tid]

    # ---- the marker channel (MarkerChannel._send_round and _send) ----------------------------

    def _current(self, b: int, entry: Pending) -> bool:
        r, core = entry.request, self.cores[b]
        return (self.channels[b].get(r.transactional_id) is entry
                and core.owned.get(core.partition_for(r.transactional_id)) == r.coordinator_epoch)

    def send_round(self, b: int) -> None:
        channel = self.channels[b]
        for tid in [t for t, e in channel.items() if not self._current(b, e)]:
            del channel[tid]
        view = self.views[b]
        by_leader, gone = group_by_leader(list(channel.values()), lambda tp: view.get(tp, GONE))
        assert not gone
        for leader, items in by_leader.items():
            for entry, tps in items:
                entry.in_flight.update(tps)
            self.send(("markers", b, leader), leader, ("markers", b, build_request(items), items))

    def on_marker_answer(self, b: int, items: list, response: Any) -> None:
        channel = self.channels[b]
        errors = (partition_errors(response, items) if response is not None
                  else [dict.fromkeys(tps, Error.NETWORK_EXCEPTION) for _, tps in items])
        for (entry, tps), answers in zip(items, errors):
            entry.in_flight.difference_update(tps)
            if not self._current(b, entry):
                continue
            if any(outcome(code) == ABORT for code in answers.values()):
                self.stats["refused_markers"] += 1
                del channel[entry.request.transactional_id]
                continue
            written = [tp for tp, code in answers.items() if outcome(code) == WRITTEN]
            if any(outcome(code) == RETRY for code in answers.values()):
                self.stats["resent_markers"] += 1
            if written:
                entry.remaining.difference_update(written)
                r = entry.request
                if not entry.remaining and channel.get(r.transactional_id) is entry:
                    del channel[r.transactional_id]
                core = self.cores[b]
                if core.owned.get(core.partition_for(r.transactional_id)) == r.coordinator_epoch:
                    self.effects(b, core.on_markers_written(r.transactional_id, r.coordinator_epoch,
                                                            written, self.now))

    def handle_markers(self, to: int, sender: int, request: Any, items: list) -> None:
        """WriteTxnMarkers at broker ``to``: each partition it leads checks and appends the
        marker; the answer goes back once every append is acknowledged (acks=all)."""
        R = M.WriteTxnMarkersResponse
        errors: dict[tuple[int, str, int], int] = {}
        waiting: list = []

        def answer() -> None:
            if waiting:
                return
            out = [R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
                R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=errors[(i, t.name, p)])
                    for p in t.partition_indexes]) for t in m.topics]) for i, m in enumerate(request.markers)]
            lost = not self.healing and self.rng.random() < 0.1
            if lost:
                self.stats["lost_answers"] += 1
            self.send(("markers-answer", to, sender), sender,
                      ("markers-answer", sender, items, None if lost else R(markers=out)))

        for i, (m, (entry, _)) in enumerate(zip(request.markers, items)):
            decision = self.tags[id(entry.request)]
            for t in m.topics:
                for p in t.partition_indexes:
                    key, tp = (i, t.name, p), (t.name, p)
                    part = self.partitions[tp]
                    if part.leader != to:
                        errors[key] = Error.NOT_LEADER_OR_FOLLOWER
                        continue
                    rep = part.lead
                    try:
                        rep.state.check_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                               m.transaction_version)
                    except ProducerFencedError:
                        errors[key] = Error.INVALID_PRODUCER_EPOCH
                        continue
                    except CoordinatorFencedError:
                        errors[key] = Error.TRANSACTION_COORDINATOR_FENCED
                        continue
                    d = self.decisions[decision]
                    if (d[1], d[2], d[3]) != (m.producer_id, m.producer_epoch, m.transaction_result) \
                            or tp not in d[4]:
                        raise Violation(f"marker {m} on {tp} is not decision {d}")
                    e = Entry(rep.leo, rep.leo, m.producer_id, m.producer_epoch, True,
                              commit=m.transaction_result, coordinator_epoch=m.coordinator_epoch,
                              decision=decision, timestamp=self.now)
                    rep.apply(e)
                    waiting.append(key)

                    def done(error: int, key: tuple = key) -> None:
                        errors[key] = error
                        waiting.remove(key)
                        answer()

                    self.acks.append(Ack(tp, part.leader_epoch, e, done))
        answer()

    # ---- produce --------------------------------------------------------------------------

    def handle_produce(self, to: int, msg: tuple, guard: Any = None, leader_epoch: int = -1) -> None:
        _, producer, tp, pid, epoch, seq, n, batch, generation = msg
        part = self.partitions[tp]

        def reply(error: int) -> None:
            if producer.zombie and error == Error.NONE and self.fenced_by.get(producer.tid, -1) > \
                    producer.incarnation:
                raise Violation(f"zombie {producer.name()} epoch {epoch} wrote {batch} to {tp} after "
                                f"incarnation {self.fenced_by[producer.tid]} fenced it")
            if producer.zombie and error:
                self.stats["zombie_refused"] += 1
            producer.on_write(batch, error)

        if part.leader != to or (guard is not None and part.leader_epoch != leader_epoch):
            reply(Error.NOT_LEADER_OR_FOLLOWER)
            return
        rep = part.lead
        if guard is None:
            # KIP-890's verification: ask the coordinator unless the transaction is open here
            guard = rep.state.start_verification(pid, epoch, self.now)
            if guard is not SENTINEL_GUARD:
                p = storage.partition_for(producer.tid, STATE_PARTITIONS)
                core = self.cores[self.tleader[p]]
                error = core.verify_partitions(producer.tid, pid, epoch, [tp])[tp]
                if error:
                    reply(Error.INVALID_PRODUCER_EPOCH if error == Error.PRODUCER_FENCED else error)
                    return
                self.send(("produce", producer.name()), to,
                          ("produce-verified", msg, guard, part.leader_epoch))
                return
        last_seq = seq + n - 1
        try:
            duplicate = rep.state.check(pid, epoch, seq, last_seq, transactional=1, guard=guard)
        except tuple(cls for cls, _ in _APPEND_ERRORS) as e:
            reply(next(code for cls, code in _APPEND_ERRORS if isinstance(e, cls)))
            return
        if duplicate is not None:
            raise Violation(f"{batch} on {tp}: a duplicate of {duplicate}, but no batch is sent twice")
        e = Entry(rep.leo, rep.leo + n - 1, pid, epoch, False, seq, last_seq, batch, timestamp=self.now,
                  generation=generation)
        rep.apply(e)
        self.acks.append(Ack(tp, part.leader_epoch, e, reply))

    # ---- the network ----------------------------------------------------------------------

    def send(self, connection: tuple, to: int, message: tuple) -> None:
        self.net.append((connection, to, message))

    def deliver(self, i: int) -> None:
        connection = self.net[i][0]
        i = next(j for j, m in enumerate(self.net) if m[0] == connection)  # FIFO per connection
        if self.net[i][2][0] == "produce-verified" and not self.healing and self.rng.random() < 0.7:
            return  # a slow append: the verified batch waits (markers may land meanwhile)
        _, to, message = self.net.pop(i)
        kind = message[0]
        if kind == "produce":
            self.handle_produce(to, message)
        elif kind == "produce-verified":
            _, msg, guard, leader_epoch = message
            self.handle_produce(to, msg, guard, leader_epoch)
        elif kind == "markers":
            _, sender, request, items = message
            self.handle_markers(to, sender, request, items)
        elif kind == "markers-answer":
            _, sender, items, response = message
            self.on_marker_answer(sender, items, response)

    # ---- replication ------------------------------------------------------------------------

    def replicate(self, tp: tuple[str, int], follower: int, everything: bool = False) -> None:
        part = self.partitions[tp]
        lead = part.lead
        if follower == part.leader:
            return
        rep = part.replicas[follower]
        keep = 0
        for a, b in zip(rep.entries, lead.entries):
            if a is not b:
                break
            keep += 1
        if keep < len(rep.entries):
            rep.truncate(keep)
        more = len(lead.entries) - keep
        take = more if everything or not more else self.rng.randrange(1, more + 1)
        for e in lead.entries[keep:keep + take]:
            rep.apply(e)
        self.advance_hw(tp)
        rep.set_hw(min(lead.hw, rep.leo))

    def advance_hw(self, tp: tuple[str, int]) -> None:
        part = self.partitions[tp]
        lead = part.lead
        matched = []
        for rep in part.replicas.values():
            n = 0
            for a, c in zip(rep.entries, lead.entries):
                if a is not c:
                    break
                n += 1
            matched.append(lead.entries[n - 1].last + 1 if n else 0)
        hw = max(lead.hw, min(matched))
        if hw != lead.hw:
            lead.set_hw(hw)
        self.resolve_acks()

    def resolve_acks(self) -> None:
        keep = []
        for ack in self.acks:
            part = self.partitions[ack.tp]
            if part.leader_epoch != ack.leader_epoch:
                ack.done(Error.NOT_LEADER_OR_FOLLOWER)
            elif part.lead.hw > ack.entry.last:
                ack.done(Error.NONE)
            else:
                keep.append(ack)
        self.acks = keep

    def move_leader(self) -> None:
        """A data partition's leader moves to another replica (any: the ISR is every replica,
        and the high watermark the least of them)."""
        tp = self.rng.choice(DATA)
        part = self.partitions[tp]
        new = self.rng.choice([b for b in BROKERS if b != part.leader])
        part.leader, part.leader_epoch = new, part.leader_epoch + 1
        self.stats["data_moves"] += 1
        self.resolve_acks()

    def initialised(self, producer: Producer) -> None:
        if producer.incarnation > self.fenced_by.get(producer.tid, -1):
            self.fenced_by[producer.tid] = producer.incarnation

    def zombie_commit(self, zombie: Producer, txn: Txn) -> None:
        if self.fenced_by.get(zombie.tid, -1) > zombie.incarnation:
            raise Violation(f"zombie {zombie.name()} committed after a newer incarnation initialised")

    def restart_producer(self) -> None:
        busy = sorted(t for t, p in self.producers.items() if p.state == "txn" and p.txn is not None)
        if not busy:
            return
        tid = self.rng.choice(busy)
        old = self.producers[tid]
        old.zombie = True
        self.zombies.append(old)
        self.producers[tid] = Producer(self, tid, old.incarnation + 1)

    # ---- steps ------------------------------------------------------------------------------

    def step(self) -> None:
        """One random event: mostly progress (a producer acts, a message, a write or a load
        goes through, replication, a marker round), sometimes a fault (a coordinator or a
        leader moves, a producer is replaced and goes on as a zombie)."""
        rng = self.rng
        self.now += rng.randrange(0, 60)
        roll = rng.random()
        if roll < 0.22:
            p = rng.choice(list(self.producers.values()) + self.zombies[-2:])
            if p.state.endswith("-retry"):
                p.retry()
            else:
                p.act()
        elif roll < 0.47:
            for _ in range(2):
                if self.net:
                    self.deliver(rng.randrange(len(self.net)))
        elif roll < 0.59:
            if self.twrites:
                self.deliver_write(rng.randrange(len(self.twrites)))
        elif roll < 0.67:
            for b in BROKERS:
                self.send_round(b)
        elif roll < 0.83:
            tp = rng.choice(DATA)
            for b in BROKERS:
                if rng.random() < 0.8:
                    self.replicate(tp, b)
        elif roll < 0.86:
            b = rng.choice(BROKERS)
            self.views[b] = {tp: p.leader for tp, p in self.partitions.items()}
        elif roll < 0.89:
            if self.loads:
                self.complete_load(rng.randrange(len(self.loads)))
        elif roll < 0.90:
            if self.resigns:
                self.resign(rng.randrange(len(self.resigns)))
        elif roll < 0.95:
            b = rng.choice(BROKERS)
            self.effects(b, self.cores[b].tick(self.now, expire=False))
            if rng.random() < 0.5 and self.net:
                self.deliver(rng.randrange(len(self.net)))
        elif roll < 0.965:
            self.move_coordinator()
        elif roll < 0.985:
            self.move_leader()
        else:
            self.restart_producer()

    def heal(self, rounds: int = 200) -> None:
        """No more faults: every message, write, load and resignation goes through, the views
        are current, time runs on past every transaction's timeout, and every producer ends
        its transaction."""
        self.healing = True
        for self.heal_rounds in range(rounds):
            self.now += 500
            while self.loads:
                self.complete_load(0)
            while self.resigns:
                self.resign(0)
            for b in BROKERS:
                self.views[b] = {tp: p.leader for tp, p in self.partitions.items()}
                self.effects(b, self.cores[b].tick(self.now, expire=False))
            for _ in range(4):
                while self.twrites:
                    self.deliver_write(0)
                for b in BROKERS:
                    self.send_round(b)
                while True:
                    for tp in DATA:
                        for b in BROKERS:
                            self.replicate(tp, b, everything=True)
                    if not self.net:
                        break
                    self.deliver(0)
            for p in list(self.producers.values()):
                if p.state.endswith("-retry"):
                    p.retry()
                else:
                    p.act()
            if self.quiet():
                return
        raise Violation(f"the cluster never settled: {self.unsettled()}")

    def quiet(self) -> bool:
        return not (self.net or self.twrites or self.acks or self.loads
                    or any(self.channels[b] for b in BROKERS)
                    or any(p.state not in ("idle",) for p in self.producers.values())
                    or any(m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.ONGOING)
                           or m.pending is not None
                           for c in self.cores.values() for m in c.transactions.values()))

    def unsettled(self) -> dict:
        return {"net": len(self.net), "twrites": len(self.twrites), "acks": len(self.acks),
                "channels": {b: sorted(c) for b, c in self.channels.items() if c},
                "producers": {t: p.state for t, p in self.producers.items()},
                "transactions": {t: (m.state.kafka_name, m.pending) for c in self.cores.values()
                                 for t, m in c.transactions.items()}}

    # ---- invariants -----------------------------------------------------------------------

    def ending_markers(self, rep: Replica) -> dict[int, Entry]:
        """Each data batch's index -> the marker of its producer after it (None: none yet)."""
        out: dict[int, Entry] = {}
        open_: dict[int, list[int]] = {}
        for i, e in enumerate(rep.entries):
            if e.marker:
                for j in open_.pop(e.pid, []):
                    out[j] = e
            else:
                open_.setdefault(e.pid, []).append(i)
        return out

    def check(self) -> None:
        """The invariants that hold after every step."""
        for tp, part in self.partitions.items():
            lead = part.lead
            # replicas agree below the high watermark
            for b, rep in part.replicas.items():
                below = [e for e in rep.entries if e.last < lead.hw]
                if any(a is not c for a, c in zip(below, lead.entries)) or \
                        len(below) > len(lead.entries):
                    raise Violation(f"{tp}: replica {b} differs from leader {part.leader} below the "
                                    f"high watermark {lead.hw}")
            ends = self.ending_markers(lead)
            visible = {id(e) for e in lead.read_committed()}
            lso = lead.lso
            last_decision: dict[int, int] = {}
            for i, e in enumerate(lead.entries):
                if e.marker:
                    d = self.decisions[e.decision]
                    if last_decision.get(e.pid, -1) > e.decision:
                        raise Violation(f"{tp}: markers of producer {e.pid} out of order at {e.base}")
                    last_decision[e.pid] = e.decision
                    if d[3] != e.commit:
                        raise Violation(f"{tp}: marker at {e.base} says {e.commit} for decision {d}")
                    continue
                if e.base >= lso:
                    continue
                end = ends.get(i)
                if end is None:
                    raise Violation(f"{tp}: batch {e.batch} at {e.base} is below the LSO {lso} "
                                    "with no marker after it")
                d = self.decisions[end.decision]
                if d[5] != e.generation:
                    raise Violation(f"{tp}: batch {e.batch} at {e.base} of transaction {e.generation} "
                                    f"ended by the marker at {end.base} of decision {end.decision} {d}")
                if d[0] != e.batch[0]:
                    raise Violation(f"{tp}: batch {e.batch} ended by {d}, another transactional id's")
                if (id(e) in visible) != d[3]:
                    raise Violation(f"{tp}: batch {e.batch} at {e.base}, its transaction "
                                    f"{'committed' if d[3] else 'aborted'}, is "
                                    f"{'' if id(e) in visible else 'not '}read_committed")

    def check_end(self) -> None:
        """After the faults healed: no hanging transaction, every decision's marker on every
        partition of it, committed data exactly once, aborted data never, no transaction torn."""
        self.check()
        for p in range(STATE_PARTITIONS):
            for tid, meta in storage.replay(self.tlog[p]).items():
                if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.ONGOING):
                    raise Violation(f"{tid} is {meta.state.kafka_name} in the log after healing")
        landed: dict[int, set] = {}
        visible: dict[tuple, list] = {}
        present: dict[tuple, list] = {}
        for tp, part in self.partitions.items():
            lead = part.lead
            for b, rep in part.replicas.items():
                if len(rep.entries) != len(lead.entries) or any(
                        a is not c for a, c in zip(rep.entries, lead.entries)):
                    raise Violation(f"{tp}: replica {b} differs from the leader after healing")
            if lead.state.ongoing or lead.hw != lead.leo or lead.lso != lead.leo:
                raise Violation(f"{tp}: a hanging transaction: open {lead.state.ongoing}, "
                                f"hw {lead.hw}, LSO {lead.lso}, log end {lead.leo}")
            for e in lead.entries:
                if e.marker:
                    landed.setdefault(e.decision, set()).add(tp)
                else:
                    present.setdefault(e.batch[:3], []).append(e.batch)
            for e in lead.read_committed():
                visible.setdefault(e.batch[:3], []).append(e.batch)
        for number, d in enumerate(self.decisions):
            missing = set(d[4]) - landed.get(number, set())
            if missing:
                raise Violation(f"decision {number} {d}: no marker on {sorted(missing)}")
        for txn, batches in visible.items():
            if len(set(batches)) != len(batches):
                raise Violation(f"{txn}: a batch read twice: {sorted(batches)}")
            if sorted(batches) != sorted(present[txn]):
                raise Violation(f"{txn}: torn: {sorted(batches)} read of {sorted(present[txn])}")
        for txn, (commit, acked) in self.told.items():
            if commit:
                lost = set(acked) - set(visible.get(txn, []))
                if lost:
                    raise Violation(f"{txn} committed, but {sorted(lost)} are not read_committed")
            elif txn in visible:
                raise Violation(f"{txn} aborted, but {visible[txn]} are read_committed")
