"""The high watermarks consumer lag is measured against, as Kafka's lag exporters measure it: a
partition this broker hosts answers its own high watermark (a follower's is the leader's as of
its last fetch); any other partition's is asked of its leader with ListOffsets (latest,
read_uncommitted: the high watermark).

A scrape is synchronous on the loop (protocol/metrics.py renders in the request's handler), so
a partition not hosted here answers the leader's last answer, and each scrape that needed one
sends the next round of ListOffsets to the leaders, at most one round at a time: a lag read
from a leader is at most one scrape old. A partition never answered yet is left out of the
scrape (broker/groups/lag.py leaves out what it cannot measure).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error
from protocol.list_offsets import LATEST, offsets_request
from protocol.types import ProtocolError

log = logging.getLogger(__name__)

LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 7
NO_LEADER = -1
REQUEST_FAILURES = (ConnectionError, OSError, TimeoutError, asyncio.TimeoutError, ProtocolError)


class LeaderOffsets:
    """``high_watermark(topic, partition)`` for broker/groups/lag.py: this broker's own where it
    hosts the partition, else its leader's last ListOffsets answer (asked again on each scrape)."""

    def __init__(self, node_id: int, partitions: Callable[[], dict[tuple[str, int], Any]],
                 leader_of: Callable[[str, int], int], endpoint_of: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity | None, timeout_s: float = 5.0) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.leader_of = leader_of
        self.endpoint_of = endpoint_of
        self.security = security
        self.timeout_s = timeout_s
        self.remote: dict[tuple[str, int], int] = {}  # the leaders' last answers
        self._wanted: set[tuple[str, int]] = set()
        self._round: asyncio.Task | None = None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        local = self.partitions().get((topic, partition))
        if local is not None:
            return local.high_watermark
        self._wanted.add((topic, partition))
        self._ask_soon()
        return self.remote.get((topic, partition))

    def _ask_soon(self) -> None:
        if self._round is not None and not self._round.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # read off the loop (a test): nothing to send with
            return
        self._round = loop.create_task(self._ask_leaders())

    async def _ask_leaders(self) -> None:
        await asyncio.sleep(0)  # after the scrape that wanted them has collected everything
        wanted, self._wanted = self._wanted, set()
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in sorted(wanted):
            leader = self.leader_of(topic, partition)
            if leader == NO_LEADER:
                self.remote.pop((topic, partition), None)
                continue
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        await asyncio.gather(*(self._ask(leader, topics) for leader, topics in by_leader.items()))

    async def _ask(self, leader: int, topics: dict[str, list[int]]) -> None:
        endpoint = self.endpoint_of(leader)
        if endpoint is None:
            return
        body = offsets_request(topics, LATEST)
        conn = KafkaConnection(endpoint[0], endpoint[1], f"broker-{self.node_id}-lag", security=self.security)
        try:
            await conn.connect(self.timeout_s)
            answer = await conn.request(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, body, self.timeout_s)
        except REQUEST_FAILURES as e:
            log.debug("consumer lag: cannot ask broker %d at %s:%d: %s", leader, *endpoint, e)
            return
        finally:
            await conn.close()
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code == Error.NONE and p.offset >= 0:
                    self.remote[(t.name, p.partition_index)] = p.offset
                else:
                    self.remote.pop((t.name, p.partition_index), None)

    def close(self) -> None:
        if self._round is not None:
            self._round.cancel()
