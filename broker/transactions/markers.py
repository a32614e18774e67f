"""The transaction marker channel: the coordinator's WriteTxnMarkers to partition leaders
(Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Theory of operation. Each ``MarkerRequest`` of the core (one ended transaction: its producer,
epoch, result, coordinator epoch and partitions) waits here until every partition's leader
wrote its marker. A sender task groups the partitions still waiting by their current leader
in the metadata image and sends each leader one WriteTxnMarkers request (v2, every marker for
that leader), over one connection per leader on the inter-broker listener; the local broker is
reached the same way, as Kafka's coordinator reaches itself. Each partition's answer decides:

| answer                                                     | the partition                      |
|------------------------------------------------------------|------------------------------------|
| NONE                                                       | written: reported to the core      |
| UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION        | dropped as written (Kafka: the     |
|                                                            | producer could not have written    |
|                                                            | there)                             |
| INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED     | the whole transaction's markers    |
|                                                            | are dropped: a newer coordinator   |
|                                                            | owns it                            |
| anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_   | retried after RETRY_BACKOFF_S,     |
| PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...),   | its leader looked up again         |
| a lost connection or a timeout                             |                                    |

A partition whose topic or partition is gone from the image (deleted) is dropped as written,
as Kafka's channel manager drops it; one without a leader waits for one. A transaction whose
``__transaction_state`` partition this broker no longer owns at that coordinator epoch is
dropped (its next coordinator's load resumes the markers). Markers of one transactional id
go out in order: the core starts the next transaction only once this one completed.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.transactions.connections import Connections
from broker.transactions.coordinator import MarkerRequest
from broker.transactions.state import TopicPartition
from protocol import messages as M
from protocol.errors import Error

log = logging.getLogger("strom.broker.transactions")

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 2
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0

WRITTEN, RETRY, ABORT = "written", "retry", "abort"
_WRITTEN = {Error.NONE, Error.UNSUPPORTED_FOR_MESSAGE_FORMAT, Error.UNSUPPORTED_VERSION}
_ABORT = {Error.INVALID_PRODUCER_EPOCH, Error.TRANSACTION_COORDINATOR_FENCED}
# What Kafka's completion handler retries; any other answer is retried too, with a warning
# (Kafka takes it for a bug: IllegalStateException).
_EXPECTED_RETRIES = {Error.UNKNOWN_TOPIC_OR_PARTITION, Error.NOT_LEADER_OR_FOLLOWER,
                     Error.NOT_ENOUGH_REPLICAS, Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                     Error.REQUEST_TIMED_OUT, Error.KAFKA_STORAGE_ERROR, Error.NETWORK_EXCEPTION}
NO_LEADER = "no leader"
GONE = "gone"


def outcome(error: int) -> str:
    """What a partition's WriteTxnMarkers answer means for its marker."""
    if error in _WRITTEN:
        return WRITTEN
    if error in _ABORT:
        return ABORT
    return RETRY


@dataclass
class Pending:
    request: MarkerRequest
    remaining: set[TopicPartition] = field(default_factory=set)
    in_flight: set[TopicPartition] = field(default_factory=set)


def group_by_leader(pending: list[Pending], leader_of: Callable[[TopicPartition], int | str]
                    ) -> tuple[dict[int, list[tuple[Pending, list[TopicPartition]]]],
                               list[tuple[Pending, list[TopicPartition]]]]:
    """The partitions to send now, grouped by leader, and those gone from the image (dropped
    as written). Partitions in flight or without a leader wait."""
    by_leader: dict[int, list[tuple[Pending, list[TopicPartition]]]] = {}
    gone: list[tuple[Pending, list[TopicPartition]]] = []
    for entry in pending:
        per_leader: dict[int, list[TopicPartition]] = {}
        lost: list[TopicPartition] = []
        for tp in sorted(entry.remaining - entry.in_flight):
            leader = leader_of(tp)
            if leader == GONE:
                lost.append(tp)
            elif isinstance(leader, int) and leader >= 0:
                per_leader.setdefault(leader, []).append(tp)
        if lost:
            gone.append((entry, lost))
        for leader, tps in per_leader.items():
            by_leader.setdefault(leader, []).append((entry, tps))
    return by_leader, gone


def build_request(items: list[tuple[Pending, list[TopicPartition]]]) -> Any:
    W = M.WriteTxnMarkersRequest.WritableTxnMarker
    markers = []
    for entry, tps in items:
        r = entry.request
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        markers.append(W(producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                         transaction_result=r.commit, coordinator_epoch=r.coordinator_epoch,
                         transaction_version=r.transaction_version,
                         topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                 for t, ps in sorted(topics.items())]))
    return M.WriteTxnMarkersRequest(markers=markers)


def partition_errors(response: Any, items: list[tuple[Pending, list[TopicPartition]]]
                     ) -> list[dict[TopicPartition, int]]:
    """Each item's partitions' errors, matched by producer id as Kafka matches them; a
    partition the response leaves out is REQUEST_TIMED_OUT (retried)."""
    by_producer: dict[int, dict[TopicPartition, int]] = {}
    for marker in response.markers:
        errors = by_producer.setdefault(marker.producer_id, {})
        for t in marker.topics:
            for p in t.partitions:
                errors[(t.name, p.partition_index)] = p.error_code
    return [{tp: by_producer.get(entry.request.producer_id, {}).get(tp, Error.REQUEST_TIMED_OUT)
             for tp in tps} for entry, tps in items]


class MarkerChannel:
    def __init__(self, runtime: Any):
        self.runtime = runtime
        self.pending: dict[str, Pending] = {}  # transactional id -> its markers still to write
        self._connections: Connections | None = None
        self._sending: set[asyncio.Task] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def connections(self) -> Connections:
        if self._connections is None:
            broker = self.runtime.broker
            config: Any = getattr(broker, "config", None)  # a stand-in broker may have none
            security = (config.client_security(broker.listener_name) if hasattr(config, "client_security")
                        else None)
            self._connections = Connections(broker.replicas.brokers,
                                            f"broker-{broker.node_id}-txn-marker-sender", security)
        return self._connections

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        tasks = list(self._sending) + ([self._task] if self._task is not None else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._connections is not None:
            await self._connections.close()

    def add(self, request: MarkerRequest) -> None:
        self.pending[request.transactional_id] = Pending(request, set(request.partitions))
        self._wake.set()

    def unknown_destination_size(self) -> int:
        """Kafka's UnknownDestinationQueueSize: the transactions with markers waiting for a
        partition's leader to be known."""
        return sum(1 for e in self.pending.values()
                   if any(self._leader_of(tp) == NO_LEADER for tp in e.remaining - e.in_flight))

    def drop_partition(self, partition: int) -> None:
        """The coordinator no longer owns this ``__transaction_state`` partition."""
        core = self.runtime.core
        for tid in [t for t in self.pending if core.partition_for(t) == partition]:
            del self.pending[tid]

    def _current(self, entry: Pending) -> bool:
        r = entry.request
        core = self.runtime.core
        return (self.pending.get(r.transactional_id) is entry
                and core.owned.get(core.partition_for(r.transactional_id)) == r.coordinator_epoch)

    def _leader_of(self, tp: TopicPartition) -> int | str:
        topic = self.runtime.broker.image.topics.get(tp[0])
        state = topic.partitions.get(tp[1]) if topic is not None else None
        if state is None:
            return GONE
        return state.leader if state.leader >= 0 else NO_LEADER

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                self._send_round()
            except Exception:
                log.exception("transaction markers: sending failed")
            waiting = any(e.remaining - e.in_flight for e in self.pending.values())
            try:
                async with asyncio.timeout(RETRY_BACKOFF_S if waiting else None):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _send_round(self) -> None:
        for tid in [t for t, e in self.pending.items() if not self._current(e)]:
            del self.pending[tid]
        by_leader, gone = group_by_leader(list(self.pending.values()), self._leader_of)
        for entry, tps in gone:
            log.info("transaction %s: partitions %s are gone; their markers are not sent",
                     entry.request.transactional_id, tps)
            self._written(entry, tps)
        for leader, items in by_leader.items():
            for entry, tps in items:
                entry.in_flight.update(tps)
            task = asyncio.get_running_loop().create_task(self._send(leader, items))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def _written(self, entry: Pending, tps: list[TopicPartition]) -> None:
        entry.remaining.difference_update(tps)
        r = entry.request
        if not entry.remaining and self.pending.get(r.transactional_id) is entry:
            del self.pending[r.transactional_id]
        if self._current_or_done(entry):
            self.runtime.markers_written(r.transactional_id, r.coordinator_epoch, tps)

    def _current_or_done(self, entry: Pending) -> bool:
        r = entry.request
        core = self.runtime.core
        return core.owned.get(core.partition_for(r.transactional_id)) == r.coordinator_epoch

    async def _send(self, leader: int, items: list[tuple[Pending, list[TopicPartition]]]) -> None:
        errors: list[dict[TopicPartition, int]]
        try:
            conn = await self.connections.get(leader)
            response = await conn.request(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, build_request(items),
                                          timeout=REQUEST_TIMEOUT_S)
            errors = partition_errors(response, items)
        except (ConnectionError, TimeoutError, OSError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s; retrying", leader, e)
            self.connections.drop(leader)
            errors = [dict.fromkeys(tps, Error.NETWORK_EXCEPTION) for _, tps in items]
        retry = False
        for (entry, tps), answers in zip(items, errors):
            entry.in_flight.difference_update(tps)
            if not self._current(entry):
                continue
            if any(outcome(code) == ABORT for code in answers.values()):
                log.info("transaction %s: markers refused (%s); a newer coordinator owns it",
                         entry.request.transactional_id,
                         sorted({Error(c).name for c in answers.values() if outcome(c) == ABORT}))
                del self.pending[entry.request.transactional_id]
                continue
            written = [tp for tp, code in answers.items() if outcome(code) == WRITTEN]
            for tp, code in answers.items():
                if outcome(code) == RETRY:
                    retry = True
                    say = log.debug if code in _EXPECTED_RETRIES else log.warning
                    say("marker of %s for %s-%d: %s; retrying", entry.request.transactional_id,
                        tp[0], tp[1], Error(code).name)
            if written:
                self._written(entry, written)
        if retry:  # the partitions refused go out again after the backoff, their leaders looked up again
            asyncio.get_running_loop().call_later(RETRY_BACKOFF_S, self._wake.set)
