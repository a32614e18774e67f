"""The StandardAuthorizer's rules: may a principal, from a host, perform an operation on a
resource, given the ACLs the metadata log holds (Kafka 4.x's StandardAuthorizerData).

Theory of operation. An ACL names a resource pattern (a type; a name; LITERAL, where the name
``*`` matches every resource of the type, or PREFIXED, matching every name that starts with
it), a principal (``User:alice``, or ``User:*`` for every principal), a host (an address, or
``*``), an operation and ALLOW or DENY. To authorize an action (operation, resource type,
literal resource name) for a principal from a host:

1. A super user (``super.users``, compared as ``Type:name``) is allowed everything, ACLs or not.
2. The ACLs whose pattern matches the resource are collected: the literal one of that exact
   name, the literal wildcard ``*`` and every prefix of the name that has PREFIXED ACLs.
3. Of those, an ACL applies when its principal is the requester's or ``User:*``, its host is
   the client's address or ``*``, and its operation is the action's or ALL, or, for an ALLOW
   ACL only, one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE;
   ALTER_CONFIGS implies DESCRIBE_CONFIGS. (A DENY of READ does not deny DESCRIBE.)
4. Any applying DENY denies; else any applying ALLOW allows; else, when no ACL matched the
   resource at all (step 2 found none, whoever they name), the default decides
   (``allow.everyone.if.no.acl.found``); else the action is denied.

``authorize_by_resource_type`` answers whether the principal may perform the operation on some
resource of a type (Kafka's ``Authorizer.authorizeByResourceType``, used to let an idempotent
or transactional producer in without naming a transactional id): allowed if the action on an
arbitrary name is, else if an applying ALLOW (exact operation or ALL, no implication) names a
literal or prefix that no applying DENY covers (a DENY of the same literal, or of a prefix of
it; a literal wildcard DENY denies the whole type).

Performance: Produce and Fetch authorize every request, so ``StandardAuthorizer`` indexes its
ACLs once, when it is built (by resource type: literal name -> ACLs, prefix -> ACLs, and the
distinct prefix lengths present), and a lookup costs one dict probe for the literal name, one
for ``*`` and one per distinct prefix length. The set of ACLs changes rarely: build a new one
then (``AclAuthorizer`` does, when the image's ACLs change).

``AclAuthorizer`` is what a node's request handlers ask, brokers' and controllers' alike: these
rules over a metadata image's ACLs, asked with a request's context (its principal and client
address), built from the node's config (``authorizer.class.name``, ``super.users``,
``allow.everyone.if.no.acl.found``), and logged as Kafka's audit log. broker/authorizer.py
wraps it for the broker's handlers; controller/authorization.py puts it in front of every API a
controller serves (``controller_rule``).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata import acls as acl_codes
from metadata.security import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY_RESOURCE,
    CLUSTER,
    CLUSTER_ACTION,
    CREATE,
    CREATE_TOKENS,
    DELEGATION_TOKEN,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    DESCRIBE_TOKENS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    OP_ANY,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    USER,
    WILDCARD,
    WRITE,
    AclEntry,
)
from protocol.context import RequestContext
from protocol.messages import API_NAMES

WILDCARD_PRINCIPAL = "User:*"

# ``authorizer.class.name`` values that select these rules: Kafka's class, and a short name.
STANDARD_AUTHORIZER_NAMES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                       "StandardAuthorizer"})

# The operations an ALLOW ACL of each operation grants besides itself.
IMPLIED_BY: dict[int, frozenset[int]] = {
    DESCRIBE: frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER}),
    DESCRIBE_CONFIGS: frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS}),
}

# Names as Kafka's audit log writes them (SecurityUtils.resourceTypeName, AclOperation.name()).
RESOURCE_TYPE_NAMES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster",
                       TRANSACTIONAL_ID: "TransactionalId", DELEGATION_TOKEN: "DelegationToken", USER: "User"}
# The operations an ACL can name (ALL to DESCRIBE_TOKENS), the patterns and the permissions an
# ACL has, with metadata/acls.py's names (Kafka's enum names).
OPERATION_NAMES = {code: name for code, name in acl_codes.OPERATION_NAMES.items() if code >= ALL}
PATTERN_TYPE_NAMES = {code: acl_codes.PATTERN_TYPE_NAMES[code] for code in (LITERAL, PREFIXED)}
PERMISSION_NAMES = {code: acl_codes.PERMISSION_NAMES[code] for code in (ALLOW, DENY)}


@dataclass(frozen=True)
class Decision:
    """An authorization's result and the rule that decided it: ``SuperUser``, ``DefaultAllow``,
    ``DefaultDeny`` (ACLs matched the resource but none applied, or none did and the default
    denies), or the ACL that applied."""
    allowed: bool
    rule: str | AclEntry

    def describe_rule(self) -> str:
        if isinstance(self.rule, str):
            return self.rule
        return f"MatchingAcl(acl={describe_acl(self.rule)})"


SUPER_USER = Decision(True, "SuperUser")
DEFAULT_ALLOW = Decision(True, "DefaultAllow")
DEFAULT_DENY = Decision(False, "DefaultDeny")


def describe_acl(acl: AclEntry) -> str:
    return (f"StandardAcl(resourceType={RESOURCE_TYPE_NAMES.get(acl.resource_type, acl.resource_type)}, "
            f"resourceName={acl.resource_name}, "
            f"patternType={PATTERN_TYPE_NAMES.get(acl.pattern_type, acl.pattern_type)}, "
            f"principal={acl.principal}, host={acl.host}, "
            f"op={OPERATION_NAMES.get(acl.operation, acl.operation)}, "
            f"permissionType={PERMISSION_NAMES.get(acl.permission_type, acl.permission_type)})")


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:alice;User:bob``), each of
    the form Type:name; ValueError naming the bad one."""
    out = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if not item:
            continue
        kind, sep, _ = item.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected principals of the form Type:name separated by ';', got {item!r}")
        out.add(item)
    return frozenset(out)


def applies(acl: AclEntry, principal: str, host: str, operation: int) -> bool:
    """Whether an ACL whose pattern matches the resource applies to this principal, host and
    operation (rule 3 of the module doc)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == ALL or acl.operation == operation:
        return True
    if acl.permission_type == ALLOW:
        implied = IMPLIED_BY.get(operation)
        return implied is not None and acl.operation in implied
    return False


class _TypeIndex:
    """One resource type's ACLs: by literal name (``*`` included), by prefix, and the distinct
    prefix lengths, longest first."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "acls")

    def __init__(self) -> None:
        self.literal: dict[str, list[AclEntry]] = {}
        self.prefixed: dict[str, list[AclEntry]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self.acls: list[AclEntry] = []


class StandardAuthorizer:
    """The rules of the module doc over one set of ACLs, with ``super.users`` and
    ``allow.everyone.if.no.acl.found``. Immutable: build a new one when the ACLs change."""

    def __init__(self, acls: Iterable[AclEntry], super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._no_acl = DEFAULT_ALLOW if allow_everyone_if_no_acl_found else DEFAULT_DENY
        self._types: dict[int, _TypeIndex] = {}
        count = 0
        for acl in acls:
            count += 1
            index = self._types.get(acl.resource_type)
            if index is None:
                index = self._types[acl.resource_type] = _TypeIndex()
            index.acls.append(acl)
            table = index.prefixed if acl.pattern_type == PREFIXED else index.literal
            table.setdefault(acl.resource_name, []).append(acl)
        for index in self._types.values():
            index.prefix_lengths = tuple(sorted({len(p) for p in index.prefixed}, reverse=True))
        self.acl_count = count

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def matching_acls(self, resource_type: int, name: str) -> list[AclEntry]:
        """The ACLs whose resource pattern matches a literal resource (rule 2), whoever they name."""
        index = self._types.get(resource_type)
        if index is None:
            return []
        out: list[AclEntry] = []
        found = index.literal.get(name)
        if found:
            out.extend(found)
        if name != WILDCARD:
            found = index.literal.get(WILDCARD)
            if found:
                out.extend(found)
        prefixed = index.prefixed
        size = len(name)
        for length in index.prefix_lengths:
            if length <= size:
                found = prefixed.get(name[:length])
                if found:
                    out.extend(found)
        return out

    def decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> Decision:
        """The decision for an action on a literal resource, and the rule that made it."""
        if principal in self.super_users:
            return SUPER_USER
        matching = self.matching_acls(resource_type, name)
        if not matching:
            return self._no_acl
        allow = None
        for acl in matching:
            if applies(acl, principal, host, operation):
                if acl.permission_type == DENY:
                    return Decision(False, acl)
                if acl.permission_type == ALLOW and allow is None:
                    allow = acl
        if allow is not None:
            return Decision(True, allow)
        return DEFAULT_DENY

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """``decide(...).allowed``, without building a Decision on the common paths."""
        if principal in self.super_users:
            return True
        matching = self.matching_acls(resource_type, name)
        if not matching:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for acl in matching:
            if applies(acl, principal, host, operation):
                if acl.permission_type == DENY:
                    return False
                if acl.permission_type == ALLOW:
                    allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: int,
                                   resource_type: int) -> bool:
        """Whether the principal may perform the operation on some resource of the type (the
        module doc; Kafka's Authorizer.authorizeByResourceType)."""
        if resource_type == ANY_RESOURCE or resource_type not in RESOURCE_TYPE_NAMES:
            raise ValueError(f"authorize_by_resource_type needs a resource type, got {resource_type}")
        if operation == OP_ANY or operation not in OPERATION_NAMES:
            raise ValueError(f"authorize_by_resource_type needs an operation, got {operation}")
        # Kafka checks an arbitrary literal name first, so that a super user (and the default,
        # where nothing names that resource) is allowed whatever DENY ACLs say.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        index = self._types.get(resource_type)
        if index is None:
            return False
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for acl in index.acls:
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation != ALL:
                continue
            literal = acl.pattern_type == LITERAL
            if acl.permission_type == DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif acl.permission_type == ALLOW:
                if literal and acl.resource_name == WILDCARD:
                    wildcard_allow = True  # a wildcard DENY later in the set still wins
                    continue
                (allow_literal if literal else allow_prefixed).add(acl.resource_name)
        if wildcard_allow:
            return True
        for name in allow_literal:
            if name not in deny_literal and not _has_denied_prefix(name, deny_prefixed):
                return True
        for name in allow_prefixed:
            if not _has_denied_prefix(name, deny_prefixed):
                return True
        return False


def _has_denied_prefix(name: str, deny_prefixed: set[str]) -> bool:
    """Whether a non-empty prefix of ``name`` (``name`` itself included) is a denied prefix."""
    return any(name[:i] in deny_prefixed for i in range(1, len(name) + 1))


@dataclass(frozen=True)
class ControllerRule:
    """What Kafka's controller (ControllerApis) checks before serving an API.

    ``cluster_operation``: the operation the principal needs on the cluster for the whole
    request (else the request is answered CLUSTER_AUTHORIZATION_FAILED); None when nothing is
    needed or the checks are per resource. ``per_resource``: (operation, resource type) pairs
    checked per named resource, each failing alone with that type's *_AUTHORIZATION_FAILED;
    ``note`` says how they combine."""
    cluster_operation: int | None = None
    per_resource: tuple[tuple[int, int], ...] = ()
    note: str = ""


_CLUSTER_ACTION = ControllerRule(CLUSTER_ACTION)
_ALTER = ControllerRule(ALTER)
_DESCRIBE = ControllerRule(DESCRIBE)

# Kafka's ControllerApis, by API name. A request of an API the controller serves that is not
# listed here needs nothing (ApiVersions, SaslHandshake, SaslAuthenticate).
CONTROLLER_RULES: dict[str, ControllerRule] = {
    # What brokers and controllers send each other: CLUSTER_ACTION on the cluster.
    "Envelope": _CLUSTER_ACTION,
    "Fetch": _CLUSTER_ACTION,  # the metadata log's replication
    "FetchSnapshot": _CLUSTER_ACTION,
    "Vote": _CLUSTER_ACTION,
    "BeginQuorumEpoch": _CLUSTER_ACTION,
    "EndQuorumEpoch": _CLUSTER_ACTION,
    "UpdateRaftVoter": _CLUSTER_ACTION,
    "BrokerRegistration": _CLUSTER_ACTION,
    "BrokerHeartbeat": _CLUSTER_ACTION,
    "ControllerRegistration": _CLUSTER_ACTION,
    "AlterPartition": _CLUSTER_ACTION,
    "AllocateProducerIds": _CLUSTER_ACTION,
    "AssignReplicasToDirs": _CLUSTER_ACTION,
    # Administration of the cluster.
    "DescribeQuorum": _DESCRIBE,
    "ListPartitionReassignments": _DESCRIBE,
    "DescribeAcls": _DESCRIBE,
    # Kafka's controllers do not serve it; Strom's do, with the brokers' rule (KafkaApis).
    "DescribeUserScramCredentials": _DESCRIBE,
    "CreateAcls": _ALTER,
    "DeleteAcls": _ALTER,
    "ElectLeaders": _ALTER,
    "UnregisterBroker": _ALTER,
    "AlterPartitionReassignments": _ALTER,
    "AlterUserScramCredentials": _ALTER,
    "UpdateFeatures": _ALTER,
    "AddRaftVoter": _ALTER,
    "RemoveRaftVoter": _ALTER,
    # Unlike a broker, a controller answers DescribeCluster only to ALTER on the cluster.
    "DescribeCluster": _ALTER,
    "AlterClientQuotas": ControllerRule(ALTER_CONFIGS),
    # Per resource.
    "CreateTopics": ControllerRule(None, ((CREATE, TOPIC), (DESCRIBE_CONFIGS, TOPIC)),
                                   "CREATE on the cluster allows every topic, else CREATE on each topic "
                                   "(TOPIC_AUTHORIZATION_FAILED); the topic's configs are returned only "
                                   "with DESCRIBE_CONFIGS on it (TOPIC_AUTHORIZATION_FAILED in "
                                   "topic_config_error_code)"),
    "DeleteTopics": ControllerRule(None, ((DESCRIBE, TOPIC), (DELETE, TOPIC)),
                                   "DELETE on the cluster allows every topic, else DESCRIBE (a topic id "
                                   "named without it: TOPIC_AUTHORIZATION_FAILED) and DELETE on each "
                                   "topic (TOPIC_AUTHORIZATION_FAILED)"),
    "CreatePartitions": ControllerRule(None, ((ALTER, TOPIC),), "ALTER on each topic"),
    "IncrementalAlterConfigs": ControllerRule(None, ((ALTER_CONFIGS, CLUSTER), (ALTER_CONFIGS, TOPIC),
                                                     (ALTER_CONFIGS, GROUP)),
                                              "ALTER_CONFIGS on the cluster for a broker (or client "
                                              "metrics) resource, on the topic for a topic, on the "
                                              "group for a group; a broker logger needs CLUSTER_ACTION "
                                              "on the cluster"),
    "AlterConfigs": ControllerRule(None, ((ALTER_CONFIGS, CLUSTER), (ALTER_CONFIGS, TOPIC),
                                          (ALTER_CONFIGS, GROUP)), "as IncrementalAlterConfigs"),
    "DescribeConfigs": ControllerRule(None, ((DESCRIBE_CONFIGS, CLUSTER), (DESCRIBE_CONFIGS, TOPIC),
                                             (DESCRIBE_CONFIGS, GROUP)),
                                      "DESCRIBE_CONFIGS on the cluster for a broker or broker logger "
                                      "resource (CLUSTER_AUTHORIZATION_FAILED), on the topic for a topic "
                                      "(TOPIC_AUTHORIZATION_FAILED), on the group for a group, per item"),
}
NO_CHECK = ControllerRule()


def controller_rule(api_name: str) -> ControllerRule:
    """What the controller checks before serving an API, by Kafka's API name (``BrokerHeartbeat``)."""
    return CONTROLLER_RULES.get(api_name, NO_CHECK)


# ---- the authorizer a node's handlers ask ---------------------------------------------------

# The operations each resource type supports (Kafka 4.x's AclEntry.supportedOperations, where a
# group also has DESCRIBE_CONFIGS and ALTER_CONFIGS for KIP-848's group configs): the bits of
# an authorized-operations set.
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


class AuthorizerConfigError(ValueError):
    """A bad authorizer setting; ``name`` is the property."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def bit_set(operations: frozenset[int] | set[int]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    bits = 0
    for code in operations:
        bits |= 1 << code
    return bits


def _fingerprint(acls: Mapping[uuid.UUID, AclEntry]) -> tuple[Any, ...]:
    """Changes whenever the set of ACLs does: ACL ids are unique and an entry under an id never
    changes, so a dict that gained, lost or swapped entries changes its size or its last
    inserted id, whether it was replaced or changed in place."""
    if isinstance(acls, dict):
        return id(acls), len(acls), next(reversed(acls), None)
    return id(acls), frozenset(acls)


class AclAuthorizer:
    """The StandardAuthorizer over a metadata image's ACLs, asked with a request's context.

    ``acls`` is called at each question for the image's ACLs as they are now; the rules are
    indexed again only when that set changed (``_fingerprint``). ``enabled`` False (no
    ``authorizer.class.name``): everything is allowed, as Kafka without an authorizer.

    Decisions go to the logger ``kafka.authorizer.logger``, as Kafka's audit log: a denial of
    something the request asked for at INFO, an allow at DEBUG, the checks behind
    authorized-operation bit sets and filters at TRACE (level 5)."""

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
    def settings(cls, config: Any) -> tuple[bool, frozenset[str], bool]:
        """(enabled, super users, allow.everyone.if.no.acl.found) from a node's config;
        AuthorizerConfigError naming the property for a class other than the
        StandardAuthorizer or a super user not of the form Type:name."""
        class_name = (config.get("authorizer.class.name") or "").strip()
        if class_name and class_name not in STANDARD_AUTHORIZER_NAMES:
            raise AuthorizerConfigError(
                "authorizer.class.name", f"unknown authorizer {class_name!r}: Strom runs "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer, or none (empty)")
        try:
            super_users = parse_super_users(config.get("super.users"))
        except ValueError as e:
            raise AuthorizerConfigError("super.users", str(e)) from None
        return bool(class_name), super_users, bool(config.get("allow.everyone.if.no.acl.found"))

    @classmethod
    def from_config(cls, config: Any, acls: Callable[[], Mapping[uuid.UUID, AclEntry]]) -> Any:
        """From ``authorizer.class.name``, ``super.users`` and ``allow.everyone.if.no.acl.found``
        (``settings``) over the image's ACLs."""
        enabled, super_users, allow_if_no_acl = cls.settings(config)
        return cls(acls, super_users, allow_if_no_acl, enabled=enabled)

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
        resource. Logged as the class doc says."""
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
