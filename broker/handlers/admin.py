"""Topic administration. Changes go to the controller (the broker forwards the request as
the client sent it) and the broker answers once its own metadata image shows the change,
so the client's next request here already sees it. DescribeConfigs and DescribeLogDirs are
answered locally.

Configs. TOPIC and GROUP (KIP-848, type 32) changes are decided by the controller
(controller/config_control.py). BROKER resources are answered here, as Kafka's
ConfigAdminManager preprocesses them: the name must be empty or this broker's id, APPEND and
SUBTRACT apply to LIST properties only (INVALID_CONFIG), and a change of a property Kafka
does not update dynamically is INVALID_REQUEST "Cannot update these configs dynamically:
Set(...)"; the rest goes to the controller, which stores the topic configs' broker-wide
defaults (log.retention.ms, message.max.bytes, ...) and the replication quotas' rates
(leader/follower.replication.throttled.rate, replica.alter.log.dirs.io.max.bytes.per.second:
LONG, default Long.MAX_VALUE) as ConfigRecords of the broker or of the
cluster default (""), and each broker applies them from its image without a restart.
DescribeConfigs of a broker gives each property's source (dynamic for the broker, dynamic
cluster default, static, default) and a topic's configs theirs, with synonyms from the most
specific. DescribeConfigs of a group gives each group config with its
source: the group's own (GROUP_CONFIG), else the broker's group.consumer.* property (static
when set, default otherwise). BROKER_LOGGER resources (type 8, this broker's id) are this
process's loggers and their levels (protocol/log_levels.py): described and changed here, never
forwarded or stored, with DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster; the legacy
AlterConfigs refuses them, as Kafka's does."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.dynamic_config import check_listener_change
from broker.handlers.services import ControllerChannel, forward, wait_for_topics
from engine.config import BROKER_SYNONYMS, TOPIC_CONFIGS
from metadata.configs import (
    APPEND,
    BROKER_RESOURCE,
    CLEANER_THREADS,
    DELETE,
    GROUP_CONFIGS,
    GROUP_RESOURCE,
    LISTENER_CONFIGS,
    LONG_MAX,
    REPLICATION_RATE_CONFIGS,
    SERVICE_CONFIGS,
    SET,
    SUBTRACT,
    THREAD_COUNTS,
    TOPIC_RESOURCE,
    ConfigFailure,
    check_request_shape,
    check_thread_count,
    dynamic_broker_configs,
    listener_connection_config,
    not_dynamic,
    unknown_operation,
)
from metadata.security import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    TOPIC,
)
from metadata.security import DELETE as DELETE_ACL_OPERATION  # not metadata.configs' DELETE
from protocol import log_levels
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from security import listener_ssl
from security.connection_config import check_listener_limits
from security.tls import SslConfigError

if TYPE_CHECKING:
    from engine.config import LogConfig
    from metadata.image import MetadataImage
    from replication.manager import ReplicaManager
    from security.tls import TlsReloader

BROKER_LOGGER = log_levels.BROKER_LOGGER_RESOURCE
Answers = dict[int, tuple[int, str | None]]  # a resource's answer by its index in the request
Synonym = tuple[int, str, str]  # a value's source, the property's name it is set under, the value
SOURCE_DYNAMIC_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 1, 2, 3
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_PASSWORD = 1, 2, 3, 5, 6, 7, 9
# A broker property's declared kind (strom.config) -> its DescribeConfigs type; lists and
# everything else are STRING, as Kafka declares most of them (listeners, log.dirs, ...).
_BROKER_TYPES = {"int": TYPE_INT, "long": TYPE_LONG, "bool": TYPE_BOOLEAN, "double": TYPE_DOUBLE}
# The type Kafka's LogConfig defines each topic config with, where it is not what the value's
# Python type gives (int: LONG; bool: BOOLEAN; str: STRING).
_KAFKA_TYPES = {
    **dict.fromkeys(("segment.bytes", "segment.index.bytes", "index.interval.bytes", "max.message.bytes",
                     "min.insync.replicas", "compression.gzip.level", "compression.lz4.level",
                     "compression.zstd.level"), TYPE_INT),
    **{name: TYPE_LIST for name, spec in TOPIC_CONFIGS.items() if spec.is_list},
}
_TOPIC_FROM_BROKER = {topic: broker for broker, topic in BROKER_SYNONYMS.items()}
# Kafka's brokerConfigSynonyms of the time properties, finest first, and each form's unit in ms.
_TIME_FORMS = {name: forms for forms in (("log.roll.ms", "log.roll.hours"),
                                         ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                                         ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
               for name in forms}
# The coarser forms, dynamic too (controller/config_control.py's TIME_FORMS).
_TIME_COARSE = ("log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours")
_TIME_FACTORS = {name: 3600000 if name.endswith(".hours") else 60000 if name.endswith(".minutes") else 1
                 for name in _TIME_FORMS}
# read_only False: the topic defaults, the replication rates, the cleaner's, the thread pools'
# and the connection limits (metadata.configs.SERVICE_CONFIGS, broker/dynamic_config.py).
_DYNAMIC = (frozenset(BROKER_SYNONYMS) | frozenset(REPLICATION_RATE_CONFIGS) | frozenset(SERVICE_CONFIGS)
            | frozenset(_TIME_COARSE))
# A config resource's ACL resource and the error its refusal answers (Kafka's ConfigHelper and
# ControllerApis.authorizeAlterResource): a broker's configs are the cluster's.
_CONFIG_AUTHORIZATION = {
    BROKER_RESOURCE: (CLUSTER, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    BROKER_LOGGER: (CLUSTER, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    TOPIC_RESOURCE: (TOPIC, Error.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    GROUP_RESOURCE: (GROUP, Error.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
}


class BrokerConfig(Protocol):
    """What the admin APIs read of the broker's config (strom/config.py's ServerConfig): the
    properties' values, those set in its file, and each property's kind."""
    values: Mapping[str, Any]
    originals: Mapping[str, str]
    log_config: LogConfig  # the topics' defaults from the static log.* properties

    def __getitem__(self, name: str) -> Any: ...

    def kind(self, name: str) -> str | None: ...


class AdminApis:
    """The admin APIs over the services they use: the controller channel of the metadata
    follower (forward a request, wait for the image to change), the image getter, the broker's
    config and id, each topic's log config, and the ReplicaManager (DescribeLogDirs)."""

    def __init__(self, *, node_id: int, config: BrokerConfig, image: Callable[[], MetadataImage],
                 controller: ControllerChannel, topic_log_config: Callable[[str], LogConfig],
                 replicas: ReplicaManager, authorizer: BrokerAuthorizer = ALLOW_ALL,
                 tls: Callable[[], TlsReloader | None] = lambda: None):
        self.authorizer = authorizer
        self.tls = tls  # the TLS listeners' reloader: a listener.name.<l>.ssl.* change checked here
        self.node_id = node_id
        self.config = config
        self.image = image
        self.controller = controller
        self.topic_log_config = topic_log_config
        self.replicas = replicas

    def apis(self) -> list[Api]:
        return [
            Api(34, 1, 2, self.handle_alter_replica_log_dirs),
            Api(35, 1, 5, self.handle_describe_log_dirs),
            Api(43, 0, 2, self.handle_elect_leaders),
            Api(45, 0, 1, self.handle_alter_partition_reassignments),
            Api(46, 0, 0, self.handle_list_partition_reassignments),
            Api(19, 2, 7, self.handle_create_topics),
            Api(20, 1, 6, self.handle_delete_topics),
            Api(37, 0, 3, self.handle_create_partitions),
            Api(44, 0, 1, self.handle_incremental_alter_configs),
            Api(33, 0, 2, self.handle_alter_configs),
            Api(32, 1, 4, self.handle_describe_configs),
        ]

    def _may_on_cluster(self, ctx: RequestContext, operation: int) -> bool:
        return self.authorizer.authorize(ctx, operation, CLUSTER, CLUSTER_NAME)

    def _config_refusal(self, ctx: RequestContext, operation: int, res) -> tuple[int, str] | None:
        """(error, message) when the principal may not perform ``operation`` (ALTER_CONFIGS or
        DESCRIBE_CONFIGS) on the config resource; None when it may, or the type is not one
        this broker knows (answered as before)."""
        rule = _CONFIG_AUTHORIZATION.get(res.resource_type)
        if rule is None:
            return None
        resource_type, code, message = rule
        name = CLUSTER_NAME if resource_type == CLUSTER else res.resource_name
        return None if self.authorizer.authorize(ctx, operation, resource_type, name) else (code, message)

    async def _forward(self, ctx: RequestContext, req):
        return await forward(self.controller, ctx, req)

    async def handle_create_topics(self, ctx: RequestContext, req):
        """Authorized before forwarding as Kafka's ControllerApis authorizes it: CREATE on the
        cluster allows every topic, else CREATE on each (TOPIC_AUTHORIZATION_FAILED, not
        forwarded); a created topic's configs are returned only with DESCRIBE_CONFIGS on it
        (else topic_config_error_code TOPIC_AUTHORIZATION_FAILED and no configs)."""
        R = M.CreateTopicsResponse
        names = {t.name for t in req.topics}
        if self.authorizer.authorize(ctx, CREATE, CLUSTER, CLUSTER_NAME, log_if_denied=False):
            allowed = names
        else:
            allowed = self.authorizer.filter(ctx, CREATE, TOPIC, names)
        refused = [R.CreatableTopicResult(name=n, error_code=Error.TOPIC_AUTHORIZATION_FAILED,
                                          error_message="Authorization failed.")
                   for n in sorted(names - allowed)]
        req.topics = [t for t in req.topics if t.name in allowed]
        if not req.topics:
            return R(topics=refused)
        response = await self._forward(ctx, req)
        if response is None:
            return _all_failed(R, req, Error.REQUEST_TIMED_OUT)
        created = [t.name for t in response.topics if t.error_code == Error.NONE]
        if created and not req.validate_only:
            await wait_for_topics(self.image, self.controller, created)
        describable = self.authorizer.filter(ctx, DESCRIBE_CONFIGS, TOPIC, created, log_if_denied=False)
        for t in response.topics:
            if t.error_code == Error.NONE and ctx.api_version >= 5:
                if t.name in describable:
                    t.configs = [self._describe_entry(t.name, n, R.CreatableTopicConfigs)
                                 for n in sorted(TOPIC_CONFIGS)]
                else:
                    t.configs, t.num_partitions, t.replication_factor = [], -1, -1
                    t.topic_config_error_code = Error.TOPIC_AUTHORIZATION_FAILED
        response.topics += refused
        return response

    async def handle_delete_topics(self, ctx: RequestContext, req):
        """Authorized before forwarding as Kafka's ControllerApis: DELETE on the cluster allows
        every topic, else a topic needs DESCRIBE and DELETE on it (TOPIC_AUTHORIZATION_FAILED,
        not forwarded; one named by id is answered without its name unless DESCRIBEd)."""
        R = M.DeleteTopicsResponse
        refused = []
        if not self.authorizer.authorize(ctx, DELETE_ACL_OPERATION, CLUSTER, CLUSTER_NAME,
                                         log_if_denied=False):
            by_id = {t.topic_id: name for name, t in self.image().topics.items()} if req.topics else {}

            def name_of(t):
                return t.name if t.name is not None else by_id.get(t.topic_id)
            names = {n for n in ([name_of(t) for t in req.topics] if req.topics else req.topic_names) if n}
            describable = self.authorizer.filter(ctx, DESCRIBE, TOPIC, names)
            deletable = self.authorizer.filter(ctx, DELETE_ACL_OPERATION, TOPIC, describable)
            if req.topics:
                kept = []
                for t in req.topics:
                    name = name_of(t)
                    if name is None or name in deletable:
                        kept.append(t)
                    else:
                        refused.append(R.DeletableTopicResult(
                            name=name if name in describable or t.name is not None else None,
                            topic_id=t.topic_id, error_code=Error.TOPIC_AUTHORIZATION_FAILED))
                req.topics = kept
            else:
                refused = [R.DeletableTopicResult(name=n, error_code=Error.TOPIC_AUTHORIZATION_FAILED)
                           for n in req.topic_names if n not in deletable]
                req.topic_names = [n for n in req.topic_names if n in deletable]
            if not (req.topics or req.topic_names):
                return R(responses=refused)
        response = await self._forward(ctx, req)
        if response is None:
            return _all_failed(M.DeleteTopicsResponse, req, Error.REQUEST_TIMED_OUT)
        deleted = [t.name for t in response.responses if t.error_code == Error.NONE]
        await wait_for_topics(self.image, self.controller, deleted, present=False)
        response.responses += refused
        return response

    async def handle_create_partitions(self, ctx: RequestContext, req):
        """A topic without ALTER on it answers TOPIC_AUTHORIZATION_FAILED, not forwarded."""
        R = M.CreatePartitionsResponse
        allowed = self.authorizer.filter(ctx, ALTER, TOPIC, [t.name for t in req.topics])
        refused = [R.CreatePartitionsTopicResult(name=t.name, error_code=Error.TOPIC_AUTHORIZATION_FAILED,
                                                 error_message="Topic authorization failed.")
                   for t in req.topics if t.name not in allowed]
        req.topics = [t for t in req.topics if t.name in allowed]
        if not req.topics:
            return R(results=refused)
        response = await self._forward(ctx, req)
        if response is None:
            return _all_failed(R, req, Error.REQUEST_TIMED_OUT)
        await self.controller.wait_for_change(0.5)
        response.results += refused
        return response

    async def _alter_configs(self, req, answered: dict[int, tuple[int, str | None]]):
        """Forward the resources not ``answered`` here, then the responses in the request's
        order."""
        Inc, R = M.IncrementalAlterConfigsRequest, M.IncrementalAlterConfigsResponse
        rest = [r for i, r in enumerate(req.resources) if i not in answered]
        forwarded: Iterator[tuple[int, str | None]] = iter([])
        if rest:
            try:
                response = await self.controller.forward(
                    44, 1, Inc(resources=rest, validate_only=req.validate_only))
            except (ConnectionError, TimeoutError):
                response = _all_failed(R, Inc(resources=rest), Error.REQUEST_TIMED_OUT)
            if any(r.error_code == Error.NONE for r in response.responses) and not req.validate_only:
                await self.controller.wait_for_change(0.5)
            forwarded = iter([(r.error_code, r.error_message) for r in response.responses])
        return [(r, answered[i] if i in answered else next(forwarded)) for i, r in enumerate(req.resources)]

    async def handle_incremental_alter_configs(self, ctx: RequestContext, req):
        R = M.IncrementalAlterConfigsResponse
        answered = self._broker_resources(req) | self._refused_alters(ctx, req)  # a refusal first
        answered = self._broker_loggers(req, answered) | answered
        return R(responses=[R.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type,
            resource_name=r.resource_name)
            for r, (code, message) in await self._alter_configs(req, answered)])

    async def handle_alter_configs(self, ctx: RequestContext, req):
        """The legacy AlterConfigs replaces a resource's whole set of overrides: it becomes an
        IncrementalAlterConfigs that SETs what is given and DELETEs every other override."""
        Inc, R = M.IncrementalAlterConfigsRequest, M.AlterConfigsResponse
        resources = []
        for res in req.resources:
            given = {c.name: c.value for c in res.configs}
            ops = [Inc.AlterableConfig(name=c.name, config_operation=SET, value=c.value) for c in res.configs]
            overrides = {TOPIC_RESOURCE: self.image().topic_config, GROUP_RESOURCE: self.image().group_config,
                         BROKER_RESOURCE: lambda name: self.image().configs.get((BROKER_RESOURCE, name), {})}
            current = overrides.get(res.resource_type, lambda _name: {})(res.resource_name)
            ops += [Inc.AlterableConfig(name=n, config_operation=DELETE, value=None)
                    for n in current if n not in given]
            resources.append(Inc.AlterConfigsResource(resource_type=res.resource_type,
                                                    resource_name=res.resource_name, configs=ops))
        incremental = Inc(resources=resources, validate_only=req.validate_only)
        legacy_refused = {i: (Error.INVALID_REQUEST, "AlterConfigs is deprecated and does not support the "
                                                     "resource type BROKER_LOGGER")
                          for i, r in enumerate(req.resources) if r.resource_type == BROKER_LOGGER}
        answers = await self._alter_configs(incremental, self._broker_resources(incremental)
                                            | self._refused_alters(ctx, incremental) | legacy_refused)
        return R(responses=[R.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type,
            resource_name=r.resource_name) for r, (code, message) in answers])

    async def handle_describe_configs(self, ctx: RequestContext, req):
        """A resource the principal may not DESCRIBE_CONFIGS (on the cluster for a broker)
        answers its type's *_AUTHORIZATION_FAILED and no configs (Kafka's ConfigHelper)."""
        R = M.DescribeConfigsResponse
        results = []
        for res in req.resources:
            out = R.DescribeConfigsResult(resource_type=res.resource_type, resource_name=res.resource_name)
            results.append(out)
            refusal = self._config_refusal(ctx, DESCRIBE_CONFIGS, res)
            if refusal is not None:
                out.error_code, out.error_message = refusal
                continue
            if res.resource_type == TOPIC_RESOURCE:
                if res.resource_name not in self.image().topics:
                    out.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                    out.error_message = f"Topic {res.resource_name} does not exist"
                    continue
                names = sorted(TOPIC_CONFIGS) if res.configuration_keys is None else res.configuration_keys
                out.configs = [self._describe_entry(res.resource_name, n, R.DescribeConfigsResourceResult,
                                                    req.include_synonyms)
                               for n in names if n in TOPIC_CONFIGS]
            elif res.resource_type == BROKER_RESOURCE:
                if res.resource_name not in ("", str(self.node_id)):
                    out.error_code = Error.INVALID_REQUEST
                    out.error_message = f"this is broker {self.node_id}"
                    continue
                out.configs = self._describe_broker(res, req.include_synonyms)
            elif res.resource_type == GROUP_RESOURCE:
                if not res.resource_name:
                    out.error_code, out.error_message = Error.INVALID_REQUEST, "Group name must not be empty"
                    continue
                names = sorted(GROUP_CONFIGS) if res.configuration_keys is None else res.configuration_keys
                out.configs = [self._describe_group_entry(res.resource_name, n, req.include_synonyms)
                               for n in names if n in GROUP_CONFIGS]
            elif res.resource_type == BROKER_LOGGER:
                try:
                    out.configs = log_levels.describe(self.node_id, res.resource_name, res.configuration_keys)
                except log_levels.LoggerFailure as e:
                    out.error_code, out.error_message = e.code, e.message
            else:
                out.error_code = Error.INVALID_REQUEST
                out.error_message = f"unsupported resource type {res.resource_type}"
        return R(results=results)

    async def _forward_partition_changes(self, ctx, req, failed, partition_results):
        """Forward; once the controller changed any partition, wait for this broker's image to
        show it, so the client's next request here sees it."""
        response = await self._forward(ctx, req)
        if response is None:
            return failed()
        if any(p.error_code == Error.NONE for p in partition_results(response)):
            await self.controller.wait_for_change(0.5)
        return response

    async def handle_elect_leaders(self, ctx: RequestContext, req):
        if not self._may_on_cluster(ctx, ALTER):
            return _all_failed(M.ElectLeadersResponse, req, Error.CLUSTER_AUTHORIZATION_FAILED)
        return await self._forward_partition_changes(
            ctx, req, lambda: _all_failed(M.ElectLeadersResponse, req, Error.REQUEST_TIMED_OUT),
            lambda r: (p for t in r.replica_election_results for p in t.partition_result))

    async def handle_alter_partition_reassignments(self, ctx: RequestContext, req):
        if not self._may_on_cluster(ctx, ALTER):
            R = M.AlterPartitionReassignmentsResponse
            code, message = Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
            P = R.ReassignableTopicResponse.ReassignablePartitionResponse
            return R(error_code=code, error_message=message, responses=[
                R.ReassignableTopicResponse(name=t.name, partitions=[
                    P(partition_index=p.partition_index, error_code=code, error_message=message)
                    for p in t.partitions]) for t in req.topics])
        return await self._forward_partition_changes(
            ctx, req, lambda: M.AlterPartitionReassignmentsResponse(error_code=Error.REQUEST_TIMED_OUT),
            lambda r: (p for t in r.responses for p in t.partitions))

    async def handle_list_partition_reassignments(self, ctx: RequestContext, req):
        if not self._may_on_cluster(ctx, DESCRIBE):
            return M.ListPartitionReassignmentsResponse(error_code=Error.CLUSTER_AUTHORIZATION_FAILED,
                                                        error_message="Cluster authorization failed.")
        response = await self._forward(ctx, req)
        if response is None:
            return M.ListPartitionReassignmentsResponse(error_code=Error.REQUEST_TIMED_OUT)
        return response

    async def handle_describe_log_dirs(self, ctx: RequestContext, req):
        """This broker's log dirs (Kafka's ReplicaManager.describeLogDirs): topics null asks for
        every partition."""
        R = M.DescribeLogDirsResponse
        T = R.DescribeLogDirsResult.DescribeLogDirsTopic
        if not self._may_on_cluster(ctx, DESCRIBE):  # Kafka's KafkaApis: no dirs, the error
            return R(error_code=Error.CLUSTER_AUTHORIZATION_FAILED, results=[])
        wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
        results = []
        for view in self.replicas.describe_log_dirs(wanted):
            topics: dict[str, list] = {}
            for topic, index, size, lag, future in view.partitions:
                topics.setdefault(topic, []).append(T.DescribeLogDirsPartition(
                    partition_index=index, partition_size=size, offset_lag=lag, is_future_key=future))
            results.append(R.DescribeLogDirsResult(
                error_code=view.error, log_dir=view.log_dir, total_bytes=view.total_bytes,
                usable_bytes=view.usable_bytes,
                topics=[T(name=name, partitions=parts) for name, parts in topics.items()]))
        return R(error_code=Error.NONE, results=results)

    async def handle_alter_replica_log_dirs(self, ctx: RequestContext, req):
        """Move replicas between this broker's log dirs (Kafka's KafkaApis and
        ReplicaManager.alterReplicaLogDirs): ALTER on the cluster, else every partition answers
        CLUSTER_AUTHORIZATION_FAILED."""
        R = M.AlterReplicaLogDirsResponse
        P = R.AlterReplicaLogDirTopicResult.AlterReplicaLogDirPartitionResult
        moves = {(t.name, p): d.path for d in req.dirs for t in d.topics for p in t.partitions}
        if self._may_on_cluster(ctx, ALTER):
            answers = await self.replicas.alter_replica_log_dirs(moves)
        else:
            answers = {tp: Error.CLUSTER_AUTHORIZATION_FAILED for tp in moves}
        topics: dict[str, list] = {}
        for (topic, index), error in answers.items():
            topics.setdefault(topic, []).append(P(partition_index=index, error_code=error))
        return R(results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
                          for name, parts in topics.items()])

    def _refused_alters(self, ctx: RequestContext, req) -> dict[int, tuple[int, str | None]]:
        """The resources, by index, the principal may not ALTER_CONFIGS, with their refusal
        (Kafka's ControllerApis.authorizeAlterResource): answered here, never forwarded."""
        refused: dict[int, tuple[int, str | None]] = {}
        for i, res in enumerate(req.resources):
            refusal = self._config_refusal(ctx, ALTER_CONFIGS, res)
            if refusal is not None:
                refused[i] = refusal
        return refused

    def _broker_resources(self, req) -> dict[int, tuple[int, str | None]]:
        """Kafka's ConfigAdminManager.preprocess of the BROKER resources: the refused ones, by
        index, answered here; the others are forwarded."""
        failed = check_request_shape(req.resources, lambda res: res.resource_type == BROKER_RESOURCE)
        answered: dict[int, tuple[int, str | None]] = {}
        for i, res in enumerate(req.resources):
            if res.resource_type != BROKER_RESOURCE:
                continue
            try:
                if i in failed:
                    raise failed[i]
                self._broker_change(res, req.validate_only)
            except ConfigFailure as e:
                answered[i] = (e.code, e.message)
        return answered

    def _broker_loggers(self, req, refused: Answers) -> Answers:
        """The BROKER_LOGGER resources not ``refused``, applied in this process (Kafka's
        RuntimeLoggerManager), by index: never forwarded."""
        failed = check_request_shape(req.resources,
                                     lambda res: res.resource_type == BROKER_LOGGER)
        answered: dict[int, tuple[int, str | None]] = {}
        for i, res in enumerate(req.resources):
            if res.resource_type != BROKER_LOGGER or i in refused:
                continue
            if i in failed:
                answered[i] = (failed[i].code, failed[i].message)
                continue
            try:
                log_levels.alter(self.node_id, res.resource_name, res.configs, req.validate_only)
                answered[i] = (Error.NONE, None)
            except log_levels.LoggerFailure as e:
                answered[i] = (e.code, e.message)
        return answered

    def _broker_change(self, res, validate_only: bool = False) -> None:
        """The checks of a BROKER resource after the request's shape, as Kafka's
        validateResourceNameIsCurrentNodeId and validateBrokerConfigChange: raises its failure."""
        if res.resource_name:
            try:
                node = int(res.resource_name)
            except ValueError:
                raise ConfigFailure(Error.INVALID_REQUEST,
                                    f"Node id must be an integer, but it is: {res.resource_name}") from None
            if node != self.node_id:
                raise ConfigFailure(Error.INVALID_REQUEST, f"Unexpected broker id, expected {self.node_id}, "
                                                           f"but received {res.resource_name}")
        for c in res.configs:
            bad = unknown_operation(c.config_operation)
            if bad is not None:
                raise bad
            if c.config_operation in (APPEND, SUBTRACT):
                kind = "long" if c.name in REPLICATION_RATE_CONFIGS else self.config.kind(c.name)
                if kind is None:
                    raise ConfigFailure(Error.INVALID_CONFIG, f"Unknown config name: {c.name}")
                topic = BROKER_SYNONYMS.get(c.name)
                if not (kind == "list" or topic is not None and TOPIC_CONFIGS[topic].is_list):
                    verb = "append" if c.config_operation == APPEND else "subtract"
                    raise ConfigFailure(Error.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {c.name}")
        setting = [c.name for c in res.configs if c.config_operation != DELETE]
        changed = [n for n in setting if n not in _DYNAMIC and n not in LISTENER_CONFIGS
                   and n not in listener_ssl.RECONFIGURABLE and listener_ssl.listener_ssl_name(n) is None
                   and listener_connection_config(n) is None]
        if changed:
            raise not_dynamic(changed)
        self._thread_counts(res)
        self._listener_tls_change(res, setting, validate_only)
        self._listener_limits(res)
        self._listeners_change(res, setting)

    def _listener_limits(self, res) -> None:
        """Kafka's ListenerConnectionQuota.validateReconfiguration for a listener of this broker
        (security.connection_config.check_listener_limits)."""
        check_listener_limits(res.configs, [lsn.name for lsn in getattr(self.config, "listeners", [])])

    def _listeners_change(self, res, setting: list[str]) -> None:
        """listeners, advertised.listeners and listener.security.protocol.map: per broker only
        (DynamicBrokerConfig.PerBrokerConfigs), and as a KRaft broker's DynamicListenerConfig
        validates the config they make with this broker's (broker.dynamic_config.
        check_listener_change): a config that does not hold, INVALID_REQUEST naming the property."""
        names = [n for n in setting if n in LISTENER_CONFIGS]
        if not any(c.name in LISTENER_CONFIGS for c in res.configs):
            return
        if not res.resource_name:
            if names:
                raise ConfigFailure(Error.INVALID_REQUEST,
                                    "Cannot update these configs at default cluster level, broker id must be "
                                    f"specified: Set({', '.join(names)})")
            return
        dynamic = dynamic_broker_configs(self.image(), self.node_id)
        values = {k: v for k, v in dynamic.items() if k in LISTENER_CONFIGS}
        for c in res.configs:
            if c.name in LISTENER_CONFIGS:
                if c.config_operation == SET:
                    values[c.name] = c.value
                else:
                    values.pop(c.name, None)
        try:
            new = type(self.config)({**self.config.originals, **values})  # type: ignore[call-arg]
        except ValueError as e:  # engine.errors.ConfigError: the property and why
            raise ConfigFailure(Error.INVALID_REQUEST, str(e)) from None
        check_listener_change(self.config, new)

    def _thread_counts(self, res) -> None:
        """Kafka's DynamicThreadPool and LogCleaner validation: a thread count SET may be at most
        double and at least half this broker's current value (its dynamic one, else the
        cluster default's, else the static); a value that is no integer is the controller's to
        refuse."""
        current = dynamic_broker_configs(self.image(), self.node_id)
        for c in res.configs:
            if c.config_operation != SET or c.name not in THREAD_COUNTS and c.name != CLEANER_THREADS:
                continue
            try:
                new = int(c.value.strip())
                now = int(current[c.name]) if c.name in current else self.config[c.name]
            except ValueError:
                continue
            check_thread_count(c.name, new, now)
        self._per_ip_zero(res)

    def _per_ip_zero(self, res) -> None:
        """KafkaConfig's requirement over the resulting config: max.connections.per.ip may be 0
        only with max.connections.per.ip.overrides set (this broker's values over the cluster
        default's over the static ones, the request's applied to its resource)."""
        per_ip, overrides = "max.connections.per.ip", "max.connections.per.ip.overrides"
        if not {c.name for c in res.configs} & {per_ip, overrides}:
            return
        configs = self.image().configs
        changed = dict(configs.get((BROKER_RESOURCE, res.resource_name), {}))
        for c in res.configs:
            if c.config_operation == SET:
                changed[c.name] = c.value
            elif c.config_operation == DELETE:
                changed.pop(c.name, None)
        if res.resource_name:
            merged = {**configs.get((BROKER_RESOURCE, ""), {}), **changed}
        else:
            merged = {**changed, **configs.get((BROKER_RESOURCE, str(self.node_id)), {})}
        try:
            zero = int(merged.get(per_ip, self.config[per_ip])) == 0
        except ValueError:
            return  # the controller refuses what is no integer
        if zero and not str(merged.get(overrides, self.config[overrides])).strip():
            raise ConfigFailure(Error.INVALID_REQUEST,
                                f"requirement failed: {per_ip} can be set to zero only if {overrides} "
                                "property is set.")

    def _listener_tls_change(self, res, setting: list[str], validate_only: bool) -> None:
        """A listener's ssl.* configs: per broker only, with the listener prefix; the new stores
        must load and keep the certificate's subject and names (security/tls.py), else
        INVALID_REQUEST with SslFactory's reason, as ConfigAdminManager answers a failed
        validation; the same values set again reload the files now."""
        refused = listener_ssl.refusal(setting, per_broker=bool(res.resource_name))
        if refused is not None:
            raise ConfigFailure(Error.INVALID_REQUEST, refused)
        changes = {c.name: c.value if c.config_operation == SET else None for c in res.configs
                   if listener_ssl.listener_ssl_name(c.name) is not None}
        reloader = self.tls()
        if not changes or reloader is None:
            return
        try:
            reloader.check(changes, dynamic_broker_configs(self.image(), self.node_id), validate_only)
        except SslConfigError as e:
            raise ConfigFailure(Error.INVALID_REQUEST, str(e)) from None

    def _describe_group_entry(self, group: str, name: str, synonyms: bool):
        """Kafka's ConfigHelper.createGroupConfigEntry: the group's own value, else the broker's
        group.consumer.* property's; INT; synonyms from the most to the least specific."""
        R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
        S = R.DescribeConfigsSynonym
        prop = "group." + name
        chain = []
        own = self.image().group_config(group).get(name)
        if own is not None:
            chain.append(S(name=name, value=own, source=SOURCE_GROUP))
        if prop in self.config.originals:
            chain.append(S(name=prop, value=_text(self.config[prop]), source=SOURCE_STATIC_BROKER))
        chain.append(S(name=prop, value=str(GROUP_CONFIGS[name]), source=SOURCE_DEFAULT))
        return R(name=name, value=chain[0].value, read_only=False, config_source=chain[0].source,
                 is_default=chain[0].source == SOURCE_DEFAULT, is_sensitive=False,
                 synonyms=chain if synonyms else [], config_type=TYPE_INT, documentation=None)

    def _broker_chain(self, prop: str, value: Any, include_default: bool = True) -> list[Synonym]:
        """A broker property's values from the most to the least specific, with their sources
        and names: this broker's dynamic value, the cluster default's, the static one, the
        default; within each source the property's own form and its coarser ones (log.retention.ms,
        .minutes, .hours: Kafka's brokerConfigSynonyms; a finer form is not a synonym of a
        coarser one, as Kafka drops what precedes the name described)."""
        forms: tuple[str, ...] = _TIME_FORMS.get(prop, (prop,))
        forms = forms[forms.index(prop):]
        chain: list[Synonym] = []
        image = self.image()
        for source, entity in ((SOURCE_DYNAMIC_BROKER, str(self.node_id)),
                               (SOURCE_DYNAMIC_DEFAULT_BROKER, "")):
            dynamic = image.configs.get((BROKER_RESOURCE, entity), {})
            chain += [(source, form, dynamic[form]) for form in forms if form in dynamic]
        for form in forms:
            if form in self.config.originals:
                chain.append((SOURCE_STATIC_BROKER, form,
                              _text(value if form == prop else self.config.values.get(form))))
        if include_default:
            chain.append((SOURCE_DEFAULT, prop, _text(value)))
        return chain

    def _in_unit_of(self, prop: str, form: str, value: str) -> str:
        """A value of ``form`` (log.retention.hours) in ``prop``'s unit (log.retention.ms)."""
        if form == prop or form not in _TIME_FACTORS or prop not in _TIME_FACTORS:
            return value
        try:
            number = int(value)
        except ValueError:
            return value
        return value if number < 0 else str(number * _TIME_FACTORS[form] // _TIME_FACTORS[prop])

    def _describe_broker(self, res, synonyms: bool) -> list:
        """Kafka's ConfigHelper for a BROKER resource: this broker's every property with its
        source (dynamic per broker, dynamic cluster default, static, default), read only unless
        dynamic; the cluster default ("") lists only its dynamic configs."""
        R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
        S = R.DescribeConfigsSynonym
        values = self.config.values
        if res.resource_name == "":
            dynamic = self.image().configs.get((BROKER_RESOURCE, ""), {})
            names = sorted(dynamic) if res.configuration_keys is None else res.configuration_keys
            hidden = {n: None if listener_ssl.is_sensitive(n) else v for n, v in dynamic.items()}
            return [R(name=n, value=hidden[n], read_only=False, config_source=SOURCE_DYNAMIC_DEFAULT_BROKER,
                      is_default=False, is_sensitive=listener_ssl.is_sensitive(n),
                      config_type=TYPE_PASSWORD if listener_ssl.is_sensitive(n)
                      else _broker_config_type(self.config, n),
                      synonyms=[S(name=n, value=hidden[n], source=SOURCE_DYNAMIC_DEFAULT_BROKER)] if synonyms
                      else []) for n in names if n in dynamic]
        log_defaults = self.config.log_config  # a log.* property left unset: its topic default
        known = {**{n: getattr(log_defaults, TOPIC_CONFIGS[t].attr) for n, t in BROKER_SYNONYMS.items()},
                 **dict.fromkeys(REPLICATION_RATE_CONFIGS, LONG_MAX),
                 **{n: v for n, v in values.items() if v is not None}}
        names = sorted(known) if res.configuration_keys is None else res.configuration_keys
        out = []
        for n in names:
            if n not in known:
                continue
            chain = self._broker_chain(n, known[n], include_default=n not in self.config.originals)
            source, form, first = chain[0]
            shown = self._in_unit_of(n, form, first)
            secret = listener_ssl.is_sensitive(n)  # a password: described, its value never
            out.append(R(name=n, value=None if secret else shown, read_only=n not in _DYNAMIC,
                         config_source=source, is_default=source == SOURCE_DEFAULT, is_sensitive=secret,
                         synonyms=[S(name=f, value=None if secret else v, source=src) for src, f, v in chain]
                         if synonyms else [],
                         config_type=TYPE_PASSWORD if secret else _broker_config_type(self.config, n)))
        own = self.image().configs.get((BROKER_RESOURCE, str(self.node_id)), {})
        listeners = [n for n in (sorted(own) if res.configuration_keys is None else res.configuration_keys)
                     if n in own and n not in known and listener_ssl.listener_ssl_name(n) is not None]
        for n in listeners:  # a listener's dynamic ssl.* configs; Kafka's PASSWORD ones sensitive
            secret = listener_ssl.is_sensitive(n)
            value = None if secret else own[n]
            out.append(R(name=n, value=value, read_only=False, config_source=SOURCE_DYNAMIC_BROKER,
                         is_default=False, is_sensitive=secret,
                         synonyms=[S(name=n, value=value, source=SOURCE_DYNAMIC_BROKER)] if synonyms else [],
                         config_type=TYPE_PASSWORD if secret else TYPE_STRING))
        return out + self._describe_listener_limits(res, own, synonyms)

    def _describe_listener_limits(self, res, own: dict[str, str], synonyms: bool) -> list:
        """A listener's connection limits set anywhere (this broker's dynamic value, the cluster
        default's, the file's), dynamic INTs whose synonyms go on to the base property's chain
        (Kafka's brokerConfigSynonyms with the listener override)."""
        R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
        S = R.DescribeConfigsSynonym
        cluster = self.image().configs.get((BROKER_RESOURCE, ""), {})
        static = self.config.originals
        present = {n for n in (*own, *cluster, *static) if listener_connection_config(n) is not None}
        out = []
        for n in sorted(present) if res.configuration_keys is None else res.configuration_keys:
            found = listener_connection_config(n)
            if n not in present or found is None:
                continue
            chain = [(source, n, layer[n].strip()) for source, layer in (
                (SOURCE_DYNAMIC_BROKER, own), (SOURCE_DYNAMIC_DEFAULT_BROKER, cluster),
                (SOURCE_STATIC_BROKER, static)) if n in layer]
            chain += self._broker_chain(found[1], self.config.values[found[1]],
                                        include_default=found[1] not in static)
            source, _, value = chain[0]
            listed = [S(name=f, value=v, source=src) for src, f, v in chain] if synonyms else []
            out.append(R(name=n, value=value, read_only=False, config_source=source, is_default=False,
                         is_sensitive=False, config_type=TYPE_INT, synonyms=listed))
        return out

    def _describe_entry(self, topic: str, name: str, _cls, synonyms: bool = False):
        """A topic config: the topic's own value, else its broker property's (dynamic for this
        broker, for the cluster, static, default), with the synonyms in that order."""
        overrides = self.image().topic_config(topic)
        config = self.topic_log_config(topic)
        value = getattr(config, TOPIC_CONFIGS[name].attr)
        chain: list[tuple[int, str, str]] = []
        if name in overrides:
            chain.append((SOURCE_DYNAMIC_TOPIC, name, _text(value)))
        prop = _TOPIC_FROM_BROKER.get(name)
        if prop is not None:
            default = getattr(self.config.log_config, TOPIC_CONFIGS[name].attr)
            chain += self._broker_chain(prop, default)
        else:
            chain.append((SOURCE_DEFAULT, name, _text(value)))
        source = chain[0][0]
        entry = _cls(name=name, value=_text(value), read_only=False, is_sensitive=False)
        if "config_source" in entry._fields:
            entry.config_source = source
        if "config_type" in entry._fields:
            entry.config_type = _topic_config_type(name)
        if "is_default" in entry._fields:
            entry.is_default = source == SOURCE_DEFAULT
        if synonyms and "synonyms" in entry._fields:
            S = M.DescribeConfigsResponse.DescribeConfigsResourceResult.DescribeConfigsSynonym
            entry.synonyms = [S(name=n, value=v, source=src) for src, n, v in chain]
        return entry

def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _topic_config_type(name: str) -> int:
    kind = TOPIC_CONFIGS[name].kind
    return _KAFKA_TYPES.get(name, TYPE_BOOLEAN if kind is bool else TYPE_LONG if kind is int
                            else TYPE_DOUBLE if kind is float else TYPE_STRING)


def _broker_config_type(config, name: str) -> int:
    """A log.* property has the type of the topic config it is the default of."""
    topic = BROKER_SYNONYMS.get(name)
    if topic is not None:
        return _topic_config_type(topic)
    if name in REPLICATION_RATE_CONFIGS:
        return TYPE_LONG
    return _BROKER_TYPES.get(config.kind(name), TYPE_STRING)


def _all_failed(cls, req, code):
    if cls is M.CreateTopicsResponse:
        return cls(topics=[cls.CreatableTopicResult(name=t.name, error_code=code) for t in req.topics])
    if cls is M.DeleteTopicsResponse:
        names = [t.name for t in req.topics] if req.topics else req.topic_names
        return cls(responses=[cls.DeletableTopicResult(name=n, error_code=code) for n in names])
    if cls is M.ElectLeadersResponse:
        # v0 has no top-level error: every partition asked for carries it.
        return cls(error_code=code, replica_election_results=[cls.ReplicaElectionResult(
            topic=t.topic, partition_result=[cls.ReplicaElectionResult.PartitionResult(
                partition_id=p, error_code=code) for p in t.partitions]) for t in req.topic_partitions or []])
    if cls is M.CreatePartitionsResponse:
        return cls(results=[cls.CreatePartitionsTopicResult(name=t.name, error_code=code)
                        for t in req.topics])
    return cls(responses=[cls.AlterConfigsResourceResponse(resource_type=r.resource_type,
                                                           resource_name=r.resource_name, error_code=code)
                          for r in req.resources])
