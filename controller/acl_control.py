"""ACLs: CreateAcls, DeleteAcls and DescribeAcls, as Kafka's AclControlManager decides them.

CreateAcls takes each ACL on its own: one that is invalid (metadata.acls.check_new_acl: a
resource type, pattern type, operation or permission that is ANY or unknown, a pattern other
than LITERAL or PREFIXED, an empty name, a CLUSTER resource not named ``kafka-cluster``, a
principal not of the form ``Type:name``) gets INVALID_REQUEST with Kafka's message; one that
already exists (the same binding, whatever its id) or comes twice in the request is written
once and answers success every time. Each new ACL gets a fresh id from ``new_id`` (the shell's
randomness), drawn again while it collides with an ACL's.

DeleteAcls takes each filter on its own: an unknown field fails that filter (INVALID_REQUEST);
otherwise it answers every ACL it matches (metadata.acls.AclFilter), and each matched ACL is
removed once, however many filters match it.

No request writes more than MAX_RECORDS_PER_USER_OP records (Kafka's bound, one metadata
batch): past it the whole request fails with POLICY_VIOLATION and nothing is written.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable

from controller.result import ControllerResult
from metadata.acls import AclFilter, InvalidAcl, check_new_acl, describe_acls
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error

MAX_RECORDS_PER_USER_OP = 10000
TOO_LARGE = "Unable to perform excessively large batch operation."


def _binding(acl) -> tuple:
    return (acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal, acl.host, acl.operation,
            acl.permission_type)


class AclControl:
    def __init__(self, new_id: Callable[[], uuid.UUID]):
        self.new_id = new_id

    def create_acls(self, image: MetadataImage, req) -> ControllerResult:
        R = M.CreateAclsResponse
        existing = {_binding(a) for a in image.acls.values()}
        taken = set(image.acls)
        results, records = [], []
        for c in req.creations:
            try:
                check_new_acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                              c.operation, c.permission_type)
            except InvalidAcl as e:
                results.append(R.AclCreationResult(error_code=Error.INVALID_REQUEST, error_message=str(e)))
                continue
            binding = (c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                       c.operation, c.permission_type)
            if binding not in existing:
                existing.add(binding)
                acl_id = self.new_id()
                while acl_id in taken:
                    acl_id = self.new_id()
                taken.add(acl_id)
                records.append(M.AccessControlEntryRecord(
                    id=acl_id.bytes, resource_type=c.resource_type, resource_name=c.resource_name,
                    pattern_type=c.resource_pattern_type, principal=c.principal, host=c.host,
                    operation=c.operation, permission_type=c.permission_type))
            results.append(R.AclCreationResult(error_code=Error.NONE, error_message=None))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult([], R(results=[
                R.AclCreationResult(error_code=Error.POLICY_VIOLATION, error_message=TOO_LARGE)
                for _ in req.creations]))
        return ControllerResult(records, R(results=results))

    def delete_acls(self, image: MetadataImage, req) -> ControllerResult:
        R = M.DeleteAclsResponse
        Matching = R.DeleteAclsFilterResult.DeleteAclsMatchingAcl
        removed: dict[uuid.UUID, None] = {}  # in the order first matched
        results = []
        for f in req.filters:
            acl_filter = AclFilter.of(f)
            try:
                acl_filter.check()
            except InvalidAcl as e:
                results.append(R.DeleteAclsFilterResult(error_code=Error.INVALID_REQUEST,
                                                        error_message=str(e)))
                continue
            matched = [a for a in image.acls.values() if acl_filter.matches(a)]
            removed.update(dict.fromkeys(a.id for a in matched))
            results.append(R.DeleteAclsFilterResult(error_code=Error.NONE, error_message=None, matching_acls=[
                Matching(error_code=Error.NONE, error_message=None, resource_type=a.resource_type,
                         resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                         host=a.host, operation=a.operation, permission_type=a.permission_type)
                for a in matched]))
        if len(removed) > MAX_RECORDS_PER_USER_OP:
            message = f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation."
            return ControllerResult([], R(filter_results=[
                R.DeleteAclsFilterResult(error_code=Error.POLICY_VIOLATION, error_message=message)
                for _ in req.filters]))
        return ControllerResult([M.RemoveAccessControlEntryRecord(id=acl_id.bytes) for acl_id in removed],
                                R(filter_results=results))

    @staticmethod
    def describe_acls(image: MetadataImage, req):
        return describe_acls(image.acls.values(), req)
