"""``df.write.format("strom")`` and ``df.writeStream.format("strom")``: Spark's Kafka sink,
written through the Kafka protocol (confluent-kafka) to any Strom (or Kafka) cluster.

Schema, as Spark's Kafka sink: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; the ``topic`` option overrides it, and one of them is required),
``partition`` (int; null or absent: the producer's partitioner, murmur2 on the key as Java's
producer), ``headers`` (array<struct<key string, value binary>>). Other columns are refused,
as Spark refuses them. Options: ``kafka.bootstrap.servers`` (required), ``topic``, and every
``kafka.<name>`` passed to the producer as ``<name>``; ``kafka.key.serializer`` and
``kafka.value.serializer`` are refused (as Spark: keys and values are bytes), and so is
``kafka.transactional.id`` (the sink derives its own, below).

Delivery. Every task writes in one Kafka transaction that it commits at its end, so a
read_committed consumer sees a task's rows all at once or not at all.

- ``df.write``: the transactional id is ``strom-write-<job uuid>-<task partition>``. A task
  retried after a failure starts with InitProducerId on the same id, which fences the
  failed attempt and aborts its open transaction: a failed attempt leaves nothing visible.
  What Spark itself does not undo stays: a job that fails after some tasks committed keeps
  their rows (Spark's Kafka sink is at-least-once; ours only removes the duplicates of a
  retried task).
- ``df.writeStream``: exactly once across task retries, an executor's kill -9 and a driver
  restart. Task ``p`` of micro-batch ``B`` of query ``q`` (the query id Spark keeps in the
  checkpoint, so it is the same after a restart) uses the transactional id
  ``strom-sink-<q>-<p>`` and, in the same transaction as its rows, commits the offset
  ``B + 1`` of the marker partition (partition 0 of the ``topic`` option's topic, else of
  the first row's topic) for the consumer group ``strom-sink-<q>-<p>``
  (send_offsets_to_transaction). Before writing, the task fences older attempts
  (InitProducerId) and then reads that group's committed offset with require_stable
  (read_committed): above ``B``, batch ``B`` was committed already by an earlier attempt or
  run, and the task writes nothing. A micro-batch is replayed with the same rows in the same
  task partitions when its source and transformations are deterministic (Spark's own
  requirement for exactly-once); a replay planned into fewer tasks than an earlier
  partially committed attempt is refused by the driver's commit (see ``check_replay``).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from spark.errors import StromSparkError

KAFKA_PREFIX = "kafka."
REFUSED_PRODUCER_OPTIONS = {
    "key.serializer": "keys are written as bytes (a binary or string key column)",
    "value.serializer": "values are written as bytes (a binary or string value column)",
    "transactional.id": "the sink derives a transactional id per task (strom-write-/strom-sink-)",
}
SINK_OPTIONS = ("topic", "transactionTimeoutMs")
DEFAULT_PRODUCER = {
    "partitioner": "murmur2_random",  # Java's producer: murmur2 on the key, as Spark's sink
    "enable.idempotence": True,
}
TIMEOUT_S = 60.0
MARKER_PARTITION = 0
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    producer: dict[str, str] = field(default_factory=dict)

    def producer_config(self, transactional_id: str) -> dict:
        return {**DEFAULT_PRODUCER, **_librdkafka(self.producer), "bootstrap.servers": self.bootstrap_servers,
                "transactional.id": transactional_id}

    def consumer_config(self, group: str) -> dict:
        passed = {k: v for k, v in _librdkafka(self.producer).items()
                  if k.startswith(("security.", "sasl.", "ssl."))}
        return {**passed, "bootstrap.servers": self.bootstrap_servers, "group.id": group,
                "isolation.level": "read_committed", "enable.auto.commit": False}


def _librdkafka(producer: dict[str, str]) -> dict[str, str]:
    """The producer's options as librdkafka takes them: a Spark user writes Java's
    (``kafka.sasl.jaas.config``, PEM ``kafka.ssl.truststore.location``...), which librdkafka refuses."""
    from security.client_config import CommandConfigError, librdkafka_config

    try:
        return librdkafka_config(producer)
    except CommandConfigError as e:
        raise StromSparkError(f"Kafka option 'kafka.{e.name}': {e.message}") from None


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Spark's Kafka sink options; ``kafka.*`` go to the producer without the prefix."""
    opts = {k.lower(): v for k, v in options.items()}
    producer: dict[str, str] = {}
    for name, value in options.items():
        if not name.lower().startswith(KAFKA_PREFIX):
            continue
        key = name[len(KAFKA_PREFIX):]
        if key.lower() in REFUSED_PRODUCER_OPTIONS:
            raise StromSparkError(f"Kafka option '{key}' is not supported: "
                                  f"{REFUSED_PRODUCER_OPTIONS[key.lower()]}")
        if key.lower() != "bootstrap.servers":
            producer[key] = value
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise StromSparkError("option 'kafka.bootstrap.servers' must be specified for the Kafka producer")
    allowed = {s.lower() for s in SINK_OPTIONS} | {"path", "checkpointlocation"}
    unknown = sorted(k for k in opts if not k.startswith(KAFKA_PREFIX) and k not in allowed)
    if unknown:
        raise StromSparkError(f"unknown sink option(s) {', '.join(unknown)}; the sink takes "
                              f"kafka.bootstrap.servers, topic and kafka.<producer config>")
    _librdkafka(producer)  # a bad security option fails here, at load, naming it
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise StromSparkError("option 'topic' is empty")
    return SinkOptions(servers, topic.strip() if topic else None, producer)


def check_schema(schema, topic_option: str | None) -> None:
    """Spark's KafkaWriter.validateQuery: which columns, of which types."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f.dataType for f in schema.fields}
    extra = sorted(set(fields) - {"key", "value", "topic", "partition", "headers"})
    if extra:
        raise StromSparkError(f"column(s) {', '.join(extra)} are not written by the Kafka sink: its "
                              f"columns are key, value, topic, partition, headers; select them")
    if "value" not in fields:
        raise StromSparkError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise StromSparkError(f"{name} attribute type must be a string or binary, not "
                                  f"{fields[name].simpleString()}")
    if topic_option is None:
        if "topic" not in fields:
            raise StromSparkError("topic option required when no 'topic' attribute is present; use "
                                  "the topic option for setting a topic")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise StromSparkError(f"topic attribute type must be a string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise StromSparkError(f"partition attribute type must be an int, not "
                              f"{fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise StromSparkError(f"headers attribute type must be array<struct<key:string,value:binary>>, "
                                  f"not {h.simpleString()}")


# ---- rows ----------------------------------------------------------------------------------

Record = tuple  # (topic, partition or -1, key, value, headers or None)


def _bytes(v) -> bytes | None:
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else bytes(v)


def records(batches: Iterable, topic_option: str | None) -> Iterator[Record]:
    """Arrow record batches (Spark's columns) -> what the producer sends, one per row."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}

        def column(name, batch=batch, names=names):
            return batch.column(names[name]).to_pylist() if name in names else [None] * batch.num_rows
        values, keys = column("value"), column("key")
        topics = [topic_option] * batch.num_rows if topic_option is not None else column("topic")
        parts, headers = column("partition"), column("headers")
        for t, p, k, v, h in zip(topics, parts, keys, values, headers):
            if t is None:
                raise StromSparkError("null topic present in the data; use the topic option for "
                                      "setting a topic")
            hs = None if h is None else [(x["key"], _bytes(x["value"])) for x in h]
            yield t, -1 if p is None else p, _bytes(k), _bytes(v), hs


# ---- transactional ids and the skip rule ---------------------------------------------------

def batch_transactional_id(job: str, partition: int) -> str:
    return f"strom-write-{job}-{partition}"


def stream_transactional_id(query_id: str, partition: int) -> str:
    """Also the consumer group holding the task's committed-batch marker."""
    return f"strom-sink-{query_id}-{partition}"


def marker_metadata(batch_id: int, partition: int) -> str:
    return f"strom-sink batch={batch_id} task={partition}"


def already_written(committed_offset: int | None, batch_id: int) -> bool:
    """The marker's offset is the next batch to write: above ``batch_id``, this batch was
    committed by an earlier attempt or run."""
    return committed_offset is not None and committed_offset > batch_id


def check_replay(batch_id: int, tasks: int, later_markers: Mapping[int, int]) -> None:
    """The driver's check after micro-batch ``batch_id`` ran in ``tasks`` tasks:
    ``later_markers`` maps task partitions at or above ``tasks`` to their marker offset. One
    above ``batch_id`` means an earlier run committed this batch with more tasks, so its rows
    were split differently and the replay may have written some of them again."""
    bad = sorted(p for p, offset in later_markers.items() if p >= tasks and offset > batch_id)
    if bad:
        raise StromSparkError(
            f"micro-batch {batch_id} was partly committed before with more tasks (task "
            f"{', '.join(map(str, bad))} of that run) than the {tasks} it was replayed with; the "
            f"output may hold duplicates of that batch: restart the query with its earlier "
            f"parallelism (the number of partitions of the write)"
        )


# ---- the producer side -------------------------------------------------------------------

@dataclass
class TaskResult:
    partition: int
    rows: int
    skipped: bool = False
    marker_topic: str | None = None
    query_id: str | None = None


def _peek(it: Iterator[Record]) -> tuple[Record | None, Iterator[Record]]:
    for first in it:
        def chain(first=first):
            yield first
            yield from it
        return first, chain()
    return None, iter(())


def _produce_all(producer, rows: Iterator[Record]) -> int:
    errors: list = []

    def report(err, _msg):
        if err is not None and not errors:
            errors.append(err)
    n = 0
    for topic, partition, key, value, headers in rows:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                                 on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
        if n % 1000 == 0:
            producer.poll(0)
        if errors:
            break
    remaining = producer.flush(TIMEOUT_S)
    if errors:
        raise StromSparkError(f"producing to Kafka failed: {errors[0]}")
    if remaining:
        raise StromSparkError(f"{remaining} records were not delivered within {TIMEOUT_S:.0f} s")
    return n


def write_transaction(options: SinkOptions, rows: Iterator[Record], transactional_id: str,
                      partition: int, batch_id: int | None = None) -> TaskResult:
    """One task's rows in one transaction. With ``batch_id`` (streaming) the transaction
    also commits the task's marker, and a batch already committed is not written again."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    first, rows = _peek(rows)
    if first is None:
        return TaskResult(partition, 0)
    producer = Producer(options.producer_config(transactional_id))
    consumer = None
    try:
        producer.init_transactions(TIMEOUT_S)  # fences any earlier attempt, aborting its transaction
        marker = None
        if batch_id is not None:
            consumer = Consumer(options.consumer_config(transactional_id))
            marker_topic = options.topic or first[0]
            committed = consumer.committed([TopicPartition(marker_topic, MARKER_PARTITION)], TIMEOUT_S)[0]
            if committed.error is not None:
                raise StromSparkError(f"reading the sink's marker of {transactional_id} failed: "
                                      f"{committed.error}")
            offset = committed.offset if committed.offset >= 0 else None
            if already_written(offset, batch_id):
                return TaskResult(partition, 0, skipped=True, marker_topic=marker_topic)
            marker = TopicPartition(marker_topic, MARKER_PARTITION, batch_id + 1,
                                    marker_metadata(batch_id, partition))
        producer.begin_transaction()
        n = _produce_all(producer, rows)
        if marker is not None:
            assert consumer is not None
            producer.send_offsets_to_transaction([marker], consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        return TaskResult(partition, n, marker_topic=marker.topic if marker is not None else None)
    finally:
        if consumer is not None:
            consumer.close()
        producer.flush(0)


def read_markers(options: SinkOptions, query_id: str, marker_topic: str, above: int) -> dict[int, int]:
    """The committed marker offsets of the query's task partitions at or above ``above``
    (the sink's groups the cluster lists)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    prefix = stream_transactional_id(query_id, 0)[:-1]
    admin = AdminClient({k: v for k, v in options.consumer_config("").items()
                         if k not in ("group.id", "isolation.level", "enable.auto.commit")})
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    partitions = sorted(int(g.group_id[len(prefix):]) for g in listed.valid
                        if g.group_id.startswith(prefix) and g.group_id[len(prefix):].isdigit()
                        and int(g.group_id[len(prefix):]) >= above)
    out = {}
    for p in partitions:
        c = Consumer(options.consumer_config(stream_transactional_id(query_id, p)))
        try:
            got = c.committed([TopicPartition(marker_topic, MARKER_PARTITION)], TIMEOUT_S)[0]
        finally:
            c.close()
        if got.error is None and got.offset >= 0:
            out[p] = got.offset
    return out


def new_job_id() -> str:
    return uuid.uuid4().hex


# ---- the Spark writers ---------------------------------------------------------------------

def _task():
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise StromSparkError("the strom sink's write() runs in a Spark task")
    return context


try:  # PySpark 4.0+
    from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
except ImportError:  # pragma: no cover - the reader side needs 4.x as well
    DataSourceArrowWriter = WriterCommitMessage = object  # type: ignore[assignment,misc]
try:  # PySpark 4.1+
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    from pyspark.sql.datasource import DataSourceStreamWriter as DataSourceStreamArrowWriter  # type: ignore


@dataclass
class TaskCommit(WriterCommitMessage):
    result: TaskResult


class StromWriter(DataSourceArrowWriter):
    """``df.write``: one transaction per task, committed at its end (see the module)."""

    def __init__(self, options: SinkOptions):
        self.options = options
        self.job = new_job_id()

    def write(self, iterator) -> TaskCommit:
        p = _task().partitionId()
        return TaskCommit(write_transaction(self.options, records(iterator, self.options.topic),
                                            batch_transactional_id(self.job, p), p))

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass  # a failed task's transaction was aborted by its retry's fencing or will time out


class StromStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: exactly once per micro-batch (see the module)."""

    def __init__(self, options: SinkOptions):
        self.options = options

    def write(self, iterator) -> TaskCommit:
        task = _task()
        p = task.partitionId()
        query_id = task.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = task.getLocalProperty(BATCH_ID_PROPERTY)
        if query_id is None or batch_id is None:
            raise StromSparkError("the streaming sink's task has no query id or batch id (is it a "
                                  "micro-batch query? continuous mode is not supported)")
        result = write_transaction(self.options, records(iterator, self.options.topic),
                                   stream_transactional_id(query_id, p), p, int(batch_id))
        result.query_id = query_id
        return TaskCommit(result)

    def commit(self, messages, batchId: int) -> None:
        done = [m.result for m in messages if isinstance(m, TaskCommit)]
        for query_id, topic in sorted({(r.query_id, r.marker_topic) for r in done
                                       if r.query_id is not None and r.marker_topic is not None}):
            check_replay(batchId, len(messages), read_markers(self.options, query_id, topic, len(messages)))

    def abort(self, messages, batchId: int) -> None:
        pass
