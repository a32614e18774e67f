"""The broker's authorizer: may the principal of a request do this to that resource.

``BrokerAuthorizer`` puts the StandardAuthorizer's rules (security/authorizer.py) in front of
the metadata image's ACLs for the request handlers, which ask with the request's context
(principal, client address, API). It is built from the node's config (``from_config``):

- ``authorizer.class.name``: empty (Kafka's default), no authorizer: everything is allowed, as
  Kafka without one; ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (or the short
  ``StandardAuthorizer``): the StandardAuthorizer over the ACLs of the metadata log; any other
  class stops startup naming the property.
- ``super.users``: principals separated by ``;`` allowed everything.
- ``allow.everyone.if.no.acl.found`` (false): the answer for a resource no ACL names.

Decisions are written to the logger ``kafka.authorizer.logger``, as Kafka's audit log: a
denial of something the request asked for at INFO, an allow at DEBUG, the checks behind
authorized-operation bit sets and filters at TRACE (level 5); turn the logger up to see them.

The rules are indexed once per set of ACLs: the image's ACL dict is fingerprinted per call by
its identity, size and last-inserted id (ACL ids are unique and an entry under an id never
changes, so a dict that gained, lost or swapped entries changes fingerprint whether it was
replaced or changed in place), and the index is rebuilt only when that changes.

Authorized operations: the bit sets that Metadata (v8+), DescribeCluster and DescribeGroups
return when a client asks for them (``include_*_authorized_operations``), bit ``code`` set for
each operation allowed, by Kafka's AclOperation codes (UNKNOWN 0, ANY 1 and ALL 2 are never
set), over the operations each resource type supports (Kafka 4.x's
``AclEntry.supportedOperations``, where a group also has DESCRIBE_CONFIGS and ALTER_CONFIGS for
KIP-848's group configs). A request that did not ask gets ``NOT_REQUESTED`` (INT32_MIN), the
schemas' default. The module function ``authorized_operations`` answers as with no authorizer
(every supported operation) for the handlers that do not yet hold a ``BrokerAuthorizer``;
``BrokerAuthorizer.authorized_operations`` answers per principal.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.errors import ConfigError
from metadata.security import (  # noqa: F401 (the codes, re-exported for the handlers)
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    CREATE_TOKENS,
    DELEGATION_TOKEN,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    DESCRIBE_TOKENS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    USER,
    WRITE,
    AclEntry,
)
from protocol.context import RequestContext
from protocol.messages import API_NAMES
from security.authorizer import (
    OPERATION_NAMES,
    PATTERN_TYPE_NAMES,
    RESOURCE_TYPE_NAMES,
    STANDARD_AUTHORIZER_NAMES,
    Decision,
    StandardAuthorizer,
    parse_super_users,
)

NOT_REQUESTED = -2**31

SUPPORTED: dict[int, frozenset[int]] = {
    TOPIC: frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    GROUP: frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    CLUSTER: frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                        DESCRIBE}),
    TRANSACTIONAL_ID: frozenset({DESCRIBE, WRITE}),
    DELEGATION_TOKEN: frozenset({DESCRIBE}),
    USER: frozenset({CREATE_TOKENS, DESCRIBE_TOKENS}),
}

AUDIT_LOG = logging.getLogger("kafka.authorizer.logger")
TRACE = 5  # below DEBUG: Kafka's TRACE
logging.addLevelName(TRACE, "TRACE")


def bit_set(operations: frozenset[int] | set[int]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    bits = 0
    for code in operations:
        bits |= 1 << code
    return bits


def authorized_operations(resource_type: int, resource_name: str = "") -> int:
    """The bit set with no authorizer: every operation the resource type supports, whatever
    the name (``BrokerAuthorizer.authorized_operations`` answers per principal)."""
    return bit_set(SUPPORTED[resource_type])


def _fingerprint(acls: Mapping[uuid.UUID, AclEntry]) -> tuple[Any, ...]:
    """Changes whenever the set of ACLs does (the module doc)."""
    if isinstance(acls, dict):
        return id(acls), len(acls), next(reversed(acls), None)
    return id(acls), frozenset(acls)


class BrokerAuthorizer:
    """The StandardAuthorizer over the image's ACLs, asked with a request's context (the
    module doc). ``enabled`` False: everything is allowed."""

    def __init__(self, acls: Callable[[], Mapping[uuid.UUID, AclEntry]],
                 super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False,
                 enabled: bool = True):
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls = acls
        self._key: tuple[Any, ...] | None = None
        self._held: Mapping[uuid.UUID, AclEntry] | None = None  # keeps the fingerprinted id in use
        self._core = StandardAuthorizer((), self.super_users, allow_everyone_if_no_acl_found)

    @classmethod
    def from_config(cls, config: Any, acls: Callable[[], Mapping[uuid.UUID, AclEntry]]) -> BrokerAuthorizer:
        """From ``authorizer.class.name``, ``super.users`` and ``allow.everyone.if.no.acl.found``;
        ConfigError naming the property for a class other than the StandardAuthorizer or a
        super user not of the form Type:name."""
        class_name = (config.get("authorizer.class.name") or "").strip()
        if class_name and class_name not in STANDARD_AUTHORIZER_NAMES:
            raise ConfigError("authorizer.class.name",
                              f"unknown authorizer {class_name!r}: Strom runs "
                              "org.apache.kafka.metadata.authorizer.StandardAuthorizer, or none (empty)")
        try:
            super_users = parse_super_users(config.get("super.users"))
        except ValueError as e:
            raise ConfigError("super.users", str(e)) from None
        allow_if_no_acl = bool(config.get("allow.everyone.if.no.acl.found"))
        return cls(acls, super_users, allow_if_no_acl, enabled=bool(class_name))

    def core(self) -> StandardAuthorizer:
        """The rules over the image's ACLs as they are now (indexed again only when they changed)."""
        acls = self._acls()
        key = _fingerprint(acls)
        if key != self._key:
            self._core = StandardAuthorizer(acls.values(), self.super_users,
                                            self.allow_everyone_if_no_acl_found)
            self._key, self._held = key, acls
        return self._core

    def authorize(self, ctx: RequestContext, operation: int, resource_type: int, name: str,
                  log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
        """May the request's principal, from its address, perform the operation on the literal
        resource. Logged as the module doc says."""
        if not self.enabled:
            return True
        core = self.core()
        principal, host = str(ctx.principal), ctx.client_address
        allowed_level = logging.DEBUG if log_if_allowed else TRACE
        if AUDIT_LOG.isEnabledFor(allowed_level):
            decision = core.decide(principal, host, operation, resource_type, name)
        else:
            if core.authorize(principal, host, operation, resource_type, name):
                return True
            if not AUDIT_LOG.isEnabledFor(logging.INFO if log_if_denied else TRACE):
                return False
            decision = core.decide(principal, host, operation, resource_type, name)
        if decision.allowed:
            _audit(allowed_level, decision, ctx, operation, resource_type, name)
        else:
            _audit(logging.INFO if log_if_denied else TRACE, decision, ctx, operation, resource_type, name)
        return decision.allowed

    def filter(self, ctx: RequestContext, operation: int, resource_type: int, names: Iterable[str],
               log_if_allowed: bool = True, log_if_denied: bool = True) -> set[str]:
        """The names the principal may perform the operation on (Kafka's filterByAuthorized)."""
        distinct = set(names)
        if not self.enabled:
            return distinct
        return {name for name in distinct
                if self.authorize(ctx, operation, resource_type, name, log_if_allowed, log_if_denied)}

    def authorize_any(self, ctx: RequestContext, operation: int, resource_type: int) -> bool:
        """May the principal perform the operation on some resource of the type (Kafka's
        authorizeByResourceType)."""
        if not self.enabled:
            return True
        return self.core().authorize_by_resource_type(str(ctx.principal), ctx.client_address, operation,
                                                      resource_type)

    def authorized_operations(self, ctx: RequestContext, resource_type: int, name: str) -> int:
        """The bit set of the operations the principal may perform on the resource, of those its
        type supports (Kafka's AuthHelper.authorizedOperations; checks logged at TRACE)."""
        supported = SUPPORTED[resource_type]
        if not self.enabled:
            return bit_set(supported)
        return bit_set({op for op in supported if self.authorize(ctx, op, resource_type, name, False, False)})


ALLOW_ALL = BrokerAuthorizer(lambda: {}, enabled=False)


def _audit(level: int, decision: Decision, ctx: RequestContext, operation: int, resource_type: int,
           name: str) -> None:
    """One line as Kafka's StandardAuthorizerData.buildAuditMessage writes it."""
    if not AUDIT_LOG.isEnabledFor(level):
        return
    AUDIT_LOG.log(level, "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s "
                  "for request = %s with resourceRefCount = 1 based on rule %s",
                  ctx.principal, "Allowed" if decision.allowed else "Denied",
                  OPERATION_NAMES.get(operation, operation), ctx.client_address,
                  RESOURCE_TYPE_NAMES.get(resource_type, resource_type), PATTERN_TYPE_NAMES[LITERAL], name,
                  API_NAMES.get(ctx.api_key, ctx.api_key), decision.describe_rule())
