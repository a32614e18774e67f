"""The broker process: partitions on the storage engine, served over the Kafka protocol.

Theory of operation. At start the broker recovers its log dirs, registers with the
controller and replays the metadata log until the controller unfences it; then it opens
its client listeners. Every metadata change is reconciled with the local partitions:
a partition this broker hosts gets a Log, a removed topic's logs are deleted. Until
replication lands, a partition's only replica is its leader, so the high watermark
follows the log end offset on every append and acks=all completes at once.

``run(config)`` takes the parsed configuration from the ``strom`` command.
"""
from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import time

from broker.fetch_waiters import FetchWaiters
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers import admin, fetch, groups, metadata, offsets, produce
from broker.metadata_follower import MetadataFollower
from engine.checkpoint import uuid_to_str
from engine.manager import LogManager
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.dispatch import Dispatcher
from protocol.errors import Error
from protocol.net import Server
from raft.settings import driver_config

log = logging.getLogger("strom.broker")
STOP_TIMEOUT_S = 20  # the stack dump comes at half of it


class Broker:
    def __init__(self, config, cluster_id: str):
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.logs = LogManager(config.log_dirs, config.log_config, cluster_id=cluster_id,
                               node_id=config.node_id)
        self.advertised = config.advertised_broker_listeners()
        self.listener_name = self.advertised[0].name
        self.follower = MetadataFollower(
            config.node_id, cluster_id, driver_config(config, cluster_id, observer=True), self.advertised,
            config["broker.rack"], self._on_metadata, config["broker.heartbeat.interval.ms"])
        self.fetch_waiters = FetchWaiters()
        self.pending_auto_create: set[str] = set()
        self.server: Server | None = None
        self.logs_started = False
        self._producer_ids: list[int] | None = None
        self._tasks: list[asyncio.Task] = []
        self.groups: GroupCoordinatorRuntime | None = None

    @property
    def image(self) -> MetadataImage:
        return self.follower.image

    # ---- partitions ------------------------------------------------------------------

    def topic_log_config(self, topic: str):
        overrides = self.image.topic_config(topic)
        return self.config.log_config.with_overrides(overrides) if overrides else self.config.log_config

    def _on_metadata(self, image: MetadataImage) -> None:
        hosted = set()
        for topic in image.topics.values():
            config = self.topic_log_config(topic.name)
            for index, p in topic.partitions.items():
                if self.node_id not in p.replicas:
                    continue
                hosted.add((topic.name, index))
                log_ = self.logs.get_log(topic.name, index)
                if log_ is not None and log_.topic_id not in (None, _uuid_str(topic.topic_id)):
                    self.logs.delete_log(topic.name, index)  # a recreated topic of the same name
                    log_ = None
                if log_ is None:
                    log_ = self.logs.get_or_create_log(topic.name, index, config, _uuid_str(topic.topic_id))
                elif log_.config != config:
                    log_.config = config
                if p.leader == self.node_id and p.isr == [self.node_id]:
                    # The leader alone is the ISR: everything it has is committed (the
                    # high watermark is the minimum log end offset over the ISR).
                    log_.update_high_watermark(log_.log_end_offset)
        for tp in list(self.logs.logs):
            if tp not in hosted:
                self.logs.delete_log(*tp)
        self.fetch_waiters.notify_all()  # leaders and partitions may have changed under them

    async def allocate_producer_id(self) -> int:
        """The next producer id from this broker's block, fetching a new block from the
        controller (AllocateProducerIds) when it runs out."""
        if self._producer_ids is None or self._producer_ids[0] >= self._producer_ids[1]:
            request = M.AllocateProducerIdsRequest(broker_id=self.node_id,
                                                   broker_epoch=self.follower.broker_epoch)
            response = await self.follower.forward(67, 0, request)
            if response.error_code != Error.NONE:
                raise RuntimeError(f"producer id allocation failed: {Error(response.error_code).name}")
            self._producer_ids = [response.producer_id_start,
                                  response.producer_id_start + response.producer_id_len]
        producer_id = self._producer_ids[0]
        self._producer_ids[0] += 1
        return producer_id

    def notify_appended(self, topic: str, partition: int) -> None:
        """Records were appended to (or committed in) the partition: answer its waiting fetches."""
        self.fetch_waiters.notify((topic, partition))

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.logs.startup()
        self.logs_started = True
        await self.follower.start(self.config["initial.broker.registration.timeout.ms"] / 1000)
        self.groups = GroupCoordinatorRuntime(self)
        self.groups.start()
        apis = []
        for module in (metadata, produce, fetch, offsets, admin, groups):
            apis += module.apis(self)
        self.dispatcher = Dispatcher(apis)
        self.server = Server(self.dispatcher.handle, self.config["socket.request.max.bytes"])
        for listener in self.config.broker_listeners():
            port = self.server.bind(listener.host, listener.port)
            log.info("broker %d listening on %s:%d", self.node_id, listener.host, port)
        self.server.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"],
                                         self.logs.cleanup_logs)),
            loop.create_task(self._every(self.config["replica.high.watermark.checkpoint.interval.ms"],
                                         self.logs.checkpoint_high_watermarks)),
            loop.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                         self._checkpoint_offsets)),
            loop.create_task(self._every(1000, lambda: self.logs.flush_dirty_logs(_now_ms()))),
        ]

    def _checkpoint_offsets(self) -> None:
        self.logs.checkpoint_recovery_points()
        self.logs.checkpoint_log_start_offsets()

    async def _every(self, interval_ms: int, fn) -> None:
        while True:
            await asyncio.sleep(min(interval_ms, 2**31) / 1000)
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        log.debug("stopping the listeners")
        if self.server is not None:
            await self.server.close()
        log.debug("stopping the group coordinator")
        if self.groups is not None:
            await self.groups.stop()
        log.debug("stopping the metadata follower")
        await self.follower.close()
        log.debug("closing the logs")
        if self.logs_started:
            self.logs.shutdown(self.follower.broker_epoch)


def _uuid_str(raw: bytes) -> str:
    return uuid_to_str(raw)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def serve(config, cluster_id: str) -> None:
    broker = Broker(config, cluster_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = loop.create_task(broker.start())
    stopping = loop.create_task(stop.wait())
    try:
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a failed start raises here
            log.info("broker %d started", config.node_id)
            metadata = broker.follower.raft.task
            await asyncio.wait([stopping, metadata], return_when=asyncio.FIRST_COMPLETED)
            if metadata.done() and not metadata.cancelled() and metadata.exception() is not None:
                raise RuntimeError(f"the metadata log observer failed: {metadata.exception()}")
    finally:
        for task in (starting, stopping):
            task.cancel()
        await asyncio.gather(starting, stopping, return_exceptions=True)
        # If stopping hangs, say where: every thread's stack goes to stderr (the log).
        faulthandler.dump_traceback_later(STOP_TIMEOUT_S / 2, exit=False)
        try:
            await asyncio.wait_for(broker.stop(), STOP_TIMEOUT_S)
        except TimeoutError:
            log.error("broker %d did not stop within %d s; exiting", config.node_id, STOP_TIMEOUT_S)
            raise
        faulthandler.cancel_dump_traceback_later()
        log.info("broker %d stopped", config.node_id)


def run(config, cluster_id: str) -> int:
    try:
        asyncio.run(serve(config, cluster_id))
    except Exception as e:
        log.error("broker %d failed: %s", config.node_id, e)
        return 1
    return 0
