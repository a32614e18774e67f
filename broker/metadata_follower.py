"""The broker as an observer of the metadata log: Fetch from the controller, replay.

The broker fetches ``__cluster_metadata-0`` from the controller with long polls, replays
each committed record into its MetadataImage and tells the broker what changed. It also
registers with the controller (BrokerRegistration) and heartbeats (BrokerHeartbeat) so the
controller unfences it once it has caught up to its own registration.
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from ext.batch import decode_records, iter_batches
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error
from protocol.metadata_records import decode_record

log = logging.getLogger("strom.broker.metadata")

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = (1).to_bytes(16, "big")
FETCH_VERSION = 16
HEARTBEAT_VERSION = 1
REGISTRATION_VERSION = 3


class MetadataFollower:
    def __init__(self, node_id: int, cluster_id: str, voters: dict[int, tuple[str, int]],
                 listeners: list, rack: str | None, on_change: Callable[[MetadataImage], None],
                 heartbeat_ms: int = 2000):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.listeners = listeners
        self.rack = rack
        self.on_change = on_change
        self.heartbeat_ms = heartbeat_ms
        self.image = MetadataImage()
        self.next_offset = 0
        self.last_fetched_epoch = -1
        self.broker_epoch = -1
        self.fenced = True
        self.changed = asyncio.Event()
        self._conn: KafkaConnection | None = None
        self._tasks: list[asyncio.Task] = []
        self.incarnation_id = os.urandom(16)

    async def _connection(self) -> KafkaConnection:
        while self._conn is None or not self._conn.connected:
            for host, port in self.voters.values():
                conn = KafkaConnection(host, port, client_id=f"broker-{self.node_id}")
                try:
                    await conn.connect()
                    self._conn = conn
                    break
                except OSError:
                    await asyncio.sleep(0.1)
        return self._conn

    async def start(self, timeout: float = 60.0) -> None:
        """Register, then replay until caught up with our registration and unfenced."""
        await asyncio.wait_for(self._register(), timeout)
        self._tasks = [asyncio.get_running_loop().create_task(self._fetch_loop()),
                       asyncio.get_running_loop().create_task(self._heartbeat_loop())]
        deadline = asyncio.get_running_loop().time() + timeout
        while self.fenced:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("the controller did not unfence this broker")
            await self._heartbeat()
            if self.fenced:
                await asyncio.sleep(0.05)

    async def _register(self) -> None:
        R = M.BrokerRegistrationRequest
        request = R(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=[R.Listener(name=lsn.name, host=lsn.host, port=lsn.port, security_protocol=0)
                       for lsn in self.listeners],
            features=[R.Feature(name="metadata.version", min_supported_version=1,
                                max_supported_version=25)],
            rack=self.rack, previous_broker_epoch=self.broker_epoch,
        )
        while True:
            conn = await self._connection()
            try:
                response = await conn.request(62, REGISTRATION_VERSION, request, timeout=5)
            except (TimeoutError, ConnectionError):
                await asyncio.sleep(0.2)
                continue
            if response.error_code != Error.NONE:
                raise RuntimeError(f"broker registration refused: {Error(response.error_code).name}")
            self.broker_epoch = response.broker_epoch
            return

    async def _heartbeat(self) -> None:
        conn = await self._connection()
        request = M.BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.next_offset - 1, want_fence=False, want_shut_down=False)
        try:
            response = await conn.request(63, HEARTBEAT_VERSION, request, timeout=5)
        except (TimeoutError, ConnectionError):
            return
        if response.error_code == Error.STALE_BROKER_EPOCH:
            await self._register()
            return
        self.fenced = response.is_fenced

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            await self._heartbeat()

    async def _fetch_loop(self) -> None:
        R = M.FetchRequest
        while True:
            request = R(
                replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
                session_id=0, session_epoch=-1,
                topics=[R.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[
                    R.FetchTopic.FetchPartition(partition=0, fetch_offset=self.next_offset,
                                                last_fetched_epoch=self.last_fetched_epoch,
                                                partition_max_bytes=8 << 20)])],
            )
            request.replica_state = R.ReplicaState(replica_id=self.node_id, replica_epoch=self.broker_epoch)
            try:
                conn = await self._connection()
                response = await conn.request(1, FETCH_VERSION, request, timeout=10)
            except (TimeoutError, ConnectionError) as e:
                log.debug("metadata fetch failed: %s", e)
                await asyncio.sleep(0.2)
                continue
            partition = response.responses[0].partitions[0]
            if partition.error_code != Error.NONE:
                log.warning("metadata fetch error %s", Error(partition.error_code).name)
                await asyncio.sleep(0.2)
                continue
            if partition.records:
                self._apply(partition.records)

    def _apply(self, data: memoryview) -> None:
        changed = False
        for header in iter_batches(data, check_crc=True):
            if not header.is_control:
                for record in decode_records(data, header.position, False):
                    self.image.replay(record.offset, decode_record(record.value)[2])
                    changed = True
            self.next_offset = header.next_offset
            self.last_fetched_epoch = header.partition_leader_epoch
        if changed:
            self.on_change(self.image)
            self.changed.set()
            self.changed = asyncio.Event()

    async def wait_for_change(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except TimeoutError:
            pass

    async def forward(self, api_key: int, version: int, request):
        """Send an admin request to the controller and return its response."""
        conn = await self._connection()
        return await conn.request(api_key, version, request, timeout=30)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()
