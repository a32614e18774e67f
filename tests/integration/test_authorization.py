"""Kafka's StandardAuthorizer end to end, with every real client: one node with
``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``, a
SASL_PLAINTEXT listener whose PLAIN users are admin (a super user, also the principal the node
connects to its own inter-broker and controller listeners as, both SASL_PLAINTEXT), alice and
bob, and the PLAINTEXT listener the node's readiness probe uses (its ANONYMOUS principal has no
ACL, so it may do nothing but what needs no authorization, such as the brokers in Metadata).

confluent-kafka, kafka-python, aiokafka, kafkajs and kcat, each reporting its own library's
error: alice without ACLs can neither produce nor consume (TOPIC_AUTHORIZATION_FAILED, or
GROUP_AUTHORIZATION_FAILED where the client asks for its group first); after `strom acls --add`
of WRITE (and READ) on the prefix ``orders-`` and READ on a group (``g1-<client>``), exactly those work
(another topic, another group stay refused); a DENY on one topic overrides the prefixed ALLOW;
a transactional producer (confluent-kafka, kafka-python, aiokafka, kafkajs; kcat has none) is
refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED until it has WRITE on its transactional id, then
commits; bob, without ACLs, sees none of alice's topics in Metadata. ACLs are added with
`strom acls --command-config` as admin, the way kafka-acls is run against a secured cluster.

Each test acts as a user of its own and adds the ACLs it needs, so each runs alone or in any
order on the module's node. The clients of one step run side by side (threads).
"""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .clients import kafkajs, kcat
from .clients.security import (
    Security,
    aiokafka_config,
    confluent_config,
    kafka_python_config,
    kcat_options,
    sasl,
)
from .cluster import REPO_ROOT, StromNode, free_ports

pytestmark = pytest.mark.timeout(180)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
# Each test acts as a user of its own, so that it holds whatever ACLs it gives and none another
# test gave: any one of them runs alone, in any order, on the module's node.
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
             "dave": "dave-secret", "erin": "erin-secret"}
SERVER_JAAS = (f'{PLAIN_LOGIN} required username="admin" password="admin-secret" '
               + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items()) + ";")
CLIENTS = ["confluent", "kafka_python", "aiokafka", "kafkajs", "kcat"]
MESSAGES = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
CLIENT_TIMEOUT_S = 10.0

# Each library's name for the errors (librdkafka's code names, kafka-python's and aiokafka's
# exception classes, kafkajs's error types, kcat's librdkafka message).
TOPIC_DENIED = re.compile(r"TOPIC_AUTHORIZATION_FAILED|TopicAuthorizationFailedError|"
                          r"Topic authorization failed")
GROUP_DENIED = re.compile(r"GROUP_AUTHORIZATION_FAILED|GroupAuthorizationFailedError|"
                          r"Group authorization failed")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    (sasl_port,) = free_ports(1)
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("authz-node")), extra={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": SERVER_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": SERVER_JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
    })
    props = node.properties
    props["listeners"] = props["listeners"].replace(
        "CONTROLLER://", f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://")
    props["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    node.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    node.admin_config = os.path.join(node.dir, "admin.properties")
    with open(node.admin_config, "w") as f:
        f.write(command_config("admin"))
    try:
        node.start()
        create_topics(node.sasl_bootstrap, [f"orders-{c}" for c in CLIENTS]
                      + [f"orders-a-{c}" for c in CLIENTS] + [f"payments-{c}" for c in CLIENTS]
                      + [f"orders-txn-{c}" for c in CLIENTS]
                      + ["orders-denied"])
        yield node
    finally:
        node.stop()
        node.close()


def command_config(user: str) -> str:
    return (f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={PLAIN_LOGIN} required username="{user}" password="{PASSWORDS[user]}";\n')


def strom_acls(node, *args: str, config: str | None = None, bootstrap: str | None = None):
    config_args = ["--command-config", config] if config else []
    cmd = [sys.executable, "-m", "strom", "acls", "--bootstrap-server", bootstrap or node.sasl_bootstrap,
           *config_args, *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def add_acls(node, *args: str) -> None:
    done = strom_acls(node, "--add", *args, config=node.admin_config)
    assert done.returncode == 0, done.stderr


def side_by_side(calls: dict[str, object]) -> dict[str, object]:
    """Run each zero-argument call on its own thread; their results by key."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {key: pool.submit(call) for key, call in calls.items()}
        return {key: f.result() for key, f in futures.items()}


# ---- the clients: produce returns "ok" or the client's error; consume the records or the error ----

def as_user(user: str) -> Security:
    """How a client connects as ``user`` (clients/security.py): PLAIN over SASL_PLAINTEXT."""
    return sasl("SASL_PLAINTEXT", "PLAIN", user, PASSWORDS[user])


def _confluent_conf(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, **confluent_config(as_user(user))}


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_confluent_conf(bootstrap, "admin"))
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(CLIENT_TIMEOUT_S)


def confluent_produce(bootstrap, user, topic):
    from confluent_kafka import KafkaException, Producer

    reports = []
    producer = Producer({**_confluent_conf(bootstrap, user),
                         "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000)})
    for key, value in MESSAGES:
        try:
            producer.produce(topic, value, key, on_delivery=lambda err, msg: reports.append(err))
        except KafkaException as e:
            # Once a delivery failed with TOPIC_AUTHORIZATION_FAILED, librdkafka marks the topic
            # so (its partition count drops to 0) and refuses the next produce() at once.
            producer.flush(CLIENT_TIMEOUT_S + 5)
            return e.args[0].name()
    producer.flush(CLIENT_TIMEOUT_S + 5)
    errors = [e for e in reports if e is not None]
    return errors[0].name() if errors else "ok" if len(reports) == len(MESSAGES) else "undelivered"


def confluent_consume(bootstrap, user, topic, group):
    from confluent_kafka import Consumer

    consumer = Consumer({**_confluent_conf(bootstrap, user), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline and len(got) < len(MESSAGES):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                return msg.error().name()
            got.append((msg.key(), msg.value()))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _kafka_python_conf(user):
    return kafka_python_config(as_user(user))


def kafka_python_produce(bootstrap, user, topic):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=int(CLIENT_TIMEOUT_S * 1000),
                             **_kafka_python_conf(user))
    try:
        for key, value in MESSAGES:
            producer.send(topic, value, key).get(CLIENT_TIMEOUT_S)
    except KafkaError as e:
        return type(e).__name__
    finally:
        producer.close(1)
    return "ok"


def kafka_python_consume(bootstrap, user, topic, group):
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    from .clients.kafka_python import subscribe

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, **_kafka_python_conf(user))
    got = []
    try:
        subscribe(consumer, topic)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline and len(got) < len(MESSAGES):
            # a poll that waits out a join whole (clients/kafka_python.subscribe)
            for records in consumer.poll(max(0, int((deadline - time.monotonic()) * 1000))).values():
                got += [(r.key, r.value) for r in records]
        if got:
            consumer.commit()
    except KafkaError as e:
        return type(e).__name__
    finally:
        consumer.close()
    return got


def aiokafka_produce(bootstrap, user, topic):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run():
        timeout_ms = int(CLIENT_TIMEOUT_S * 1000)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms,
                                    **aiokafka_config(as_user(user)))
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait(topic, value, key)
        except KafkaError as e:
            return type(e).__name__
        finally:
            await producer.stop()
        return "ok"

    return asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S + 5))


def aiokafka_consume(bootstrap, user, topic, group):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaError

    async def run():
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    **aiokafka_config(as_user(user)))
        got = []
        try:
            await consumer.start()
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while time.monotonic() < deadline and len(got) < len(MESSAGES):
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [(r.key, r.value) for r in records]
            if got:
                await consumer.commit()
        except KafkaError as e:
            return type(e).__name__
        finally:
            await consumer.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S + 5))


def _kafkajs(bootstrap, user, action, topic, group=None, txn_id=None):
    """kafkajs (clients/secured.js) as ``user``: "ok", the records it read, or its error: the
    innermost cause's type (kafkajs wraps a refused request in KafkaJSNonRetriableError) and the
    errors it logged on the way (it reports a refused FindCoordinator only as
    KafkaJSGroupCoordinatorNotFound, having logged the broker's error at debug level)."""
    out = kafkajs.secured(action, bootstrap, as_user(user), topic, MESSAGES, retries=2, consumer_retries=1,
                          group=group, txn_id=txn_id, timeout=CLIENT_TIMEOUT_S + 10)
    if "error" in out:
        return " ".join([out["error"]["cause"], *out["error"]["logged"]])
    if "got" in out:
        return [(k.encode(), v.encode()) for k, v in out["got"]]
    return "ok"


def kafkajs_produce(bootstrap, user, topic):
    return _kafkajs(bootstrap, user, "produce", topic)


def kafkajs_consume(bootstrap, user, topic, group):
    return _kafkajs(bootstrap, user, "consume", topic, group)


def _kcat(bootstrap, user):
    if kcat.BINARY is None:
        pytest.fail("kcat is missing (make setup installs it)")
    return [kcat.BINARY, "-b", bootstrap, *kcat_options(as_user(user))]


def kcat_produce(bootstrap, user, topic):
    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in MESSAGES).encode()
    proc = subprocess.run([*_kcat(bootstrap, user), "-P", "-t", topic, "-K", ":",
                           "-X", f"message.timeout.ms={int(CLIENT_TIMEOUT_S * 1000)}"],
                          input=lines, capture_output=True, timeout=CLIENT_TIMEOUT_S + 10)
    return "ok" if proc.returncode == 0 else proc.stderr.decode(errors="replace")


def kcat_consume(bootstrap, user, topic, group):
    proc = subprocess.run([*_kcat(bootstrap, user), "-G", group, "-X", "auto.offset.reset=earliest",
                           "-c", str(len(MESSAGES)), "-f", "%k:%s\n", "-e", topic],
                          capture_output=True, timeout=CLIENT_TIMEOUT_S + 10, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not proc.stdout:
        return proc.stderr.decode(errors="replace")
    return [tuple(part.encode() for part in line.split(":", 1)) for line in proc.stdout.decode().splitlines()
            if line]


PRODUCE = {c: globals()[f"{c}_produce"] for c in CLIENTS}
CONSUME = {c: globals()[f"{c}_consume"] for c in CLIENTS}


def produce_all(node, user: str, topic_of) -> dict[str, object]:
    return side_by_side({c: (lambda c=c: PRODUCE[c](node.sasl_bootstrap, user, topic_of(c)))
                         for c in CLIENTS})


def consume_all(node, user: str, topic_of, group_of) -> dict[str, object]:
    return side_by_side({c: (lambda c=c: CONSUME[c](node.sasl_bootstrap, user, topic_of(c), group_of(c)))
                         for c in CLIENTS})


def assert_refused(results: dict[str, object], *errors: re.Pattern) -> None:
    for client, result in results.items():
        assert isinstance(result, str) and any(e.search(result) for e in errors), (client, result)


# ---- the tests, in order ----------------------------------------------------------------------------

def test_without_acls_a_user_can_neither_produce_nor_consume_nor_join_a_group(node):
    assert_refused(produce_all(node, "bob", lambda c: f"orders-{c}"), TOPIC_DENIED)
    # a consumer asks for its group's coordinator (GROUP) or the topic's metadata (TOPIC) first
    assert_refused(consume_all(node, "bob", lambda c: f"orders-{c}", lambda c: "g1"),
                   TOPIC_DENIED, GROUP_DENIED)


def test_strom_acls_needs_alter_on_the_cluster(node):
    # AclCommand.main prints the failure on stdout
    refused = ("Error while executing ACL command: "
               "org.apache.kafka.common.errors.ClusterAuthorizationException: Cluster authorization failed.")
    anonymous = strom_acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                           "--topic", "acl-probe", bootstrap=node.bootstrap)
    assert anonymous.returncode == 1 and refused in anonymous.stdout, anonymous.stdout
    alice_config = os.path.join(node.dir, "alice.properties")
    with open(alice_config, "w") as f:
        f.write(command_config("alice"))
    alice = strom_acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                       "--topic", "acl-probe", config=alice_config)
    assert alice.returncode == 1 and refused in alice.stdout, alice.stdout
    listed = strom_acls(node, "--list", "--topic", "acl-probe", config=node.admin_config)
    assert listed.returncode == 0 and listed.stdout == "", listed.stdout


def test_write_on_a_prefix_and_read_on_a_group_make_exactly_those_work(node):
    add_acls(node, "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Read",
             "--topic", "orders-", "--resource-pattern-type", "prefixed")
    # READ on one literal group per client, so that the five consume side by side: one group shared
    # in turn waited on each leaver's rebalance, past the clients' timeout on a loaded box.
    add_acls(node, "--allow-principal", "User:alice", "--operation", "Read",
             *(arg for c in CLIENTS for arg in ("--group", f"g1-{c}")))
    assert produce_all(node, "alice", lambda c: f"orders-a-{c}") == {c: "ok" for c in CLIENTS}
    assert_refused(produce_all(node, "alice", lambda c: f"payments-{c}"), TOPIC_DENIED)
    assert_refused(consume_all(node, "alice", lambda c: f"orders-a-{c}", lambda c: f"g2-{c}"), GROUP_DENIED)
    assert consume_all(node, "alice", lambda c: f"orders-a-{c}", lambda c: f"g1-{c}") == {
        c: MESSAGES for c in CLIENTS}


def test_a_deny_acl_overrides_the_prefixed_allow(node):
    add_acls(node, "--allow-principal", "User:carol", "--operation", "Write",
             "--topic", "orders-", "--resource-pattern-type", "prefixed")
    add_acls(node, "--deny-principal", "User:carol", "--operation", "Write", "--topic", "orders-denied")
    assert_refused(produce_all(node, "carol", lambda c: "orders-denied"), TOPIC_DENIED)
    assert produce_all(node, "carol", lambda c: f"orders-{c}") == {c: "ok" for c in CLIENTS}


def test_a_user_sees_no_topic_it_may_not_describe_in_metadata(node):
    from confluent_kafka.admin import AdminClient

    def topics(user):
        admin = AdminClient(_confluent_conf(node.sasl_bootstrap, user))
        return set(admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics)

    add_acls(node, "--allow-principal", "User:erin", "--operation", "Describe",
             "--topic", "orders-", "--resource-pattern-type", "prefixed")
    everything = topics("admin")
    assert everything >= {f"payments-{c}" for c in CLIENTS} | {f"orders-{c}" for c in CLIENTS}
    assert topics("bob") == set()
    assert topics("erin") == {t for t in everything if t.startswith("orders-")}


TXN_DENIED = re.compile(r"TRANSACTIONAL_ID_AUTHORIZATION_FAILED|TransactionalIdAuthorizationFailed")


def confluent_transaction(bootstrap, user, txn_id, topic):
    from confluent_kafka import KafkaException, Producer

    producer = Producer({**_confluent_conf(bootstrap, user), "transactional.id": txn_id})
    try:
        producer.init_transactions(CLIENT_TIMEOUT_S)
        producer.begin_transaction()
        for key, value in MESSAGES:
            producer.produce(topic, value, key)
        producer.commit_transaction(CLIENT_TIMEOUT_S)
    except KafkaException as e:
        return e.args[0].name()
    return "ok"


def kafka_python_transaction(bootstrap, user, txn_id, topic):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                             max_block_ms=int(CLIENT_TIMEOUT_S * 1000), **_kafka_python_conf(user))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for key, value in MESSAGES:
            producer.send(topic, value, key)
        producer.commit_transaction()
    except KafkaError as e:
        return type(e).__name__
    finally:
        producer.close(1)
    return "ok"


def aiokafka_transaction(bootstrap, user, txn_id, topic):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                    **aiokafka_config(as_user(user)))
        try:
            await producer.start()
            async with producer.transaction():
                for key, value in MESSAGES:
                    await producer.send_and_wait(topic, value, key)
        except KafkaError as e:
            return type(e).__name__
        finally:
            await producer.stop()
        return "ok"

    return asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S + 5))


def kafkajs_transaction(bootstrap, user, txn_id, topic):
    return _kafkajs(bootstrap, user, "transaction", topic, txn_id=txn_id)


TRANSACTION = {c: globals()[f"{c}_transaction"] for c in CLIENTS if c != "kcat"}  # kcat has none


def read_committed(node, topic) -> list[tuple[bytes, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_confluent_conf(node.sasl_bootstrap, "admin"), "group.id": "txn-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline and len(got) < len(MESSAGES):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def test_a_transactional_producer_needs_write_on_its_transactional_id(node):
    def run_all():
        return side_by_side({c: (lambda c=c: TRANSACTION[c](node.sasl_bootstrap, "dave", f"txn-{c}",
                                                             f"orders-txn-{c}")) for c in TRANSACTION})

    add_acls(node, "--allow-principal", "User:dave", "--operation", "Write",
             "--topic", "orders-txn-", "--resource-pattern-type", "prefixed")
    assert_refused(run_all(), TXN_DENIED)
    add_acls(node, "--allow-principal", "User:dave", "--operation", "Write",
             *(arg for c in TRANSACTION for arg in ("--transactional-id", f"txn-{c}")))
    assert run_all() == {c: "ok" for c in TRANSACTION}
    for client in TRANSACTION:
        assert read_committed(node, f"orders-txn-{client}") == MESSAGES, client
