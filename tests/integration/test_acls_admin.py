"""ACLs and SCRAM credentials through a real node and real clients: confluent-kafka's
AdminClient creates, describes and deletes ACLs (KIP-140) and alters and describes SCRAM
credentials (KIP-554); `strom acls` adds, lists and removes them in kafka-acls's layout; the
users of `strom format --add-scram` exist from the first start. The node runs Kafka's
StandardAuthorizer with allow.everyone.if.no.acl.found, so the anonymous test client may
administer (no ACL names the cluster) and the ACL APIs are enabled (without an authorizer
Kafka answers them SECURITY_DISABLED)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from .cluster import REPO_ROOT, StromNode

TIMEOUT = 15


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    node = StromNode(
        base_dir=str(tmp_path_factory.mktemp("acls-node")),
        extra={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "allow.everyone.if.no.acl.found": "true"},
        format_args=["--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                     "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"])
    try:
        node.start()
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap})


def strom_acls(node, *args: str) -> str:
    cmd = [sys.executable, "-m", "strom", "acls", "--bootstrap-server", node.bootstrap, *args]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


def binding(name, principal="User:alice", operation=AclOperation.READ, pattern=ResourcePatternType.LITERAL,
            permission=AclPermissionType.ALLOW, resource=ResourceType.TOPIC):
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def everything(name=None, resource=ResourceType.ANY, pattern=ResourcePatternType.ANY):
    return AclBindingFilter(resource, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY)


def described(admin, acl_filter) -> set[tuple]:
    return {(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
            for b in admin.describe_acls(acl_filter).result(TIMEOUT)}


def as_tuple(b: AclBinding) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def test_create_describe_and_delete_acls_round_trip_through_the_admin_client(admin):
    acls = [binding("orders"),
            binding("orders", "User:bob", AclOperation.WRITE, permission=AclPermissionType.DENY),
            binding("orders-", pattern=ResourcePatternType.PREFIXED),
            binding("app", resource=ResourceType.GROUP)]
    for future in admin.create_acls(acls, request_timeout=TIMEOUT).values():
        assert future.result(TIMEOUT) is None
    assert described(admin, everything()) >= {as_tuple(b) for b in acls}
    # MATCH: the ACLs that apply to topic orders-eu (the prefix), not those of "orders" itself.
    assert described(admin, everything("orders-eu", ResourceType.TOPIC, ResourcePatternType.MATCH)) == {
        as_tuple(acls[2])}
    deleted = admin.delete_acls([everything("orders", ResourceType.TOPIC, ResourcePatternType.LITERAL)],
                                request_timeout=TIMEOUT)
    gone = {as_tuple(b) for f in deleted.values() for b in f.result(TIMEOUT)}
    assert gone == {as_tuple(b) for b in acls[:2]}
    assert described(admin, everything("orders", ResourceType.TOPIC)) == set()
    for f in admin.delete_acls([everything()], request_timeout=TIMEOUT).values():
        f.result(TIMEOUT)
    assert described(admin, everything()) == set()


def test_an_invalid_acl_is_refused_with_invalid_request(admin):
    bad = binding("orders", principal="alice")  # not Type:name
    (future,) = admin.create_acls([bad], request_timeout=TIMEOUT).values()
    with pytest.raises(Exception, match="INVALID_REQUEST|principalType:principalName|Invalid"):
        future.result(TIMEOUT)


def test_strom_acls_add_list_and_remove_in_kafka_acls_layout(node, admin):
    out = strom_acls(node, "--add", "--allow-principal", "User:carol", "--operation", "Write",
                     "--operation", "Describe", "--topic", "billing-", "--resource-pattern-type", "prefixed")
    pattern = "ResourcePattern(resourceType=TOPIC, name=billing-, patternType=PREFIXED)"
    assert out.startswith(f"Adding ACLs for resource `{pattern}`: \n")
    assert described(admin, everything("billing-", ResourceType.TOPIC)) == {
        (ResourceType.TOPIC, "billing-", ResourcePatternType.PREFIXED, "User:carol", "*", op,
         AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)}
    strom_acls(node, "--add", "--consumer", "--allow-principal", "User:carol", "--topic", "ledger",
               "--group", "billing-app")
    listed = strom_acls(node, "--list", "--topic", "billing-", "--resource-pattern-type", "prefixed")
    assert listed == (f"Current ACLs for resource `{pattern}`: \n"
                      " \t(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)\n"
                      "\t(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    everything_listed = strom_acls(node, "--list")
    assert "ResourcePattern(resourceType=GROUP, name=billing-app, patternType=LITERAL)" in everything_listed
    assert "operation=READ, permissionType=ALLOW" in everything_listed
    strom_acls(node, "--remove", "--force", "--topic", "billing-", "--resource-pattern-type", "prefixed")
    strom_acls(node, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
               "--topic", "ledger")
    remaining = described(admin, everything())
    assert {(name, op) for _, name, _, _, _, op, _ in remaining} == {("ledger", AclOperation.DESCRIBE),
                                                                     ("billing-app", AclOperation.READ)}


def credentials(admin, *users) -> dict[str, set[tuple]]:
    futures = admin.describe_user_scram_credentials(list(users) or None, request_timeout=TIMEOUT)
    if isinstance(futures, dict):
        described_users = {user: f.result(TIMEOUT) for user, f in futures.items()}
    else:
        described_users = futures.result(TIMEOUT)
    return {user: {(i.mechanism, i.iterations) for i in d.scram_credential_infos}
            for user, d in described_users.items()}


def test_format_add_scram_users_exist_from_the_first_start(admin):
    assert credentials(admin, "alice") == {"alice": {(ScramMechanism.SCRAM_SHA_256, 4096),
                                                     (ScramMechanism.SCRAM_SHA_512, 8192)}}


def test_alter_user_scram_credentials_is_seen_by_the_next_describe(admin):
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000),
                                          b"dave-secret")
    for f in admin.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT).values():
        assert f.result(TIMEOUT) is None
    assert credentials(admin, "dave") == {"dave": {(ScramMechanism.SCRAM_SHA_512, 10000)}}
    delete = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
    for f in admin.alter_user_scram_credentials([delete], request_timeout=TIMEOUT).values():
        assert f.result(TIMEOUT) is None
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        credentials(admin, "dave")
    too_few = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000),
                                           b"erin-secret")
    (future,) = admin.alter_user_scram_credentials([too_few], request_timeout=TIMEOUT).values()
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|Too few iterations"):
        future.result(TIMEOUT)
