"""The simulation's invariant checker (the table is in sim.py's docstring): after every event,
and once more on the converged log at the end of a run.

Each broker's log is followed as a hash chain (``Broker.hashes[i]`` = hash of the chain at
offset i - 1 and the (epoch, value) at offset i), kept in step with the log after every event; a
rewrite (truncation, crash) is reported by SimLog. ``committed`` is the one committed history:
every prefix below any replica's high watermark extends it or must match it, so "logs agree
below the HW" is one comparison per broker. ``committed_by_epoch`` is the highest HW each leader
epoch reached, for leader completeness.
"""
from __future__ import annotations

from replication.isr import NO_LEADER, PartitionRegistration


class Checker:
    def __init__(self, sim) -> None:
        self.sim = sim
        self.committed: list[int] = []
        self.committed_entries: list[tuple] = []
        self.committed_by_epoch: dict[int, int] = {}
        self.leader_of_epoch: dict[int, int] = {}
        self.acked: dict[str, list[tuple[str, int, int]]] = {}
        self.acked_count = 0
        self.metadata_checked = 0
        self.epochs_version = 0  # bumped whenever committed_by_epoch grows
        self.isr_checked_at = -1  # controller log length at the last ISR check
        self.last_registration: PartitionRegistration | None = None

    def fail(self, what: str) -> None:
        self.sim.fail(what)

    # -- the controller's metadata log ---------------------------------------------------------------------

    def on_metadata(self, metadata_log: list) -> None:
        for entry in metadata_log[self.metadata_checked:]:
            if entry[0] == "partition":
                reg = entry[1]
                self._check_registration(reg, self.last_registration, "controller")
                self.last_registration = reg
        self.metadata_checked = len(metadata_log)

    def _check_registration(self, reg: PartitionRegistration, previous: PartitionRegistration | None,
                            where: str) -> None:
        if not reg.isr or not set(reg.isr) <= set(reg.replicas):
            self.fail(f"{where}: ISR {reg.isr} is not a non-empty subset of the assignment {reg.replicas}")
        if reg.leader != NO_LEADER and reg.leader not in reg.isr:
            self.fail(f"{where}: leader {reg.leader} not in the ISR {reg.isr}")
        if previous is None:
            return
        if reg.partition_epoch <= previous.partition_epoch or reg.leader_epoch < previous.leader_epoch:
            self.fail(f"{where}: epochs went from (leader {previous.leader_epoch}, partition "
                      f"{previous.partition_epoch}) to ({reg.leader_epoch}, {reg.partition_epoch})")
        if where == "controller" and reg.partition_epoch != previous.partition_epoch + 1:
            self.fail(f"controller: partition epoch {previous.partition_epoch} -> {reg.partition_epoch}")
        if reg.leader != previous.leader and reg.leader_epoch <= previous.leader_epoch:
            self.fail(f"{where}: leader {previous.leader} -> {reg.leader} without a new leader epoch")

    def on_log_deleted(self, broker) -> None:
        """The broker is no longer a replica and deleted its log: its HW and epochs start over
        (a later replica of it starts from an empty log and a later registration)."""
        broker.hashes = []
        broker.last_hw = 0
        broker.last_epochs = (-1, -1)
        broker.checked_key = None

    def on_broker_replay(self, broker, previous: PartitionRegistration | None,
                         reg: PartitionRegistration) -> None:
        self._check_registration(reg, previous, f"broker {broker.id} replay")

    # -- acknowledgements -----------------------------------------------------------------------------------

    def on_acked(self, broker, producer: str, values: tuple, first_offset: int, leader_epoch: int) -> None:
        log = broker.log
        if log.high_watermark < first_offset + len(values):
            self.fail(f"{producer} acknowledged {values} at {first_offset} above the HW {log.high_watermark}")
        for i, value in enumerate(values):
            entry = log.entry_at(first_offset + i)
            if entry is None or entry[2] != value:
                self.fail(f"{producer} acknowledged {value} at {first_offset + i}, the leader holds {entry}")
            self.acked.setdefault(producer, []).append((value, first_offset + i, leader_epoch))
        self.acked_count += len(values)

    # -- after every event ----------------------------------------------------------------------------------

    def check(self) -> None:
        """A broker whose log, HW and partition state are unchanged since its last check is
        skipped (the committed history only grows, so what matched still matches), except for
        leader completeness when an earlier leader committed more meanwhile. The ISR check
        reruns when any broker changed or the controller wrote anything."""
        changed = False
        for broker in self.sim.brokers.values():
            if not broker.up:
                continue
            log, p = broker.log, broker.partition
            key = (log.high_watermark, log.log_end_offset, log.rewritten_from, broker.published,
                   p.leader_epoch, p.partition_epoch, p.partition_state)
            if key != broker.checked_key:
                broker.checked_key = key
                changed = True
                self._check_broker(broker)
            elif broker.completeness_version != self.epochs_version and broker.published and p.is_leader:
                self._check_leader_completeness(broker, p.leader_epoch)
        version = len(self.sim.controller.log)
        if changed or version != self.isr_checked_at:
            self.isr_checked_at = version
            self._check_committed_on_isr()

    def sync_chain(self, broker) -> None:
        log, hashes = broker.log, broker.hashes
        if log.log_start_offset != 0:
            self.fail(f"broker {broker.id}: log start offset moved to {log.log_start_offset} "
                      "(nothing deletes records here)")
        keep = min(len(hashes), log.rewritten_from, log.log_end_offset)
        log.rewritten_from = 1 << 62
        if keep < len(hashes):
            del hashes[keep:]
        if log.log_end_offset > keep:
            prev = hashes[-1] if hashes else 0
            for _, epoch, value in log.entries[keep:]:
                prev = hash((prev, epoch, value))
                hashes.append(prev)

    def _check_broker(self, broker) -> None:
        log, p = broker.log, broker.partition
        self.sync_chain(broker)
        hashes = broker.hashes
        hw = log.high_watermark
        if hw > log.log_end_offset:
            self.fail(f"broker {broker.id}: HW {hw} past its log end offset {log.log_end_offset}")
        if hw < broker.last_hw:
            self.fail(f"broker {broker.id}: HW went from {broker.last_hw} to {hw}")
        broker.last_hw = hw
        committed = self.committed
        if hw:
            if hw <= len(committed):
                if committed[hw - 1] != hashes[hw - 1]:
                    self.fail(f"broker {broker.id}: log below its HW {hw} differs from the committed history "
                              f"(first difference at {self._first_difference(broker, hw)})")
            else:
                n = len(committed)
                if n and committed[n - 1] != hashes[n - 1]:
                    self.fail(f"broker {broker.id}: log below its HW {hw} differs from the committed history "
                              f"(first difference at {self._first_difference(broker, n)})")
                committed.extend(hashes[n:hw])
                self.committed_entries.extend(log.entries[n:hw])
        if not broker.published:
            return
        epochs = (p.leader_epoch, p.partition_epoch)
        last = broker.last_epochs
        if epochs[0] < last[0] or epochs[1] < last[1]:
            self.fail(f"broker {broker.id}: (leader epoch, partition epoch) went from {last} to {epochs}")
        broker.last_epochs = epochs
        if not p.is_leader:
            return
        epoch = p.leader_epoch
        leader = self.leader_of_epoch.setdefault(epoch, broker.id)
        if leader != broker.id:
            self.fail(f"two leaders in leader epoch {epoch}: brokers {leader} and {broker.id}")
        state = p.partition_state
        assignment = set(p.assignment)
        if broker.id not in state.isr or not state.maximal_isr <= assignment:
            self.fail(f"broker {broker.id} leads with ISR {sorted(state.isr)} / maximal ISR "
                      f"{sorted(state.maximal_isr)}, assignment {p.assignment}")
        if hw > self.committed_by_epoch.get(epoch, 0):
            self.committed_by_epoch[epoch] = hw
            self.epochs_version += 1
        self._check_leader_completeness(broker, epoch)

    def _check_leader_completeness(self, broker, epoch: int) -> None:
        broker.completeness_version = self.epochs_version
        must_hold = max((h for e, h in self.committed_by_epoch.items() if e < epoch), default=0)
        hashes = broker.hashes
        if must_hold and (len(hashes) < must_hold or hashes[must_hold - 1] != self.committed[must_hold - 1]):
            self.fail(f"leader completeness: broker {broker.id} leads epoch {epoch} without the records "
                      f"committed below {must_hold} by earlier leaders")

    def _check_committed_on_isr(self) -> None:
        controller = self.sim.controller
        reg = controller.registration
        if reg.leader == NO_LEADER:
            return
        leader = self.sim.brokers[reg.leader]
        p = leader.partition
        if not (leader.up and leader.published and p.is_leader and p.leader_epoch == reg.leader_epoch):
            return
        hw = leader.log.high_watermark
        if not hw:
            return
        for member in reg.isr:
            broker = self.sim.brokers[member]
            registered = controller.brokers[member].incarnation == broker.incarnation
            if member == leader.id or not broker.up or not registered:
                continue
            if len(broker.hashes) < hw or broker.hashes[hw - 1] != leader.hashes[hw - 1]:
                self.fail(f"ISR member {member} lacks records below the HW {hw} of leader {leader.id} "
                          f"(its log end offset {broker.log.log_end_offset})")

    def _first_difference(self, broker, end: int):
        committed = self.committed_entries
        for offset in range(end):
            if offset >= len(committed) or broker.log.entry_at(offset) != committed[offset]:
                theirs = committed[offset] if offset < len(committed) else None
                return offset, broker.log.entry_at(offset), theirs
        return None

    # -- at the end ------------------------------------------------------------------------------------------

    def check_final_log(self, leader) -> None:
        """Every acks=all record in the converged leader's log exactly once, at the offset it was
        acknowledged at, in acknowledgement order per producer."""
        position: dict[str, int] = {}
        for offset, _, value in leader.log.entries:
            if value in position:
                self.fail(f"{value} is in the final log twice (offsets {position[value]} and {offset})")
            position[value] = offset
        for producer, acked in self.acked.items():
            previous = -1
            for value, offset, epoch in acked:
                found = position.get(value)
                if found is None:
                    self.fail(f"acks=all record {value} (offset {offset}, leader epoch {epoch}) is lost")
                if found != offset:
                    self.fail(f"acks=all record {value} acknowledged at {offset} is at {found}")
                if found <= previous:
                    self.fail(f"{producer}'s acknowledged records out of order at {value}")
                previous = found
