"""The Kafka sink's rules without a JVM or a broker: options, schema checks, rows to
records, transactional ids, the skip rule and the replay check (spark/sink.py)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark.errors import StromSparkError
from spark.sink import (
    already_written,
    batch_transactional_id,
    check_replay,
    check_schema,
    parse_sink_options,
    records,
    stream_transactional_id,
)
from spark.source import StromDataSource

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(**columns):
    return StructType([StructField(n, t) for n, t in columns.items()])


def test_kafka_options_go_to_the_producer_without_their_prefix():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:9092", "topic": "out", "kafka.linger.ms": "20",
                            "kafka.compression.type": "zstd"})
    assert (o.bootstrap_servers, o.topic) == ("h:9092", "out")
    conf = o.producer_config("tid")
    assert conf["linger.ms"] == "20" and conf["compression.type"] == "zstd"
    assert conf["bootstrap.servers"] == "h:9092" and conf["transactional.id"] == "tid"
    assert conf["partitioner"] == "murmur2_random"  # Java's partitioner, as Spark's sink
    assert parse_sink_options({"kafka.bootstrap.servers": "h", "kafka.partitioner": "random"}) \
        .producer_config("t")["partitioner"] == "random"


def test_javas_security_options_reach_librdkafka_in_its_own_terms():
    """Spark's Kafka sink options are Java's producer's; librdkafka refuses a JAAS config and
    Java's store properties, so they are translated (PEM stores only)."""
    o = parse_sink_options({
        "kafka.bootstrap.servers": "h", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="alice" password="alice-secret";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/pki/ca.pem",
        "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": "/pki/alice.pem",
        "kafka.ssl.key.password": "k", "kafka.ssl.endpoint.identification.algorithm": ""})
    for conf in (o.producer_config("tid"), o.consumer_config("g")):
        assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "SCRAM-SHA-512"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", "alice-secret")
        assert conf["ssl.ca.location"] == "/pki/ca.pem"
        assert conf["ssl.certificate.location"] == conf["ssl.key.location"] == "/pki/alice.pem"
        assert conf["ssl.key.password"] == "k" and conf["ssl.endpoint.identification.algorithm"] == "none"
        assert not {k for k in conf if k.startswith(("ssl.truststore", "ssl.keystore", "sasl.jaas"))}


@pytest.mark.parametrize("options, message", [
    ({"kafka.ssl.truststore.type": "JKS", "kafka.ssl.truststore.location": "/x.jks"},
     "'kafka.ssl.truststore.type': only PEM"),
    ({"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": "nonsense"}, "'kafka.sasl.jaas.config'"),
    ({"kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.jaas.config": "x required;"}, "'kafka.sasl.mechanism'"),
])
def test_a_bad_security_option_fails_at_load_naming_it(options, message):
    with pytest.raises(StromSparkError, match=message):
        parse_sink_options({"kafka.bootstrap.servers": "h", **options})


@pytest.mark.parametrize("options, message", [
    ({"topic": "t"}, "kafka.bootstrap.servers' must be specified"),
    ({"kafka.bootstrap.servers": "h", "kafka.key.serializer": "x"}, "'key.serializer' is not supported"),
    ({"kafka.bootstrap.servers": "h", "kafka.value.serializer": "x"}, "'value.serializer' is not supported"),
    ({"kafka.bootstrap.servers": "h", "kafka.transactional.id": "x"}, "'transactional.id' is not supported"),
    ({"kafka.bootstrap.servers": "h", "subscribe": "t"}, "unknown sink option"),
    ({"kafka.bootstrap.servers": "h", "topic": " "}, "'topic' is empty"),
])
def test_sink_options_refused_as_spark_refuses_them(options, message):
    with pytest.raises(StromSparkError, match=message):
        parse_sink_options(options)


def test_the_data_source_checks_write_options_and_schema_at_writer():
    source = StromDataSource({"kafka.bootstrap.servers": "h:1"})
    with pytest.raises(StromSparkError, match="topic option required"):
        source.writer(schema(value=BinaryType()), False)
    with pytest.raises(StromSparkError, match="topic option required"):
        source.streamWriter(schema(value=BinaryType()), False)
    assert source.writer(schema(value=StringType(), topic=StringType()), False).options.topic is None
    with pytest.raises(StromSparkError, match="must be specified"):
        StromDataSource({"topic": "t"}).writer(schema(value=BinaryType()), False)


def test_schema_rules_of_sparks_kafka_writer():
    check_schema(schema(key=StringType(), value=BinaryType(), partition=IntegerType(), headers=HEADERS), "t")
    check_schema(schema(value=StringType(), topic=StringType()), None)
    bad = [
        (schema(key=StringType()), "t", "required attribute 'value'"),
        (schema(value=LongType()), "t", "value attribute type must be a string or binary"),
        (schema(value=BinaryType(), key=IntegerType()), "t", "key attribute type"),
        (schema(value=BinaryType(), topic=BinaryType()), None, "topic attribute type must be a string"),
        (schema(value=BinaryType(), partition=LongType()), "t", "partition attribute type must be an int"),
        (schema(value=BinaryType(), headers=ArrayType(StringType())), "t", "headers attribute type"),
        (schema(value=BinaryType(), offset=LongType()), "t", "not written by the Kafka sink"),
    ]
    for s, topic, message in bad:
        with pytest.raises(StromSparkError, match=message):
            check_schema(s, topic)


def test_rows_become_records_with_the_topic_option_overriding_the_column():
    batch = pa.RecordBatch.from_pydict({
        "key": ["k1", None], "value": [b"v1", None], "topic": ["a", "b"], "partition": [2, None],
        "headers": [[{"key": "h", "value": b"x"}], None],
    })
    assert list(records([batch], None)) == [("a", 2, b"k1", b"v1", [("h", b"x")]),
                                            ("b", -1, None, None, None)]
    assert [r[0] for r in records([batch], "out")] == ["out", "out"]
    plain = pa.RecordBatch.from_pydict({"value": ["x"]})
    assert list(records([plain.slice(0, 0), plain], "t")) == [("t", -1, None, b"x", None)]
    with pytest.raises(StromSparkError, match="null topic present"):
        list(records([pa.RecordBatch.from_pydict({"value": [b"x"], "topic": pa.array([None], pa.string())})],
                     None))


def test_transactional_ids_are_stable_per_task_and_distinct_across_jobs_and_queries():
    assert stream_transactional_id("q1", 3) == stream_transactional_id("q1", 3)
    assert len({stream_transactional_id(q, p) for q in ("q1", "q2") for p in (0, 1)}) == 4
    assert batch_transactional_id("j", 0) != stream_transactional_id("j", 0)


def test_a_batch_is_skipped_only_when_its_marker_is_past_it():
    assert not already_written(None, 0)
    assert not already_written(5, 5)  # batches 0..4 committed: 5 is to write
    assert already_written(6, 5)
    assert already_written(9, 5)


def test_a_replay_with_fewer_tasks_than_a_partly_committed_run_is_refused():
    check_replay(5, 2, {})
    check_replay(5, 2, {2: 5, 3: 3})  # tasks 2 and 3 last wrote earlier batches: fine
    with pytest.raises(StromSparkError, match="micro-batch 5 was partly committed before with more tasks"):
        check_replay(5, 2, {3: 6})
