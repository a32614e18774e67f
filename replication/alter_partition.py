"""AlterPartitionManager: a leader's ISR proposals on their way to the active controller.

Theory of operation (Kafka's DefaultAlterPartitionManager). A partition leader never writes its
ISR; it proposes a LeaderAndIsr (Partition's pending expand, shrink or leader recovery) and the
controller commits it as a PartitionChangeRecord, or refuses it with an error code. This class
carries the proposals:

- ``submit`` queues one item per partition; a newer proposal for a partition replaces its queued
  (not yet sent) one. A proposal already on the wire is not touched: its answer reaches
  ``on_result`` and the Partition ignores it when its state has moved on (the answer is stale).
- One task sends; at most ONE AlterPartition request is in flight for the whole broker. When it
  is free it takes everything queued and sends it as one request, grouped by topic id.
- A failed send or a top-level error (STALE_BROKER_EPOCH, CLUSTER_AUTHORIZATION_FAILED, ...)
  puts the whole batch back (unless a newer proposal for the partition was queued meanwhile) and
  retries after ``retry_backoff_ms``. ``send`` reaches the active controller and already retries
  NOT_CONTROLLER itself. Nothing times out: a proposal is retried until answered, replaced, or
  ``close()``.
- Each partition's answer goes to ``on_result(topic_id, partition, sent, error, result)``:
  ``result`` is the committed LeaderAndIsr when ``error`` is NONE, else None. A partition the
  controller left out of its answer is reported as UNKNOWN_SERVER_ERROR (the Partition retries
  it), so no proposal is silently lost.

The request (AlterPartition v3, KIP-903; the v2 ``new_isr`` is filled as well):

| field                         | value                                                        |
|-------------------------------|--------------------------------------------------------------|
| broker_id, broker_epoch       | this broker; its epoch read when the request is built        |
| topics[].topic_id             | one entry per topic id in the batch                          |
| partitions[].partition_index  |                                                              |
| leader_epoch                  | LeaderAndIsr.leader_epoch                                    |
| new_isr_with_epochs           | LeaderAndIsr.isr_with_epochs as (broker_id, broker_epoch)    |
| leader_recovery_state         | RECOVERED 0 / RECOVERING 1                                   |
| partition_epoch               | the partition epoch the proposal is based on (the CAS token) |

The answer's partitions carry the committed leader, leader epoch, ISR (without broker epochs:
they come back as -1), leader recovery state and the new partition epoch.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from protocol import messages as M

from . import errors
from .isr import RECOVERED, RECOVERING, LeaderAndIsr

log = logging.getLogger("strom.replication.alter_partition")

ALTER_PARTITION_KEY = 56
ALTER_PARTITION_VERSION = 3

PartitionKey = tuple[bytes, int]  # (topic id, partition)
OnResult = Callable[[bytes, int, LeaderAndIsr, int, "LeaderAndIsr | None"], None]


def build_request(broker_id: int, broker_epoch: int, items: dict[PartitionKey, LeaderAndIsr]) -> Any:
    R = M.AlterPartitionRequest
    topics: dict[bytes, Any] = {}
    for (topic_id, partition), sent in items.items():
        topic = topics.get(topic_id)
        if topic is None:
            topic = topics[topic_id] = R.TopicData(topic_id=topic_id, partitions=[])
        topic.partitions.append(R.TopicData.PartitionData(
            partition_index=partition,
            leader_epoch=sent.leader_epoch,
            new_isr=list(sent.isr),
            new_isr_with_epochs=[R.BrokerState(broker_id=b, broker_epoch=e) for b, e in sent.isr_with_epochs],
            leader_recovery_state=sent.leader_recovery_state,
            partition_epoch=sent.partition_epoch,
        ))
    return R(broker_id=broker_id, broker_epoch=broker_epoch, topics=list(topics.values()))


def parse_response(response: Any) -> dict[PartitionKey, tuple[int, LeaderAndIsr | None]]:
    """Each answered partition: (error, committed LeaderAndIsr or None)."""
    out: dict[PartitionKey, tuple[int, LeaderAndIsr | None]] = {}
    for topic in response.topics or []:
        for p in topic.partitions or []:
            key = (bytes(topic.topic_id), p.partition_index)
            if p.error_code != errors.NONE:
                out[key] = (p.error_code, None)
            elif p.leader_recovery_state not in (RECOVERED, RECOVERING):
                log.error("AlterPartition answer for %s-%d has an invalid leader recovery state %d",
                          topic.topic_id.hex(), p.partition_index, p.leader_recovery_state)
                out[key] = (errors.UNKNOWN_SERVER_ERROR, None)
            else:
                out[key] = (errors.NONE, LeaderAndIsr.build(
                    p.leader_id, p.leader_epoch, [(b, -1) for b in p.isr or []],
                    p.leader_recovery_state, p.partition_epoch))
    return out


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 send: Callable[[Any], Awaitable[Any]], on_result: OnResult, retry_backoff_ms: int = 50):
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.send = send
        self.on_result = on_result
        self.retry_backoff_ms = retry_backoff_ms
        # Invariant: at most one queued item per partition; an item is either queued or in flight
        # (a partition may have one of each: the queued one is newer).
        self._queued: dict[PartitionKey, LeaderAndIsr] = {}
        self._in_flight: dict[PartitionKey, LeaderAndIsr] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._failure: str | None = None  # the last failure logged, while it repeats

    # ---- what the Partitions call -------------------------------------------------------------

    def submit(self, topic_id: bytes, partition: int, leader_and_isr: LeaderAndIsr) -> None:
        """Queue a proposal, replacing this partition's queued (not yet sent) one."""
        if self._closed:
            return
        self._queued[(bytes(topic_id), partition)] = leader_and_isr
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition")
        self._wakeup.set()

    def queued(self) -> dict[PartitionKey, LeaderAndIsr]:
        return dict(self._queued)

    def in_flight(self) -> dict[PartitionKey, LeaderAndIsr]:
        return dict(self._in_flight)

    async def close(self) -> None:
        """Stop sending; queued and in-flight proposals are dropped (their answers too)."""
        self._closed = True
        self._queued.clear()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # ---- the sender ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self._queued:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch, self._queued = self._queued, {}
            self._in_flight = batch
            try:
                answered = await self._send_batch(batch)
            finally:
                self._in_flight = {}
            if not answered:
                for key, item in batch.items():
                    self._queued.setdefault(key, item)  # a newer proposal queued meanwhile wins
                await asyncio.sleep(self.retry_backoff_ms / 1000)

    def _failed(self, what: str, partitions: int) -> None:
        """Log an outage once (retries come every retry_backoff_ms), not every retry."""
        level = logging.DEBUG if what == self._failure else logging.WARNING
        log.log(level, "AlterPartition %s; retrying %d partitions every %d ms", what, partitions,
                self.retry_backoff_ms)
        self._failure = what

    async def _send_batch(self, batch: dict[PartitionKey, LeaderAndIsr]) -> bool:
        """Send one request; route its answers. False: retry the whole batch after the backoff."""
        try:
            response = await self.send(build_request(self.broker_id, self.broker_epoch(), batch))
            results = parse_response(response)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the controller is unreachable: retried, never timed out
            self._failed(f"failed ({e!r})", len(batch))
            return False
        if response.error_code != errors.NONE:
            self._failed(f"answered {errors.NAMES.get(response.error_code, response.error_code)}", len(batch))
            return False
        self._failure = None
        for key, sent in batch.items():
            error, result = results.get(key, (errors.UNKNOWN_SERVER_ERROR, None))
            if key not in results:
                log.warning("AlterPartition answer left out %s-%d", key[0].hex(), key[1])
            try:
                self.on_result(key[0], key[1], sent, error, result)
            except Exception:
                log.exception("AlterPartition result handler failed for %s-%d", key[0].hex(), key[1])
        return True


__all__ = ["AlterPartitionManager", "build_request", "parse_response", "ALTER_PARTITION_KEY",
           "ALTER_PARTITION_VERSION"]
