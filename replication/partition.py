"""One partition on one broker: leader or follower, ISR, high watermark, AlterPartition answers.

Theory of operation. The metadata image drives the role: ``make_leader`` / ``make_follower``
take the partition's registration and ignore one whose partition epoch is older than ours
(the AlterPartition answer may have taught us a newer epoch before the metadata arrived). A new
leader epoch makes the leader cache (leader epoch -> epoch start offset = its LEO) and reset every
follower's ReplicaState; a follower only reports that the leader epoch moved so its fetcher
restarts.

As leader, every follower Fetch is first checked (``check_follower_fetch``: leader epoch,
diverging epoch, range) and, once read, recorded (``update_follower_fetch_state``), which may
expand the ISR and advance the high watermark. A timer calls ``maybe_shrink_isr``. ISR changes are
proposed, never applied: the partition moves to a pending state (isr.py) and returns the
LeaderAndIsr to send; ``handle_alter_partition_response`` applies the controller's answer.

Nothing here does IO or reads a clock: each call gets ``now_ms`` and returns an Outcome telling
the caller what to do (complete waiters, send an AlterPartition, restart the fetcher).

| rule                                                   | where                              |
|--------------------------------------------------------|------------------------------------|
| stale partition epoch ignored                          | make_leader, make_follower         |
| epoch start offset cached, replica states reset        | make_leader (new leader epoch)     |
| unclean leader proposes RECOVERED before expanding     | make_leader, _maybe_propose_recovery |
| HW = min LEO over maximal ISR + caught-up eligible     | maybe_increment_leader_hw          |
| HW frozen while the ISR is under the effective min ISR | maybe_increment_leader_hw          |
| join ISR: LEO >= HW and >= epoch start offset, eligible| _maybe_expand_isr                  |
| leave ISR: not caught up for replica.lag.time.max.ms   | maybe_shrink_isr                   |
| one AlterPartition in flight                           | is_inflight checks                 |
| acks=all: refuse under min ISR, complete at HW         | check_append, check_enough_replicas_reach_offset |
| diverging epoch answered instead of records            | check_follower_fetch               |

State (read-only outside):

| field                     | meaning                                                        |
|---------------------------|----------------------------------------------------------------|
| leader_id                 | current leader (NO_LEADER before any registration)             |
| leader_epoch              | only grows                                                     |
| partition_epoch           | only grows (registrations and AlterPartition answers)          |
| assignment                | the replicas of the registration                               |
| partition_state           | isr.py's states; a follower's is committed with an empty ISR   |
| leader_epoch_start_offset | LEO when this leader epoch began; None on a follower          |
| remote_replicas           | leader only: one Replica per other assigned broker             |
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from replication import errors
from replication.errors import NotEnoughReplicas, NotLeaderOrFollower
from replication.isr import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    CommittedPartitionState,
    LeaderAndIsr,
    PartitionRegistration,
    PartitionState,
    PendingExpandIsr,
    PendingLeaderRecovery,
    PendingShrinkIsr,
)
from replication.log import PartitionLog
from replication.replica import Replica

# AlterPartition errors after which the leader waits for new metadata (the state stays pending).
_GIVE_UP = frozenset({
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.FENCED_LEADER_EPOCH, errors.INVALID_UPDATE_VERSION,
    errors.INVALID_REQUEST, errors.NEW_LEADER_ELECTED,
})
# AlterPartition errors that say "not applied, your partition epoch is right": reset.
_RESET = frozenset({errors.OPERATION_NOT_ATTEMPTED, errors.INELIGIBLE_REPLICA})


@dataclass(frozen=True)
class BrokerLiveness:
    broker_epoch: int
    fenced: bool = False
    in_controlled_shutdown: bool = False


class BrokerRegistry(Protocol):
    def get(self, broker_id: int) -> BrokerLiveness | None: ...


@dataclass
class Outcome:
    hw_advanced: bool = False
    alter_partition: LeaderAndIsr | None = None
    leader_epoch_changed: bool = False
    low_watermark_moved: bool = False  # a follower reported a new log start offset


class FollowerFetchCheck(NamedTuple):
    error: int = errors.NONE
    diverging_epoch: tuple[int, int] | None = None


@dataclass(frozen=True)
class OffsetSnapshot:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int


class Partition:
    def __init__(self, topic: str, partition: int, local_broker_id: int, log: PartitionLog,
                 brokers: BrokerRegistry, replica_lag_time_max_ms: int = 30000,
                 min_insync_replicas: int = 1) -> None:
        self.topic = topic
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.log = log
        self.brokers = brokers
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.assignment: tuple[int, ...] = ()
        self.partition_state: PartitionState = CommittedPartitionState(frozenset())
        self.leader_epoch_start_offset: int | None = None
        self.remote_replicas: dict[int, Replica] = {}

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition} on {self.local_broker_id}: leader {self.leader_id} "
                f"epoch {self.leader_epoch}/{self.partition_epoch} {self.partition_state})")

    # -- views ------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas capped by the replication factor, so a too-large setting cannot
        block writes forever."""
        return min(self.min_insync_replicas, len(self.remote_replicas) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.partition_state.isr) < self.effective_min_isr

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.partition_state.isr) < len(self.assignment)

    @property
    def in_sync_replica_ids(self) -> frozenset[int]:
        return self.partition_state.isr

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def set_min_insync_replicas(self, value: int, now_ms: int) -> Outcome:
        """A changed topic config: a lower min ISR may let the high watermark move at once."""
        self.min_insync_replicas = value
        return Outcome(hw_advanced=self.maybe_increment_leader_hw(now_ms))

    def check_leader_epoch(self, current_leader_epoch: int, require_leader: bool = True) -> int:
        """Kafka's getLocalLog check: the request's leader epoch (-1: not sent) against ours."""
        if current_leader_epoch >= 0:
            if self.leader_epoch > current_leader_epoch:
                return errors.FENCED_LEADER_EPOCH
            if self.leader_epoch < current_leader_epoch:
                return errors.UNKNOWN_LEADER_EPOCH
        if require_leader and not self.is_leader:
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.NONE

    # -- role changes -----------------------------------------------------------------------------

    def make_leader(self, reg: PartitionRegistration, now_ms: int) -> Outcome:
        if reg.partition_epoch < self.partition_epoch:
            return Outcome()
        is_new_leader = not self.is_leader
        is_new_leader_epoch = reg.leader_epoch > self.leader_epoch
        if not is_new_leader and not is_new_leader_epoch and reg.partition_epoch == self.partition_epoch:
            # The registration we already hold (an AlterPartition answer taught us its epoch
            # first): it says nothing new, and replacing our state by it would drop a pending
            # ISR change built on it, which the controller may still commit.
            return Outcome(hw_advanced=self.maybe_increment_leader_hw(now_ms))
        self._update_assignment_and_isr(reg.replicas, True, frozenset(reg.isr), reg.leader_recovery_state)
        if is_new_leader_epoch:
            start = self.log.log_end_offset
            # Cached before any write, so a follower holding a later epoch than anything in
            # this log still finds where this leadership began.
            self.log.assign_epoch_start_offset(reg.leader_epoch, start)
            for replica in self.remote_replicas.values():
                replica.reset(now_ms, start, is_new_leader, replica.broker_id in reg.isr)
            self.leader_epoch = reg.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = reg.partition_epoch
        self.leader_id = self.local_broker_id
        alter = self._maybe_propose_recovery()
        # The ISR may have dropped to the leader alone: the HW may jump to the LEO.
        return Outcome(hw_advanced=self.maybe_increment_leader_hw(now_ms), alter_partition=alter,
                       leader_epoch_changed=is_new_leader_epoch)

    def make_follower(self, reg: PartitionRegistration, now_ms: int) -> Outcome:
        if reg.partition_epoch < self.partition_epoch:
            return Outcome()
        is_new_leader_epoch = reg.leader_epoch > self.leader_epoch
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = reg.partition_epoch
        self._update_assignment_and_isr(reg.replicas, False, frozenset(), reg.leader_recovery_state)
        return Outcome(leader_epoch_changed=is_new_leader_epoch)

    def _update_assignment_and_isr(self, replicas, is_leader: bool, isr: frozenset[int],
                                   leader_recovery_state: int) -> None:
        self.assignment = tuple(replicas)
        if is_leader:
            followers = [r for r in self.assignment if r != self.local_broker_id]
            for broker_id in followers:
                self.remote_replicas.setdefault(broker_id, Replica(broker_id))
            for broker_id in [r for r in self.remote_replicas if r not in followers]:
                del self.remote_replicas[broker_id]
        else:
            self.remote_replicas.clear()
        self.partition_state = CommittedPartitionState(isr, leader_recovery_state)

    def _maybe_propose_recovery(self) -> LeaderAndIsr | None:
        """An uncleanly elected leader first asks the controller to mark the partition RECOVERED,
        ISR unchanged (KIP-704); no expansion is proposed before that is committed."""
        state = self.partition_state
        if not self.is_leader or state.is_inflight or state.leader_recovery_state != RECOVERING:
            return None
        sent = self._leader_and_isr(state.isr, RECOVERED)
        self.partition_state = PendingLeaderRecovery(sent, state)
        return sent

    # -- appends (acks) ---------------------------------------------------------------------------

    def check_append(self, acks: int) -> int:
        if not self.is_leader:
            return errors.NOT_LEADER_OR_FOLLOWER
        if acks == -1 and len(self.partition_state.isr) < self.effective_min_isr:
            return errors.NOT_ENOUGH_REPLICAS
        return errors.NONE

    def append_records_to_leader(self, records: Any, acks: int, now_ms: int,
                                 verification_guard: Any = None) -> tuple[Any, Outcome]:
        error = self.check_append(acks)
        if error == errors.NOT_LEADER_OR_FOLLOWER:
            raise NotLeaderOrFollower(f"{self.topic}-{self.partition}: leader is {self.leader_id}")
        if error == errors.NOT_ENOUGH_REPLICAS:
            raise NotEnoughReplicas(
                f"{self.topic}-{self.partition}: ISR {sorted(self.partition_state.isr)} under min ISR "
                f"{self.effective_min_isr}")
        if verification_guard is None:
            info = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        else:
            info = self.log.append_as_leader(records, self.leader_epoch, now_ms,
                                             verification_guard=verification_guard)
        return info, Outcome(hw_advanced=self.maybe_increment_leader_hw(now_ms))

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """acks=all: done once the HW reached ``required_offset`` (last offset + 1). The data is
        then committed, but if the maximal ISR fell under min ISR meanwhile the durability
        promise weakened: NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        if not self.is_leader:
            return False, errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, errors.NONE
        if len(self.partition_state.maximal_isr) < self.effective_min_isr:
            return True, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, errors.NONE

    # -- follower fetches (leader side) -----------------------------------------------------------

    def check_follower_fetch(self, replica_id: int, current_leader_epoch: int, fetch_offset: int,
                             last_fetched_epoch: int) -> FollowerFetchCheck:
        """What to answer a follower's Fetch before reading (Kafka's fetchRecords/readRecords).

        A diverging epoch comes back instead of records, and the fetch must then not update the
        follower's state: its fetch offset is not a position in our log.
        """
        error = self.check_leader_epoch(current_leader_epoch, require_leader=True)
        if error:
            return FollowerFetchCheck(error)
        if replica_id not in self.remote_replicas:
            # Not (yet) one of our replicas at this epoch: the follower retries.
            return FollowerFetchCheck(
                errors.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 else errors.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
            if epoch == -1 or end_offset == -1:
                return FollowerFetchCheck(errors.OFFSET_OUT_OF_RANGE)
            if fetch_offset < log.log_start_offset:
                return FollowerFetchCheck(errors.OFFSET_OUT_OF_RANGE)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return FollowerFetchCheck(diverging_epoch=(epoch, end_offset))
        if fetch_offset < log.log_start_offset or fetch_offset > log.log_end_offset:
            return FollowerFetchCheck(errors.OFFSET_OUT_OF_RANGE)
        return FollowerFetchCheck()

    def update_follower_fetch_state(self, replica_id: int, broker_epoch: int, fetch_offset: int,
                                    log_start_offset: int, leader_end_offset_at_read: int,
                                    now_ms: int) -> Outcome:
        """Record a served follower Fetch. ``leader_end_offset_at_read`` is our LEO before the
        read, so appends racing the fetch cannot keep a follower out of sync. Raises
        StaleBrokerEpoch (a fetch from an older incarnation) or NotLeaderOrFollower."""
        replica = self.remote_replicas.get(replica_id)
        if not self.is_leader or replica is None:
            raise NotLeaderOrFollower(f"{self.topic}-{self.partition}: {replica_id} is not a follower here")
        registered = self.brokers.get(replica_id)
        previous_end, previous_start = replica.state.log_end_offset, replica.state.log_start_offset
        replica.update_fetch_state(fetch_offset, log_start_offset, now_ms, leader_end_offset_at_read,
                                   broker_epoch, registered.broker_epoch if registered else None)
        alter = self._maybe_expand_isr(replica)
        hw_advanced = previous_end != replica.state.log_end_offset and self.maybe_increment_leader_hw(now_ms)
        return Outcome(hw_advanced=hw_advanced, alter_partition=alter,
                       low_watermark_moved=previous_start != replica.state.log_start_offset)

    def low_watermark(self) -> int:
        """The lowest log start offset among the leader and the replicas on live (registered,
        unfenced) brokers: what DeleteRecords answers once every live replica has deleted up
        to its offset (-1 while one has not reported its log start yet)."""
        low = self.log.log_start_offset
        for replica_id, replica in self.remote_replicas.items():
            liveness = self.brokers.get(replica_id)
            if liveness is not None and not liveness.fenced:
                low = min(low, replica.state.log_start_offset)
        return low

    # -- ISR ---------------------------------------------------------------------------------------

    def is_replica_isr_eligible(self, replica_id: int) -> bool:
        """Not fenced, not in controlled shutdown, and the broker epoch of its fetches is the
        registered one (or the fetch sent -1)."""
        replica = self.remote_replicas.get(replica_id)
        liveness = self.brokers.get(replica_id)
        if replica is None or liveness is None or liveness.fenced or liveness.in_controlled_shutdown:
            return False
        stored = replica.state.broker_epoch
        return stored is not None and (stored == -1 or stored == liveness.broker_epoch)

    def is_follower_in_sync(self, replica: Replica) -> bool:
        """Caught up to the HW *within this leader epoch*: a replica past the HW but short of the
        epoch start offset could be elected and lose committed data between the HW and LEO."""
        end = replica.state.log_end_offset
        return (self.leader_epoch_start_offset is not None and end >= self.log.high_watermark
                and end >= self.leader_epoch_start_offset)

    def _maybe_expand_isr(self, replica: Replica) -> LeaderAndIsr | None:
        state = self.partition_state
        if state.is_inflight or replica.broker_id in state.isr:
            return None
        if state.leader_recovery_state == RECOVERING:
            return self._maybe_propose_recovery()  # a reset proposal: propose it again first
        if not self.is_follower_in_sync(replica) or not self.is_replica_isr_eligible(replica.broker_id):
            return None
        sent = self._leader_and_isr(state.isr | {replica.broker_id}, state.leader_recovery_state)
        self.partition_state = PendingExpandIsr(replica.broker_id, sent, state)
        return sent

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        state = self.partition_state
        if state.is_inflight:
            return frozenset()
        leader_end = self.log.log_end_offset
        out = set()
        for broker_id in state.isr - {self.local_broker_id}:
            replica = self.remote_replicas.get(broker_id)
            lag = self.replica_lag_time_max_ms
            if replica is None or not replica.state.is_caught_up(leader_end, now_ms, lag):
                out.add(broker_id)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int) -> Outcome:
        """Drop ISR members that were not caught up for replica.lag.time.max.ms: stuck ones
        (no fetch) and slow ones (never reaching the LEO) alike."""
        if not self.is_leader or self.partition_state.is_inflight:
            return Outcome()
        state = self.partition_state
        if state.leader_recovery_state == RECOVERING:
            return Outcome(alter_partition=self._maybe_propose_recovery())
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return Outcome()
        sent = self._leader_and_isr(state.isr - out, state.leader_recovery_state)
        self.partition_state = PendingShrinkIsr(out, sent, state)
        return Outcome(alter_partition=sent)

    def _leader_and_isr(self, isr, leader_recovery_state: int) -> LeaderAndIsr:
        with_epochs = []
        for broker_id in isr:
            if broker_id == self.local_broker_id:
                liveness = self.brokers.get(broker_id)
                epoch = liveness.broker_epoch if liveness else -1
            else:
                replica = self.remote_replicas.get(broker_id)
                stored = replica.state.broker_epoch if replica else None
                # Unknown before its first fetch: -1 is safe, a crashed member is removed by the
                # controller, which bumps the partition epoch and so rejects this proposal.
                epoch = stored if stored is not None else -1
            with_epochs.append((broker_id, epoch))
        return LeaderAndIsr.build(self.local_broker_id, self.leader_epoch, with_epochs,
                                  leader_recovery_state, self.partition_epoch)

    def handle_alter_partition_response(self, sent: LeaderAndIsr, error: int, result: LeaderAndIsr | None,
                                        now_ms: int) -> Outcome:
        state = self.partition_state
        if not state.is_inflight or state.sent != sent:
            return Outcome()  # the state moved on (election, metadata replay): stale answer
        if error == errors.NONE and result is not None:
            if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
                return Outcome()
            self.partition_state = CommittedPartitionState(frozenset(result.isr),
                                                           result.leader_recovery_state)
            self.partition_epoch = result.partition_epoch
            return Outcome(hw_advanced=self.maybe_increment_leader_hw(now_ms))
        if error in _RESET:
            # The controller says: your partition epoch is right and nothing was applied.
            self.partition_state = state.last_committed_state
            return Outcome()
        if error in _GIVE_UP:
            return Outcome()
        return Outcome(alter_partition=sent)

    # -- high watermark ---------------------------------------------------------------------------

    def maybe_increment_leader_hw(self, now_ms: int) -> bool:
        """HW = min LEO over the maximal ISR and over any follower that is caught up and eligible
        (it could join the ISR at any moment, and must not find the HW past it), never while
        the ISR is under the effective min ISR; the log keeps it monotonic and <= LEO."""
        if not self.is_leader or self.is_under_min_isr:
            return False
        leader_end = self.log.log_end_offset
        new_hw = leader_end
        maximal_isr = self.partition_state.maximal_isr
        for replica in self.remote_replicas.values():
            end = replica.state.log_end_offset
            if end < new_hw and (
                    replica.broker_id in maximal_isr
                    or (replica.state.is_caught_up(leader_end, now_ms, self.replica_lag_time_max_ms)
                        and self.is_replica_isr_eligible(replica.broker_id))):
                new_hw = end
        return self.log.maybe_increment_high_watermark(new_hw)

    # -- offsets -----------------------------------------------------------------------------------

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True) -> tuple[int, int, int]:
        """OffsetsForLeaderEpoch: (error, epoch, end offset); (0, -1, -1) when unknown."""
        error = self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        if error:
            return error, -1, -1
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        if end_offset == -1:
            return errors.NONE, -1, -1
        return errors.NONE, epoch, end_offset

    def fetch_offset_snapshot(self, current_leader_epoch: int = -1,
                              fetch_only_from_leader: bool = True) -> tuple[int, OffsetSnapshot | None]:
        error = self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        if error:
            return error, None
        log = self.log
        return errors.NONE, OffsetSnapshot(log.log_start_offset, log.high_watermark, log.log_end_offset)
