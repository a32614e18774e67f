"""A partition leader on the wire for the replica fetcher tests.

A protocol.net.Server + protocol.dispatch.Dispatcher on 127.0.0.1 that serves Fetch and
ListOffsets from engine Logs the test appends to, as a leader does for its followers:

- Fetch (v4..``fetch_max_version``): the leader epoch check (FENCED_LEADER_EPOCH older,
  UNKNOWN_LEADER_EPOCH newer), the divergence check on ``last_fetched_epoch`` (a diverging epoch
  and no records), OFFSET_OUT_OF_RANGE outside [log start, LEO], records up to the LEO as file
  slices (sent with sendfile like the broker's), the HW as a two-replica ISR would move it (the
  follower's fetch offset acknowledges everything below it), a long poll woken by ``append``;
- ListOffsets: earliest = log start, latest = LEO for a replica;
- ``errors[(topic, partition)]``: answer that error code instead.

Every request is recorded (``fetches`` with the ``fetch_clients`` that sent them,
``list_offsets``) for the tests to inspect; ``connections`` are the fetchers' open connections.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engine.log import FETCH_LOG_END, Log
from protocol import messages as M
from protocol.dispatch import Api, Dispatcher
from protocol.errors import Error
from protocol.net import Server

HOST = "127.0.0.1"


@dataclass
class LeaderPartition:
    topic_id: bytes
    log: Log
    leader_epoch: int


class LeaderServer:
    def __init__(self, fetch_max_version: int = 16):
        self.partitions: dict[tuple[str, int], LeaderPartition] = {}
        self.errors: dict[tuple[str, int], int] = {}
        self.fetches: list[tuple[int, object]] = []  # (version, request)
        self.fetch_clients: list[str] = []  # the client id of each Fetch: which fetcher sent it
        self.fetch_times: list[float] = []  # loop time each Fetch arrived
        self.list_offsets: list[tuple[int, object]] = []
        self.parked = 0  # Fetches waiting for data right now
        self.dispatcher = Dispatcher([Api(1, 4, fetch_max_version, self._fetch),
                                      Api(2, 1, 8, self._list_offsets)])
        self.server: Server | None = None
        self.port = 0
        self._changed = asyncio.Event()

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self, port: int = 0) -> int:
        self.server = Server(self.dispatcher.handle, 100 << 20)
        self.port = self.server.bind(HOST, port)
        self.server.start()
        return self.port

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None

    @property
    def endpoint(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def connections(self) -> set:
        return set(self.server.connections) if self.server is not None else set()

    # ---- the leader's log ---------------------------------------------------------------------

    def lead(self, topic: str, partition: int, topic_id: bytes, log: Log, leader_epoch: int) -> None:
        self.partitions[(topic, partition)] = LeaderPartition(topic_id, log, leader_epoch)

    def append(self, topic: str, partition: int, batch: bytearray, epoch: int | None = None):
        p = self.partitions[(topic, partition)]
        info = p.log.append_as_leader(batch, p.leader_epoch if epoch is None else epoch)
        self.wake()
        return info

    def wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def fetched_offsets(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """(fetch_offset, last_fetched_epoch) of every Fetch of the partition, in order."""
        return [(p.fetch_offset, p.last_fetched_epoch) for _, req in self.fetches for t in req.topics
                if t.topic == topic or self._name_of(t.topic_id) == topic
                for p in t.partitions if p.partition == partition]

    def _name_of(self, topic_id: bytes) -> str | None:
        for (name, _), p in self.partitions.items():
            if p.topic_id == bytes(topic_id):
                return name
        return None

    # ---- Fetch --------------------------------------------------------------------------------

    async def _fetch(self, header, req):
        version = header.api_version
        loop = asyncio.get_running_loop()
        self.fetches.append((version, req))
        self.fetch_clients.append(header.client_id)
        self.fetch_times.append(loop.time())
        deadline = loop.time() + req.max_wait_ms / 1000
        while True:
            changed = self._changed
            topics, total, failed = self._read(req, version)
            remaining = deadline - loop.time()
            if total >= max(req.min_bytes, 1) or failed or remaining <= 0:
                return M.FetchResponse(error_code=0, session_id=0, responses=topics)
            self.parked += 1
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass
            finally:
                self.parked -= 1

    def _read(self, req, version: int):
        R = M.FetchResponse
        out, total, failed = [], 0, False
        for t in req.topics:
            name = t.topic if version < 13 else self._name_of(t.topic_id)
            topic = R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[])
            out.append(topic)
            for p in t.partitions:
                pd = R.PartitionData(partition_index=p.partition, high_watermark=-1, last_stable_offset=-1,
                                     log_start_offset=-1, records=b"")
                topic.partitions.append(pd)
                pd.error_code = self._read_partition(name, p, pd)
                failed |= pd.error_code != 0
                total += len(pd.records) if isinstance(pd.records, bytes) else pd.records.size
        return out, total, failed

    def _read_partition(self, name, p, pd) -> int:
        leader = self.partitions.get((name, p.partition))
        if leader is None:
            return Error.UNKNOWN_TOPIC_OR_PARTITION
        error = self.errors.get((name, p.partition))
        if error is not None:
            return error
        if 0 <= p.current_leader_epoch < leader.leader_epoch:
            return Error.FENCED_LEADER_EPOCH
        if p.current_leader_epoch > leader.leader_epoch:
            return Error.UNKNOWN_LEADER_EPOCH
        log = leader.log
        if p.last_fetched_epoch >= 0:
            epoch, end = log.leader_epoch_cache.end_offset_for(p.last_fetched_epoch, log.log_end_offset)
            if epoch < p.last_fetched_epoch or end < p.fetch_offset:
                pd.diverging_epoch = R_EPOCH(epoch=epoch, end_offset=end)
                pd.high_watermark, pd.log_start_offset = log.high_watermark, log.log_start_offset
                return Error.NONE
        if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
            return Error.OFFSET_OUT_OF_RANGE
        # A two-replica ISR: the follower's fetch offset is its LEO, so the HW may reach it.
        log.maybe_increment_high_watermark(min(p.fetch_offset, log.log_end_offset))
        pd.high_watermark, pd.log_start_offset = log.high_watermark, log.log_start_offset
        pd.last_stable_offset = log.high_watermark
        info = log.read(p.fetch_offset, p.partition_max_bytes, FETCH_LOG_END)
        if info.records is not None and info.size:
            pd.records = info.records
        return Error.NONE

    # ---- ListOffsets --------------------------------------------------------------------------

    async def _list_offsets(self, header, req):
        self.list_offsets.append((header.api_version, req))
        R = M.ListOffsetsResponse
        topics = []
        for t in req.topics:
            out = R.ListOffsetsTopicResponse(name=t.name, partitions=[])
            topics.append(out)
            for p in t.partitions:
                pr = R.ListOffsetsPartitionResponse(partition_index=p.partition_index, timestamp=-1,
                                                    offset=-1)
                out.partitions.append(pr)
                leader = self.partitions.get((t.name, p.partition_index))
                if leader is None:
                    pr.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                pr.leader_epoch = leader.leader_epoch
                if p.timestamp == -2:
                    pr.offset = leader.log.log_start_offset
                elif p.timestamp == -1:
                    log = leader.log
                    pr.offset = log.log_end_offset if req.replica_id >= 0 else log.high_watermark
                else:
                    pr.error_code = Error.INVALID_REQUEST
        return R(topics=topics)


R_EPOCH = M.FetchResponse.EpochEndOffset
