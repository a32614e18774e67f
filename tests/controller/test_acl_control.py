"""ACLs at the controller, as Kafka's AclControlManager decides them: CreateAcls validation and
de-duplication, DeleteAcls and DescribeAcls filters (ResourcePatternFilter's ANY and MATCH),
each ACL's id, and the bound on records per request."""
import itertools
import uuid

import pytest

from controller import acl_control
from controller.acl_control import AclControl
from metadata.image import MetadataImage
from metadata.security import (
    ALL,
    ALLOW,
    ANY_RESOURCE,
    CLUSTER,
    CLUSTER_NAME,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    OP_ANY,
    PATTERN_ANY,
    PATTERN_MATCH,
    PERMISSION_ANY,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import decode_record, encode_record

C = M.CreateAclsRequest.AclCreation
F = M.DeleteAclsRequest.DeleteAclsFilter


class Acls:
    """An AclControl over an image; every result is committed through the record codec."""

    def __init__(self, ids=None):
        counter = itertools.count(1)
        self.ids = ids or (lambda: uuid.UUID(int=next(counter)))
        self.control = AclControl(lambda: self.ids())
        self.image = MetadataImage()
        self.offset = 0
        self.last_records = []

    def commit(self, result):
        self.last_records = result.records
        for record in result.records:
            self.image.replay(self.offset, decode_record(encode_record(record))[2])
            self.offset += 1
        return result.response

    def create(self, *creations):
        request = M.CreateAclsRequest(creations=list(creations))
        response = self.commit(self.control.create_acls(self.image, request))
        return [(r.error_code, r.error_message) for r in response.results]

    def delete(self, *filters):
        request = M.DeleteAclsRequest(filters=list(filters))
        response = self.commit(self.control.delete_acls(self.image, request))
        return response.filter_results

    def describe(self, **f):
        req = M.DescribeAclsRequest(**{**dict(resource_type_filter=ANY_RESOURCE, resource_name_filter=None,
                                              pattern_type_filter=PATTERN_ANY, principal_filter=None,
                                              host_filter=None, operation=OP_ANY,
                                              permission_type=PERMISSION_ANY), **f})
        return self.control.describe_acls(self.image, req)


def acl(resource_type=TOPIC, name="orders", pattern=LITERAL, principal="User:alice", host="*",
        operation=READ, permission=ALLOW):
    return C(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
             principal=principal, host=host, operation=operation, permission_type=permission)


def flt(resource_type=ANY_RESOURCE, name=None, pattern=PATTERN_ANY, principal=None, host=None,
        operation=OP_ANY, permission=PERMISSION_ANY):
    return F(resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
             principal_filter=principal, host_filter=host, operation=operation, permission_type=permission)


def bindings(acls: Acls):
    return sorted((a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                   a.permission_type) for a in acls.image.acls.values())


OK = (Error.NONE, None)


def test_create_acls_writes_each_acl_with_a_fresh_id():
    s = Acls()
    assert s.create(acl(), acl(GROUP, "app-", PREFIXED, "User:bob", "10.0.0.1", READ, DENY)) == [OK, OK]
    assert set(s.image.acls) == {uuid.UUID(int=1), uuid.UUID(int=2)}
    assert bindings(s) == [(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
                           (GROUP, "app-", PREFIXED, "User:bob", "10.0.0.1", READ, DENY)]


def test_a_duplicate_acl_is_not_created_twice_but_answers_success():
    s = Acls()
    assert s.create(acl(), acl()) == [OK, OK]
    assert len(s.last_records) == 1
    assert s.create(acl()) == [OK]
    assert s.last_records == []
    assert len(s.image.acls) == 1


def test_a_new_acl_id_that_collides_with_an_existing_one_is_drawn_again():
    drawn = iter([uuid.UUID(int=7), uuid.UUID(int=7), uuid.UUID(int=8)])
    s = Acls(ids=lambda: next(drawn))
    s.create(acl())
    s.create(acl(operation=WRITE))
    assert set(s.image.acls) == {uuid.UUID(int=7), uuid.UUID(int=8)}


@pytest.mark.parametrize("creation, message", [
    (acl(resource_type=ANY_RESOURCE), "Invalid resourceType ANY"),
    (acl(resource_type=0), "Invalid resourceType UNKNOWN"),
    (acl(pattern=PATTERN_MATCH), "Invalid patternType MATCH"),
    (acl(pattern=PATTERN_ANY), "Invalid patternType ANY"),
    (acl(operation=OP_ANY), "Invalid operation ANY"),
    (acl(operation=99), "Invalid operation UNKNOWN"),
    (acl(permission=PERMISSION_ANY), "Invalid permissionType ANY"),
    (acl(name=""), "Invalid empty resource name"),
    (acl(resource_type=CLUSTER, name="my-cluster"),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(principal="alice"), "expected a string in format principalType:principalName but got alice"),
])
def test_create_acls_refuses_an_invalid_acl_with_invalid_request_and_keeps_the_others(creation, message):
    s = Acls()
    assert s.create(acl(), creation, acl(TRANSACTIONAL_ID, "tx")) == [
        OK, (Error.INVALID_REQUEST, message), OK]
    assert len(s.image.acls) == 2


def test_a_cluster_acl_names_kafka_cluster():
    s = Acls()
    assert s.create(acl(CLUSTER, CLUSTER_NAME, operation=ALL)) == [OK]


def test_delete_acls_answers_the_acls_each_filter_matched_and_removes_them_once():
    s = Acls()
    s.create(acl(), acl(operation=WRITE), acl(GROUP, "g"), acl(principal="User:bob"))
    results = s.delete(flt(TOPIC, principal="User:alice"), flt(name="orders", operation=WRITE))
    assert [r.error_code for r in results] == [Error.NONE, Error.NONE]
    assert sorted((m.resource_name, m.principal, m.operation) for m in results[0].matching_acls) == [
        ("orders", "User:alice", READ), ("orders", "User:alice", WRITE)]
    assert [(m.resource_name, m.operation, m.pattern_type) for m in results[1].matching_acls] == [
        ("orders", WRITE, LITERAL)]
    assert len(s.last_records) == 2  # WRITE matched twice, removed once
    assert bindings(s) == [(TOPIC, "orders", LITERAL, "User:bob", "*", READ, ALLOW),
                           (GROUP, "g", LITERAL, "User:alice", "*", READ, ALLOW)]


def test_delete_acls_with_an_unknown_field_fails_that_filter_only():
    s = Acls()
    s.create(acl())
    results = s.delete(flt(pattern=0), flt(operation=0), flt(TOPIC))
    assert [(r.error_code, r.error_message) for r in results[:2]] == [
        (Error.INVALID_REQUEST, "Unknown patternFilter."), (Error.INVALID_REQUEST, "Unknown entryFilter.")]
    assert results[2].error_code == Error.NONE and len(results[2].matching_acls) == 1
    assert s.image.acls == {}


def described(response):
    assert response.error_code == Error.NONE
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation,
                   a.permission_type) for r in response.resources for a in r.acls)


def test_describe_acls_match_filter_finds_the_literal_wildcard_and_prefixed_acls_that_apply():
    s = Acls()
    s.create(acl(name="orders-eu"), acl(name="*"), acl(name="orders-", pattern=PREFIXED),
             acl(name="ord", pattern=PREFIXED), acl(name="payments-", pattern=PREFIXED), acl(name="orders"),
             acl(GROUP, "orders-eu"))
    assert described(s.describe(resource_type_filter=TOPIC, resource_name_filter="orders-eu",
                                pattern_type_filter=PATTERN_MATCH)) == [
        (TOPIC, "*", LITERAL, "User:alice", READ, ALLOW),
        (TOPIC, "ord", PREFIXED, "User:alice", READ, ALLOW),
        (TOPIC, "orders-", PREFIXED, "User:alice", READ, ALLOW),
        (TOPIC, "orders-eu", LITERAL, "User:alice", READ, ALLOW)]


def test_describe_acls_any_pattern_filter_matches_the_name_exactly_and_literal_only_literal():
    s = Acls()
    s.create(acl(name="orders-", pattern=PREFIXED), acl(name="orders-"), acl(name="*"))
    assert [n for _, n, *_ in described(s.describe(resource_name_filter="orders-"))] == ["orders-", "orders-"]
    assert described(s.describe(resource_name_filter="orders-", pattern_type_filter=LITERAL)) == [
        (TOPIC, "orders-", LITERAL, "User:alice", READ, ALLOW)]
    assert described(s.describe(pattern_type_filter=PREFIXED)) == [
        (TOPIC, "orders-", PREFIXED, "User:alice", READ, ALLOW)]


def test_describe_acls_groups_acls_by_resource_pattern_and_filters_principal_host_operation_permission():
    s = Acls()
    s.create(acl(operation=READ), acl(operation=DESCRIBE, permission=DENY), acl(principal="User:bob"),
             acl(host="10.0.0.1", operation=WRITE))
    response = s.describe(resource_type_filter=TOPIC)
    assert [(r.resource_name, len(r.acls)) for r in response.resources] == [("orders", 4)]
    assert described(s.describe(principal_filter="User:bob")) == [
        (TOPIC, "orders", LITERAL, "User:bob", READ, ALLOW)]
    assert [op for *_, op, _ in described(s.describe(host_filter="10.0.0.1"))] == [WRITE]
    assert [op for *_, op, _ in described(s.describe(permission_type=DENY))] == [DESCRIBE]
    assert [op for *_, op, _ in described(s.describe(operation=DESCRIBE))] == [DESCRIBE]


def test_describe_acls_with_an_unknown_field_is_invalid_request():
    assert Acls().describe(resource_type_filter=0).error_code == Error.INVALID_REQUEST


def test_a_request_past_the_record_bound_writes_nothing(monkeypatch):
    monkeypatch.setattr(acl_control, "MAX_RECORDS_PER_USER_OP", 2)
    s = Acls()
    assert s.create(acl(), acl(operation=WRITE), acl(operation=DESCRIBE)) == [
        (Error.POLICY_VIOLATION, acl_control.TOO_LARGE)] * 3
    assert s.image.acls == {}
    s.create(acl(), acl(operation=WRITE))
    s.create(acl(operation=DESCRIBE))
    assert [r.error_code for r in s.delete(flt(TOPIC))] == [Error.POLICY_VIOLATION]
    assert len(s.image.acls) == 3
