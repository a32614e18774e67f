"""The security state the metadata log holds: ACL entries and SCRAM credentials, as Kafka's
AclsImage and ScramImage hold them, and the codes Kafka's admin protocol uses for them.

An ACL entry (AccessControlEntryRecord, removed by RemoveAccessControlEntryRecord naming its
id): a resource pattern (type, name, LITERAL or PREFIXED), a principal (``User:alice``, or
``User:*`` for every one), a host (``*`` for any), an operation and ALLOW or DENY. Principal
and host are kept as strings, as Kafka's StandardAcl keeps them.

A SCRAM credential (UserScramCredentialRecord, removed by RemoveUserScramCredentialRecord): a
user's salt, stored key, server key and iteration count for one mechanism (RFC 5802); never the
password.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

# Kafka's ResourceType codes.
ANY_RESOURCE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7

# Kafka's PatternType codes: ANY and MATCH only in filters.
PATTERN_ANY, PATTERN_MATCH, LITERAL, PREFIXED = 1, 2, 3, 4

# Kafka's AclPermissionType codes: ANY only in filters.
PERMISSION_ANY, DENY, ALLOW = 1, 2, 3

# Kafka's AclOperation codes: ANY only in filters; ALL grants (or denies) every operation.
OP_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14

WILDCARD = "*"  # a resource name, principal name or host that matches every one
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name

# Kafka's ScramMechanism codes and names.
SCRAM_SHA_256, SCRAM_SHA_512 = 1, 2
SCRAM_MECHANISMS = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}


@dataclass(frozen=True)
class AclEntry:
    """One ACL (AccessControlEntryRecord's fields)."""
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one mechanism (UserScramCredentialRecord's fields)."""
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
