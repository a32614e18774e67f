"""The simulation's model controller: one partition's registration, broker lifecycle, AlterPartition.

A stand-in for the KRaft controller (controller/ is not used), following Kafka 4.x's
ReplicationControlManager and PartitionChangeBuilder with eligible leader replicas (KIP-966)
disabled and clean elections only. Every change is appended to ``log``, the metadata log the
brokers replay in order; each call returns how far the log grew so the simulation can propagate
it. Nothing here knows about time except the ``now_ms`` it is given.

Metadata log entries:

| entry                                    | replayed by a broker as                               |
|------------------------------------------|-------------------------------------------------------|
| ("broker", broker_id, BrokerLiveness)    | RegisterBrokerRecord / BrokerRegistrationChangeRecord |
| ("partition", PartitionRegistration)     | PartitionRecord / PartitionChangeRecord               |

Brokers may be registered without being replicas (spares). A reassignment (KIP-455, as
controller/replication_control.py and partition_change.py do it) makes the replicas the target
followed by the replicas being removed (``removing``; ``adding`` the ones new to it), and
completes in the first change whose ISR, without the removed replicas, holds every replica that
stays: the replicas become the target, the removed ones leave the ISR, a removed leader hands
over, and a replica leaving bumps the leader epoch. A broker that is no longer a replica deletes
its log when it replays that.

Broker state (``BrokerState``):

| field                  | meaning                                                              |
|------------------------|----------------------------------------------------------------------|
| epoch                  | broker epoch of the current registration; grows with every one       |
| incarnation            | the process that registered (a retried registration is idempotent)   |
| fenced                 | registered fenced; unfenced by a heartbeat caught up to registered_at |
| in_controlled_shutdown | asked to shut down: ineligible for the ISR and for leadership        |
| registered_at          | metadata log end after the registration batch (catch-up target)      |
| last_heartbeat_ms      | session: fenced when now - this > broker.session.timeout.ms          |

Changes (``_change`` = PartitionChangeBuilder): the partition epoch grows by one on every
change, the leader epoch on every leader change. A target ISR that would be empty leaves the ISR
as it is (ELR disabled); the leader is kept if it is still in the target ISR and acceptable
(unfenced, not shutting down, not being removed), else the first acceptable replica of the
target ISR in assignment order, else NO_LEADER (the partition is offline until an ISR member
is unfenced again).

| trigger                                      | change                                            |
|----------------------------------------------|---------------------------------------------------|
| session expired (handleBrokerFenced)         | broker out of the ISR and of leadership           |
| registration without a clean shutdown        | the same (handleBrokerUncleanShutdown): it may    |
|                                              | have lost unflushed records                       |
| controlled shutdown                          | the same, and in_controlled_shutdown              |
| unfenced (handleBrokerUnfenced)              | leaderless partition: elect it if in the ISR      |
| AlterPartition, validated in Kafka's order   | the proposed ISR                                  |
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from replication import errors
from replication.isr import NO_LEADER, RECOVERED, RECOVERING, LeaderAndIsr, PartitionRegistration
from replication.partition import BrokerLiveness


@dataclass
class BrokerState:
    epoch: int
    incarnation: int
    fenced: bool = False
    in_controlled_shutdown: bool = False
    registered_at: int = 0
    last_heartbeat_ms: int = 0

    def liveness(self) -> BrokerLiveness:
        return BrokerLiveness(self.epoch, self.fenced, self.in_controlled_shutdown)

    @property
    def active(self) -> bool:
        return not self.fenced and not self.in_controlled_shutdown


class ModelController:
    def __init__(self, replicas: tuple[int, ...], session_timeout_ms: int,
                 spares: tuple[int, ...] = ()) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.log: list[tuple] = []
        self.next_broker_epoch = 100
        self.brokers: dict[int, BrokerState] = {}
        self.removing: tuple[int, ...] = ()  # a reassignment in progress: replicas leaving
        self.adding: tuple[int, ...] = ()  # and replicas joining
        for broker_id in replicas + spares:
            self.brokers[broker_id] = BrokerState(self._new_epoch(), incarnation=1)
            self.log.append(("broker", broker_id, self.brokers[broker_id].liveness()))
        self.registration = PartitionRegistration(replicas, replicas, replicas[0], 0, 0)
        self.log.append(("partition", self.registration))
        for state in self.brokers.values():
            state.registered_at = len(self.log)
        self.changes = {"fenced": 0, "unfenced": 0, "unclean registrations": 0, "elections": 0,
                        "offline": 0, "isr changes": 0, "controlled shutdowns": 0, "reassignments": 0,
                        "reassignments completed": 0}
        self.alter_errors: dict[str, int] = {}

    def _new_epoch(self) -> int:
        self.next_broker_epoch += 1
        return self.next_broker_epoch

    def _broker_record(self, broker_id: int) -> None:
        self.log.append(("broker", broker_id, self.brokers[broker_id].liveness()))

    # -- PartitionChangeBuilder ----------------------------------------------------------------------

    def _change(self, target_isr: tuple[int, ...], removed: int = NO_LEADER, added: int = NO_LEADER,
                replicas: tuple[int, ...] | None = None) -> bool:
        """Commit a change towards ``target_isr`` (and ``replicas``); ``removed`` is never an
        acceptable leader, ``added`` always is (it is being unfenced). True if a record was written."""
        reg = self.registration
        replicas = reg.replicas if replicas is None else replicas
        target = set(target_isr)
        isr = reg.isr if not target_isr else tuple(r for r in replicas if r in target)
        if target_isr and (self.removing or self.adding):
            staying = tuple(r for r in replicas if r not in self.removing)
            in_sync = tuple(r for r in isr if r not in self.removing)
            if in_sync and staying and set(staying) <= set(in_sync):  # the reassignment completes
                replicas, isr, target = staying, in_sync, set(in_sync)
                self.removing = self.adding = ()
                self.changes["reassignments completed"] += 1

        def acceptable(r: int) -> bool:
            return r != removed and (r == added or (r in self.brokers and self.brokers[r].active))

        def valid(r: int) -> bool:
            return r in target and acceptable(r)

        if valid(reg.leader):
            leader = reg.leader
        else:
            leader = next((r for r in replicas if valid(r)), NO_LEADER)
        if leader == reg.leader and isr == reg.isr and replicas == reg.replicas:
            return False
        # A new leader, or a replica leaving the assignment, is a new leader epoch.
        bump = leader != reg.leader or not set(reg.replicas) <= set(replicas)
        if leader != reg.leader:
            self.changes["elections" if leader != NO_LEADER else "offline"] += 1
        if isr != reg.isr:
            self.changes["isr changes"] += 1
        self.registration = replace(reg, replicas=replicas, isr=isr, leader=leader,
                                    leader_epoch=reg.leader_epoch + (1 if bump else 0),
                                    partition_epoch=reg.partition_epoch + 1)
        self.log.append(("partition", self.registration))
        return True

    def reassign(self, target: tuple[int, ...]) -> bool:
        """AlterPartitionReassignments to ``target`` (registered brokers, none twice): the
        replicas become target + the ones being removed, completed at once when the ISR allows."""
        reg = self.registration
        self.removing = tuple(sorted(set(reg.replicas) - set(target)))
        self.adding = tuple(sorted(set(target) - set(reg.replicas)))
        self.changes["reassignments"] += 1
        return self._change(reg.isr, replicas=tuple(target) + self.removing)

    @property
    def heading(self) -> tuple[int, ...]:
        """The replicas the partition is headed for (its replicas when nothing is moving)."""
        return tuple(r for r in self.registration.replicas if r not in self.removing)

    def _remove_from_isr(self, broker_id: int) -> None:
        reg = self.registration
        if broker_id in reg.isr or reg.leader == broker_id:
            self._change(tuple(r for r in reg.isr if r != broker_id), removed=broker_id)

    # -- broker lifecycle ----------------------------------------------------------------------------

    def register(self, broker_id: int, incarnation: int, previous_epoch: int, now_ms: int) -> tuple[int, int]:
        """BrokerRegistration: (broker epoch, metadata offset to catch up to). A broker whose
        previous epoch is not the registered one did not shut down cleanly (KIP-966): it leaves
        the ISR and leadership in the same batch, before it can act on any metadata."""
        state = self.brokers[broker_id]
        if incarnation <= state.incarnation:  # a retry, or a late one from an older process
            return state.epoch, state.registered_at
        clean = previous_epoch == state.epoch
        self.brokers[broker_id] = state = BrokerState(self._new_epoch(), incarnation, fenced=True,
                                                      last_heartbeat_ms=now_ms)
        self._broker_record(broker_id)
        if not clean:
            self.changes["unclean registrations"] += 1
            self._remove_from_isr(broker_id)
        state.registered_at = len(self.log)
        return state.epoch, state.registered_at

    def heartbeat(self, broker_id: int, epoch: int, metadata_offset: int, now_ms: int) -> None:
        state = self.brokers[broker_id]
        if epoch != state.epoch:
            return  # STALE_BROKER_EPOCH
        state.last_heartbeat_ms = now_ms
        if state.fenced and not state.in_controlled_shutdown and metadata_offset >= state.registered_at:
            state.fenced = False
            self.changes["unfenced"] += 1
            self._broker_record(broker_id)
            if self.registration.leader == NO_LEADER:
                self._change(self.registration.isr, added=broker_id)

    def controlled_shutdown(self, broker_id: int, epoch: int) -> None:
        """Leadership and ISR membership move away (the last ISR member stays in the ISR and
        the partition goes offline); the broker then leads nothing and is fenced at once
        (SHUTDOWN_NOW)."""
        state = self.brokers[broker_id]
        if epoch != state.epoch or state.fenced:
            return
        state.in_controlled_shutdown = True
        self.changes["controlled shutdowns"] += 1
        self._broker_record(broker_id)
        self._fence(broker_id)

    def _fence(self, broker_id: int) -> None:
        state = self.brokers[broker_id]
        self._remove_from_isr(broker_id)
        state.fenced = True
        self.changes["fenced"] += 1
        self._broker_record(broker_id)

    def maybe_fence_stale_brokers(self, now_ms: int) -> None:
        for broker_id, state in self.brokers.items():
            if not state.fenced and now_ms - state.last_heartbeat_ms > self.session_timeout_ms:
                self._fence(broker_id)

    # -- AlterPartition ------------------------------------------------------------------------------

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        proposal: LeaderAndIsr) -> tuple[int, int, LeaderAndIsr | None]:
        """(top-level error, partition error, committed LeaderAndIsr when NONE)."""
        if self.brokers[broker_id].epoch != broker_epoch:
            return errors.STALE_BROKER_EPOCH, errors.NONE, None
        error = self._validate(broker_id, proposal)
        self.alter_errors[errors.NAMES[error]] = self.alter_errors.get(errors.NAMES[error], 0) + 1
        if error:
            return errors.NONE, error, None
        if set(proposal.isr) != set(self.registration.isr):
            self._change(tuple(proposal.isr))  # the leader stays, unless the change completed a
            if self.registration.leader != broker_id:  # reassignment that removed it
                return errors.NONE, errors.NEW_LEADER_ELECTED, None
        reg = self.registration
        result = LeaderAndIsr.build(reg.leader, reg.leader_epoch, [(r, -1) for r in reg.isr],
                                    reg.leader_recovery_state, reg.partition_epoch)
        return errors.NONE, errors.NONE, result

    def _validate(self, broker_id: int, proposal: LeaderAndIsr) -> int:
        """ReplicationControlManager.validateAlterPartitionData, in its order."""
        reg = self.registration
        if proposal.leader_epoch > reg.leader_epoch or proposal.partition_epoch > reg.partition_epoch:
            return errors.NOT_CONTROLLER
        if proposal.leader_epoch < reg.leader_epoch:
            return errors.FENCED_LEADER_EPOCH
        if broker_id != reg.leader:
            return errors.INVALID_REQUEST
        if proposal.partition_epoch < reg.partition_epoch:
            return errors.INVALID_UPDATE_VERSION
        isr = proposal.isr
        if len(set(isr)) != len(isr) or not set(isr) <= set(reg.replicas) or reg.leader not in isr:
            return errors.INVALID_REQUEST
        if proposal.leader_recovery_state == RECOVERING and len(isr) > 1:
            return errors.INVALID_REQUEST
        if reg.leader_recovery_state == RECOVERED and proposal.leader_recovery_state == RECOVERING:
            return errors.INVALID_REQUEST
        for member, epoch in proposal.isr_with_epochs:
            state = self.brokers.get(member)
            if (state is None or state.in_controlled_shutdown or state.fenced
                    or (epoch != -1 and epoch != state.epoch)):
                return errors.INELIGIBLE_REPLICA
        return errors.NONE
