"""Seeded simulation of one replicated partition: brokers, a model controller, producers, faults.

One ``random.Random(seed)`` drives everything under one scheduler (a heap of timed events,
simulated milliseconds): the network between brokers and the controller (drops, delays that
reorder, duplicates, partitions that isolate a broker from the others and/or the controller),
follower stalls longer than replica.lag.time.max.ms, hard kills that lose the unflushed tail of
the log and the in-memory HW (a restart recovers the HW from its last checkpoint, as Kafka's
replication-offset-checkpoint), clean and controlled shutdowns, restarts, and producers that
append on whichever broker believes it leads (acks=all, acknowledged only when the core's
check_enough_replicas_reach_offset says done without error; and acks=1).

Each broker runs the pure core (replication/partition.py, follower.py over MemoryPartitionLog)
behind the driver in sim_broker.py; the model controller (sim_controller.py) owns the partition
registration and the broker registrations, validates AlterPartition, fences brokers whose
heartbeats stop and elects clean leaders; brokers replay its metadata log late (a delay per
broker) and in order. After every event the invariants below are checked (sim_invariants.py);
at the end every fault is healed, the partition must converge (one leader, full ISR, identical
logs, HW = LEO) and every acks=all record must be in the final log exactly once, in order. A
failure raises SimulationFailure naming the seed and a one-line replay command.

With spare brokers (``--spares N``: registered, not replicas at first) an operator reassigns
the partition about every REASSIGN_EVERY_MS: one replica of the set it is headed for swapped
for a broker outside it (a spare, or one being removed: a move back). The model controller
completes a reassignment as Kafka's does; a broker that replays that it is no longer a replica
answers what waits NOT_LEADER_OR_FOLLOWER and deletes its log, and one added again starts from
an empty log. Convergence then also needs the reassignment completed and every removed replica
empty.

| invariant                                   | how it is checked                                    |
|---------------------------------------------|------------------------------------------------------|
| HW never decreases                          | per broker and incarnation; a restart starts from    |
|                                             | the checkpoint (capped by the recovered LEO)         |
| HW never passes the LEO                     | every broker                                         |
| records below the leader's HW are on every  | the controller's leader, once it leads its epoch:    |
| ISR member                                  | every member of the controller's ISR that is up as   |
|                                             | the incarnation it registered holds that prefix      |
| ISR contains the leader, within assignment  | every registration written; every leader's own ISR   |
|                                             | and maximal ISR                                      |
| leader and partition epochs strictly rise   | at the controller (partition epoch +1 per change,    |
|                                             | leader epoch up on every leader change); a broker's  |
|                                             | replayed registrations and its Partition's epochs    |
|                                             | never go back                                        |
| ISR members' logs agree below the HW        | hash chains: every replica's log below its own HW is |
|                                             | the one committed history, (offset, epoch, value)    |
| one leader per leader epoch                 | (epoch -> broker) over every broker that led         |
| leader completeness                         | a leader of epoch E holds all that leaders of        |
|                                             | earlier epochs committed                             |
| no acks=all record lost (clean elections)   | acknowledged only when on the leader below its HW;   |
|                                             | at the end each is in the converged log once, at its |
|                                             | offset, in acknowledgement order per producer        |

The fault budget. Kafka does not fsync: an acks=all record is safe because the ISR holds it, and
a broker that crashed uncleanly leaves every ISR when it registers again (KIP-966). Without
eligible leader replicas a partition can still lose acknowledged records when its last intact
ISR member crashes (the "last replica standing" case KIP-966 describes), so the simulation keeps
to what Kafka promises: a lossy kill happens only while every other broker is up, unfenced and
heartbeating on time (a broker cut off earlier may still be fenced after the partition healed),
no partition is active, the controller's ISR has another member and the victim has no
AlterPartition in flight; until the controller has the victim's new registration, no other kill,
shutdown or partition starts. So the ISR keeps an intact member until the victim leaves it.
Otherwise faults overlap freely (shutdowns flush first and lose nothing).

| timing (simulated ms)             | value                                                     |
|-----------------------------------|-----------------------------------------------------------|
| replica.lag.time.max.ms           | 100 (ISR expiration every 50)                             |
| broker.session.timeout.ms         | 180, heartbeats every 40 (the broker's tick)              |
| HW checkpoint / flush             | every 100 / each broker with p = 0.4 every 20             |
| fetch.max.wait / request timeout  | 40 / 60; fetch backoff 10; AlterPartition retry 10        |
| by seed                           | fault profile (PROFILES), Fetch size (2, 5 or 50 records), |
|                                   | min.insync.replicas (2; with 5 replicas 2 or 3), metadata |
|                                   | propagation delay per broker (up to 2..25)                |

Replay one run: ``python3 -m tests.replication.sim --seed 17 --replicas 5``.
"""
from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields, replace

from replication import errors
from tests.replication.sim_broker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    Broker,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from tests.replication.sim_controller import ModelController
from tests.replication.sim_invariants import Checker

CONTROLLER = 0


class SimulationFailure(AssertionError):
    pass


@dataclass(frozen=True)
class Faults:
    drop: float = 0.03
    duplicate: float = 0.02
    max_delay_ms: int = 6
    crash_every_ms: int = 500  # mean time between kills / shutdowns; 0 disables
    partition_every_ms: int = 500  # mean time between network partitions; 0 disables
    stall_every_ms: int = 600  # mean time between follower stalls; 0 disables
    lossy: float = 0.7  # share of kills that lose the unflushed tail (when the budget allows)

    @classmethod
    def none(cls) -> Faults:
        return cls(0.0, 0.0, 3, 0, 0, 0, 0.0)


# Each seed picks a fault profile, a Fetch size and min.insync.replicas, so the seed alone replays.
PROFILES = (
    Faults(),
    Faults(crash_every_ms=150, partition_every_ms=900, lossy=0.9),
    Faults(drop=0.15, duplicate=0.05, max_delay_ms=20, crash_every_ms=400, partition_every_ms=200),
    Faults(stall_every_ms=150, partition_every_ms=250, crash_every_ms=700),
)
FETCH_MAX_ENTRIES = (2, 5, 50)
REASSIGN_EVERY_MS = 300  # mean time between reassignments, in runs with spare brokers


@dataclass(frozen=True)
class SimConfig:
    replica_lag_time_max_ms: int = 100
    session_timeout_ms: int = 180
    heartbeat_ms: int = 40
    hw_checkpoint_ms: int = 100
    flush_every_ms: int = 20
    flush_probability: float = 0.4
    fetch_max_wait_ms: int = 40
    request_timeout_ms: int = 60
    fetch_backoff_ms: int = 10
    alter_partition_retry_ms: int = 10
    produce_timeout_ms: int = 300
    fetch_max_entries: int = 3
    min_insync_replicas: int = 2
    settle_ms: int = 2000


class Simulation:
    def __init__(self, seed: int, replicas: int = 3, faults: Faults | None = None,
                 config: SimConfig | None = None, spares: int = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or PROFILES[seed % len(PROFILES)]
        fetch_max_entries = FETCH_MAX_ENTRIES[seed // len(PROFILES) % len(FETCH_MAX_ENTRIES)]
        min_isr = 2 if replicas <= 3 else (2, 3)[seed // 12 % 2]
        self.config = config or SimConfig(fetch_max_entries=fetch_max_entries, min_insync_replicas=min_isr)
        self.replay = f"python3 -m tests.replication.sim --seed {seed} --replicas {replicas}"
        if faults is not None and faults in PROFILES:
            self.replay += f" --profile {PROFILES.index(faults)}"
        elif faults == Faults.none():
            self.replay += " --no-faults"
        elif faults is not None:
            self.replay += " --faults " + ",".join(f"{k}={v}" for k, v in asdict(faults).items())
        if config is not None:
            self.replay += (f" --min-isr {config.min_insync_replicas}"
                            f" --fetch-max-entries {config.fetch_max_entries}")
        if spares:
            self.replay += f" --spares {spares}"
        ids = tuple(range(1, replicas + 1))
        spare_ids = tuple(range(replicas + 1, replicas + spares + 1))
        self.controller = ModelController(ids, self.config.session_timeout_ms, spare_ids)
        ids += spare_ids
        self.brokers = {i: Broker(self, i) for i in ids}
        self.metadata_delay = {i: self.rng.randint(2, 25) for i in ids}
        self.checker = Checker(self)
        self.now = 0
        self.events = 0
        self._queue: list = []
        self._seq = 0
        self._request_ids = 0
        self.blocked: set[frozenset[int]] = set()
        self.alter_in_network: Counter[int] = Counter()
        self.healing = False
        self.producers = {"p0": False, "p1": False}  # acks=all producers: one produce in flight each
        self.produced = Counter()
        self.stats: Counter[str] = Counter()

    # ---- scheduling --------------------------------------------------------------------------------

    def at(self, time_ms: int, kind: str, *args) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time_ms, self._seq, kind, args))

    def at_broker(self, time_ms: int, broker: Broker, method: str, *args) -> None:
        self.at(time_ms, "broker", broker.id, broker.incarnation, method, args)

    def next_request_id(self) -> int:
        self._request_ids += 1
        return self._request_ids

    def run(self, duration_ms: int = 2000) -> Simulation:
        if duration_ms != 2000:
            self.replay += f" --duration-ms {duration_ms}"
        try:
            self._run(duration_ms)
        except SimulationFailure:
            raise
        except Exception as exc:  # a core exception (a log refusing an append, ...) is a failure too
            self.fail(f"{type(exc).__name__}: {exc}")
        return self

    def _run(self, duration_ms: int) -> None:
        cfg, f = self.config, self.faults
        self.checker.on_metadata(self.controller.log)
        for broker in self.brokers.values():
            state = self.controller.brokers[broker.id]
            broker.start(0, state.epoch, state.registered_at)
            broker.on_metadata(0, self.controller.log, len(self.controller.log))
            self.at(self.rng.randint(1, cfg.heartbeat_ms), "tick", broker.id)
        self.at(cfg.replica_lag_time_max_ms // 2, "isr_expiration")
        self.at(self.rng.randint(1, cfg.hw_checkpoint_ms), "checkpoint")
        self.at(cfg.flush_every_ms, "flush")
        self.at(20, "session_check")
        self.at(5, "produce")
        spares = len(self.brokers) > len(self.controller.registration.replicas)
        reassign_every = REASSIGN_EVERY_MS if spares else 0
        for kind, every in (("crash", f.crash_every_ms), ("partition", f.partition_every_ms),
                            ("stall", f.stall_every_ms), ("reassign", reassign_every)):
            if every:
                self.at(self.rng.randrange(2 * every), kind)
        self.at(duration_ms, "heal_all")
        end = duration_ms + cfg.settle_ms
        self.checker.check()
        while self._queue:
            t, _, kind, args = heapq.heappop(self._queue)
            if t > end:
                break
            self.now = t
            self.events += 1
            getattr(self, "_on_" + kind)(*args)
            self.checker.check()
            if self.healing and self._converged():
                self.checker.check_final_log(self.brokers[self.controller.registration.leader])
                return
        self.fail(f"no convergence {cfg.settle_ms} ms after healing: {self._describe()}")

    # ---- the network -------------------------------------------------------------------------------

    def send(self, src: int, dst: int, message, dst_incarnation: int | None = None,
             reliable: bool = False, max_delay_ms: int | None = None) -> None:
        """Unreliable unless ``reliable`` (a TCP stream that only a partition cuts)."""
        if self._blocked(src, dst):
            return
        f = self.faults
        if not reliable and self.rng.random() < f.drop:
            return
        copies = 2 if not reliable and self.rng.random() < f.duplicate else 1
        src_incarnation = self.brokers[src].incarnation if src else 0
        for _ in range(copies):
            if isinstance(message, AlterPartitionRequest):
                self.alter_in_network[src] += 1
            delay = self.rng.randint(1, max_delay_ms or f.max_delay_ms)
            self.at(self.now + delay, "deliver", src, src_incarnation, dst, dst_incarnation, message)

    def send_to_controller(self, src: int, message: tuple) -> None:
        self.send(src, CONTROLLER, message, reliable=True)

    def _blocked(self, a: int, b: int) -> bool:
        return bool(self.blocked) and frozenset((a, b)) in self.blocked

    def _on_deliver(self, src: int, src_incarnation: int, dst: int, dst_incarnation: int | None,
                    message) -> None:
        if isinstance(message, AlterPartitionRequest):
            self.alter_in_network[src] -= 1
        if self._blocked(src, dst):
            return
        reply_to = (src, src_incarnation)
        if dst == CONTROLLER:
            return self._controller_receive(reply_to, message)
        broker = self.brokers[dst]
        if not broker.up or (dst_incarnation is not None and broker.incarnation != dst_incarnation):
            return
        now = self.now
        if isinstance(message, FetchRequest):
            broker.on_fetch_request(now, message, reply_to)
        elif isinstance(message, FetchResponse):
            broker.on_fetch_response(now, message)
        elif isinstance(message, ListOffsetsRequest):
            broker.on_list_offsets_request(now, message, reply_to)
        elif isinstance(message, ListOffsetsResponse):
            broker.on_list_offsets_response(now, message)
        elif isinstance(message, AlterPartitionResponse):
            broker.on_alter_partition_response(now, message)
        elif message[0] == "metadata":
            broker.on_metadata(now, self.controller.log, message[1])
        elif message[0] == "registered":
            broker.on_registered(now, message[1], message[2])
        elif message[0] == "shutdown granted":
            if broker.shutting_down:
                self.stop_broker(broker, lossy=False)

    def _controller_receive(self, reply_to: tuple[int, int], message) -> None:
        controller, now = self.controller, self.now
        src, incarnation = reply_to
        if isinstance(message, AlterPartitionRequest):
            top, error, result = controller.alter_partition(message.broker_id, message.broker_epoch,
                                                            message.proposal)
            self._publish()
            answer = AlterPartitionResponse(message.request_id, top, message.proposal, error, result)
            return self.send(CONTROLLER, src, answer, incarnation)
        kind = message[0]
        if kind == "register":
            _, broker_id, broker_incarnation, previous_epoch = message
            epoch, registered_at = controller.register(broker_id, broker_incarnation, previous_epoch, now)
            broker = self.brokers[broker_id]
            if broker_incarnation == broker.incarnation:
                broker.lost_unflushed = False  # the old incarnation is out of every ISR now
            self._publish()
            self.send(CONTROLLER, src, ("registered", epoch, registered_at), incarnation, reliable=True)
        elif kind == "heartbeat":
            _, broker_id, epoch, applied = message
            controller.heartbeat(broker_id, epoch, applied, now)
            self._publish()
            if applied < len(controller.log):  # catch-up for pushes that were lost
                self.send(CONTROLLER, src, ("metadata", len(controller.log)), incarnation, reliable=True)
        elif kind == "controlled shutdown":
            controller.controlled_shutdown(message[1], message[2])
            self._publish()
            self.send(CONTROLLER, src, ("shutdown granted",), incarnation, reliable=True)

    def _publish(self) -> None:
        """Push the grown metadata log to every broker, each with its own propagation delay."""
        log = self.controller.log
        if len(log) <= self.checker.metadata_checked:
            return
        self.checker.on_metadata(log)
        for broker in self.brokers.values():
            if broker.up:
                self.send(CONTROLLER, broker.id, ("metadata", len(log)), broker.incarnation,
                          max_delay_ms=self.metadata_delay[broker.id])

    # ---- timers ------------------------------------------------------------------------------------

    def _on_broker(self, broker_id: int, incarnation: int, method: str, args: tuple) -> None:
        broker = self.brokers[broker_id]
        if broker.up and broker.incarnation == incarnation:
            getattr(broker, method)(self.now, *args)

    def _on_tick(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.up:
            broker.tick(self.now)
        self.at(self.now + self.config.heartbeat_ms, "tick", broker_id)

    def _on_isr_expiration(self) -> None:
        for broker in self.brokers.values():
            if broker.up and broker.published and broker.partition.is_leader:
                outcome = broker.partition.maybe_shrink_isr(self.now)
                self.stats["shrink proposals"] += outcome.alter_partition is not None
                broker.process(self.now, outcome)
        self.at(self.now + self.config.replica_lag_time_max_ms // 2, "isr_expiration")

    def _on_checkpoint(self) -> None:
        for broker in self.brokers.values():
            if broker.up:
                broker.log.checkpoint_high_watermark()
        self.at(self.now + self.config.hw_checkpoint_ms, "checkpoint")

    def _on_flush(self) -> None:
        for broker in self.brokers.values():
            if broker.up and self.rng.random() < self.config.flush_probability:
                broker.log.flush()
        self.at(self.now + self.config.flush_every_ms, "flush")

    def _on_session_check(self) -> None:
        self.controller.maybe_fence_stale_brokers(self.now)
        self._publish()
        self.at(self.now + 20, "session_check")

    # ---- producers ---------------------------------------------------------------------------------

    def _on_produce(self) -> None:
        if self.healing:
            return
        self.at(self.now + self.rng.randint(10, 40), "produce")
        leaders = [b for b in self.brokers.values() if b.up and b.published and b.partition.is_leader]
        idle = [name for name, busy in self.producers.items() if not busy]
        if not leaders:
            self.stats["no leader"] += 1
            return
        broker = self.rng.choice(leaders)
        acks_all = idle and self.rng.random() < 0.8
        name = self.rng.choice(idle) if acks_all else "a1"
        values = []
        for _ in range(self.rng.randint(1, 3)):
            self.produced[name] += 1
            values.append(f"{name}-{self.produced[name]}")
        error = broker.produce(self.now, name, tuple(values), -1 if acks_all else 1)
        if error:
            self.stats[f"produce {errors.NAMES[error]}"] += 1
        elif acks_all:
            self.producers[name] = True
        else:
            self.stats["acks=1 acknowledged"] += len(values)

    def on_produce_completed(self, broker: Broker, waiter, error: int) -> None:
        self.producers[waiter.producer] = False
        if error == errors.NONE:
            self.checker.on_acked(broker, waiter.producer, waiter.values, waiter.first_offset,
                                  waiter.leader_epoch)
            if len(broker.partition.partition_state.isr) < len(broker.partition.assignment):
                self.stats["acks=all acknowledged by a shrunk ISR"] += len(waiter.values)
        else:
            self.stats[f"acks=all {errors.NAMES[error]}"] += 1

    # ---- faults ------------------------------------------------------------------------------------

    def _lossy_pending(self) -> bool:
        return any(b.lost_unflushed for b in self.brokers.values())

    def _may_lose_unflushed(self, broker: Broker) -> bool:
        """The fault budget (module docstring)."""
        recent = self.now - self.config.heartbeat_ms - self.faults.max_delay_ms
        for other in self.brokers.values():
            state = self.controller.brokers[other.id]
            if other is not broker and (not other.up or other.shutting_down or state.fenced
                                        or state.last_heartbeat_ms < recent):
                return False  # down, or its session may still expire (an earlier partition)
        isr = self.controller.registration.isr
        return (not self._lossy_pending() and not self.blocked and any(r != broker.id for r in isr)
                and broker.ap_inflight is None and not self.alter_in_network[broker.id])

    def _on_crash(self) -> None:
        if self.healing:
            return
        self.at(self.now + self.rng.randrange(2 * self.faults.crash_every_ms), "crash")
        up = [b for b in self.brokers.values() if b.up and not b.shutting_down]
        if not up:
            return
        broker = self.rng.choice(up)
        if self.rng.random() < self.faults.lossy and self._may_lose_unflushed(broker):
            self.stats["lossy kills"] += 1
            self.stats["records lost by kills"] += broker.log.log_end_offset - broker.log.recovery_point
            self.stop_broker(broker, lossy=True)
        elif self._lossy_pending():
            return
        elif self.rng.random() < 0.5 and broker.broker_epoch is not None:
            self.stats["controlled shutdowns"] += 1
            broker.shutting_down = True
            self.send_to_controller(broker.id, ("controlled shutdown", broker.id, broker.broker_epoch))
            self.at_broker(self.now + 100, broker, "shutdown_timeout")
        else:
            self.stats["clean shutdowns"] += 1
            self.stop_broker(broker, lossy=False)

    def stop_broker(self, broker: Broker, lossy: bool) -> None:
        for waiter in broker.stop(lossy):
            self.on_produce_completed(broker, waiter, errors.REQUEST_TIMED_OUT)
        self.at(self.now + self.rng.randint(20, 300), "restart", broker.id)

    def _on_restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if not broker.up:
            broker.start(self.now)

    def _on_partition(self) -> None:
        if self.healing:
            return
        if self.blocked or self._lossy_pending():
            self.at(self.now + self.rng.randint(20, 100), "partition")
            return
        ids = sorted(self.brokers)
        victim = self.rng.choice(ids)
        others = [i for i in ids if i != victim]
        kind = self.rng.randrange(4)
        if kind == 0:  # alone
            pairs = [(victim, o) for o in others + [CONTROLLER]]
        elif kind == 1:  # cut from the controller only
            pairs = [(victim, CONTROLLER)]
        elif kind == 2:  # cut from the other brokers only
            pairs = [(victim, o) for o in others]
        else:  # two sides, the controller with one of them
            side = set(self.rng.sample(ids, self.rng.randint(1, len(ids) - 1)))
            if self.rng.random() < 0.5:
                side.add(CONTROLLER)
            pairs = [(a, b) for a in side for b in ids + [CONTROLLER] if b not in side]
        self.blocked = {frozenset(pair) for pair in pairs}
        self.stats["partitions"] += 1
        self.at(self.now + self.rng.randint(50, 400), "heal")

    def _on_heal(self) -> None:
        self.blocked = set()
        if not self.healing:
            self.at(self.now + self.rng.randrange(2 * self.faults.partition_every_ms), "partition")

    def _on_stall(self) -> None:
        if self.healing:
            return
        self.at(self.now + self.rng.randrange(2 * self.faults.stall_every_ms), "stall")
        broker = self.rng.choice(list(self.brokers.values()))
        lag = self.config.replica_lag_time_max_ms
        broker.stalled_until = self.now + self.rng.randint(lag + 20, 3 * lag)
        self.stats["stalls"] += 1

    def _on_reassign(self) -> None:
        """An operator moves one replica: from the replicas the partition is headed for, one is
        swapped for a broker outside them (a spare, or one being removed: a move back)."""
        if self.healing:
            return
        self.at(self.now + self.rng.randrange(2 * REASSIGN_EVERY_MS), "reassign")
        heading = list(self.controller.heading)
        outside = [b for b in sorted(self.brokers) if b not in heading]
        target = heading[:]
        target[self.rng.randrange(len(target))] = self.rng.choice(outside)
        self.rng.shuffle(target)
        self.controller.reassign(tuple(target))
        self.stats["reassignments"] += 1
        self._publish()

    def _on_heal_all(self) -> None:
        """End of the faulty part: heal the network, end stalls, restart everyone, stop producing."""
        self.healing = True
        self.faults = replace(self.faults, drop=0.0, duplicate=0.0,
                              max_delay_ms=min(self.faults.max_delay_ms, 5))
        self.blocked = set()
        for broker in self.brokers.values():
            broker.stalled_until = 0
            if not broker.up:
                broker.start(self.now)

    # ---- convergence and reporting -----------------------------------------------------------------

    def _converged(self) -> bool:
        reg = self.controller.registration
        if (reg.leader < 0 or set(reg.isr) != set(reg.replicas) or any(self.producers.values())
                or self.controller.removing or self.controller.adding):
            return False
        leader = self.brokers[reg.leader]
        p = leader.partition
        if not (leader.up and leader.published and p.is_leader and p.leader_epoch == reg.leader_epoch
                and not p.partition_state.is_inflight and set(p.partition_state.isr) == set(reg.replicas)
                and leader.log.high_watermark == leader.log.log_end_offset):
            return False
        end = leader.log.log_end_offset
        for broker in self.brokers.values():
            state = self.controller.brokers[broker.id]
            if not broker.up or broker.waiters or state.fenced or state.incarnation != broker.incarnation:
                return False
            if broker.id not in reg.replicas:
                if broker.hosting or broker.log.log_end_offset:  # a removed replica deletes its log
                    return False
            elif (broker.log.log_end_offset != end
                  or (end and broker.hashes[end - 1] != leader.hashes[end - 1])):
                return False
        return True

    def _describe(self) -> str:
        lines = [f"controller: {self.controller.registration}",
                 *(f"  {b!r}" for b in self.brokers.values())]
        return "\n".join(lines)

    def fail(self, what: str) -> None:
        raise SimulationFailure(
            f"seed {self.seed}, {len(self.brokers)} replicas, t={self.now} ms, event {self.events}: {what}\n"
            f"replay: {self.replay}")

    def summary(self) -> str:
        reg = self.controller.registration
        stats = {**self.stats, **{k: v for k, v in self.controller.changes.items() if v}}
        details = ", ".join(f"{v} {k}" for k, v in sorted(stats.items()))
        return (f"seed {self.seed}: {self.events} events, replicas {list(reg.replicas)}, leader epoch "
                f"{reg.leader_epoch}, partition epoch "
                f"{reg.partition_epoch}, {self.checker.acked_count} acks=all records acknowledged of "
                f"{sum(v for k, v in self.produced.items() if k != 'a1')}, final log "
                f"{self.brokers[reg.leader].log.log_end_offset if reg.leader > 0 else '?'}; {details}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="run seed .. seed + SEEDS - 1")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--spares", type=int, default=0,
                        help="brokers that are not replicas at first; with any, reassignments move replicas")
    parser.add_argument("--duration-ms", type=int, default=2000)
    parser.add_argument("--profile", type=int, help="fault profile (index into PROFILES); default: by seed")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--faults", help="a fault profile as name=value,... (Faults' fields)")
    parser.add_argument("--min-isr", type=int, help="min.insync.replicas; default: by seed")
    parser.add_argument("--fetch-max-entries", type=int, help="default: by seed")
    parser.add_argument("--quiet", action="store_true", help="print only failures and the total")
    args = parser.parse_args(argv)
    faults = Faults.none() if args.no_faults else None
    if args.profile is not None:
        faults = PROFILES[args.profile]
    if args.faults:
        types = {f.name: f.type for f in fields(Faults)}
        pairs = (item.split("=") for item in args.faults.split(","))
        faults = Faults(**{k: (float if types[k] == "float" else int)(v) for k, v in pairs})
    config = None
    if args.min_isr or args.fetch_max_entries:
        config = SimConfig(min_insync_replicas=args.min_isr or 2,
                           fetch_max_entries=args.fetch_max_entries or 5)
    started = time.perf_counter()
    failures = 0
    for seed in range(args.seed, args.seed + args.seeds):
        sim = Simulation(seed, args.replicas, faults, config, args.spares)
        try:
            sim.run(args.duration_ms)
        except SimulationFailure as failure:
            failures += 1
            print(failure)
            continue
        if not args.quiet:
            print(sim.summary())
    print(f"{args.seeds} seeds, {failures} failed, in {time.perf_counter() - started:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
