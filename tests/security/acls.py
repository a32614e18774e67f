"""ACL builders the authorization tests share: an ACL entry (``acl``) and the id -> entry map an
image or an authorizer holds (``acls``)."""
from __future__ import annotations

import uuid

from metadata.security import ALLOW, LITERAL, AclEntry

ALICE = "User:alice"


def acl(resource_type: int, name: str, operation: int, permission: int = ALLOW, pattern: int = LITERAL,
        principal: str = ALICE, host: str = "*") -> AclEntry:
    """An ACL with a fresh id: ``principal`` from ``host`` may (ALLOW) or may not (DENY) do
    ``operation`` on the resource ``name`` of ``resource_type`` (LITERAL, or PREFIXED)."""
    return AclEntry(uuid.uuid4(), resource_type, name, pattern, principal, host, operation, permission)


def acls(*entries: AclEntry) -> dict[uuid.UUID, AclEntry]:
    """The entries by id, as a metadata image holds them."""
    return {e.id: e for e in entries}
