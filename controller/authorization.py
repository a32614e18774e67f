"""What a controller lets each principal do: every API on the controller listener authorized
as Kafka's ControllerApis authorizes it, by the StandardAuthorizer over the controller's own
metadata image (security/authorizer.py's ``AclAuthorizer``, the one brokers run).

``authorize_apis`` wraps the APIs a controller serves (the quorum controller's and raft's)
with the checks ``controller_rule`` names for each:

- CLUSTER_ACTION on the cluster for what brokers and controllers send each other (raft's Vote,
  BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, UpdateRaftVoter; BrokerRegistration,
  BrokerHeartbeat, AlterPartition, AllocateProducerIds): a broker's or a controller's
  principal (SASL, or a mutual-TLS certificate's mapped name; ``User:ANONYMOUS`` on a
  PLAINTEXT listener) must be a super user or hold it, as in Kafka;
- DESCRIBE (DescribeQuorum, ListPartitionReassignments, DescribeAcls,
  DescribeUserScramCredentials), ALTER (CreateAcls, DeleteAcls, ElectLeaders,
  AlterPartitionReassignments, AlterUserScramCredentials, DescribeCluster) or ALTER_CONFIGS
  (AlterClientQuotas) on the cluster;
- per resource for CreateTopics (CREATE on the cluster, else on each topic; a created topic's
  configs only with DESCRIBE_CONFIGS on it), DeleteTopics (DELETE on the cluster, else
  DESCRIBE and DELETE on each topic; one named by id is answered without its name unless
  DESCRIBEd), CreatePartitions (ALTER on each topic), IncrementalAlterConfigs
  (ALTER_CONFIGS on the cluster for a broker resource, on the topic, on the group; CLUSTER_ACTION
  on the cluster for a broker logger) and DescribeConfigs (DESCRIBE_CONFIGS on the cluster for a
  broker or a broker logger, on the topic, on the group).

A refused request is answered with the API's own error in its own shape
(CLUSTER_AUTHORIZATION_FAILED for the whole request, TOPIC_ / GROUP_AUTHORIZATION_FAILED per
item), never by closing the connection; the items allowed are served as usual.

Forwarded requests. Brokers authorize a client's admin request themselves and forward it to
the controller on their own connection (Strom has no Envelope, KIP-590), so the controller
sees the broker's principal. A principal with CLUSTER_ACTION on the cluster is therefore let
through every check: Kafka lets such a principal wrap any request in an Envelope naming any
principal, so this grants nothing Kafka does not.

Without an authorizer (``authorizer.class.name`` empty) everything is allowed, and the ACL
APIs answer SECURITY_DISABLED, as Kafka's AclApis: ACLs are stored only where they are enforced.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from controller.quorum_controller import error_response as controller_error_response
from metadata.configs import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE
from metadata.image import MetadataImage
from metadata.security import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    TOPIC,
)
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api, HandlerFn
from protocol.errors import Error
from protocol.log_levels import BROKER_LOGGER_RESOURCE
from raft import wire
from security.authorizer import AclAuthorizer, controller_rule

log = logging.getLogger("strom.controller")

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 37, 44
DESCRIBE_CONFIGS_API = 32
CLIENT_METRICS_RESOURCE = 16
NO_AUTHORIZER = "No Authorizer is configured."
AUTHORIZATION_FAILED = "Authorization failed."
ZERO_ID = bytes(16)


def error_response(api_key: int, version: int, req: Any, code: int, message: str | None = None) -> Any:
    """A controller's answer to a request refused as a whole, in its API's shape (raft's or the
    quorum controller's)."""
    if api_key in wire.VERSIONS:
        return wire.build_error_response(api_key, version, code, message)
    return controller_error_response(api_key, req, code, message)


def authorize_apis(apis: list[Api], authorizer: AclAuthorizer,
                   image: Callable[[], MetadataImage]) -> list[Api]:
    """``apis`` with each one's checks in front of it (the module doc). ``image``: the
    controller's metadata image, for the names of topics named by id."""
    return [Api(api.key, api.min_version, api.max_version, _authorized(api, authorizer, image))
            for api in apis]


def _authorized(api: Api, authorizer: AclAuthorizer, image: Callable[[], MetadataImage]) -> HandlerFn:
    serve = api.fn
    if not authorizer.enabled:
        if api.key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS):
            return _security_disabled
        return serve
    rule = controller_rule(M.API_NAMES[api.key])
    if rule.cluster_operation is not None:
        operation = rule.cluster_operation

        async def cluster_operation(ctx: RequestContext, req: Any) -> Any:
            if _forwarder(authorizer, ctx) or authorizer.authorize(ctx, operation, CLUSTER, CLUSTER_NAME):
                return await serve(ctx, req)
            return error_response(ctx.api_key, ctx.api_version, req, Error.CLUSTER_AUTHORIZATION_FAILED,
                                  f"Request {M.API_NAMES[ctx.api_key]} is not authorized.")
        return cluster_operation
    per_resource = _PER_RESOURCE.get(api.key)
    if per_resource is None:
        return serve

    async def each_resource(ctx: RequestContext, req: Any) -> Any:
        if _forwarder(authorizer, ctx):
            return await serve(ctx, req)
        return await per_resource(authorizer, image, serve, ctx, req)
    return each_resource


def _forwarder(authorizer: AclAuthorizer, ctx: RequestContext) -> bool:
    """A broker (CLUSTER_ACTION on the cluster), forwarding what it has authorized itself."""
    return authorizer.authorize(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, log_if_denied=False)


async def _security_disabled(ctx: RequestContext, req: Any) -> Any:
    if ctx.api_key == DESCRIBE_ACLS:
        return M.DescribeAclsResponse(error_code=Error.SECURITY_DISABLED,
                                      error_message="No Authorizer is configured on the controller")
    return controller_error_response(ctx.api_key, req, Error.SECURITY_DISABLED, NO_AUTHORIZER)


# ---- per resource ------------------------------------------------------------------------------

async def _create_topics(authorizer: AclAuthorizer, image: Callable[[], MetadataImage], serve: HandlerFn,
                         ctx: RequestContext, req: Any) -> Any:
    """CREATE on the cluster, else on each topic; configs only with DESCRIBE_CONFIGS."""
    R = M.CreateTopicsResponse
    names = {t.name for t in req.topics}
    if authorizer.authorize(ctx, CREATE, CLUSTER, CLUSTER_NAME, log_if_denied=False):
        creatable = names
    else:
        creatable = authorizer.filter(ctx, CREATE, TOPIC, names)
    describable = authorizer.filter(ctx, DESCRIBE_CONFIGS, TOPIC, names, log_if_denied=False)
    refused = [t.name for t in req.topics if t.name not in creatable]
    req.topics = [t for t in req.topics if t.name in creatable]
    response = await serve(ctx, req)
    for result in response.topics:
        if result.error_code == Error.NONE and result.name not in describable:
            result.topic_config_error_code = Error.TOPIC_AUTHORIZATION_FAILED
            result.configs = []
    response.topics.extend(R.CreatableTopicResult(name=name, error_code=Error.TOPIC_AUTHORIZATION_FAILED,
                                                  error_message=AUTHORIZATION_FAILED)
                           for name in dict.fromkeys(refused))
    return response


async def _delete_topics(authorizer: AclAuthorizer, image: Callable[[], MetadataImage], serve: HandlerFn,
                         ctx: RequestContext, req: Any) -> Any:
    """DELETE on the cluster, else DESCRIBE and DELETE on each topic (Kafka's
    ControllerApis.deleteTopics): a topic named by id is told apart from an unknown id only
    when DESCRIBEd."""
    if authorizer.authorize(ctx, DELETE, CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return await serve(ctx, req)
    R = M.DeleteTopicsResponse
    by_id = image().topics_by_id

    def known(name: str | None, topic_id: bytes | None) -> str | None:
        """The topic's name; None for an id that names no topic (the controller answers it)."""
        if name:
            return name
        topic = by_id.get(topic_id) if topic_id is not None else None
        return topic.name if topic is not None else None

    items: list[tuple[Any, str | None, bytes | None]]
    if req.topics:
        items = [(t, t.name, t.topic_id) for t in req.topics]
    else:
        items = [(n, n, None) for n in req.topic_names]
    names = {n for _, name, topic_id in items if (n := known(name, topic_id)) is not None}
    describable = authorizer.filter(ctx, DESCRIBE, TOPIC, names)
    deletable = authorizer.filter(ctx, DELETE, TOPIC, names)
    kept, refused = [], []
    for item, name, topic_id in items:
        topic = known(name, topic_id)
        if topic is None or topic in deletable:
            kept.append(item)
        elif name:
            refused.append(R.DeletableTopicResult(name=name, topic_id=ZERO_ID,
                                                  error_code=Error.TOPIC_AUTHORIZATION_FAILED))
        else:
            refused.append(R.DeletableTopicResult(name=topic if topic in describable else None,
                                                  topic_id=topic_id or ZERO_ID,
                                                  error_code=Error.TOPIC_AUTHORIZATION_FAILED))
    if req.topics:
        req.topics = kept
    else:
        req.topic_names = kept
    response = await serve(ctx, req) if kept else R(responses=[])
    response.responses.extend(refused)
    return response


async def _create_partitions(authorizer: AclAuthorizer, image: Callable[[], MetadataImage],
                             serve: HandlerFn, ctx: RequestContext, req: Any) -> Any:
    """ALTER on each topic."""
    R = M.CreatePartitionsResponse
    alterable = authorizer.filter(ctx, ALTER, TOPIC, {t.name for t in req.topics})
    refused = [t.name for t in req.topics if t.name not in alterable]
    req.topics = [t for t in req.topics if t.name in alterable]
    response = await serve(ctx, req) if req.topics else R(results=[])
    response.results.extend(R.CreatePartitionsTopicResult(
        name=name, error_code=Error.TOPIC_AUTHORIZATION_FAILED, error_message=AUTHORIZATION_FAILED)
        for name in dict.fromkeys(refused))
    return response


# A described resource's ACL resource and the refusal (Kafka's ConfigHelper): a broker's and a
# broker logger's configs are the cluster's.
_DESCRIBE_AUTHORIZATION = {
    BROKER_RESOURCE: (CLUSTER, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    BROKER_LOGGER_RESOURCE: (CLUSTER, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    CLIENT_METRICS_RESOURCE: (CLUSTER, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    TOPIC_RESOURCE: (TOPIC, Error.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    GROUP_RESOURCE: (GROUP, Error.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
}


async def _describe_configs(authorizer: AclAuthorizer, image: Callable[[], MetadataImage], serve: HandlerFn,
                            ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE_CONFIGS on the cluster for a broker or a broker logger, on the topic, on the
    group; the refused after those served, without configs (ConfigHelper). Any other type
    is the controller's to refuse."""
    R = M.DescribeConfigsResponse
    kept, refused = [], []
    for resource in req.resources:
        check = _DESCRIBE_AUTHORIZATION.get(resource.resource_type)
        if check is None:
            kept.append(resource)
            continue
        acl_type, code, message = check
        name = CLUSTER_NAME if acl_type == CLUSTER else resource.resource_name
        if authorizer.authorize(ctx, DESCRIBE_CONFIGS, acl_type, name):
            kept.append(resource)
        else:
            refused.append(R.DescribeConfigsResult(
                error_code=code, error_message=message, resource_type=resource.resource_type,
                resource_name=resource.resource_name, configs=[]))
    req.resources = kept
    response = await serve(ctx, req) if kept else R(results=[])
    response.results.extend(refused)
    return response


def _alter_resource_error(authorizer: AclAuthorizer, ctx: RequestContext, resource_type: int,
                          name: str) -> tuple[int, str | None]:
    """Kafka's ControllerApis.authorizeAlterResource; a broker logger as its RuntimeLoggerManager
    is asked, with CLUSTER_ACTION on the cluster."""
    if resource_type == BROKER_LOGGER_RESOURCE:
        if authorizer.authorize(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return Error.NONE, None
        return Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if resource_type in (BROKER_RESOURCE, CLIENT_METRICS_RESOURCE):
        if authorizer.authorize(ctx, ALTER_CONFIGS, CLUSTER, CLUSTER_NAME):
            return Error.NONE, None
        return Error.CLUSTER_AUTHORIZATION_FAILED, None
    if resource_type == TOPIC_RESOURCE:
        if authorizer.authorize(ctx, ALTER_CONFIGS, TOPIC, name):
            return Error.NONE, None
        return Error.TOPIC_AUTHORIZATION_FAILED, None
    if resource_type == GROUP_RESOURCE:
        if authorizer.authorize(ctx, ALTER_CONFIGS, GROUP, name):
            return Error.NONE, None
        return Error.GROUP_AUTHORIZATION_FAILED, None
    return Error.NONE, None  # the controller answers any other type itself


async def _incremental_alter_configs(authorizer: AclAuthorizer, image: Callable[[], MetadataImage],
                                     serve: HandlerFn, ctx: RequestContext, req: Any) -> Any:
    """ALTER_CONFIGS on the cluster for a broker, on the topic, on the group."""
    R = M.IncrementalAlterConfigsResponse
    kept, refused = [], []
    for resource in req.resources:
        code, message = _alter_resource_error(authorizer, ctx, resource.resource_type, resource.resource_name)
        if code == Error.NONE:
            kept.append(resource)
        else:
            refused.append(R.AlterConfigsResourceResponse(
                resource_type=resource.resource_type, resource_name=resource.resource_name, error_code=code,
                error_message=message))
    req.resources = kept
    response = await serve(ctx, req) if kept else R(responses=[])
    response.responses.extend(refused)
    return response


PerResource = Callable[[AclAuthorizer, Callable[[], MetadataImage], HandlerFn, RequestContext, Any], Any]
_PER_RESOURCE: dict[int, PerResource] = {
    CREATE_TOPICS: _create_topics, DELETE_TOPICS: _delete_topics, CREATE_PARTITIONS: _create_partitions,
    INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs, DESCRIBE_CONFIGS_API: _describe_configs,
}
