"""Balanced recovery: a partition whose ISR and ELR are both gone is led by its most complete replica.

Theory of operation. When every in-sync and every eligible replica of a partition has left
(each killed and restarted without a clean shutdown, KIP-966), nobody is known to hold all
that was committed. Kafka 4.x then elects the last known leader (lastKnownElr) as soon as it
is live again, uncleanly. That broker may have come back with an empty disk while others
hold every record: electing it makes them truncate to it and loses what they hold. KIP-966
designed the better rule, its "balanced" unclean recovery: ask the replicas for their logs
and elect the most complete one. That is what this core does, for partitions whose topic
does not allow unclean election (where it does, ReplicationControl elects at once):

- A partition *awaits recovery* (ReplicationControl.awaits_recovery) while it has no leader,
  its ISR and ELR are empty, and its one last known leader is live. Nothing else elects it.
- For each, ``poll`` asks every registered replica broker for its log end: the epoch of its
  last batch and its log end offset (the shell sends ListOffsets LATEST with the debugging
  replica id, which any replica answers). A query without an answer is asked again after
  ``retry_ms``; an answer counts only for the broker incarnation (broker epoch) it came from.
- The most complete replica is the greatest (last epoch, log end offset): a higher epoch
  was written by a later leader, so a longer log of an older epoch is a stale branch it
  would be truncated from anyway. Ties go to the last known leader, then assignment order.
  A log end whose epoch is above the partition's leader epoch cannot be (a corrupt log
  would claim it): it is no candidate. Storage recovery (engine.recovery) truncates a log
  whose uncovered header fields were corrupted, so such claims should not reach here.
- ``poll`` elects once every replica has answered, or at ``timeout_ms`` after the recovery
  began with the answers it has: the most complete *live* one among them, or, when the last
  known leader never answered, the last known leader (Kafka's choice: nothing better is
  known). Until then the partition stays offline, as it would be without recovery until
  its last leader returned. The election is unclean (the partition RECOVERING).
- A recovery is forgotten when its partition no longer awaits one or changes (its
  partition epoch moves): a new one starts from nothing.

Pure: it takes the image, the time and the answers, and returns the queries to send and the
records to commit. It keeps nothing durable: a new active controller starts asking afresh.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.replication_control import PartitionRef, ReplicationControl, partitions
from metadata.image import MetadataImage
from protocol.errors import Error

RECOVERY_TIMEOUT_MS = 5000
RETRY_MS = 1000

LogEnd = tuple[int, int]  # (epoch of the last batch, log end offset); (-1, 0) for an empty log


@dataclass(frozen=True)
class LogEndQuery:
    """Ask ``broker_id`` (incarnation ``broker_epoch``) for its log end of topic-partition."""
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int


@dataclass
class _Recovery:
    partition_epoch: int
    started_ms: int
    asked: dict[int, tuple[int, int]] = field(default_factory=dict)  # broker: (broker epoch, at ms)
    answers: dict[int, tuple[int, LogEnd]] = field(default_factory=dict)  # broker: (broker epoch, end)


class BalancedRecovery:
    def __init__(self, replication: ReplicationControl, timeout_ms: int = RECOVERY_TIMEOUT_MS,
                 retry_ms: int = RETRY_MS):
        self.replication = replication
        self.timeout_ms = timeout_ms
        self.retry_ms = retry_ms
        self._recoveries: dict[tuple[str, int], _Recovery] = {}
        self._changed = False  # an answer arrived since the last poll
        # What the last poll elected, to be told: (topic, partition, leader, {broker: log end}).
        self.elected: list[tuple[str, int, int, dict[int, LogEnd]]] = []

    @property
    def pending(self) -> bool:
        return bool(self._recoveries)

    def due(self, now_ms: int) -> bool:
        """Whether a poll may do something without a change to the image."""
        if self._changed:
            return True
        for r in self._recoveries.values():
            if now_ms >= r.started_ms + self.timeout_ms:
                return True
            if any(now_ms >= at + self.retry_ms for b, (_, at) in r.asked.items() if b not in r.answers):
                return True
        return False

    def reset(self) -> None:
        """No longer the active controller: whatever was asked is forgotten."""
        self._recoveries.clear()
        self._changed = False

    # ---- answers ---------------------------------------------------------------------------
    def answered(self, query: LogEndQuery, error: int, leader_epoch: int, offset: int) -> None:
        """A ListOffsets answer to ``query``. An error leaves it unanswered: asked again later."""
        recovery = self._recoveries.get((query.topic, query.partition))
        if recovery is None or recovery.asked.get(query.broker_id, (None,))[0] != query.broker_epoch:
            return
        if error == Error.NONE and offset >= 0:
            recovery.answers[query.broker_id] = (query.broker_epoch, (leader_epoch, offset))
            self._changed = True

    # ---- the step --------------------------------------------------------------------------
    def poll(self, image: MetadataImage, now_ms: int,
             rescan: bool = True) -> tuple[list[LogEndQuery], list[Any]]:
        """(queries to send, PartitionChangeRecords to commit). ``rescan``: look at every
        partition (the image changed); otherwise only at those already recovering."""
        self._changed = False
        self.elected = []
        if rescan:
            refs = [ref for ref in partitions(image) if self.replication.awaits_recovery(image, ref)]
        else:
            refs = [ref for ref in (_ref(image, key) for key in list(self._recoveries))
                    if ref is not None and self.replication.awaits_recovery(image, ref)]
        awaiting = {(ref[0], ref[2]) for ref in refs}
        for key in [k for k in self._recoveries if k not in awaiting]:
            del self._recoveries[key]
        queries: list[LogEndQuery] = []
        records: list[Any] = []
        for ref in refs:
            topic, _, index, p = ref
            recovery = self._recoveries.get((topic, index))
            if recovery is None or recovery.partition_epoch != p.partition_epoch:
                recovery = self._recoveries[(topic, index)] = _Recovery(p.partition_epoch, now_ms)
            leader = self._decide(image, ref, recovery, now_ms)
            if leader is not None:
                record = self.replication.recovery_election(image, ref, leader)
                if record is not None:
                    records.append(record)
                    self.elected.append((topic, index, leader, self._current_answers(image, recovery)))
                    del self._recoveries[(topic, index)]
                    continue
            queries.extend(self._ask(image, ref, recovery, now_ms))
        return queries, records

    def _current_answers(self, image: MetadataImage, recovery: _Recovery) -> dict[int, LogEnd]:
        """Answers from the incarnation each broker still is."""
        out = {}
        for broker_id, (epoch, end) in recovery.answers.items():
            b = image.brokers.get(broker_id)
            if b is not None and b.broker_epoch == epoch:
                out[broker_id] = end
        return out

    def _decide(self, image: MetadataImage, ref: PartitionRef, recovery: _Recovery,
                now_ms: int) -> int | None:
        p = ref[3]
        last_known = p.last_known_elr[0]
        answers = self._current_answers(image, recovery)
        everyone = all(r in answers for r in p.replicas)
        timed_out = now_ms >= recovery.started_ms + self.timeout_ms
        if not everyone and not timed_out:
            return None
        # No replica can hold an epoch the partition never had: such a log end is corrupt.
        believable = {r: end for r, end in answers.items() if end[0] <= p.leader_epoch}
        live = {r: end for r, end in believable.items() if image.is_active_broker(r)}
        if last_known not in answers or not live:
            return last_known if timed_out else None  # nothing better is known
        order = {r: i for i, r in enumerate(p.replicas)}
        best = max(live, key=lambda r: (live[r], r == last_known, -order.get(r, len(order))))
        if not timed_out and max(believable.values()) > live[best]:
            return None  # the most complete replica is not live yet: wait for it, up to the timeout
        return best

    def _ask(self, image: MetadataImage, ref: PartitionRef, recovery: _Recovery,
             now_ms: int) -> list[LogEndQuery]:
        topic, _, index, p = ref
        out = []
        for r in p.replicas:
            b = image.brokers.get(r)
            if b is None or not b.endpoints:
                continue
            answered = recovery.answers.get(r)
            if answered is not None and answered[0] == b.broker_epoch:
                continue
            asked = recovery.asked.get(r)
            if asked is not None and asked[0] == b.broker_epoch and now_ms < asked[1] + self.retry_ms:
                continue
            recovery.asked[r] = (b.broker_epoch, now_ms)
            out.append(LogEndQuery(r, b.broker_epoch, topic, index))
        return out


def _ref(image: MetadataImage, key: tuple[str, int]) -> PartitionRef | None:
    topic = image.topics.get(key[0])
    p = topic.partitions.get(key[1]) if topic is not None else None
    return (key[0], topic.topic_id, key[1], p) if topic is not None and p is not None else None
