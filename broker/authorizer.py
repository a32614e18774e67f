"""The broker's authorizer: may the principal of a request do this to that resource.

``BrokerAuthorizer`` is security/authorizer.py's ``AclAuthorizer`` (the StandardAuthorizer over
the metadata image's ACLs, asked with a request's context; the controller runs the same one),
for the broker's request handlers. It is built from the node's config (``from_config``):

- ``authorizer.class.name``: empty (Kafka's default), no authorizer: everything is allowed, as
  Kafka without one; ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (or the short
  ``StandardAuthorizer``): the StandardAuthorizer over the ACLs of the metadata log; any other
  class stops startup naming the property.
- ``super.users``: principals separated by ``;`` allowed everything.
- ``allow.everyone.if.no.acl.found`` (false): the answer for a resource no ACL names.

Decisions are written to the logger ``kafka.authorizer.logger``, as Kafka's audit log: a
denial of something the request asked for at INFO, an allow at DEBUG, the checks behind
authorized-operation bit sets and filters at TRACE (level 5); turn the logger up to see them.

Authorized operations: the bit sets that Metadata (v8+), DescribeCluster and DescribeGroups
return when a client asks for them (``include_*_authorized_operations``), bit ``code`` set for
each operation allowed, by Kafka's AclOperation codes (UNKNOWN 0, ANY 1 and ALL 2 are never
set), over the operations each resource type supports (``SUPPORTED``). A request that did not
ask gets ``NOT_REQUESTED`` (INT32_MIN), the schemas' default.
``BrokerAuthorizer.authorized_operations`` answers per principal; ``ALLOW_ALL`` (no authorizer)
with every operation the resource type supports.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from engine.errors import ConfigError
from metadata.security import AclEntry
from security.authorizer import SUPPORTED, AclAuthorizer, AuthorizerConfigError, bit_set

__all__ = ["ALLOW_ALL", "NOT_REQUESTED", "SUPPORTED", "BrokerAuthorizer", "bit_set"]

NOT_REQUESTED = -2**31


class BrokerAuthorizer(AclAuthorizer):
    """The StandardAuthorizer over the broker's image's ACLs (security/authorizer.py's
    ``AclAuthorizer``); ``from_config`` stops startup with a ConfigError naming the property."""

    @classmethod
    def from_config(cls, config: Any, acls: Callable[[], Mapping[uuid.UUID, AclEntry]]) -> BrokerAuthorizer:
        try:
            enabled, super_users, allow_if_no_acl = cls.settings(config)
        except AuthorizerConfigError as e:
            raise ConfigError(e.name, e.message) from None
        return cls(acls, super_users, allow_if_no_acl, enabled=enabled)


ALLOW_ALL = BrokerAuthorizer(lambda: {}, enabled=False)
