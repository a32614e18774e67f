"""The Kafka sink against a real `strom` node: ``df.write.format("strom")`` and a streaming
query strom -> transform -> strom whose Python worker is killed with SIGKILL mid-batch and
which is restarted from its checkpoint (a driver restart), once more after losing its last
commit (so Spark replays a batch the sink had committed). A read_committed consumer then
finds every input record exactly once. The node runs Kafka's StandardAuthorizer with a
SASL_PLAINTEXT listener beside its PLAINTEXT one (whose ANONYMOUS principal is a super user, for
the tests above and the node's own connections): the sink, given Spark's ``kafka.security.*`` and
``kafka.sasl.*`` options, writes as the PLAIN user alice only with WRITE on its transactional ids
and on the topic."""
from __future__ import annotations

import os
import shutil
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer

from engine.checkpoint import read_offset_checkpoint
from tests.integration.clients import confluent as reference
from tests.integration.clients.security import PLAIN_LOGIN, sasl, spark_options
from tests.integration.cluster import StromNode, free_ports

from .test_spark_integration import FAST_CHECKPOINTS

pytestmark = [
    pytest.mark.processes,
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    (sasl_port,) = free_ports(1)
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("sink-node")), extra={
        **FAST_CHECKPOINTS, "transaction.state.log.num.partitions": 3,
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_LOGIN} required user_alice="alice-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    props = node.properties
    props["listeners"] = props["listeners"].replace(
        "CONTROLLER://", f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://")
    props["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    node.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    try:
        node.start()
        yield node
    finally:
        node.cleanup()


def topic(node, partitions=2) -> str:
    name = f"sink-{uuid.uuid4().hex[:10]}"
    reference.create_topic(node.bootstrap, name, partitions=partitions)
    return name


def wait_committed(node, name: str, partitions: int, records: int) -> None:
    """Until the node's high watermark checkpoint covers ``records`` records of ``name``
    (the strom source reads below it)."""
    path = os.path.join(node.log_dir, "replication-offset-checkpoint")
    deadline = time.monotonic() + 30
    while sum(read_offset_checkpoint(path).get((name, p), 0) for p in range(partitions)) < records:
        assert time.monotonic() < deadline, "the high watermark checkpoint did not catch up"
        time.sleep(0.05)


def read_committed(node, name: str, want: int, idle_s: float = 2.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([name])
        deadline, quiet = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
                quiet = None
                continue
            if len(got) >= want:
                quiet = quiet or time.monotonic()
                if time.monotonic() - quiet > idle_s:
                    break
    finally:
        c.close()
    return got


def test_df_write_is_read_back_exactly_once(spark, node):
    out = topic(node)
    headers = "array(named_struct('key', 'h', 'value', CAST('x' AS BINARY))) AS headers"
    df = spark.range(3000).selectExpr("CAST(id % 7 AS STRING) AS key", "CAST(id AS STRING) AS value", headers)
    (df.repartition(3).write.format("strom").option("kafka.bootstrap.servers", node.bootstrap)
     .option("topic", out).mode("append").save())
    got = read_committed(node, out, 3000)
    assert sorted(got) == sorted(str(i).encode() for i in range(3000))


def test_stream_killed_and_restarted_writes_every_record_exactly_once(spark, node, tmp_path):
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    source, out = topic(node), topic(node)
    values = [f"in-{i:04d}".encode() for i in range(300)]
    reference.produce(node.bootstrap, source, [(None, v, []) for v in values])
    wait_committed(node, source, 2, len(values))
    hook = str(tmp_path / "kill-once")
    open(hook, "w").close()

    @F.udf(StringType())
    def upper_or_die(v):
        if v.endswith("0150"):  # in the second micro-batch of 150
            try:
                os.rename(hook, hook + ".taken")
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)  # the Python worker running this task dies
        return v.upper()

    checkpoint = str(tmp_path / "checkpoint")

    def run():
        stream = (spark.readStream.format("strom").option("path", node.log_dir).option("subscribe", source)
                  .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150").load())
        query = (stream.select(upper_or_die(F.col("value").cast("string")).alias("value"))
                 .writeStream.format("strom").option("kafka.bootstrap.servers", node.bootstrap)
                 .option("topic", out).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except StreamingQueryException as e:
            return e
        finally:
            query.stop()
        return query.exception()

    first = run()
    assert first is not None, "the killed worker should fail the query"
    assert os.path.exists(hook + ".taken"), \
        f"the query failed before its worker was killed: {str(first)[:3000]}"
    second = run()  # a driver restart: the same checkpoint
    assert second is None, str(second)[:3000]
    # A restart that lost its last commit: Spark replays that batch, the sink skips it.
    commits = os.path.join(checkpoint, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        if os.path.exists(os.path.join(commits, name)):
            os.unlink(os.path.join(commits, name))
    shutil.rmtree(os.path.join(checkpoint, "state"), ignore_errors=True)
    third = run()
    assert third is None, str(third)[:3000]
    got = read_committed(node, out, len(values))
    assert sorted(got) == sorted(v.upper() for v in values)


def test_df_write_over_sasl_needs_write_on_the_topic_and_the_transactional_ids(spark, node):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # ANONYMOUS: a super user here

    def allow_alice_write(resource_type, name, pattern):
        binding = AclBinding(resource_type, name, pattern, "User:alice", "*", AclOperation.WRITE,
                             AclPermissionType.ALLOW)
        for future in admin.create_acls([binding], request_timeout=15).values():
            future.result(15)

    alice = sasl("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    out = topic(node, partitions=1)
    # df.write's transactional ids are strom-write-<job>-<task>
    allow_alice_write(ResourceType.TRANSACTIONAL_ID, "strom-write-", ResourcePatternType.PREFIXED)
    df = spark.range(20).selectExpr("CAST(id AS STRING) AS value")

    def write():
        # kafka.security.protocol, kafka.sasl.mechanism and kafka.sasl.jaas.config: Java's JAAS
        # config, as Spark's Kafka sink takes it
        (df.coalesce(1).write.format("strom").option("kafka.bootstrap.servers", node.sasl_bootstrap)
         .options(**spark_options(alice)).option("topic", out).mode("append").save())

    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED|Topic authorization failed"):
        write()
    allow_alice_write(ResourceType.TOPIC, out, ResourcePatternType.LITERAL)
    write()
    got = read_committed(node, out, 20)
    assert sorted(got) == sorted(str(i).encode() for i in range(20))
