"""The controller process: a KRaft voter for ``__cluster_metadata-0`` and the quorum controller.

``run(config, cluster_id)`` takes the node's parsed configuration (strom.config.ServerConfig) from
the ``strom`` command and serves until SIGTERM/SIGINT, when it hands leadership over
(EndQuorumEpoch) before it exits. The controller listener serves the KRaft RPCs (raft/driver.py)
and the controller's own APIs (quorum_controller.py) through one dispatcher.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from dataclasses import replace

from controller import metrics
from controller.authorization import authorize_apis
from controller.bootstrap import read_bootstrap_records
from controller.dynamic_config import ControllerDynamicConfig
from controller.feature_control import KRAFT_VERSION, SUPPORTED
from controller.quorum_controller import QuorumController
from engine.checkpoint import uuid_from_str
from engine.config import LogConfig
from engine.errors import ConfigError
from engine.manager import read_meta_properties
from protocol import messages as M
from protocol.dispatch import Dispatcher
from protocol.metrics import REGISTRY
from protocol.metrics import serve as serve_metrics
from protocol.net import Server, freeze_startup_heap
from raft.driver import RaftDriver
from raft.engine_log import METADATA_LOG_CONFIG, EngineRaftLog
from raft.quorum_file import QUORUM_STATE_FILE
from raft.settings import METADATA_PARTITION, driver_config
from raft.voters import Endpoint
from security.authorizer import AclAuthorizer, AuthorizerConfigError
from security.sasl.apis import image_scram_lookup, node_sasl_apis

log = logging.getLogger("strom.controller")


def metadata_log_config(config) -> LogConfig:
    """The controller's metadata log: segments of metadata.log.segment.bytes."""
    return replace(METADATA_LOG_CONFIG, segment_bytes=config["metadata.log.segment.bytes"])


def controller_settings(config) -> dict:
    """What the quorum controller takes from the node's configuration: topic defaults, the log
    config, broker session and fencing, leader rebalancing, the bounds of groups' configs, and the
    bootstrap metadata strom format wrote (controller/bootstrap.py)."""
    return {
        "num.partitions": config["num.partitions"],
        "default.replication.factor": config["default.replication.factor"],
        "log_config": config.log_config,  # min.insync.replicas, unclean.leader.election.enable, ...
        **{name: config[name] for name in (
            "broker.session.timeout.ms", "strom.broker.disconnect.fence.ms",
            "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
            "leader.imbalance.per.broker.percentage", "delete.topic.enable",
            "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
            "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")},
        "bootstrap_records": read_bootstrap_records(config.metadata_log_dir),
    }


def build_controller(config, cluster_id: str) -> QuorumController:
    """The node's quorum controller, with the node's config: its client security (balanced
    recovery's asks to brokers) and its properties (DescribeConfigs of its own BROKER resource)."""
    controller = QuorumController(config.node_id, cluster_id, controller_settings(config),
                                  snapshot_bytes=config["metadata.log.max.record.bytes.between.snapshots"])
    controller.client_security = config.client_security
    controller.server_config = config
    return controller


def supported_features() -> list:
    """ApiVersions' supported features of a controller: every feature it can finalize
    (controller.feature_control.SUPPORTED, Kafka's QuorumFeatures), kraft.version among them."""
    K = M.ApiVersionsResponse.SupportedFeatureKey
    return [K(name=name, min_version=lo, max_version=hi) for name, (lo, hi) in sorted(SUPPORTED.items())]


def finalized_features(image, raft: RaftDriver) -> tuple[int, dict[str, int]]:
    """The controller's image's finalized levels, and kraft.version from its raft log."""
    features = dict(image.features)
    kraft_version = raft.kraft_version()
    if kraft_version is not None:
        features[KRAFT_VERSION] = kraft_version
    return image.last_offset, features


async def serve(config, cluster_id: str, ready=None) -> None:
    meta = read_meta_properties(config.metadata_log_dir) or {}
    directory_id = uuid_from_str(meta["directory.id"]) if meta.get("directory.id") else None
    endpoints = tuple(Endpoint(lsn.name, lsn.host, lsn.port)
                      for lsn in config.advertised_controller_listeners())
    partition_dir = os.path.join(config.metadata_log_dir, METADATA_PARTITION)
    raft_log = EngineRaftLog(partition_dir, metadata_log_config(config))
    controller = build_controller(config, cluster_id)
    # The dynamic broker configs of this node's id (connection limits, ip quotas, the listeners'
    # key stores) applied to its listeners from each image it replays (controller/dynamic_config.py).
    dynamic = ControllerDynamicConfig(config, config.node_id)
    raft = RaftDriver(driver_config(config, cluster_id, directory_id=directory_id, endpoints=endpoints),
                      raft_log, os.path.join(partition_dir, QUORUM_STATE_FILE),
                      dynamic.publishing(controller))
    controller.attach(raft)
    # SASL controller listeners authenticate brokers and other controllers: SCRAM against the
    # controller's own image (the credentials the metadata log holds, --add-scram's included).
    sasl = node_sasl_apis(config, [lsn.name for lsn in config.controller_listeners()],
                          image_scram_lookup(lambda: controller.state))
    # Every API is authorized as Kafka's ControllerApis does, by the StandardAuthorizer over the
    # controller's own image when authorizer.class.name is set (controller/authorization.py).
    try:
        authorizer = AclAuthorizer.from_config(config, lambda: controller.state.acls)
    except AuthorizerConfigError as e:
        raise ConfigError(e.name, e.message) from None
    apis = authorize_apis(dynamic.preprocess(controller.apis()) + raft.apis(), authorizer,
                          lambda: controller.state)
    dispatcher = Dispatcher(apis + sasl, supported_features(),
                            lambda: finalized_features(controller.state, raft),
                            unauthenticated_max_bytes=config["sasl.server.max.receive.size"])
    server = Server(dispatcher.handle, config["socket.request.max.bytes"], limits=config.listener_limits(),
                    send_buffer_bytes=config["socket.send.buffer.bytes"],
                    receive_buffer_bytes=config["socket.receive.buffer.bytes"])
    for listener in config.controller_listeners():
        port = server.bind(listener.host, listener.port, listener.name,
                           **config.listener_binding(listener.name))
        log.info("controller %d listening on %s:%d", config.node_id, listener.host, port)
    dynamic.attach(server)
    await raft.start()
    server.start()
    metrics_server = None
    address = config.metrics_address("controller")
    if address is not None:
        metrics.register(REGISTRY, controller)
        metrics_server = await serve_metrics(REGISTRY, *address)
        host, port = metrics_server.sockets[0].getsockname()[:2]
        log.info("controller %d serving metrics on http://%s:%d/metrics", config.node_id, host, port)
    controller.start()  # session expiry and leader rebalance, on the active controller only
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready()
    freeze_startup_heap()
    stopping = loop.create_task(stop.wait())
    try:
        await asyncio.wait([stopping, raft.task], return_when=asyncio.FIRST_COMPLETED)
        if raft.task.done() and not raft.task.cancelled() and raft.task.exception() is not None:
            raise RuntimeError(f"the raft replica failed: {raft.task.exception()}")
    finally:
        stopping.cancel()
        await controller.stop()
        await raft.close(graceful=True)
        await server.close()
        if metrics_server is not None:
            metrics_server.close()
        raft_log.close()
        log.info("controller %d stopped", config.node_id)


def run(config, cluster_id: str) -> int:
    asyncio.run(serve(config, cluster_id))
    return 0
