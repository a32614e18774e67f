"""The controller's shell: the metadata state machine on the KRaft log, its APIs and timers.

Every controller replays committed metadata records (``handle_commit``, ``handle_snapshot``:
the RaftListener the driver calls) into a MetadataImage. Only the active controller, the raft
leader, writes. Once it has replayed everything up to its own epoch's LeaderChange record it
*activates*: broker sessions start afresh (cluster_control), and a new cluster gets its
bootstrap features (metadata.version, eligible.leader.replicas.version=1: KIP-966 ELR on
for new clusters, as from Kafka 4.1, transaction.version=2: KIP-890 part 2, as Kafka 4.0
bootstraps it from metadata.version 4.0-IV2, and group.version=1: KIP-848's consumer protocol,
from 4.0-IV0), in one batch with the records of strom format's
bootstrap.checkpoint (controller/bootstrap.py: the --add-scram users). A cluster formatted
before a feature was bootstrapped keeps it unfinalized (level 0), as Kafka's upgrade leaves it
to kafka-features.

Deciding is the pure managers' work: cluster_control (brokers, heartbeats, fencing,
controlled shutdown), replication_control (AlterPartition, elections, ElectLeaders,
rebalancing), topic_control (topics, partitions, configs). Each takes the image and the
request and returns the records and the answer; this shell appends the records as one batch,
waits until they are committed and replayed, and answers. Requests and timers are handled
one at a time (a lock), so each is decided on an image that holds everything before it. A
controller that is not active, or loses leadership before the records commit, answers
NOT_CONTROLLER and the broker retries at the new leader.

Timers, on the active controller only: every TICK_S the broker sessions (fencing on
broker.session.timeout.ms, or strom.broker.disconnect.fence.ms after the close of a broker's
heartbeat connection, which the shell learns from protocol.net); every
leader.imbalance.check.interval.seconds the preferred-leader rebalance
(auto.leader.rebalance.enable) and the unclean election of leaderless partitions whose topic
allows it (also right after a config change); whenever the image changed or an answer is due,
balanced recovery (controller.balanced_recovery) of partitions whose ISR and ELR are both
gone: it asks their replicas' listeners for their log ends (ListOffsets LATEST with the
debugging replica id, one request per broker) and elects the most complete. Every
``metadata.log.max.record.bytes.between.snapshots`` bytes of records, each controller
snapshots its image (MetadataImage.records()).
"""
from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable
from typing import Any

from controller.acl_control import AclControl
from controller.balanced_recovery import BalancedRecovery, LogEndQuery
from controller.cluster_control import ClusterControl
from controller.describe_configs import NodeConfig, describe_configs
from controller.feature_control import FeatureControl
from controller.placement import StripedReplicaPlacer
from controller.quota_control import QuotaControl, alter_client_quotas_error
from controller.replication_control import ELR_FEATURE, ReplicationControl
from controller.result import ControllerResult
from controller.scram_control import ScramControl
from controller.topic_control import TopicControl
from engine.checkpoint import new_uuid, uuid_from_str
from engine.config import LogConfig
from engine.errors import ConfigError
from metadata.configs import GROUP_BOUNDS, GroupBounds, check_request_shape
from metadata.image import MetadataImage
from metadata.scram import describe_user_scram_credentials
from protocol import log_levels
from protocol import messages as M
from protocol.client import PLAINTEXT_SECURITY, ClientSecurity, KafkaConnection, listener_refuses
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from protocol.list_offsets import DEBUGGING_REPLICA_ID, LATEST
from protocol.metadata_records import decode_record, encode_record
from protocol.net import current_connection
from raft.accumulator import RecordBatchTooLargeError
from raft.errors import NotLeaderError
from raft.log import Entry, Snapshot
from raft.quorum_state import Leader

log = logging.getLogger("strom.controller")

COMMIT_TIMEOUT_S = 30.0
TICK_S = 0.05
PROBE_TIMEOUT_S = 0.5  # a broker's listener after its heartbeat connection closed
LOG_END_TIMEOUT_S = 2.0  # a replica's answer to balanced recovery (asked again after RETRY_MS)
LIST_OFFSETS_VERSION = 7
UNCLEAN_CHECK_INTERVAL_MS = 5 * 60 * 1000  # Kafka's, besides the check after a config change
METADATA_VERSION = 25  # 4.0-IV3, the highest the brokers announce; ELR needs 4.0-IV1 (23)
TRANSACTION_VERSION_FEATURE = "transaction.version"
GROUP_VERSION_FEATURE = "group.version"
BOOTSTRAP_FEATURES = (("metadata.version", METADATA_VERSION), (ELR_FEATURE, 1),
                      (TRANSACTION_VERSION_FEATURE, 2), (GROUP_VERSION_FEATURE, 1))


class NotController(Exception):
    """This controller is not (or no longer) the active one."""


class _RaftKRaftVersion:
    """kraft.version as the raft log has it, upgraded by this leader in the epoch it leads
    (feature_control.KRaftVersionAccess)."""

    def __init__(self, raft, epoch: int) -> None:
        self.raft, self.epoch = raft, epoch

    def kraft_version(self) -> int:
        return self.raft.core.kraft_version

    def upgrade_kraft_version(self, version: int, validate_only: bool) -> None:
        try:
            self.raft.upgrade_kraft_version(version, validate_only, self.epoch)
        except NotLeaderError as e:
            raise NotController(str(e)) from None


class QuorumController:
    def __init__(self, node_id: int, cluster_id: str, defaults: dict[str, Any],
                 snapshot_bytes: int = 20 << 20, rng: random.Random | None = None):
        """``defaults``: num.partitions, default.replication.factor, and optionally log_config
        (the broker defaults of topic configs), broker.session.timeout.ms,
        strom.broker.disconnect.fence.ms, auto.leader.rebalance.enable,
        leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage,
        delete.topic.enable, group.consumer.min/max.session.timeout.ms and
        group.consumer.min/max.heartbeat.interval.ms (the bounds of a group's configs), and
        bootstrap_records (the records of strom format's bootstrap.checkpoint)."""
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.defaults = defaults
        self.snapshot_bytes = snapshot_bytes
        self.state = MetadataImage()
        self.raft = None  # the RaftDriver, set by attach()
        self.applied_offset = 0  # every committed entry below it is replayed
        self._bytes_since_snapshot = 0
        self._lock = asyncio.Lock()
        rng = rng or random.Random()
        log_defaults = defaults.get("log_config") or LogConfig()
        self.replication = ReplicationControl(log_defaults)
        self.cluster = ClusterControl(cluster_id, self.replication,
                                      defaults.get("broker.session.timeout.ms", 9000),
                                      defaults.get("strom.broker.disconnect.fence.ms", 500))
        self.topics = TopicControl(StripedReplicaPlacer(rng), lambda: uuid_from_str(new_uuid()),
                                   defaults["num.partitions"], defaults["default.replication.factor"],
                                   log_defaults, defaults.get("delete.topic.enable", True),
                                   GroupBounds(**{f: defaults[prop] for f, prop in GROUP_BOUNDS.items()
                                                  if prop in defaults}))
        self.recovery = BalancedRecovery(self.replication)
        self.feature_control = FeatureControl(node_id)
        # strom format's bootstrap metadata (controller/bootstrap.py): committed with the
        # bootstrap features by a new cluster's first active controller.
        self.bootstrap_records: list[Any] = list(defaults.get("bootstrap_records", ()))
        self.acls = AclControl(uuid.uuid4)
        self.scram = ScramControl()
        self.quotas = QuotaControl()
        self._recovery_scanned = -1  # applied_offset of the image balanced recovery last scanned
        self.rebalance = defaults.get("auto.leader.rebalance.enable", True)
        self.imbalance_interval_ms = defaults.get("leader.imbalance.check.interval.seconds", 300) * 1000
        self.imbalance_percentage = defaults.get("leader.imbalance.per.broker.percentage", 10)
        self._activated_epoch = -1
        self._next_rebalance_ms = 0
        self._next_unclean_check_ms = 0
        self._watched: set = set()  # connections whose close we hear of
        self._probes: set[asyncio.Task] = set()  # listener probes after such a close, log-end queries
        self._task: asyncio.Task | None = None
        # How this controller connects to a broker's listener, by the listener's name (balanced
        # recovery's ListOffsets): the node's ServerConfig.client_security, set by its process.
        self.client_security: Callable[[str], ClientSecurity] = lambda listener: PLAINTEXT_SECURITY
        # The node's config (ServerConfig), for DescribeConfigs of its own BROKER resource; set by
        # its process.
        self.server_config: NodeConfig | None = None

    def attach(self, raft) -> None:
        self.raft = raft

    # ---- the RaftListener ------------------------------------------------------------------
    def handle_commit(self, entries: list[Entry]) -> None:
        for entry in entries:
            if isinstance(entry.value, bytes | bytearray | memoryview):
                self.state.replay(entry.offset, decode_record(entry.value)[2])
                self._bytes_since_snapshot += len(entry.value)
            self.applied_offset = entry.offset + 1
        if self._bytes_since_snapshot >= self.snapshot_bytes and self.raft is not None:
            # After the driver has recorded this delivery: a snapshot holds only what it handed us.
            self._bytes_since_snapshot = 0
            asyncio.get_running_loop().call_soon(self._snapshot, self.applied_offset,
                                                 [encode_record(r) for r in self.state.records()])

    def _snapshot(self, end_offset: int, values: list[bytes]) -> None:
        if self.raft.closed or end_offset <= self.raft.log.log_start_offset:
            return
        snapshot_id = self.raft.create_snapshot(end_offset, values)
        log.info("controller %d: snapshot %s (%d records)", self.node_id, snapshot_id, len(values))

    def handle_snapshot(self, snapshot: Snapshot) -> None:
        self.state = MetadataImage()
        for value in snapshot.values:
            self.state.replay(snapshot.snapshot_id.offset - 1, decode_record(value)[2])
        self.applied_offset = snapshot.snapshot_id.offset
        self._bytes_since_snapshot = 0

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        if leader_id == self.node_id:
            log.info("controller %d is the active controller in epoch %d", self.node_id, epoch)

    # ---- activation ----------------------------------------------------------------------
    def _active(self) -> bool:
        """Leader, and the image holds everything committed before this epoch."""
        if self.raft is None or not self.raft.is_leader():
            return False
        s = self.raft.core.state
        return isinstance(s, Leader) and self.applied_offset > s.epoch_start_offset

    @staticmethod
    def now_ms() -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    async def _ensure_active(self) -> bool:
        """Under the lock: True when this is the active controller, activated for its epoch."""
        if not self._active():
            if self._activated_epoch != -1:
                log.info("controller %d is no longer active", self.node_id)
                self._activated_epoch = -1
                self.cluster.deactivate()
                self.recovery.reset()
            return False
        epoch = self.raft.core.state.epoch
        if epoch == self._activated_epoch:
            return True
        now = self.now_ms()
        self.cluster.activate(self.state, now)
        self.recovery.reset()
        self._recovery_scanned = -1
        for broker_id, broker in self.state.brokers.items():  # any that died with the last leader?
            if not broker.fenced:
                self._start_probe(broker_id)
        self._next_rebalance_ms = now + self.imbalance_interval_ms
        self._next_unclean_check_ms = now + UNCLEAN_CHECK_INTERVAL_MS
        if "metadata.version" not in self.state.features:
            try:
                await self._commit([M.FeatureLevelRecord(name=name, feature_level=level)
                                    for name, level in BOOTSTRAP_FEATURES] + self.bootstrap_records)
            except NotController:
                return False
        self._activated_epoch = epoch
        return True

    # ---- writing -----------------------------------------------------------------------------
    def _next_offset(self) -> int:
        return self.raft.log.end_offset().offset

    async def _commit(self, records: list[Any]) -> int:
        """Append as one batch; returns when committed and replayed. Raises NotController."""
        try:
            last = self.raft.append([encode_record(r) for r in records])
            await self.raft.wait_committed(last, COMMIT_TIMEOUT_S)
        except (NotLeaderError, TimeoutError) as e:
            raise NotController(str(e)) from None
        return last

    async def _apply(self, result: ControllerResult) -> Any:
        if result.records:
            await self._commit(result.records)
        return result.response

    def apis(self) -> list[Api]:
        return [
            Api(19, 2, 7, self._write(self.handle_create_topics, _topics_error)),
            Api(20, 1, 6, self._unless_deletion_disabled(self._write(self.handle_delete_topics,
                                                                     _responses_error))),
            Api(37, 0, 3, self._write(self.handle_create_partitions, _results_error)),
            Api(43, 0, 2, self._write(self.handle_elect_leaders, _top_error)),
            Api(44, 0, 1, self._loggers_here(self._write(self.handle_incremental_alter_configs,
                                                         _responses_error))),
            Api(32, 1, 4, self.handle_describe_configs),
            Api(45, 0, 1, self._write(self.handle_alter_partition_reassignments, _top_error)),
            Api(46, 0, 0, self._write(self.handle_list_partition_reassignments, _top_error)),
            Api(56, 2, 3, self._write(self.handle_alter_partition, _top_error)),
            Api(62, 0, 4, self._write(self.handle_broker_registration, _top_error)),
            Api(63, 0, 1, self._heard_from(self._write(self.handle_broker_heartbeat, _top_error))),
            Api(67, 0, 0, self._write(self.handle_allocate_producer_ids, _top_error)),
            Api(64, 0, 0, self._write(self.handle_unregister_broker, _top_error)),
            Api(60, 1, 1, self.handle_describe_cluster),
            Api(29, 1, 3, self.handle_describe_acls),
            Api(30, 1, 3, self._write(self.handle_create_acls, _security_error)),
            Api(31, 1, 3, self._write(self.handle_delete_acls, _security_error)),
            Api(50, 0, 0, self.handle_describe_user_scram_credentials),
            Api(51, 0, 0, self._write(self.handle_alter_user_scram_credentials, _security_error)),
            Api(49, 0, 1, self._write(self.handle_alter_client_quotas, _quotas_error)),
            Api(57, 0, 2, self._write(self.handle_update_features, _features_error)),
        ]

    def _unless_deletion_disabled(self, serve):
        """delete.topic.enable=false refuses DeleteTopics on any controller, active or not, before
        it waits its turn: Kafka's ControllerApis refuses before it asks the quorum controller."""
        async def delete_topics(header: RequestContext, req) -> Any:
            if not self.topics.delete_topic_enable:
                return self.topics.delete_topics(self.state, req, header.api_version).response
            return await serve(header, req)
        return delete_topics

    def _loggers_here(self, serve):
        """IncrementalAlterConfigs: BROKER_LOGGER resources are this process's loggers, changed
        here by any controller (Kafka's ControllerApis hands them to its RuntimeLoggerManager);
        the rest go to the active controller, whose answers come first, as in Kafka."""
        async def alter(header: RequestContext, req) -> Any:
            R = M.IncrementalAlterConfigsResponse
            loggers = [i for i, r in enumerate(req.resources)
                       if r.resource_type == log_levels.BROKER_LOGGER_RESOURCE]
            if not loggers:
                return await serve(header, req)
            failed = check_request_shape(req.resources,
                                         lambda r: r.resource_type == log_levels.BROKER_LOGGER_RESOURCE)
            answers: dict[int, Any] = {}
            for i in loggers:
                res = req.resources[i]
                code, message = Error.NONE, None
                if i in failed:
                    code, message = failed[i].code, failed[i].message
                else:
                    try:
                        log_levels.alter(self.node_id, res.resource_name, res.configs, req.validate_only)
                    except log_levels.LoggerFailure as e:
                        code, message = e.code, e.message
                answers[i] = R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                            resource_type=res.resource_type,
                                                            resource_name=res.resource_name)
            rest = [r for i, r in enumerate(req.resources) if i not in answers]
            others = []
            if rest:
                forwarded = type(req)(resources=rest, validate_only=req.validate_only)
                others = (await serve(header, forwarded)).responses
            return R(responses=[*others, *answers.values()])
        return alter

    async def handle_describe_configs(self, header: RequestContext, req) -> Any:
        """KIP-919: this controller's own BROKER and BROKER_LOGGER resources, the cluster
        default and the topics, from what it has replayed (controller/describe_configs.py)."""
        return describe_configs(self.node_id, self.server_config, self.state, req, self.topics.log_defaults)

    def _heard_from(self, serve):
        """A heartbeat counts as the broker's sign of life when it arrives, not when its turn
        comes: a request queued behind a slow commit must not let the broker be fenced."""
        async def heartbeat(header: RequestContext, req) -> Any:
            if self._activated_epoch != -1:
                self.cluster.heard_from(self.state, req.broker_id, req.broker_epoch, self.now_ms(),
                                        self._watch())
            return await serve(header, req)
        return heartbeat

    def _write(self, handler, error_response):
        """Serve ``handler`` as the active controller, else answer NOT_CONTROLLER. Records that
        do not fit one metadata batch fail the whole request with POLICY_VIOLATION, as Kafka
        answers an operation past its record bound."""
        async def serve(header: RequestContext, req) -> Any:
            async with self._lock:
                if not await self._ensure_active():
                    return error_response(header.api_key, req)
                try:
                    return await handler(header, req)
                except NotController:
                    return error_response(header.api_key, req)
                except RecordBatchTooLargeError as e:
                    log.info("refused %s v%d: %s", header.api_key, header.api_version, e)
                    return error_response(header.api_key, req, Error.POLICY_VIOLATION, TOO_LARGE)
        return serve

    async def handle_describe_cluster(self, header: RequestContext, req) -> Any:
        """KIP-919: asked with endpoint_type 2, a controller lists the controllers (the voters)
        and names the active one; brokers are asked of brokers."""
        R = M.DescribeClusterResponse
        if req.endpoint_type != 2:
            return R(error_code=Error.UNSUPPORTED_ENDPOINT_TYPE, endpoint_type=req.endpoint_type,
                     error_message="controllers answer endpoint_type 2 (controller) only",
                     cluster_id=self.cluster_id)
        leader, _ = self.raft.leader_and_epoch()
        controllers = []
        for voter in self.raft.core.voter_set.voters:
            endpoint = voter.endpoints[0] if voter.endpoints else None
            if endpoint is not None:
                controllers.append(R.DescribeClusterBroker(broker_id=voter.id, host=endpoint.host,
                                                           port=endpoint.port))
        return R(error_code=Error.NONE, endpoint_type=2, cluster_id=self.cluster_id, controller_id=leader,
                 brokers=controllers)

    # ---- brokers -----------------------------------------------------------------------
    def _watch(self):
        """The connection of the request being served, watched for its close."""
        conn = current_connection.get()
        if conn is not None and conn not in self._watched:
            self._watched.add(conn)
            conn.add_close_callback(lambda: self._connection_closed(conn))
        return conn

    def _connection_closed(self, conn) -> None:
        self._watched.discard(conn)
        if self._activated_epoch != -1:
            self.cluster.connection_closed(conn, self.now_ms())
            broker_id = self.cluster.broker_of(conn)
            if broker_id is not None:
                self._start_probe(broker_id)

    def _start_probe(self, broker_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self._probe_listener(broker_id))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe_listener(self, broker_id: int) -> None:
        """Connect to the broker's listener once its heartbeat connection closed, or once this
        controller activated: refused means nothing listens there (cluster_control.
        listener_refused); anything else (an answer, a timeout: a partition, a busy host)
        leaves it to the grace period or the session timeout."""
        broker = self.state.brokers.get(broker_id)
        endpoint = broker.endpoints[0] if broker is not None and broker.endpoints else None
        if endpoint is None:
            return
        if await listener_refuses(endpoint.host, endpoint.port, PROBE_TIMEOUT_S):
            self.cluster.listener_refused(broker_id, self.now_ms())

    async def handle_broker_registration(self, header: RequestContext, req) -> Any:
        return await self._apply(self.cluster.register(
            self.state, req, header.api_version, self._next_offset(), self.now_ms(), self._watch()))

    async def handle_broker_heartbeat(self, header: RequestContext, req) -> Any:
        return await self._apply(self.cluster.heartbeat(
            self.state, req, self._next_offset(), self.now_ms(), self._watch()))

    async def handle_allocate_producer_ids(self, header: RequestContext, req) -> Any:
        return await self._apply(self.cluster.allocate_producer_ids(self.state, req))

    async def handle_update_features(self, header: RequestContext, req) -> Any:
        kraft = _RaftKRaftVersion(self.raft, self.raft.core.state.epoch)
        return await self._apply(self.feature_control.update_features(self.state, req, header.api_version,
                                                                      kraft))

    async def handle_unregister_broker(self, header: RequestContext, req) -> Any:
        return await self._apply(self.cluster.unregister(self.state, req.broker_id))

    # ---- partitions --------------------------------------------------------------------
    async def handle_alter_partition(self, header: RequestContext, req) -> Any:
        return await self._apply(self.replication.alter_partition(self.state, req, header.api_version))

    async def handle_elect_leaders(self, header: RequestContext, req) -> Any:
        return await self._apply(self.replication.elect_leaders(self.state, req, header.api_version))

    async def handle_alter_partition_reassignments(self, header: RequestContext, req) -> Any:
        return await self._apply(self.replication.alter_partition_reassignments(self.state, req))

    async def handle_list_partition_reassignments(self, header: RequestContext, req) -> Any:
        """A read, answered by the active controller from what it has committed."""
        return self.replication.list_partition_reassignments(self.state, req)

    # ---- topics --------------------------------------------------------------------------
    async def handle_create_topics(self, header: RequestContext, req) -> Any:
        return await self._apply(self.topics.create_topics(self.state, req))

    async def handle_delete_topics(self, header: RequestContext, req) -> Any:
        return await self._apply(self.topics.delete_topics(self.state, req, header.api_version))

    async def handle_create_partitions(self, header: RequestContext, req) -> Any:
        return await self._apply(self.topics.create_partitions(self.state, req))

    async def handle_incremental_alter_configs(self, header: RequestContext, req) -> Any:
        response = await self._apply(self.topics.incremental_alter_configs(self.state, req))
        # unclean.leader.election.enable may have just been turned on.
        records = self.replication.maybe_elect_unclean_leaders(self.state)
        if records:
            try:
                await self._commit(records)
            except NotController:
                pass  # the configs are committed; the next active controller checks again
        return response

    # ---- ACLs and SCRAM credentials ----------------------------------------------------------
    async def handle_create_acls(self, header: RequestContext, req) -> Any:
        return await self._apply(self.acls.create_acls(self.state, req))

    async def handle_delete_acls(self, header: RequestContext, req) -> Any:
        return await self._apply(self.acls.delete_acls(self.state, req))

    async def handle_describe_acls(self, header: RequestContext, req) -> Any:
        """A read, answered from what this controller has replayed."""
        return self.acls.describe_acls(self.state, req)

    async def handle_alter_user_scram_credentials(self, header: RequestContext, req) -> Any:
        return await self._apply(self.scram.alter_user_scram_credentials(self.state, req))

    async def handle_alter_client_quotas(self, header: RequestContext, req) -> Any:
        return await self._apply(self.quotas.alter_client_quotas(self.state, req))

    async def handle_describe_user_scram_credentials(self, header: RequestContext, req) -> Any:
        return describe_user_scram_credentials(self.state, req)

    # ---- timers ----------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        for probe in list(self._probes):
            probe.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self._tick()
            except NotController:
                pass
            except Exception:
                log.exception("controller %d: periodic task failed", self.node_id)

    async def _tick(self) -> None:
        active = self._active()
        if active and self._activated_epoch == self.raft.core.state.epoch:
            now = self.now_ms()
            if (not self.cluster.expired(self.state, now) and now < self._next_rebalance_ms
                    and now < self._next_unclean_check_ms and not self._recovery_due(now)):
                return  # the common case: nothing due, and no need to queue behind requests
        elif not active and self._activated_epoch == -1:
            return
        async with self._lock:
            if not await self._ensure_active():
                return
            now = self.now_ms()
            expired = self.cluster.expired(self.state, now)
            if expired:
                log.info("controller %d fences brokers %s", self.node_id, expired)
                await self._commit(self.cluster.tick(self.state, now))
            if now >= self._next_rebalance_ms:
                self._next_rebalance_ms = now + self.imbalance_interval_ms
                if self.rebalance:
                    records = self.replication.maybe_balance_partition_leaders(
                        self.state, self.imbalance_percentage)
                    if records:
                        await self._commit(records)
            if now >= self._next_unclean_check_ms:
                self._next_unclean_check_ms = now + UNCLEAN_CHECK_INTERVAL_MS
                records = self.replication.maybe_elect_unclean_leaders(self.state)
                if records:
                    await self._commit(records)
            if self._recovery_due(now):
                await self._recover(now)

    # ---- balanced recovery -------------------------------------------------------------------
    def _recovery_due(self, now: int) -> bool:
        return self.applied_offset != self._recovery_scanned or self.recovery.due(now)

    async def _recover(self, now: int) -> None:
        """Under the lock: elect what balanced recovery has decided, send what it asks."""
        rescan = self.applied_offset != self._recovery_scanned
        self._recovery_scanned = self.applied_offset
        queries, records = self.recovery.poll(self.state, now, rescan)
        if records:
            try:
                await self._commit(records)
            except NotController:
                self._recovery_scanned = -1  # still awaiting: look again once active
                raise
            for topic, index, leader, ends in self.recovery.elected:
                log.warning("controller %d: %s-%d had no in-sync or eligible replica left; balanced "
                            "recovery elected %d (log ends as (epoch, offset) by broker: %s)",
                            self.node_id, topic, index, leader, ends)
        by_broker: dict[int, list[LogEndQuery]] = {}
        for q in queries:
            by_broker.setdefault(q.broker_id, []).append(q)
        for broker_id, asked in by_broker.items():
            task = asyncio.get_running_loop().create_task(self._ask_log_ends(broker_id, asked))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    async def _ask_log_ends(self, broker_id: int, queries: list[LogEndQuery]) -> None:
        """One ListOffsets to the broker's listener for every partition asked of it. No answer
        (refused, a partition, a timeout) is no answer: balanced recovery asks again."""
        broker = self.state.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return
        endpoint = broker.endpoints[0]
        R = M.ListOffsetsRequest
        topics: dict[str, list] = {}
        for q in queries:
            topics.setdefault(q.topic, []).append(R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=q.partition, current_leader_epoch=-1, timestamp=LATEST))
        request = R(replica_id=DEBUGGING_REPLICA_ID, isolation_level=0, topics=[
            R.ListOffsetsTopic(name=name, partitions=ps) for name, ps in topics.items()])
        try:
            security = self.client_security(endpoint.name)
        except ConfigError as e:  # this controller cannot secure a connection to that listener
            log.warning("controller %d: cannot connect to broker %d's listener %s: %s", self.node_id,
                        broker_id, endpoint.name, e)
            return
        conn = KafkaConnection(endpoint.host, endpoint.port, client_id=f"strom-controller-{self.node_id}",
                               security=security)
        try:
            await conn.connect(LOG_END_TIMEOUT_S)
            response = await conn.request(2, LIST_OFFSETS_VERSION, request, timeout=LOG_END_TIMEOUT_S)
        except (OSError, TimeoutError) as e:
            log.info("controller %d: broker %d did not tell its log ends: %s", self.node_id, broker_id, e)
            return
        except Exception as e:  # an answer that does not decode: that broker's, asked again
            log.warning("controller %d: broker %d's log ends unreadable: %r", self.node_id, broker_id, e)
            return
        finally:
            await conn.close()
        asked = {(q.topic, q.partition): q for q in queries}
        for t in response.topics:
            for p in t.partitions:
                q = asked.get((t.name, p.partition_index))
                if q is not None:
                    self.recovery.answered(q, p.error_code, p.leader_epoch, p.offset)


# ---- NOT_CONTROLLER answers, in each response's own shape -------------------------------------

# Whole-request answers: NOT_CONTROLLER by default, or the error a handler's failure maps to.
TOO_LARGE = "Unable to perform excessively large batch operation."


def _top_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    response = {43: M.ElectLeadersResponse, 45: M.AlterPartitionReassignmentsResponse,
                46: M.ListPartitionReassignmentsResponse, 56: M.AlterPartitionResponse,
                62: M.BrokerRegistrationResponse, 63: M.BrokerHeartbeatResponse,
                64: M.UnregisterBrokerResponse, 67: M.AllocateProducerIdsResponse}[api_key]
    return response(error_code=code)


def _topics_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    R = M.CreateTopicsResponse
    return R(topics=[R.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
                     for t in req.topics])


def _responses_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    if api_key == 20:
        R = M.DeleteTopicsResponse
        names = [t.name for t in req.topics] if req.topics else list(req.topic_names)
        return R(responses=[R.DeletableTopicResult(name=n, error_code=code, error_message=message)
                            for n in names])
    R = M.IncrementalAlterConfigsResponse
    return R(responses=[R.AlterConfigsResourceResponse(
        resource_type=r.resource_type, resource_name=r.resource_name, error_code=code, error_message=message)
        for r in req.resources])


def _results_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    R = M.CreatePartitionsResponse
    return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
                      for t in req.topics])


def _security_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    """CreateAcls, DeleteAcls, AlterUserScramCredentials: the error for every item asked."""
    if api_key == 30:
        C = M.CreateAclsResponse
        return C(results=[C.AclCreationResult(error_code=code, error_message=message) for _ in req.creations])
    if api_key == 31:
        D = M.DeleteAclsResponse
        return D(filter_results=[D.DeleteAclsFilterResult(error_code=code, error_message=message)
                                 for _ in req.filters])
    A = M.AlterUserScramCredentialsResponse
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return A(results=[A.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
                      for user in users])


def _quotas_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    return alter_client_quotas_error(req, code, message)


def _elect_leaders_error(api_key: int, req, code: int = Error.NOT_CONTROLLER,
                         message: str | None = None) -> Any:
    """ElectLeaders: the error at the top (v1+) and for every partition named (v0 has no top)."""
    R = M.ElectLeadersResponse
    return R(error_code=code, replica_election_results=[
        R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
        for t in req.topic_partitions or ()])


def _features_error(api_key: int, req, code: int = Error.NOT_CONTROLLER, message: str | None = None) -> Any:
    return M.UpdateFeaturesResponse(error_code=code, error_message=message)


def _describe_configs_error(api_key: int, req, code: int = Error.NOT_CONTROLLER,
                            message: str | None = None) -> Any:
    """DescribeConfigs: the error for every resource named (the response has no top-level code)."""
    R = M.DescribeConfigsResponse
    return R(results=[R.DescribeConfigsResult(error_code=code, error_message=message, configs=[],
                                              resource_type=r.resource_type, resource_name=r.resource_name)
                      for r in req.resources or ()])


_ERROR_RESPONSES = {
    19: _topics_error, 20: _responses_error, 37: _results_error, 43: _elect_leaders_error,
    44: _responses_error, 45: _top_error, 46: _top_error, 56: _top_error, 62: _top_error, 63: _top_error,
    64: _top_error, 67: _top_error, 30: _security_error, 31: _security_error, 51: _security_error,
    49: _quotas_error, 57: _features_error, 32: _describe_configs_error,
}


def error_response(api_key: int, req, code: int, message: str | None = None) -> Any:
    """The answer to a request of any API the quorum controller serves that fails as a whole
    (controller/authorization.py: CLUSTER_AUTHORIZATION_FAILED), in that API's own shape."""
    builder = _ERROR_RESPONSES.get(api_key)
    if builder is not None:
        return builder(api_key, req, code, message)
    response = {29: M.DescribeAclsResponse, 50: M.DescribeUserScramCredentialsResponse,
                60: M.DescribeClusterResponse}[api_key]
    return response(error_code=code, error_message=message)
