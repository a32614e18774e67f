"""The broker process: partitions on the storage engine, served over the Kafka protocol.

Theory of operation. At start the broker recovers its log dirs (each log keeps the high
watermark of its last checkpoint), registers with the controller and replays the metadata log
until the controller unfences it; only then is the image handed to the ReplicaManager
(replication/manager.py), so that a half-replayed log never deletes a partition. From then on
every metadata change goes to it: it creates and deletes logs, makes partitions leaders or
followers, and starts or stops the replica fetchers. Then the broker opens its client
listeners; the request handlers reach partitions only through the ReplicaManager.

A log dir that fails while serving (disk full, IO error) goes offline through the
LogDirFailureChannel (engine/log_dir_failure.py): the request that hit it answers
KAFKA_STORAGE_ERROR, the ReplicaManager takes the dir's partitions offline, and the other dirs
go on serving. When none is left online the broker logs one ERROR line naming the dir and the OS
error and halts with exit code 1 (Kafka's "all log dirs have failed"), without a controlled
shutdown, once the answer had HALT_DELAY_S to go out. Its heartbeat connection closes, the
controller fences it and moves its leaderships; restarted with space again, recovery truncates
what a failed write left torn.

Periodic tasks: retention, isr-expiration every replica.lag.time.max.ms / 2, the HW checkpoint
every replica.high.watermark.checkpoint.interval.ms (and at shutdown), recovery point and log
start checkpoints, the flush of what a log rolled away from within a second of the roll, the
flush.ms flushes (these fsynced in a worker thread, broker/off_loop.py, so a slow disk never
stalls the loop), producer id expiration every
producer.id.expiration.check.interval.ms (and once the logs are loaded). Once started, the
heap it has so far is frozen out of the garbage collector's full collections
(protocol.net.freeze_startup_heap). Stopping closes the listeners, the group coordinator, the
transaction coordinator (broker/transactions/runtime.py), the replica fetchers and the
AlterPartition manager, the metadata follower, then the logs.

``run(config)`` takes the parsed configuration from the ``strom`` command.
"""
from __future__ import annotations

import asyncio
import faulthandler
import inspect
import logging
import os
import signal
import sys
import time

from broker.authorizer import BrokerAuthorizer
from broker.dynamic_config import DynamicBrokerConfig
from broker.fetch_session import FetchSessionCache
from broker.fetch_waiters import FetchWaiters
from broker.groups.lag import register as register_group_metrics
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.admin import AdminApis
from broker.handlers.fetch import FetchHandler
from broker.handlers.groups import GroupApis
from broker.handlers.metadata import MetadataHandlers
from broker.handlers.offsets import OffsetsHandlers
from broker.handlers.produce import ProduceHandlers
from broker.handlers.quorum import QuorumApis
from broker.handlers.quotas import QuotaApis
from broker.handlers.security import SecurityApis
from broker.handlers.transactions import TransactionApis
from broker.lag_offsets import LeaderOffsets
from broker.metadata_follower import MetadataFollower, supported_features
from broker.metrics import (
    BROKER_STATE_PENDING_CONTROLLED_SHUTDOWN,
    BROKER_STATE_RUNNING,
    BROKER_STATE_STARTING,
    register_broker_metrics,
)
from broker.off_loop import (
    CleanerThread,
    cleaner_values,
    flush_dirty_off_loop,
    flush_rolled_off_loop,
    write_off_loop,
)
from broker.quotas import BrokerQuotas
from broker.replication_quota import ReplicationQuota, configure_from, parse_rate
from broker.transactions.runtime import TransactionCoordinatorRuntime
from broker.transactions.runtime import register_metrics as register_transaction_metrics
from engine.config import log_config_from_broker
from engine.errors import ConfigError
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from engine.manager import LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LogManager
from metadata.configs import TOPIC_RESOURCE, dynamic_broker_configs
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.dispatch import Dispatcher
from protocol.errors import Error
from protocol.metrics import Registry
from protocol.metrics import serve as serve_metrics
from protocol.net import Server, freeze_startup_heap
from raft.settings import driver_config
from replication.alter_partition import ALTER_PARTITION_KEY, ALTER_PARTITION_VERSION, AlterPartitionManager
from replication.fetcher import FetcherConfig, ReplicaFetcherManager
from replication.manager import ReplicaManager
from replication.replica_selector import selector_name
from security.sasl.apis import image_scram_lookup, node_sasl_apis
from security.tls import TlsReloader

log = logging.getLogger("strom.broker")
STOP_TIMEOUT_S = 20  # the stack dump comes at half of it
CONTROLLED_SHUTDOWN_TIMEOUT_S = 15
DEFAULT_FLUSH_CHECK_MS = 1000  # unless log.flush.scheduler.interval.ms is set
HALT_DELAY_S = 0.25  # from a log dir failure to the halt: the failed request's answer goes out


class Broker:
    def __init__(self, config, cluster_id: str):
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.failure_channel = LogDirFailureChannel(self._on_log_dir_failure)
        self.logs = LogManager(config.log_dirs, config.log_config, cluster_id=cluster_id,
                               node_id=config.node_id, failure_channel=self.failure_channel)
        self.advertised = config.advertised_broker_listeners()  # registered in this order
        # inter.broker.listener.name: where the replica fetchers find leaders. A client is
        # answered (Metadata, DescribeCluster, FindCoordinator, KIP-951 leader endpoints) with
        # the endpoints of the listener its request came on (RequestHeader.listener_name); this
        # one names them for a request that came on no listener.
        self.listener_name = config.inter_broker_listener_name
        self.follower = MetadataFollower(
            config.node_id, cluster_id, driver_config(config, cluster_id, observer=True), self.advertised,
            config["broker.rack"], self._on_metadata, config["broker.heartbeat.interval.ms"],
            request_timeout_ms=config["controller.socket.timeout.ms"],
            heartbeat_timeout_ms=min(config["controller.socket.timeout.ms"],
                                     config["broker.session.timeout.ms"] // 2))
        self.fetch_waiters = FetchWaiters()
        # Replication quotas (Kafka's ReplicationQuotaManager, leader and follower), set from
        # each image: the fetch path and the replica fetchers enforce them.
        window = (config["replication.quota.window.num"],
                  config["replication.quota.window.size.seconds"] * 1000)
        self.leader_quota, self.follower_quota = ReplicationQuota(*window), ReplicationQuota(*window)
        self.replicas = ReplicaManager(
            config.node_id, self.logs, self.topic_log_config, listener_name=self.listener_name,
            replica_lag_time_max_ms=config["replica.lag.time.max.ms"], on_changed=self.notify_appended,
            on_committed=self.notify_committed,
            replica_selector=selector_name(config["replica.selector.class"]))
        # The bound of a replica's copy between log dirs unless the image holds a dynamic one.
        self.replicas.alter_log_dirs_static_rate = parse_rate(
            str(config["replica.alter.log.dirs.io.max.bytes.per.second"]))
        self.replicas.fetchers = ReplicaFetcherManager(
            config.node_id, lambda: self.follower.broker_epoch, self.replicas.brokers.endpoint_of,
            FetcherConfig(fetch_wait_max_ms=config["replica.fetch.wait.max.ms"],
                          fetch_min_bytes=config["replica.fetch.min.bytes"],
                          fetch_max_bytes=config["replica.fetch.max.bytes"],
                          response_max_bytes=config["replica.fetch.response.max.bytes"],
                          backoff_ms=config.get("replica.fetch.backoff.ms", 1000),
                          request_timeout_ms=config["replica.socket.timeout.ms"],
                          num_fetchers=config["num.replica.fetchers"],
                          socket_receive_buffer_bytes=config["replica.socket.receive.buffer.bytes"],
                          security=config.client_security(self.listener_name)),
            self.replicas.on_follower_appended, quota=self.follower_quota)
        # The other dynamic broker configs (cleaner, fetchers, connection limits, ip quotas).
        self.dynamic = DynamicBrokerConfig(config, config.node_id)
        self.dynamic.attach(fetchers=self.replicas.fetchers)
        self.replicas.alter_partition = AlterPartitionManager(
            config.node_id, lambda: self.follower.broker_epoch, self._send_alter_partition,
            self.replicas.handle_alter_partition_result)
        self._replicas_started = False
        self.server: Server | None = None
        self.logs_started = False
        self._producer_ids: list[int] | None = None  # [next, end) of the block at hand
        self._next_producer_ids: list[int] | None = None  # the block fetched ahead
        self._producer_block_size = 1000  # Kafka's block; the controller's answer says
        self._producer_ids_fetch: asyncio.Task | None = None
        self._tasks: list[asyncio.Task] = []
        self.groups: GroupCoordinatorRuntime | None = None
        self.cleaner: CleanerThread | None = None  # log.cleaner.enable
        self.transactions: TransactionCoordinatorRuntime | None = None
        # /metrics at metrics.listener (protocol/metrics.py, broker/metrics.py)
        self.metrics = Registry()
        self.broker_state = BROKER_STATE_STARTING
        self.request_metrics = register_broker_metrics(self.metrics, self.replicas, self.fetch_waiters,
                                                       lambda: self.broker_state, self.logs)
        self.follower.register_metrics(self.metrics)  # raft-metrics, as an observer
        self.metrics_server: asyncio.Server | None = None
        self.leader_offsets: LeaderOffsets | None = None  # consumer lag's high watermarks
        self._dynamic_key: tuple = ()  # the dynamic broker configs broker_log_config was made of
        self._dynamic_log_config = config.log_config
        self.tls: TlsReloader | None = None  # the TLS listeners' contexts, reloaded from the image

    @property
    def image(self) -> MetadataImage:
        return self.follower.image

    # ---- partitions ------------------------------------------------------------------

    def topic_log_config(self, topic: str):
        base = self.broker_log_config()
        overrides = self.image.topic_config(topic)
        return base.with_overrides(overrides) if overrides else base

    def broker_log_config(self):
        """The topics' defaults: the static log.* properties overlaid with the dynamic broker
        configs of the image (the cluster default's, then this broker's), applied to every log
        at the next image without a restart; of a time's forms set anywhere the finest wins
        (log.retention.ms > .minutes > .hours, as Kafka's KafkaConfig reads them)."""
        dynamic = dynamic_broker_configs(self.image, self.config.node_id)
        key = tuple(sorted(dynamic.items()))
        if key != self._dynamic_key:
            try:
                self._dynamic_log_config = (log_config_from_broker({**self.config.originals, **dynamic})
                                            if dynamic else self.config.log_config)
            except ConfigError as e:  # the controller validated it: kept as it was
                log.warning("dynamic broker config not applied: %s", e)
                self._dynamic_log_config = self.config.log_config
            self._dynamic_key = key
        return self._dynamic_log_config

    def _on_metadata(self, image: MetadataImage) -> None:
        broker = dynamic_broker_configs(image, self.node_id)
        if self.tls is not None:
            self.tls.apply(broker)  # listener.name.<l>.ssl.*: a rotated certificate, without a restart
        topics = [(name, cfg) for (kind, name), cfg in image.configs.items() if kind == TOPIC_RESOURCE]
        for quota, leader in ((self.leader_quota, True), (self.follower_quota, False)):
            configure_from(quota, broker, topics, self.node_id, leader)
        self.dynamic.apply(image)
        if not self._replicas_started:
            return  # still catching up with the metadata log: start() applies the whole image
        try:
            self.replicas.apply_image(image)
        finally:
            self.fetch_waiters.notify_all()  # leaders and partitions may have changed under them

    def _finalized_features(self) -> tuple[int, dict[str, int]]:
        """ApiVersions' finalized features: the image's levels, and kraft.version from the
        metadata log this broker follows (not a FeatureLevelRecord), as Kafka's metadata cache."""
        features = dict(self.image.features)
        kraft_version = self.follower.raft.kraft_version()
        if kraft_version is not None:
            features["kraft.version"] = kraft_version
        return self.image.last_offset, features

    async def _send_alter_partition(self, request):
        return await self.follower.forward(ALTER_PARTITION_KEY, ALTER_PARTITION_VERSION, request)

    async def allocate_producer_id(self) -> int:
        """The next producer id from this broker's block, fetching a new block from the
        controller (AllocateProducerIds) when it runs out."""
        producer_id = self.take_producer_id()
        while producer_id is None:
            await self.prefetch_producer_ids(force=True)
            producer_id = self.take_producer_id()
        return producer_id

    def take_producer_id(self) -> int | None:
        """The next producer id of the block at hand, without waiting; None when the block is
        used up (the transaction coordinator then answers a retriable error)."""
        ids = self._producer_ids
        if (ids is None or ids[0] >= ids[1]) and self._next_producer_ids is not None:
            ids = self._producer_ids = self._next_producer_ids
            self._next_producer_ids = None
        if ids is None or ids[0] >= ids[1]:
            return None
        producer_id = ids[0]
        ids[0] += 1
        return producer_id

    def producer_ids_low(self) -> bool:
        """Under a tenth of the block is left: time to fetch the next (Kafka's prefetch at 90%)."""
        if self._next_producer_ids is not None:
            return False
        ids = self._producer_ids
        return ids is None or (ids[1] - ids[0]) * 10 < self._producer_block_size

    async def prefetch_producer_ids(self, force: bool = False) -> None:
        """Fetch the next block from the controller once the one at hand runs low; one fetch
        at a time. Raises RuntimeError when the controller refuses."""
        if self._producer_ids_fetch is not None and not self._producer_ids_fetch.done():
            await asyncio.shield(self._producer_ids_fetch)
            return
        if not force and not self.producer_ids_low():
            return
        self._producer_ids_fetch = asyncio.get_running_loop().create_task(self._fetch_producer_ids())
        await asyncio.shield(self._producer_ids_fetch)

    async def _fetch_producer_ids(self) -> None:
        request = M.AllocateProducerIdsRequest(broker_id=self.node_id,
                                               broker_epoch=self.follower.broker_epoch)
        response = await self.follower.forward(67, 0, request)
        if response.error_code != Error.NONE:
            raise RuntimeError(f"producer id allocation failed: {Error(response.error_code).name}")
        self._producer_block_size = response.producer_id_len
        if self._producer_ids is not None and self._producer_ids[0] < self._producer_ids[1]:
            # the rest of the old block is used first: keep it, and the new block after it
            self._next_producer_ids = [response.producer_id_start,
                                       response.producer_id_start + response.producer_id_len]
        else:
            self._producer_ids = [response.producer_id_start,
                                  response.producer_id_start + response.producer_id_len]

    def notify_appended(self, topic: str, partition: int) -> None:
        """Records were appended to the partition, or it changed otherwise: answer its waiting
        fetches."""
        self.fetch_waiters.notify((topic, partition))

    def notify_committed(self, topic: str, partition: int) -> None:
        """The partition's high watermark moved: answer its waiting consumer fetches (a
        follower's learns it with its next records)."""
        self.fetch_waiters.notify((topic, partition), replicas=False)

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        # The SASL listeners first, as Kafka builds its listeners before it registers: an
        # OAUTHBEARER listener whose JWKS cannot be read stops the broker before anything else.
        sasl_apis = node_sasl_apis(self.config, [lsn.name for lsn in self.config.broker_listeners()],
                                   image_scram_lookup(lambda: self.image))
        address = self.config.metrics_address("broker")
        if address is not None:
            self.metrics_server = await serve_metrics(self.metrics, *address)
            host, port = self.metrics_server.sockets[0].getsockname()[:2]
            log.info("broker %d serving metrics at http://%s:%d/metrics", self.node_id, host, port)
        self.logs.open()
        self.follower.previous_broker_epoch = self.logs.previous_broker_epoch()
        await self.follower.start(self.config["initial.broker.registration.timeout.ms"] / 1000,
                                  recover=self._load_logs)
        self._replicas_started = True
        self.replicas.apply_image(self.image, startup=True)
        self.groups = GroupCoordinatorRuntime(self)
        self.groups.start()
        self._register_coordinator_metrics()
        self.transactions = TransactionCoordinatorRuntime(self)
        self.transactions.start()
        register_transaction_metrics(self.metrics, self.transactions)
        config = self.config
        self.authorizer = authorizer = BrokerAuthorizer.from_config(config, lambda: self.image.acls)
        apis = MetadataHandlers(lambda: self.image, self.cluster_id, self.node_id, self.listener_name,
                                self.replicas, self.fetch_waiters, self.follower,
                                auto_create_topics=config["auto.create.topics.enable"],
                                partition_size_limit=config["max.request.partition.size.limit"],
                                authorizer=authorizer).apis()
        apis += ProduceHandlers(self.replicas, lambda: self.transactions, self.allocate_producer_id,
                                authorizer).apis()
        sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        apis += FetchHandler(self.replicas, sessions, self.fetch_waiters, config["fetch.max.bytes"],
                             authorizer, leader_quota=self.leader_quota).apis()
        apis += OffsetsHandlers(self.replicas, self.fetch_waiters, authorizer).apis()
        apis += AdminApis(node_id=self.node_id, config=self.config, image=lambda: self.image,
                          controller=self.follower, topic_log_config=self.topic_log_config,
                          replicas=self.replicas, authorizer=authorizer, tls=lambda: self.tls).apis()
        apis += GroupApis(self.groups, self.transactions, lambda: self.image, self.listener_name,
                          authorizer).apis()
        apis += TransactionApis(self.transactions, lambda: self.image, self.replicas, self.groups,
                                authorizer).apis()
        apis += SecurityApis(lambda: self.image, self.follower, self.authorizer).apis()
        apis += sasl_apis
        apis += QuotaApis(lambda: self.image, self.follower, self.authorizer).apis()
        apis += QuorumApis(self.follower, self.authorizer).apis()
        # Client quotas (KIP-13, KIP-124) around every handler: throttle_time_ms, and KIP-219's mute.
        self.quotas = BrokerQuotas.from_config(config, lambda: self.image)
        apis = self.quotas.wrap(apis)
        self.dispatcher = Dispatcher(apis, supported_features(), self._finalized_features,
                                     unauthenticated_max_bytes=config["sasl.server.max.receive.size"],
                                     metrics=self.request_metrics)
        self.server = Server(self.dispatcher.handle, self.config["socket.request.max.bytes"],
                             limits=self.config.listener_limits(),
                             send_buffer_bytes=self.config["socket.send.buffer.bytes"],
                             receive_buffer_bytes=self.config["socket.receive.buffer.bytes"])
        for listener in self.config.broker_listeners():
            port = self.server.bind(listener.host, listener.port, listener.name,
                                    **self.config.listener_binding(listener.name))
            log.info("broker %d listening on %s:%d", self.node_id, listener.host, port)
        self.tls = TlsReloader.of(self.config, [lsn.name for lsn in self.config.broker_listeners()],
                                  self.server.set_ssl_context)
        self.tls.apply(dynamic_broker_configs(self.image, self.node_id))
        self.dynamic.attach(server=self.server)
        self.server.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"],
                                         self.logs.cleanup_logs)),
            loop.create_task(self._every(self.config["replica.high.watermark.checkpoint.interval.ms"],
                                         lambda: write_off_loop(self.logs, REPLICATION_CHECKPOINT))),
            loop.create_task(self._every(self.config["replica.lag.time.max.ms"] // 2,
                                         self.replicas.maybe_shrink_isr)),
            loop.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                         lambda: write_off_loop(self.logs, RECOVERY_POINT_CHECKPOINT))),
            loop.create_task(self._every(self.config["log.flush.start.offset.checkpoint.interval.ms"],
                                         lambda: write_off_loop(self.logs, LOG_START_CHECKPOINT))),
            loop.create_task(self._every(flush_check_ms(self.config),
                                         lambda: flush_dirty_off_loop(self.logs, _now_ms))),
            loop.create_task(self._every(ROLLED_FLUSH_CHECK_MS,
                                         lambda: flush_rolled_off_loop(self.logs, _now_ms))),
            loop.create_task(self._every(self.config["producer.id.expiration.check.interval.ms"],
                                         self.remove_expired_producers)),
        ]
        if self.config["log.cleaner.enable"]:
            self.cleaner = CleanerThread(self.logs, self.config)
            self.dynamic.attach(cleaner=self.cleaner)
            self._tasks.append(loop.create_task(self.cleaner.run()))
        self.broker_state = BROKER_STATE_RUNNING

    def _load_logs(self) -> None:
        """The logs loaded, once the image holds the topics' configs (the metadata log caught
        up, the broker still fenced): each with its topic's config, so that recovery keeps a
        compacted log's offset gaps (with the broker's default cleanup.policy, delete, it took
        a cleaned segment's first gap for corruption and truncated the segment there)."""
        self.logs.load({topic: self.topic_log_config(topic) for topic in self.image.topics})
        self.logs_started = True
        self.remove_expired_producers()  # as Kafka's load drops them from its producer snapshots

    def remove_expired_producers(self) -> None:
        """Forget the idempotent producers idle for producer.id.expiration.ms in every
        partition's log, followers' included (engine/producer_state.py has the rule)."""
        forgotten = self.logs.remove_expired_producers(_now_ms(), self.config["producer.id.expiration.ms"])
        if forgotten:
            log.info("forgot %d producer ids idle for producer.id.expiration.ms", forgotten)

    def _on_log_dir_failure(self, log_dir: str, message: str) -> None:
        """The LogDirFailureChannel's handler: take the dir's partitions offline; with no log
        dir left online, stop the periodic work and halt."""
        self.replicas.handle_log_dir_failure(log_dir)
        if any(not self.failure_channel.is_offline(d) for d in self.logs.log_dirs):
            log.error("%s; its partitions are offline", message)
            return
        log.error("%s; no log dir is left online: halting broker %d", message, self.node_id)
        for task in self._tasks:
            task.cancel()
        try:
            asyncio.get_running_loop().call_later(HALT_DELAY_S, _halt)
        except RuntimeError:  # no loop: nothing is waiting for an answer
            _halt()

    async def _every(self, interval_ms: int, fn) -> None:
        """Call ``fn`` every ``interval_ms``; if it returns an awaitable, the next interval begins
        once that is done."""
        while True:
            await asyncio.sleep(min(interval_ms, 2**31) / 1000)
            try:
                done = fn()
                if inspect.isawaitable(done):
                    await done
            except KafkaStorageError:
                pass  # the log dir failure channel has said so, and handles it
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    def _register_coordinator_metrics(self) -> None:
        """The group coordinator's counts and its groups' lag per partition against each
        partition's high watermark (this broker's, or its leader's through ListOffsets), and the
        log cleaner's gauges."""
        def leader_of(topic: str, partition: int) -> int:
            t = self.image.topics.get(topic)
            p = t.partitions.get(partition) if t is not None else None
            return p.leader if p is not None else -1

        self.leader_offsets = LeaderOffsets(
            self.node_id, lambda: self.replicas.partitions, leader_of, self.replicas.brokers.endpoint_of,
            self.config.client_security(self.listener_name), self.config["replica.socket.timeout.ms"] / 1000)
        register_group_metrics(self.metrics, self.groups.core, self.leader_offsets.high_watermark)
        for name in cleaner_values(None):
            self.metrics.gauge(name, f"kafka.log:type=LogCleaner ({name})",
                               lambda name=name: cleaner_values(self.cleaner)[name])

    async def stop(self) -> None:
        if self.cleaner is not None:
            await self.cleaner.stop()  # no swap once the logs close
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        log.debug("stopping the listeners")
        if self.server is not None:
            await self.server.close()
        if self.leader_offsets is not None:
            self.leader_offsets.close()
        log.debug("stopping the group coordinator")
        if self.groups is not None:
            await self.groups.stop()
        log.debug("stopping the transaction coordinator")
        if self.transactions is not None:
            await self.transactions.stop()
        log.debug("stopping the replica fetchers and the AlterPartition manager")
        await self.replicas.close()
        log.debug("stopping the metadata follower")
        await self.follower.close()
        log.debug("closing the logs")
        if self.logs_started:
            self.logs.shutdown(self.follower.broker_epoch)
        if self.metrics_server is not None:
            self.metrics_server.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _halt() -> None:
    """Exit at once with status 1, as Kafka's Exit.halt: no controlled shutdown, no flushes
    or checkpoints on the failed disk; only the log lines are pushed out first."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


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
            freeze_startup_heap()
            metadata = broker.follower.raft.task
            await asyncio.wait([stopping, metadata], return_when=asyncio.FIRST_COMPLETED)
            if metadata.done() and not metadata.cancelled() and metadata.exception() is not None:
                raise RuntimeError(f"the metadata log observer failed: {metadata.exception()}")
            if stopping.done() and broker.server is not None:
                # Controlled shutdown: still serving, ask the controller to move our leaderships
                # away and take us out of every ISR, so clients see only retriable redirects.
                broker.broker_state = BROKER_STATE_PENDING_CONTROLLED_SHUTDOWN
                await broker.follower.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
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


# How often the logs that rolled since are flushed up to the roll (Kafka schedules that flush
# at once on its scheduler thread; here a second at most passes). Only those logs are looked
# at (LogManager.take_rolled), however many the broker has.
ROLLED_FLUSH_CHECK_MS = 1000


def flush_check_ms(config) -> int:
    """How often logs are checked against their flush.ms: log.flush.scheduler.interval.ms when
    set. Kafka's default never checks, which leaves a topic's flush.ms without effect; Strom
    checks every second unless told otherwise."""
    if "log.flush.scheduler.interval.ms" in config.originals:
        return config["log.flush.scheduler.interval.ms"]
    return DEFAULT_FLUSH_CHECK_MS


def run(config, cluster_id: str) -> int:
    try:
        asyncio.run(serve(config, cluster_id))
    except Exception as e:
        log.error("broker %d failed: %s", config.node_id, e)
        return 1
    return 0
