"""Partitions and elections: AlterPartition, ElectLeaders, and what broker changes do to ISRs.

Theory of operation (Kafka's ReplicationControlManager). Every function reads the image and
returns PartitionChangeRecords (built by partition_change.PartitionChange); nothing here
remembers anything between calls. Who may lead is decided by one predicate: a replica is
*acceptable* when its broker is registered, unfenced and not in controlled shutdown, and is
not one of the brokers being removed by the change at hand.

- A broker fenced, shutting down, or back as a new incarnation is taken out of every ISR,
  and every partition it led gets a new leader, in the same batch of records as the
  registration change (``remove_brokers``). A new incarnation that did not shut down
  cleanly also leaves every ELR: it may have lost what it had not flushed.
- A broker unfenced may lead the partitions that have no leader (``broker_unfenced``).
  A partition whose ISR and ELR are both empty is not elected here unless its topic allows
  unclean election: it *awaits recovery* (``awaits_recovery``) until balanced recovery
  (controller.balanced_recovery) has its replicas' log ends and elects the most complete
  (``recovery_election``).
- AlterPartition is validated as Kafka's controller does (``alter_partition``), then the
  leader's proposal is the target ISR of one PartitionChange.
- AlterPartitionReassignments (KIP-455): the target replicas are validated as a manual
  assignment (and, when the request does not allow a replication factor change, KIP-860, as
  long as the replica set the partition is headed for); the partition then holds target +
  the replicas being removed, with adding_replicas and removing_replicas set, until a change
  finds every target replica in the ISR and completes it (partition_change, step 0). A cancel
  reverts to the original replicas and takes the added ones out of the ISR; when that empties
  the ISR it is an unclean election, refused unless the topic allows one.
  ListPartitionReassignments reads what is in progress.
- ElectLeaders (PREFERRED, UNCLEAN), the periodic preferred-leader rebalance
  (auto.leader.rebalance.enable) and the unclean election of leaderless partitions whose
  topic allows it.

Configuration per topic: the controller's broker defaults (``log_defaults``, from
min.insync.replicas and unclean.leader.election.enable of its properties) overlaid with the
topic's ConfigRecords. The effective min ISR is min(min.insync.replicas, replication factor).
ELR is on when the finalized feature eligible.leader.replicas.version is >= 1.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from controller.partition_change import Election, PartitionChange
from controller.placement import InvalidReplicaAssignment, check_manual_assignment
from controller.result import ControllerResult
from engine.config import LogConfig
from engine.errors import ConfigError
from metadata.image import NO_LEADER, NO_LEADER_CHANGE, RECOVERED, RECOVERING, MetadataImage, PartitionState
from protocol import messages as M
from protocol.errors import Error, KafkaError

ELR_FEATURE = "eligible.leader.replicas.version"
MAX_ELECTIONS_PER_IMBALANCE = 1000
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1  # ElectLeaders election_type

PartitionRef = tuple[str, bytes, int, PartitionState]  # topic name, topic id, index, state


class ReplicationControl:
    def __init__(self, log_defaults: LogConfig | None = None):
        self.log_defaults = log_defaults or LogConfig()

    # ---- configuration ---------------------------------------------------------------------
    def topic_config(self, image: MetadataImage, topic: str) -> LogConfig:
        overrides = image.topic_config(topic)
        if not overrides:
            return self.log_defaults
        try:
            return self.log_defaults.with_overrides(overrides)
        except ConfigError:
            return self.log_defaults  # validated when written; a later default change cannot break it

    def effective_min_isr(self, image: MetadataImage, topic: str, p: PartitionState) -> int:
        return max(1, min(self.topic_config(image, topic).min_insync_replicas, len(p.replicas)))

    def unclean_allowed(self, image: MetadataImage, topic: str) -> bool:
        return self.topic_config(image, topic).unclean_leader_election_enable

    @staticmethod
    def elr_enabled(image: MetadataImage) -> bool:
        return image.features.get(ELR_FEATURE, 0) >= 1

    def change(self, image: MetadataImage, ref: PartitionRef,
               acceptable: Callable[[int], bool] | None = None) -> PartitionChange:
        topic, topic_id, index, p = ref
        return PartitionChange(p, topic_id, index, acceptable or image.is_active_broker,
                               self.effective_min_isr(image, topic, p), self.elr_enabled(image))

    # ---- what broker changes do to partitions ----------------------------------------------
    def leader_and_isr_updates(self, image: MetadataImage, partitions: Iterable[PartitionRef],
                               remove: frozenset[int] = frozenset(), add: int = NO_LEADER,
                               unclean_shutdown: frozenset[int] = frozenset()) -> list[Any]:
        """Kafka's generateLeaderAndIsrUpdates: brokers in ``remove`` leave the ISR and may not
        lead; ``add`` may lead though the image still shows it fenced (it is being unfenced);
        ``unclean_shutdown`` brokers also leave the ELR."""
        gone = remove | unclean_shutdown

        def acceptable(r: int) -> bool:
            return r not in gone and (r == add or image.is_active_broker(r))

        records = []
        for ref in partitions:
            topic = ref[0]
            builder = self.change(image, ref, acceptable)
            if self.unclean_allowed(image, topic):
                builder.set_election(Election.UNCLEAN)
            if unclean_shutdown:
                builder.set_unclean_shutdown_replicas(unclean_shutdown)
            builder.set_target_isr([r for r in ref[3].isr if r not in gone])
            record = builder.build()
            if record is not None:
                records.append(record)
        return records

    def broker_fenced(self, image: MetadataImage, broker_ids: Iterable[int]) -> list[Any]:
        """Out of every ISR, leaderships moved: the partition half of fencing (or of a
        controlled shutdown)."""
        ids = frozenset(broker_ids)
        refs = [ref for ref in partitions(image) if ids & set(ref[3].isr) or ref[3].leader in ids]
        return self.leader_and_isr_updates(image, refs, remove=ids)

    def broker_unfenced(self, image: MetadataImage, broker_id: int) -> list[Any]:
        """Partitions without a leader may now be led by ``broker_id``."""
        refs = [ref for ref in partitions(image) if ref[3].leader == NO_LEADER]
        return self.leader_and_isr_updates(image, refs, add=broker_id)

    def broker_new_incarnation(self, image: MetadataImage, broker_id: int, clean: bool) -> list[Any]:
        """A broker registering anew: its previous incarnation is gone. It leaves every ISR and
        leadership, and every ELR too unless it shut down cleanly."""
        unclean = frozenset() if clean else frozenset([broker_id])
        refs = [ref for ref in partitions(image)
                if broker_id in ref[3].isr or ref[3].leader == broker_id
                or (not clean and broker_id in ref[3].elr)]
        return self.leader_and_isr_updates(image, refs, remove=frozenset([broker_id]),
                                           unclean_shutdown=unclean)

    def awaits_recovery(self, image: MetadataImage, ref: PartitionRef) -> bool:
        """No leader, ISR and ELR empty, the one last known leader live, and a topic that does
        not allow unclean election: balanced recovery (controller.balanced_recovery) elects."""
        p = ref[3]
        return (p.leader == NO_LEADER and not p.isr and not p.elr and len(p.last_known_elr) == 1
                and self.elr_enabled(image) and image.is_active_broker(p.last_known_elr[0])
                and not self.unclean_allowed(image, ref[0]))

    def recovery_election(self, image: MetadataImage, ref: PartitionRef, leader: int) -> Any:
        """The PartitionChangeRecord electing balanced recovery's choice (RECOVERING), or None
        when it may not lead."""
        return self.change(image, ref).set_recovery_leader(leader).build()

    @staticmethod
    def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
        return any(ref[3].leader == broker_id for ref in partitions(image))

    # ---- AlterPartition (key 56) -----------------------------------------------------------
    def alter_partition(self, image: MetadataImage, req, version: int) -> ControllerResult:
        R = M.AlterPartitionResponse
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return ControllerResult([], R(error_code=Error.STALE_BROKER_EPOCH))
        records: list[Any] = []
        response = R(error_code=Error.NONE)
        for t in req.topics:
            result = R.TopicData(topic_id=t.topic_id)
            response.topics.append(result)
            topic = image.topics_by_id.get(t.topic_id)
            for pd in t.partitions:
                if topic is None:
                    result.partitions.append(R.TopicData.PartitionData(
                        partition_index=pd.partition_index, error_code=Error.UNKNOWN_TOPIC_ID))
                    continue
                isr_with_epochs = ([(b.broker_id, b.broker_epoch) for b in pd.new_isr_with_epochs]
                                   if version >= 3 else [(b, -1) for b in pd.new_isr])
                p = topic.partitions.get(pd.partition_index)
                error = self._validate_alter_partition(image, req.broker_id, p, pd, isr_with_epochs)
                if error != Error.NONE:
                    result.partitions.append(R.TopicData.PartitionData(
                        partition_index=pd.partition_index, error_code=error))
                    continue
                assert p is not None  # _validate_alter_partition refuses a missing partition
                ref = (topic.name, topic.topic_id, pd.partition_index, p)
                builder = self.change(image, ref)
                if self.unclean_allowed(image, topic.name):
                    builder.set_election(Election.UNCLEAN)
                builder.set_target_isr([b for b, _ in isr_with_epochs])
                builder.set_target_leader_recovery_state(pd.leader_recovery_state)
                record = builder.build()
                after = p
                if record is not None:
                    records.append(record)
                    after = p.copy()
                    after.merge(record)
                    if record.leader not in (NO_LEADER_CHANGE, req.broker_id):
                        # Only a reassignment completing can move the leader; the sender must
                        # learn the new state from the metadata log.
                        result.partitions.append(R.TopicData.PartitionData(
                            partition_index=pd.partition_index, error_code=Error.NEW_LEADER_ELECTED))
                        continue
                result.partitions.append(R.TopicData.PartitionData(
                    partition_index=pd.partition_index, error_code=Error.NONE, leader_id=after.leader,
                    leader_epoch=after.leader_epoch, isr=list(after.isr),
                    leader_recovery_state=after.leader_recovery_state,
                    partition_epoch=after.partition_epoch))
        return ControllerResult(records, response)

    @staticmethod
    def _validate_alter_partition(image: MetadataImage, sender: int, p: PartitionState | None, pd,
                                  isr_with_epochs: list[tuple[int, int]]) -> int:
        """Kafka's validateAlterPartitionData, rule by rule, in its order."""
        if p is None:
            return Error.UNKNOWN_TOPIC_OR_PARTITION
        if pd.leader_epoch > p.leader_epoch or pd.partition_epoch > p.partition_epoch:
            # The sender knows a newer state than ours: we are not (or no longer) the active
            # controller; it will find the one that is.
            return Error.NOT_CONTROLLER
        if pd.leader_epoch < p.leader_epoch:
            return Error.FENCED_LEADER_EPOCH
        if sender != p.leader:
            return Error.INVALID_REQUEST
        if pd.partition_epoch < p.partition_epoch:
            return Error.INVALID_UPDATE_VERSION
        new_isr = [b for b, _ in isr_with_epochs]
        if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(p.replicas):
            return Error.INVALID_REQUEST  # an ISR is a subset of the assignment
        if p.leader not in new_isr:
            return Error.INVALID_REQUEST  # and always holds the leader
        if pd.leader_recovery_state == RECOVERING and len(new_isr) > 1:
            return Error.INVALID_REQUEST  # a recovering leader cannot grow its ISR
        if p.leader_recovery_state == RECOVERED and pd.leader_recovery_state == RECOVERING:
            return Error.INVALID_REQUEST  # RECOVERED never goes back to RECOVERING
        for broker_id, broker_epoch in isr_with_epochs:
            b = image.brokers.get(broker_id)
            if (b is None or b.in_controlled_shutdown or b.fenced
                    or (broker_epoch != -1 and broker_epoch != b.broker_epoch)):
                return Error.INELIGIBLE_REPLICA
        return Error.NONE

    # ---- AlterPartitionReassignments (key 45), ListPartitionReassignments (key 46) -----------
    def alter_partition_reassignments(self, image: MetadataImage, req) -> ControllerResult:
        R = M.AlterPartitionReassignmentsResponse
        P = R.ReassignableTopicResponse.ReassignablePartitionResponse
        records: list[Any] = []
        allow_rf_change = req.allow_replication_factor_change
        response = R(error_code=Error.NONE, error_message=None,
                     allow_replication_factor_change=allow_rf_change)
        for t in req.topics:
            result = R.ReassignableTopicResponse(name=t.name)
            response.responses.append(result)
            for target in t.partitions:
                try:
                    record = self._reassign(image, t.name, target.partition_index, target.replicas,
                                            allow_rf_change)
                except _Refused as e:
                    result.partitions.append(P(partition_index=target.partition_index, error_code=e.code,
                                               error_message=e.message))
                    continue
                if record is not None:
                    records.append(record)
                result.partitions.append(P(partition_index=target.partition_index, error_code=Error.NONE,
                                           error_message=None))
        return ControllerResult(records, response)

    def _reassign(self, image: MetadataImage, name: str, index: int, replicas: list[int] | None,
                  allow_rf_change: bool = True) -> Any:
        topic = image.topics.get(name)
        p = topic.partitions.get(index) if topic is not None else None
        if p is None:
            raise _Refused(Error.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}.")
        assert topic is not None
        ref = (name, topic.topic_id, index, p)
        if replicas is None:
            return self._cancel_reassignment(image, ref)
        try:
            check_manual_assignment(image.brokers, replicas)
        except InvalidReplicaAssignment as e:
            raise _Refused(Error.INVALID_REPLICA_ASSIGNMENT, str(e)) from None
        heading = [r for r in p.replicas if r not in p.removing_replicas]  # where it is going now
        if not allow_rf_change and len(replicas) != len(heading):
            raise _Refused(Error.INVALID_REPLICATION_FACTOR,
                           f"The replication factor is changed from {len(heading)} to {len(replicas)}")
        removing = sorted(set(p.replicas) - set(replicas))
        builder = self.change(image, ref)
        builder.set_target_replicas(list(replicas) + removing)
        builder.set_target_removing(removing)
        builder.set_target_adding(sorted(set(replicas) - set(p.replicas)))
        return builder.build()

    def _cancel_reassignment(self, image: MetadataImage, ref: PartitionRef) -> Any:
        """Kafka's PartitionReassignmentRevert: the original replicas back, the added ones out
        of the ISR; an ISR left empty takes the first original replica, uncleanly."""
        name, _, index, p = ref
        if not p.adding_replicas and not p.removing_replicas:
            raise _Refused(Error.NO_REASSIGNMENT_IN_PROGRESS,
                           "No partition reassignment is in progress for this topic or partition.")
        replicas = [r for r in p.replicas if r not in p.adding_replicas]
        isr = [r for r in p.isr if r not in p.adding_replicas]
        builder = self.change(image, ref)
        if self.unclean_allowed(image, name):
            builder.set_election(Election.UNCLEAN)
        if not isr:
            if not self.unclean_allowed(image, name):
                raise _Refused(Error.INVALID_REPLICA_ASSIGNMENT, f"Unable to revert partition assignment for "
                               f"{name}:{index} because it would require an unclean leader election.")
            isr = replicas[:1]
            # It may lack what the ISR held: it leads as an unclean leader does (KIP-704).
            builder.set_target_leader_recovery_state(RECOVERING)
        builder.set_target_isr(isr).set_target_replicas(replicas).set_target_removing([]).set_target_adding([])
        return builder.build()

    def list_partition_reassignments(self, image: MetadataImage, req) -> Any:
        R = M.ListPartitionReassignmentsResponse
        T = R.OngoingTopicReassignment
        if req.topics is None:
            wanted = [(name, sorted(image.topics[name].partitions)) for name in sorted(image.topics)]
        else:
            wanted = [(t.name, t.partition_indexes) for t in req.topics if t.name in image.topics]
        response = R(error_code=Error.NONE, error_message=None)
        for name, indexes in wanted:
            parts = image.topics[name].partitions
            moving = [(i, parts[i]) for i in indexes
                      if i in parts and (parts[i].adding_replicas or parts[i].removing_replicas)]
            if moving:
                response.topics.append(T(name=name, partitions=[T.OngoingPartitionReassignment(
                    partition_index=i, replicas=list(p.replicas), adding_replicas=list(p.adding_replicas),
                    removing_replicas=list(p.removing_replicas)) for i, p in moving]))
        return response

    # ---- ElectLeaders (key 43) -------------------------------------------------------------
    def elect_leaders(self, image: MetadataImage, req, version: int) -> ControllerResult:
        R = M.ElectLeadersResponse
        election_type = req.election_type if version >= 1 else ELECTION_PREFERRED
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            return ControllerResult([], R(error_code=Error.INVALID_REQUEST))
        records: list[Any] = []
        response = R(error_code=Error.NONE)
        if req.topic_partitions is None:  # every partition; those already fine are left out
            for name in sorted(image.topics):
                result = R.ReplicaElectionResult(topic=name)
                response.replica_election_results.append(result)
                for index in sorted(image.topics[name].partitions):
                    error, message = self._elect(image, name, index, election_type, records)
                    if error != Error.ELECTION_NOT_NEEDED:
                        result.partition_result.append(R.ReplicaElectionResult.PartitionResult(
                            partition_id=index, error_code=error, error_message=message))
        else:
            for t in req.topic_partitions:
                result = R.ReplicaElectionResult(topic=t.topic)
                response.replica_election_results.append(result)
                for index in t.partitions:
                    error, message = self._elect(image, t.topic, index, election_type, records)
                    result.partition_result.append(R.ReplicaElectionResult.PartitionResult(
                        partition_id=index, error_code=error, error_message=message))
        return ControllerResult(records, response)

    def _elect(self, image: MetadataImage, name: str, index: int, election_type: int,
               records: list[Any]) -> tuple[int, str | None]:
        topic = image.topics.get(name)
        p = topic.partitions.get(index) if topic is not None else None
        if p is None:
            return Error.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{index}"
        assert topic is not None
        preferred = p.replicas[0] if p.replicas else NO_LEADER
        if election_type == ELECTION_PREFERRED and p.leader == preferred:
            return Error.ELECTION_NOT_NEEDED, None
        if election_type == ELECTION_UNCLEAN and p.leader != NO_LEADER:
            return Error.ELECTION_NOT_NEEDED, None
        builder = self.change(image, (name, topic.topic_id, index, p))
        builder.set_election(Election.PREFERRED if election_type == ELECTION_PREFERRED
                             else Election.UNCLEAN)
        record = builder.build()
        if record is None:
            if election_type == ELECTION_PREFERRED:
                return Error.PREFERRED_LEADER_NOT_AVAILABLE, (
                    f"Failed to elect leader for partition {name}-{index} under strategy "
                    "PreferredLeaderElectionStrategy")
            return Error.ELIGIBLE_LEADERS_NOT_AVAILABLE, (
                f"Failed to elect leader for partition {name}-{index} under strategy "
                "UncleanLeaderElectionStrategy")
        records.append(record)
        return Error.NONE, None

    # ---- periodic work of the active controller --------------------------------------------
    def maybe_balance_partition_leaders(self, image: MetadataImage, imbalance_percentage: int,
                                        max_elections: int = MAX_ELECTIONS_PER_IMBALANCE) -> list[Any]:
        """auto.leader.rebalance.enable: for every broker whose share of the partitions it is
        preferred for but does not lead exceeds leader.imbalance.per.broker.percentage, move
        those leaderships back to it where it is in the ISR and live."""
        preferred_for: dict[int, list[PartitionRef]] = {}
        for ref in partitions(image):
            if ref[3].replicas:
                preferred_for.setdefault(ref[3].replicas[0], []).append(ref)
        records: list[Any] = []
        for broker_id in sorted(preferred_for):
            refs = preferred_for[broker_id]
            not_led = [ref for ref in refs if ref[3].leader != broker_id]
            if not not_led or len(not_led) * 100 <= imbalance_percentage * len(refs):
                continue
            for ref in not_led:
                if len(records) >= max_elections:
                    return records
                record = self.change(image, ref).set_election(Election.PREFERRED).build()
                if record is not None and record.leader == broker_id:
                    records.append(record)
        return records

    def maybe_elect_unclean_leaders(self, image: MetadataImage,
                                    max_elections: int = MAX_ELECTIONS_PER_IMBALANCE) -> list[Any]:
        """Partitions with no leader whose topic allows unclean election get one if any
        replica is live."""
        records: list[Any] = []
        for ref in partitions(image):
            if len(records) >= max_elections:
                break
            if ref[3].leader != NO_LEADER or not self.unclean_allowed(image, ref[0]):
                continue
            record = self.change(image, ref).set_election(Election.UNCLEAN).build()
            if record is not None:
                records.append(record)
        return records


class _Refused(KafkaError):
    """A partition change refused: its code and Kafka's message."""


def partitions(image: MetadataImage) -> Iterator[PartitionRef]:
    for name in sorted(image.topics):
        topic = image.topics[name]
        for index in sorted(topic.partitions):
            yield name, topic.topic_id, index, topic.partitions[index]
