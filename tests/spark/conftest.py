"""One SparkSession for every Spark test (start-up costs 5-10 s and ~1 GiB; see
notes/spark.md), with the strom data source registered once.

Python workers are separate processes that start ``python3`` from PATH and import the
data source by module name: PYSPARK_PYTHON pins this interpreter and PYTHONPATH gives
them the repository. Python filter pushdown is on for the session so that a DataFrame
with ``pushFilters=true`` can be planned; without that option the reader has no
pushFilters and the conf does not matter.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
from dataclasses import dataclass, replace

import pytest

from engine.checkpoint import read_offset_checkpoint
from engine.config import LogConfig
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import ORIGIN_COORDINATOR, Log
from engine.manager import LogManager, format_log_dir
from ext.batch import build_batch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST_DRIVER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark():
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("strom-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.extraJavaOptions", FAST_DRIVER_JVM)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from spark.source import StromDataSource

    session.dataSource.register(StromDataSource)
    yield session
    session.stop()


# ---- log dirs written with engine/, as a broker leaves them --------------------------------

BASE_TS = 1_700_000_000_000  # ms
CLUSTER_ID = "c2Ryb20tc3BhcmstdGVzdA"


@dataclass(frozen=True)
class Written:
    """One record as Spark's Kafka schema shows it (timestamp in ms; headers None when a
    record has none)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] | None


class Broker:
    """A node's log dir written through engine.manager.LogManager: appends as a leader,
    control batches as a coordinator would write them, high watermarks and log start
    offsets checkpointed when a test says so (as the broker's periodic checkpoints do)."""

    def __init__(self, log_dir: str, node_id: int = 1, config: LogConfig | None = None):
        self.log_dir = log_dir
        format_log_dir(log_dir, CLUSTER_ID, node_id)
        self.manager = LogManager([log_dir], config or LogConfig(), cluster_id=CLUSTER_ID, node_id=node_id)
        self.manager.startup()
        self.written: list[Written] = []
        self.sequences: dict[tuple[str, int, int], int] = {}
        self.now_ms = BASE_TS + 10_000

    def create(self, topic: str, partitions: int = 1, **config) -> None:
        for p in range(partitions):
            self.manager.get_or_create_log(topic, p, replace(self.manager.default_config, **config))

    def log(self, topic: str, partition: int) -> Log:
        found = self.manager.get_log(topic, partition)
        assert found is not None, f"{topic}-{partition} was not created"
        return found

    def append(self, topic: str, partition: int, records, compression: int = 0) -> list[Written]:
        """records: (key, value, headers, timestamp ms) tuples, one batch."""
        log = self.log(topic, partition)
        info = log.append_as_leader(bytearray(build_batch(records, compression=compression)), 0, self.now_ms)
        out = []
        for i, (key, value, headers, ts) in enumerate(records):
            append_time = info.log_append_time >= 0
            out.append(Written(
                topic, partition, info.first_offset + i, key, value,
                info.log_append_time if append_time else ts, 1 if append_time else 0,
                tuple((k if isinstance(k, str) else k.decode(), v) for k, v in headers) or None,
            ))
        self.written.extend(out)
        return out

    def append_txn(self, topic: str, partition: int, producer_id: int, records,
                   epoch: int = 0, compression: int = 0) -> list[Written]:
        """A transactional batch of ``producer_id`` (its next sequence; opens its
        transaction on the partition if none is open)."""
        log = self.log(topic, partition)
        seq = self.sequences.get((topic, partition, producer_id), 0)
        batch = build_batch(records, compression=compression, producer_id=producer_id,
                            producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        info = log.append_as_leader(bytearray(batch), 0, self.now_ms)
        self.sequences[(topic, partition, producer_id)] = seq + len(records)
        out = [Written(topic, partition, info.first_offset + i, key, value, ts, 0,
                       tuple((k if isinstance(k, str) else k.decode(), v) for k, v in headers) or None)
               for i, (key, value, headers, ts) in enumerate(records)]
        self.written.extend(out)
        return out

    def end_txn(self, topic: str, partition: int, producer_id: int, commit: bool, epoch: int = 0) -> int:
        """The coordinator's COMMIT or ABORT marker for ``producer_id``; returns its offset."""
        log = self.log(topic, partition)
        marker = build_end_txn_marker_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, producer_id,
                                            epoch, 0, self.now_ms)
        return log.append_as_leader(bytearray(marker), 0, self.now_ms, origin=ORIGIN_COORDINATOR).first_offset

    def append_control(self, topic: str, partition: int, timestamp: int | None = None) -> int:
        """A transaction marker (COMMIT) batch; returns its offset."""
        log = self.log(topic, partition)
        ts = self.now_ms if timestamp is None else timestamp
        marker = [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], ts)]
        batch = bytearray(build_batch(marker, is_control=True, is_transactional=True,
                                      producer_id=7, producer_epoch=0))
        return log.append_as_leader(batch, 0, self.now_ms, origin=ORIGIN_COORDINATOR).first_offset

    def commit(self, topic: str | None = None, partition: int | None = None, hw: int | None = None) -> None:
        """Move high watermarks (to the log end offset unless ``hw``) and write the
        replication-offset-checkpoint and log-start-offset-checkpoint."""
        for (t, p), log in self.manager.logs.items():
            if (topic is None or t == topic) and (partition is None or p == partition):
                log.update_high_watermark(log.log_end_offset if hw is None else hw)
        self.manager.checkpoint_high_watermarks()
        self.manager.checkpoint_log_start_offsets()

    def delete_records(self, topic: str, partition: int, offset: int) -> None:
        """DeleteRecords: the log start offset moves up; segments wholly below it go."""
        log = self.log(topic, partition)
        log.maybe_increment_log_start_offset(offset)
        log.delete_old_segments(self.now_ms)
        log.delete_pending_segments(force=True)
        self.manager.checkpoint_log_start_offsets()

    def close(self) -> None:
        self.manager.shutdown()

    def rows(self, topic: str | None = None, committed: bool = True) -> list[Written]:
        """What a read of the whole log dir should return, in (topic, partition, offset)
        order: from each log start offset to the checkpointed high watermark (or to the
        log end with ``committed=False``)."""
        hws = read_offset_checkpoint(os.path.join(self.log_dir, "replication-offset-checkpoint"))
        out = []
        for w in self.written:
            log = self.log(w.topic, w.partition)
            end = hws.get((w.topic, w.partition), log.log_start_offset) if committed else log.log_end_offset
            if (topic is None or w.topic == topic) and log.log_start_offset <= w.offset < end:
                out.append(w)
        return sorted(out, key=lambda w: (w.topic, w.partition, w.offset))


def varied_records(n: int, tag: str = "r", ts: int = BASE_TS, value_size: int = 40):
    """Keys, null keys, null and empty values, no / one / several headers (a repeated key,
    a null and an empty value, non-ASCII), timestamps that are not monotonic."""
    out = []
    for i in range(n):
        key = None if i % 4 == 1 else f"{tag}-k{i % 5}".encode()
        if i % 6 == 2:
            value = None
        elif i % 11 == 3:
            value = b""
        else:
            value = f"{tag}-{i:05d}|".encode() + bytes(range(256))[: value_size + i % 30]
        if i % 3 == 1:
            headers = [("h", f"{i}".encode())]
        elif i % 3 == 2:
            headers = [("a", b"1"), ("a", b""), ("n\u00e9", "\u00fc".encode()), ("nul", None)]
        else:
            headers = []
        out.append((key, value, headers, ts + 10 * i - (5 if i % 7 == 3 else 0)))
    return out


def rows_of(df, headers: bool = False) -> list[Written]:
    """A DataFrame's rows as Written, in (topic, partition, offset) order."""
    out = []
    for r in df.collect():
        ts = r["timestamp"]
        ms = (ts.replace(tzinfo=dt.UTC) - EPOCH) // dt.timedelta(milliseconds=1) if ts.tzinfo is None \
            else (ts - EPOCH) // dt.timedelta(milliseconds=1)
        h = None
        if headers:
            h = None if r["headers"] is None else tuple((x["key"], _bytes(x["value"])) for x in r["headers"])
        out.append(Written(r["topic"], r["partition"], r["offset"], _bytes(r["key"]), _bytes(r["value"]),
                           ms, r["timestampType"], h))
    return sorted(out, key=lambda w: (w.topic, w.partition, w.offset))


def without_headers(rows: list[Written]) -> list[Written]:
    return [replace(w, headers=None) for w in rows]


def _bytes(value) -> bytes | None:
    return None if value is None else bytes(value)


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def broker(tmp_path):
    b = Broker(str(tmp_path / "broker-1" / "data"))
    yield b
    b.close()


def read(spark, path, **options):
    reader = spark.read.format("strom").option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()
