"""The broker's authorizer (broker/authorizer.py): the StandardAuthorizer over the image's ACLs,
asked with a request's context; its config, audit log and authorized-operation bit sets."""
import logging
import uuid

import pytest

from broker.authorizer import ALLOW_ALL, SUPPORTED, BrokerAuthorizer, bit_set
from engine.errors import ConfigError
from metadata.security import (
    ALLOW,
    ALTER,
    CLUSTER,
    CLUSTER_NAME,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclEntry,
)
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.headers import RequestHeader
from protocol.messages import API_KEYS
from strom.config import ServerConfig
from tests.security.acls import acl

FETCH = API_KEYS["Fetch"]


def ctx(user="alice", host="10.0.0.1", api_key=FETCH):
    session = Session("SASL_SSL", "SASL_SSL", host, KafkaPrincipal("User", user))
    return RequestContext(RequestHeader(api_key, 12, 1, "client", 2, "SASL_SSL"), session)


def add(acls, *entries):
    for entry in entries:
        acls[entry.id] = entry


def config(**props):
    base = {"process.roles": "broker", "node.id": "1", "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "0@127.0.0.1:9093"}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return ServerConfig(base)


def test_without_an_authorizer_everything_is_allowed():
    for auth in (ALLOW_ALL, BrokerAuthorizer.from_config(config(), lambda: {})):
        assert not auth.enabled
        assert auth.authorize(ctx(), WRITE, TOPIC, "orders")
        assert auth.filter(ctx(), READ, TOPIC, ["a", "b", "a"]) == {"a", "b"}
        assert auth.authorize_any(ctx(), WRITE, TRANSACTIONAL_ID)
        assert auth.authorized_operations(ctx(), GROUP, "g") == bit_set(SUPPORTED[GROUP])


def test_kafkas_standard_authorizer_class_turns_the_authorizer_on():
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "StandardAuthorizer"):
        auth = BrokerAuthorizer.from_config(config(authorizer_class_name=name), lambda: {})
        assert auth.enabled
        assert not auth.authorize(ctx(), READ, TOPIC, "orders")  # allow.everyone.if.no.acl.found=false


def test_another_authorizer_class_is_refused_naming_the_property():
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerAuthorizer.from_config(config(authorizer_class_name="kafka.security.authorizer.AclAuthorizer"),
                                     lambda: {})


def test_super_users_and_allow_everyone_come_from_the_config():
    auth = BrokerAuthorizer.from_config(config(authorizer_class_name="StandardAuthorizer",
                                               super_users="User:admin;User:broker"), lambda: {})
    assert auth.authorize(ctx("admin"), ALTER, CLUSTER, CLUSTER_NAME)
    assert auth.authorize(ctx("broker"), ALTER, CLUSTER, CLUSTER_NAME)
    assert not auth.authorize(ctx("alice"), ALTER, CLUSTER, CLUSTER_NAME)
    everyone = BrokerAuthorizer.from_config(config(authorizer_class_name="StandardAuthorizer",
                                                   allow_everyone_if_no_acl_found="true"), lambda: {})
    assert everyone.authorize(ctx(), WRITE, TOPIC, "orders")
    with pytest.raises(ConfigError, match="super.users"):
        BrokerAuthorizer.from_config(config(authorizer_class_name="StandardAuthorizer", super_users="admin"),
                                     lambda: {})


def test_acls_added_to_or_removed_from_the_image_take_effect_on_the_next_request():
    acls: dict = {}
    auth = BrokerAuthorizer(lambda: acls)
    assert not auth.authorize(ctx(), READ, TOPIC, "orders")
    read = acl(TOPIC, "orders", READ)
    add(acls, read)  # the same dict, changed in place
    assert auth.authorize(ctx(), READ, TOPIC, "orders")
    deny = acl(TOPIC, "orders", READ, permission=DENY)
    add(acls, deny)
    assert not auth.authorize(ctx(), READ, TOPIC, "orders")
    del acls[deny.id]
    assert auth.authorize(ctx(), READ, TOPIC, "orders")
    # One removed and another added: same size, different set.
    del acls[read.id]
    add(acls, acl(TOPIC, "orders", WRITE))
    assert not auth.authorize(ctx(), READ, TOPIC, "orders")
    assert auth.authorize(ctx(), WRITE, TOPIC, "orders")
    acls = {}  # the image replaced the dict
    assert not auth.authorize(ctx(), WRITE, TOPIC, "orders")


def test_the_acls_are_indexed_once_per_change_not_per_request():
    acls: dict = {}
    add(acls, acl(TOPIC, "orders", READ))
    auth = BrokerAuthorizer(lambda: acls)
    core = auth.core()
    for _ in range(3):
        auth.authorize(ctx(), READ, TOPIC, "orders")
    assert auth.core() is core
    add(acls, acl(TOPIC, "payments", READ))
    assert auth.core() is not core


def test_principal_and_client_address_come_from_the_request_context():
    acls: dict = {}
    add(acls, AclEntry(uuid.uuid4(), TOPIC, "orders", LITERAL, "User:alice", "10.0.0.1", READ, ALLOW))
    auth = BrokerAuthorizer(lambda: acls)
    assert auth.authorize(ctx("alice", "10.0.0.1"), READ, TOPIC, "orders")
    assert not auth.authorize(ctx("alice", "10.0.0.2"), READ, TOPIC, "orders")
    assert not auth.authorize(ctx("bob", "10.0.0.1"), READ, TOPIC, "orders")


def test_filter_keeps_the_names_the_principal_may_use():
    acls: dict = {}
    add(acls, acl(TOPIC, "orders.", DESCRIBE, pattern=PREFIXED))
    auth = BrokerAuthorizer(lambda: acls)
    names = ["orders.eu", "orders.us", "payments"]
    assert auth.filter(ctx(), DESCRIBE, TOPIC, names) == {"orders.eu", "orders.us"}


def test_authorize_any_finds_an_allowed_transactional_id_prefix():
    acls: dict = {}
    auth = BrokerAuthorizer(lambda: acls)
    assert not auth.authorize_any(ctx(), WRITE, TRANSACTIONAL_ID)
    add(acls, acl(TRANSACTIONAL_ID, "app-", WRITE, pattern=PREFIXED))
    assert auth.authorize_any(ctx(), WRITE, TRANSACTIONAL_ID)


def test_authorized_operations_answers_per_principal():
    acls: dict = {}
    add(acls, acl(TOPIC, "orders", WRITE), acl(GROUP, "g", READ))
    auth = BrokerAuthorizer(lambda: acls)
    assert auth.authorized_operations(ctx("alice"), TOPIC, "orders") == bit_set({WRITE, DESCRIBE})
    assert auth.authorized_operations(ctx("bob"), TOPIC, "orders") == 0
    assert auth.authorized_operations(ctx("alice"), GROUP, "g") == bit_set({READ, DESCRIBE})


def test_a_denial_is_logged_at_info_as_kafkas_audit_log(caplog):
    acls: dict = {}
    add(acls, acl(TOPIC, "orders", READ, principal="User:bob"))
    auth = BrokerAuthorizer(lambda: acls)
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        assert not auth.authorize(ctx("alice"), READ, TOPIC, "orders")
        assert not auth.authorized_operations(ctx("alice"), TOPIC, "orders")  # not logged at INFO
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert lines == ["Principal = User:alice is Denied operation = READ from host = 10.0.0.1 on resource = "
                     "Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1 "
                     "based on rule DefaultDeny"]


def test_an_allow_is_logged_at_debug_with_the_acl_that_allowed_it(caplog):
    acls: dict = {}
    add(acls, acl(TOPIC, "orders", READ))
    auth = BrokerAuthorizer(lambda: acls)
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        assert auth.authorize(ctx(), READ, TOPIC, "orders")
    assert not [r for r in caplog.records if r.name == "kafka.authorizer.logger"]
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        assert auth.authorize(ctx(), READ, TOPIC, "orders")
    (record,) = [r for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert record.levelno == logging.DEBUG
    assert "is Allowed operation = READ" in record.getMessage()
    rule = "based on rule MatchingAcl(acl=StandardAcl(resourceType=Topic, resourceName=orders"
    assert rule in record.getMessage()
