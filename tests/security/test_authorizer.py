"""The StandardAuthorizer's rules (security/authorizer.py), named after Kafka's behaviour, and
the core checked against a brute-force reading of the same rules."""
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.security import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclEntry,
)
from security.authorizer import (
    DEFAULT_ALLOW,
    DEFAULT_DENY,
    SUPER_USER,
    StandardAuthorizer,
    controller_rule,
    parse_super_users,
)
from tests.security.acls import acl

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def allowed(acls, operation, name, resource_type=TOPIC, principal=ALICE, host=HOST, **kw):
    return StandardAuthorizer(acls, **kw).authorize(principal, host, operation, resource_type, name)


def test_no_acl_for_a_resource_denies_by_default():
    assert not allowed([], READ, "orders")
    assert not allowed([acl(TOPIC, "payments", READ)], READ, "orders")


def test_literal_acl_allows_only_its_exact_name():
    acls = [acl(TOPIC, "orders", READ)]
    assert allowed(acls, READ, "orders")
    assert not allowed(acls, READ, "orders2")
    assert not allowed(acls, READ, "order")


def test_prefixed_acl_matches_names_that_start_with_the_prefix():
    acls = [acl(TOPIC, "orders.", WRITE, pattern=PREFIXED)]
    assert allowed(acls, WRITE, "orders.eu")
    assert allowed(acls, WRITE, "orders.")
    assert not allowed(acls, WRITE, "orders")
    assert not allowed(acls, WRITE, "payments.orders.eu")


def test_wildcard_literal_acl_matches_every_name_of_its_type():
    acls = [acl(TOPIC, "*", READ)]
    assert allowed(acls, READ, "orders")
    assert allowed(acls, READ, "anything")
    assert not allowed(acls, READ, "orders", resource_type=GROUP)


def test_acl_on_one_resource_type_grants_nothing_on_another():
    acls = [acl(GROUP, "shared", READ)]
    assert allowed(acls, READ, "shared", resource_type=GROUP)
    assert not allowed(acls, READ, "shared", resource_type=TOPIC)


def test_acl_for_another_principal_does_not_apply():
    acls = [acl(TOPIC, "orders", READ, principal=BOB)]
    assert not allowed(acls, READ, "orders", principal=ALICE)
    assert allowed(acls, READ, "orders", principal=BOB)


def test_wildcard_principal_matches_every_user():
    acls = [acl(TOPIC, "orders", READ, principal="User:*")]
    assert allowed(acls, READ, "orders", principal=ALICE)
    assert allowed(acls, READ, "orders", principal="User:ANONYMOUS")


def test_host_must_match_unless_the_acl_names_every_host():
    acls = [acl(TOPIC, "orders", READ, host=HOST)]
    assert allowed(acls, READ, "orders", host=HOST)
    assert not allowed(acls, READ, "orders", host=OTHER_HOST)
    assert allowed([acl(TOPIC, "orders", READ, host="*")], READ, "orders", host=OTHER_HOST)


def test_deny_acl_overrides_allow_for_the_same_principal():
    acls = [acl(TOPIC, "orders", READ), acl(TOPIC, "orders", READ, permission=DENY)]
    assert not allowed(acls, READ, "orders")


def test_prefixed_deny_overrides_literal_allow():
    acls = [acl(TOPIC, "orders", READ), acl(TOPIC, "ord", READ, permission=DENY, pattern=PREFIXED)]
    assert not allowed(acls, READ, "orders")


def test_wildcard_principal_deny_overrides_a_users_allow():
    acls = [acl(TOPIC, "orders", WRITE), acl(TOPIC, "orders", WRITE, permission=DENY, principal="User:*")]
    assert not allowed(acls, WRITE, "orders")


def test_deny_from_one_host_leaves_other_hosts_allowed():
    acls = [acl(TOPIC, "orders", READ), acl(TOPIC, "orders", READ, permission=DENY, host=OTHER_HOST)]
    assert allowed(acls, READ, "orders", host=HOST)
    assert not allowed(acls, READ, "orders", host=OTHER_HOST)


@pytest.mark.parametrize("operation", [READ, WRITE, DELETE, ALTER])
def test_write_implies_describe(operation):
    """READ, WRITE, DELETE and ALTER each imply DESCRIBE (Kafka's IMPLIES_DESCRIBE)."""
    assert allowed([acl(TOPIC, "orders", operation)], DESCRIBE, "orders")


def test_describe_implies_nothing_else():
    acls = [acl(TOPIC, "orders", DESCRIBE)]
    assert allowed(acls, DESCRIBE, "orders")
    assert not allowed(acls, READ, "orders")
    assert not allowed([acl(TOPIC, "orders", CREATE)], DESCRIBE, "orders")


def test_alter_configs_implies_describe_configs():
    acls = [acl(TOPIC, "orders", ALTER_CONFIGS)]
    assert allowed(acls, DESCRIBE_CONFIGS, "orders")
    assert not allowed(acls, ALTER, "orders")
    assert not allowed([acl(TOPIC, "orders", ALTER)], DESCRIBE_CONFIGS, "orders")


def test_deny_of_read_does_not_deny_describe():
    """Implication holds for ALLOW only: a DENY names exactly its operation."""
    acls = [acl(TOPIC, "orders", DESCRIBE), acl(TOPIC, "orders", READ, permission=DENY)]
    assert allowed(acls, DESCRIBE, "orders")
    assert not allowed(acls, READ, "orders")


def test_all_grants_every_operation():
    acls = [acl(TOPIC, "orders", ALL)]
    for operation in (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS):
        assert allowed(acls, operation, "orders")


def test_deny_all_denies_every_operation():
    acls = [acl(TOPIC, "orders", ALL), acl(TOPIC, "orders", ALL, permission=DENY)]
    for operation in (READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS):
        assert not allowed(acls, operation, "orders")


def test_super_user_is_allowed_without_acls():
    assert allowed([], ALTER, "kafka-cluster", resource_type=CLUSTER, super_users={ALICE})
    assert not allowed([], ALTER, "kafka-cluster", resource_type=CLUSTER, principal=BOB, super_users={ALICE})


def test_super_user_is_allowed_despite_a_deny():
    acls = [acl(TOPIC, "orders", ALL, permission=DENY, principal="User:*")]
    assert allowed(acls, READ, "orders", super_users={ALICE})


def test_allow_everyone_if_no_acl_found_allows_a_resource_no_acl_names():
    assert allowed([], WRITE, "orders", allow_everyone_if_no_acl_found=True)
    assert allowed([acl(TOPIC, "payments", READ)], WRITE, "orders", allow_everyone_if_no_acl_found=True)


def test_allow_everyone_if_no_acl_found_does_not_apply_once_any_acl_names_the_resource():
    """An ACL for bob on the topic, whatever its operation, takes the topic out of the default."""
    acls = [acl(TOPIC, "orders", READ, principal=BOB)]
    assert not allowed(acls, WRITE, "orders", allow_everyone_if_no_acl_found=True)
    prefixed = [acl(TOPIC, "ord", READ, principal=BOB, pattern=PREFIXED)]
    assert not allowed(prefixed, WRITE, "orders", allow_everyone_if_no_acl_found=True)


def test_decision_names_the_rule_that_decided():
    allow, deny = acl(TOPIC, "orders", READ), acl(TOPIC, "orders", READ, permission=DENY, host=OTHER_HOST)
    auth = StandardAuthorizer([allow, deny], super_users={"User:admin"})
    assert auth.decide("User:admin", HOST, READ, TOPIC, "orders") == SUPER_USER
    assert auth.decide(ALICE, HOST, READ, TOPIC, "orders").rule == allow
    decision = auth.decide(ALICE, OTHER_HOST, READ, TOPIC, "orders")
    assert (decision.allowed, decision.rule) == (False, deny)
    assert "permissionType=DENY" in decision.describe_rule()
    assert auth.decide(ALICE, HOST, READ, TOPIC, "payments") == DEFAULT_DENY
    assert auth.decide(ALICE, HOST, WRITE, TOPIC, "orders") == DEFAULT_DENY  # ACLs matched, none applied
    everyone = StandardAuthorizer([], allow_everyone_if_no_acl_found=True)
    assert everyone.decide(ALICE, HOST, READ, TOPIC, "orders") == DEFAULT_ALLOW


def test_parse_super_users_takes_semicolon_separated_principals():
    assert parse_super_users("User:admin; User:broker;;") == {"User:admin", "User:broker"}
    assert parse_super_users("") == frozenset()
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError, match="Type:name"):
        parse_super_users("User:admin;broker")


# authorize_by_resource_type (Kafka's Authorizer.authorizeByResourceType)

def by_type(acls, operation=WRITE, resource_type=TRANSACTIONAL_ID, principal=ALICE, host=HOST, **kw):
    auth = StandardAuthorizer(acls, **kw)
    return auth.authorize_by_resource_type(principal, host, operation, resource_type)


def test_by_resource_type_allowed_by_an_allow_on_any_literal_or_prefix():
    assert by_type([acl(TRANSACTIONAL_ID, "txn-1", WRITE)])
    assert by_type([acl(TRANSACTIONAL_ID, "txn-", WRITE, pattern=PREFIXED)])
    assert by_type([acl(TRANSACTIONAL_ID, "*", WRITE)])
    assert not by_type([])
    assert not by_type([acl(TRANSACTIONAL_ID, "txn-1", WRITE, principal=BOB)])
    assert not by_type([acl(TOPIC, "txn-1", WRITE)])


def test_by_resource_type_denied_when_every_allow_is_covered_by_a_deny():
    def txn(name, permission=ALLOW, pattern=LITERAL):  # WRITE on a transactional id
        return acl(TRANSACTIONAL_ID, name, WRITE, permission, pattern)

    assert not by_type([txn("txn-1"), txn("txn-1", DENY)])
    assert not by_type([txn("txn-1"), txn("txn", DENY, PREFIXED)])
    assert not by_type([txn("txn-a", ALLOW, PREFIXED), txn("txn", DENY, PREFIXED)])
    # A deny on a longer prefix, or on one literal name, leaves other names of the prefix allowed.
    assert by_type([txn("txn", ALLOW, PREFIXED), txn("txn-a", DENY, PREFIXED)])
    assert by_type([txn("txn", ALLOW, PREFIXED), txn("txn", DENY)])
    # A wildcard deny denies the whole type, whatever allows there are.
    assert not by_type([txn("*"), txn("*", DENY)])


def test_by_resource_type_counts_exact_operations_and_all_only():
    t = dict(resource_type=TOPIC)
    assert not by_type([acl(TOPIC, "orders", READ)], operation=DESCRIBE, **t)
    assert by_type([acl(TOPIC, "orders", ALL)], operation=WRITE, **t)


def test_by_resource_type_allows_a_super_user_and_the_default():
    deny_all = [acl(TRANSACTIONAL_ID, "*", ALL, permission=DENY, principal="User:*")]
    assert by_type(deny_all, super_users={ALICE})
    assert by_type([], allow_everyone_if_no_acl_found=True)


def test_by_resource_type_refuses_filter_codes():
    auth = StandardAuthorizer([])
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ALICE, HOST, WRITE, 1)  # ANY
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ALICE, HOST, 1, TOPIC)  # ANY


def test_controller_rules_follow_kafkas_controller_apis():
    assert controller_rule("BrokerRegistration").cluster_operation == CLUSTER_ACTION
    assert controller_rule("BrokerHeartbeat").cluster_operation == CLUSTER_ACTION
    assert controller_rule("AlterPartition").cluster_operation == CLUSTER_ACTION
    assert controller_rule("Vote").cluster_operation == CLUSTER_ACTION
    assert controller_rule("CreateAcls").cluster_operation == ALTER
    assert controller_rule("DescribeCluster").cluster_operation == ALTER
    assert controller_rule("AlterClientQuotas").cluster_operation == ALTER_CONFIGS
    assert controller_rule("DescribeQuorum").cluster_operation == DESCRIBE
    assert controller_rule("CreateTopics").per_resource == ((CREATE, TOPIC), (DESCRIBE_CONFIGS, TOPIC))
    for free in ("ApiVersions", "SaslHandshake", "SaslAuthenticate"):
        assert controller_rule(free).cluster_operation is None
        assert controller_rule(free).per_resource == ()


# The core against a brute-force reading of the rules.

NAMES = ["a", "ab", "abc", "b", "ba", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = [HOST, OTHER_HOST, "*"]
OPERATIONS = [ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS,
              IDEMPOTENT_WRITE]
QUERY_OPERATIONS = [op for op in OPERATIONS if op != ALL]
IMPLIES = {DESCRIBE: {READ, WRITE, DELETE, ALTER}, DESCRIBE_CONFIGS: {ALTER_CONFIGS}}

acl_entries = st.builds(
    lambda rt, name, pattern, principal, host, op, perm: AclEntry(uuid.uuid4(), rt, name, pattern, principal,
                                                                  host, op, perm),
    st.sampled_from([TOPIC, GROUP]), st.sampled_from(NAMES), st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(OPERATIONS),
    st.sampled_from([ALLOW, DENY]))
queries = st.tuples(st.sampled_from([ALICE, BOB]), st.sampled_from([HOST, OTHER_HOST]),
                    st.sampled_from(QUERY_OPERATIONS), st.sampled_from([TOPIC, GROUP]),
                    st.sampled_from(NAMES + ["abcd", "c", "a*"]))


def pattern_matches(a, resource_type, name):
    if a.resource_type != resource_type:
        return False
    if a.pattern_type == LITERAL:
        return a.resource_name in (name, "*")
    return name.startswith(a.resource_name)


def model_applies(a, principal, host, operation, exact=False):
    if a.principal not in (principal, "User:*") or a.host not in (host, "*"):
        return False
    if a.operation in (ALL, operation):
        return True
    return not exact and a.permission_type == ALLOW and a.operation in IMPLIES.get(operation, ())


def model_authorize(acls, super_users, default, principal, host, operation, resource_type, name):
    if principal in super_users:
        return True
    matching = [a for a in acls if pattern_matches(a, resource_type, name)]
    if not matching:
        return default
    applying = [a for a in matching if model_applies(a, principal, host, operation)]
    if any(a.permission_type == DENY for a in applying):
        return False
    return any(a.permission_type == ALLOW for a in applying)


def model_by_type(acls, super_users, default, principal, host, operation, resource_type):
    """Some name of the type is allowed the operation by an ACL of exactly it (or ALL) and denied
    by none: tried on every name the ACLs spell, every prefix followed by a fresh character, and
    a fresh name; or the action on an arbitrary name is allowed."""
    if model_authorize(acls, super_users, default, principal, host, operation, resource_type, "hardcode"):
        return True
    fresh = "\uffff"
    candidates = {fresh} | {a.resource_name + (fresh if a.pattern_type == PREFIXED else "")
                            for a in acls if (a.resource_name, a.pattern_type) != ("*", LITERAL)}
    for name in candidates:
        applying = [a for a in acls if pattern_matches(a, resource_type, name)
                    and model_applies(a, principal, host, operation, exact=True)]
        if applying and all(a.permission_type == ALLOW for a in applying):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(acl_entries, max_size=12), st.lists(queries, min_size=1, max_size=8),
       st.sets(st.sampled_from([ALICE, BOB]), max_size=1), st.booleans())
def test_authorize_agrees_with_a_brute_force_reading_of_the_rules(acls, asked, super_users, default):
    auth = StandardAuthorizer(acls, super_users, default)
    for principal, host, operation, resource_type, name in asked:
        expected = model_authorize(acls, super_users, default, principal, host, operation, resource_type,
                                   name)
        assert auth.authorize(principal, host, operation, resource_type, name) == expected
        assert auth.decide(principal, host, operation, resource_type, name).allowed == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(acl_entries, max_size=10), st.sampled_from([ALICE, BOB]), st.sampled_from([HOST, OTHER_HOST]),
       st.sampled_from(QUERY_OPERATIONS), st.sampled_from([TOPIC, GROUP]), st.booleans())
def test_authorize_by_resource_type_agrees_with_a_search_for_an_allowed_name(acls, principal, host, operation,
                                                                             resource_type, default):
    auth = StandardAuthorizer(acls, (), default)
    expected = model_by_type(acls, (), default, principal, host, operation, resource_type)
    assert auth.authorize_by_resource_type(principal, host, operation, resource_type) == expected
