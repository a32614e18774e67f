"""Authorized operations: what a principal may do to a resource, as the bit sets that Metadata
(v8+), DescribeCluster and DescribeGroups return when a client asks for them
(``include_*_authorized_operations``).

A bit set has bit ``code`` set for each ACL operation allowed, by Kafka's AclOperation codes
(UNKNOWN 0, ANY 1 and ALL 2 are never set). With no authorizer, which is all Strom runs today,
a principal may perform every operation the resource type supports (Kafka's
``AuthHelper.authorizedOperations`` without an authorizer, over ``AclEntry.supportedOperations``
of Kafka 4.x, where a group also has DESCRIBE_CONFIGS and ALTER_CONFIGS for KIP-848's group
configs). An authorizer, once there is one, narrows the set per principal here.

A request that did not ask gets ``NOT_REQUESTED`` (INT32_MIN), the schemas' default.
"""
from __future__ import annotations

# Kafka's AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14

# Kafka's ResourceType codes
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7

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


def bit_set(operations: frozenset[int] | set[int]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    bits = 0
    for code in operations:
        bits |= 1 << code
    return bits


def authorized_operations(resource_type: int, resource_name: str = "") -> int:
    """The bit set of operations the requesting principal may perform on the resource. With no
    authorizer: every operation its type supports, whatever the name."""
    return bit_set(SUPPORTED[resource_type])
