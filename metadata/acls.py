"""ACL bindings and the filters that select them, as Kafka's AclBinding and AclBindingFilter
(ResourcePatternFilter + AccessControlEntryFilter): what CreateAcls checks before an ACL is
written, and what DescribeAcls and DeleteAcls match against the image's ACLs.

A filter matches an ACL when every one of its fields does:

| filter field    | matches                                                                  |
|-----------------|--------------------------------------------------------------------------|
| resource type   | ANY, or the ACL's type                                                   |
| pattern type    | ANY: any pattern; MATCH: see below; LITERAL / PREFIXED: that pattern only |
| resource name   | null: any; with ANY or the ACL's own pattern type: the same name;        |
|                 | with MATCH: a LITERAL ACL of that name or of ``*``, or a PREFIXED ACL     |
|                 | whose prefix starts the name (the ACLs that would apply to that resource) |
| principal, host | null: any; else the same string                                          |
| operation       | ANY, or the ACL's operation                                              |
| permission type | ANY, or the ACL's permission                                             |

A code Kafka does not know (0 is UNKNOWN; any code past the last is read as UNKNOWN too) makes
the filter or the ACL invalid: INVALID_REQUEST.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from metadata.security import (
    ALLOW,
    ANY_RESOURCE,
    CLUSTER,
    CLUSTER_NAME,
    DENY,
    DESCRIBE_TOKENS,
    LITERAL,
    OP_ANY,
    PATTERN_ANY,
    PATTERN_MATCH,
    PERMISSION_ANY,
    PREFIXED,
    USER,
    WILDCARD,
    AclEntry,
)
from protocol import messages as M
from protocol.errors import Error

# The codes Kafka defines (0 is UNKNOWN in each).
RESOURCE_TYPES = range(ANY_RESOURCE, USER + 1)
PATTERN_TYPES = range(PATTERN_ANY, PREFIXED + 1)
OPERATIONS = range(OP_ANY, DESCRIBE_TOKENS + 1)
PERMISSION_TYPES = range(PERMISSION_ANY, ALLOW + 1)

RESOURCE_TYPE_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                       6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPE_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATION_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
                   7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS",
                   11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
PERMISSION_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}


def _name(names: dict[int, str], code: int) -> str:
    return names.get(code, "UNKNOWN")


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def check_principal(principal: str) -> None:
    """Kafka's SecurityUtils.parseKafkaPrincipal: ``Type:name``, the type not empty."""
    kind, sep, _name_ = principal.partition(":")
    if not sep or not kind:
        raise InvalidAcl(f"expected a string in format principalType:principalName but got {principal}")


def check_new_acl(resource_type: int, name: str, pattern_type: int, principal: str, operation: int,
                  permission_type: int) -> None:
    """What an ACL must be to be created (Kafka's AclApis, then AclControlManager.validateNewAcl,
    then its principal parsed): raises InvalidAcl."""
    if resource_type == CLUSTER and name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not name:
        raise InvalidAcl("Invalid empty resource name")
    if resource_type not in RESOURCE_TYPES or resource_type == ANY_RESOURCE:
        raise InvalidAcl(f"Invalid resourceType {_name(RESOURCE_TYPE_NAMES, resource_type)}")
    if pattern_type not in (LITERAL, PREFIXED):
        raise InvalidAcl(f"Invalid patternType {_name(PATTERN_TYPE_NAMES, pattern_type)}")
    if operation not in OPERATIONS or operation == OP_ANY:
        raise InvalidAcl(f"Invalid operation {_name(OPERATION_NAMES, operation)}")
    if permission_type not in (DENY, ALLOW):
        raise InvalidAcl(f"Invalid permissionType {_name(PERMISSION_NAMES, permission_type)}")
    check_principal(principal)


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter (see the module doc)."""
    resource_type: int = ANY_RESOURCE
    resource_name: str | None = None
    pattern_type: int = LITERAL
    principal: str | None = None
    host: str | None = None
    operation: int = OP_ANY
    permission_type: int = PERMISSION_ANY

    @classmethod
    def of(cls, f) -> AclFilter:
        """From a DescribeAclsRequest or a DeleteAclsRequest.DeleteAclsFilter."""
        return cls(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                   f.host_filter, f.operation, f.permission_type)

    def check(self) -> None:
        """Kafka's AclControlManager.validateFilter: no UNKNOWN field (raises InvalidAcl)."""
        if self.resource_type not in RESOURCE_TYPES or self.pattern_type not in PATTERN_TYPES:
            raise InvalidAcl("Unknown patternFilter.")
        if self.operation not in OPERATIONS or self.permission_type not in PERMISSION_TYPES:
            raise InvalidAcl("Unknown entryFilter.")

    def matches(self, acl: AclEntry) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclEntry) -> bool:
        if self.resource_type != ANY_RESOURCE and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PATTERN_ANY, PATTERN_MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type == PATTERN_ANY or self.pattern_type == acl.pattern_type:
            return self.resource_name == acl.resource_name
        # MATCH: the ACLs that apply to the resource named.
        if acl.pattern_type == LITERAL:
            return self.resource_name == acl.resource_name or acl.resource_name == WILDCARD
        return acl.pattern_type == PREFIXED and self.resource_name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclEntry) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != OP_ANY and self.operation != acl.operation:
            return False
        return self.permission_type == PERMISSION_ANY or self.permission_type == acl.permission_type


def describe_acls(acls: Iterable[AclEntry], req) -> Any:
    """A DescribeAclsResponse from ``acls`` for a DescribeAclsRequest: the matching ACLs grouped
    by resource pattern (Kafka's DescribeAclsResponse.aclsResources); INVALID_REQUEST for a
    filter with an unknown field."""
    R = M.DescribeAclsResponse
    acl_filter = AclFilter.of(req)
    try:
        acl_filter.check()
    except InvalidAcl as e:
        return R(error_code=Error.INVALID_REQUEST, error_message=str(e))
    by_pattern: dict[tuple[int, str, int], list] = {}
    for acl in acls:
        if acl_filter.matches(acl):
            by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                R.DescribeAclsResource.AclDescription(principal=acl.principal, host=acl.host,
                                                      operation=acl.operation,
                                                      permission_type=acl.permission_type))
    return R(error_code=Error.NONE, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=entries)
        for (t, n, p), entries in sorted(by_pattern.items())])
