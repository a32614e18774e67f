"""A failing log dir, without root: a segment's fd is replaced by /dev/full (every write fails
with ENOSPC) or a checkpoint's path by a directory. Each storage failure raises
KafkaStorageError, takes the log dir offline once through the LogDirFailureChannel, and the
ReplicaManager answers KAFKA_STORAGE_ERROR for the partitions of that dir from then on."""
from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest

from engine.config import LogConfig
from engine.log import Log
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from engine.manager import LogManager
from protocol.errors import Error
from tests.broker.replica_nodes import TOPIC, Cluster, Node, records, settle

STORAGE_ERROR = Error.KAFKA_STORAGE_ERROR


class Reports:
    """A LogDirFailureChannel handler that records what it was told."""

    def __init__(self, then=None):
        self.calls: list[tuple[str, str]] = []
        self.then = then

    def __call__(self, log_dir: str, message: str) -> None:
        self.calls.append((log_dir, message))
        if self.then is not None:
            self.then(log_dir)


def fail_writes(segment) -> int:
    """Point the segment's fd at /dev/full; returns a dup of the real file to restore it."""
    saved = os.dup(segment.fd)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, segment.fd)
    finally:
        os.close(full)
    return saved


def restore(segment, saved: int) -> None:
    os.dup2(saved, segment.fd)
    os.close(saved)


def test_an_append_that_fails_with_enospc_raises_kafka_storage_error_and_takes_the_dir_offline(tmp_path):
    reports = Reports()
    log = Log(str(tmp_path / "t-0"), LogConfig(), failure_channel=LogDirFailureChannel(reports))
    log.append_as_leader(records(5), 0)
    saved = fail_writes(log.active_segment)
    try:
        with pytest.raises(KafkaStorageError) as failed:
            log.append_as_leader(records(5), 0)
        with pytest.raises(KafkaStorageError):
            log.append_as_follower(_with_offsets(records(5), 5))
    finally:
        restore(log.active_segment, saved)
    assert failed.value.errno == errno.ENOSPC
    assert failed.value.log_dir == str(tmp_path)
    assert log.log_end_offset == 5 and log.active_segment.size == os.path.getsize(log.active_segment.log_path)
    assert reports.calls == [(str(tmp_path), str(failed.value))]  # once, for both failures
    assert str(tmp_path) in reports.calls[0][1] and "No space left on device" in reports.calls[0][1]
    assert "appending to t-0" in reports.calls[0][1]
    log.close()


def _with_offsets(batch: bytearray, base_offset: int) -> bytearray:
    batch[0:8] = base_offset.to_bytes(8, "big")
    return batch


def test_a_log_without_a_channel_logs_the_failure_as_one_error_line_without_a_traceback(tmp_path, caplog):
    log = Log(str(tmp_path / "t-0"))
    saved = fail_writes(log.active_segment)
    try:
        with caplog.at_level(logging.ERROR, logger="strom.storage"), pytest.raises(KafkaStorageError):
            log.append_as_leader(records(3), 0)
    finally:
        restore(log.active_segment, saved)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    assert f"log dir {tmp_path} failed while appending to t-0: [Errno 28]" in errors[0].getMessage()
    log.close()


def test_a_checkpoint_write_that_fails_takes_the_dir_offline(tmp_path):
    reports = Reports()
    logs = LogManager([str(tmp_path / "data")], cluster_id="c", node_id=1,
                      failure_channel=LogDirFailureChannel(reports))
    logs.startup()
    logs.get_or_create_log("t", 0)
    blocker = tmp_path / "data" / "replication-offset-checkpoint"
    blocker.mkdir()
    (blocker / "x").write_text("a directory where the checkpoint goes: the rename fails")
    with pytest.raises(KafkaStorageError):
        logs.checkpoint_high_watermarks()
    assert [d for d, _ in reports.calls] == [str(tmp_path / "data")]
    assert "writing replication-offset-checkpoint" in reports.calls[0][1]


# ---- the ReplicaManager ----------------------------------------------------------------------


def node_with_reports(tmp_path) -> tuple[Node, Reports]:
    cluster = Cluster()
    cluster.create_topic(partitions=2)
    node = Node(tmp_path, 1, cluster)
    reports = Reports(then=node.replicas.handle_log_dir_failure)
    node.replicas.failure_channel.on_offline = reports
    return node, reports


def take_offline(node: Node) -> None:
    node.replicas.failure_channel.maybe_add_offline_log_dir(node.dir, "testing", OSError(errno.EIO, "EIO"))


def test_a_produce_whose_append_fails_answers_kafka_storage_error_and_reports_the_dir_once(tmp_path):
    node, reports = node_with_reports(tmp_path)

    async def scenario():
        assert (await node.produce(5, acks=1)).error_code == 0
        segment = node.log(0).active_segment
        saved = fail_writes(segment)
        try:
            failed = await node.produce(5, acks=1)
            again = await node.produce(5, acks=1, partition=1)  # same dir, another partition
        finally:
            restore(segment, saved)
        # The disk works again, but the dir stays offline until the broker restarts.
        after = await node.produce(5, acks=1)
        return failed, again, after

    failed, again, after = asyncio.run(scenario())
    assert (failed.error_code, again.error_code, after.error_code) == (STORAGE_ERROR,) * 3
    assert len(reports.calls) == 1 and reports.calls[0][0] == node.dir
    assert node.log(0).log_end_offset == 5 and node.log(1).log_end_offset == 0


def test_reads_of_an_offline_dir_answer_kafka_storage_error(tmp_path):
    node, reports = node_with_reports(tmp_path)

    async def scenario():
        await node.produce(5, acks=1)
        take_offline(node)
        consumer, _ = await node.fetch(0)
        follower = await node.replica_fetch(2, 0)
        listed = await node.list_offsets(-1)
        return consumer, follower, listed

    consumer, follower, listed = asyncio.run(scenario())
    assert consumer.error_code == follower.error_code == listed.error_code == STORAGE_ERROR
    assert reports.calls and reports.calls[0][0] == node.dir


def test_a_parked_acks_all_produce_is_answered_kafka_storage_error_when_its_dir_fails(tmp_path):
    node, reports = node_with_reports(tmp_path)

    async def scenario():
        parked = asyncio.ensure_future(node.produce(5, acks=-1, timeout_ms=10000))
        await settle()
        assert not parked.done()  # the followers have not fetched: the HW waits
        segment = node.log(1).active_segment
        saved = fail_writes(segment)
        try:
            failed = await node.produce(5, acks=-1, partition=1)
        finally:
            restore(segment, saved)
        return failed, await asyncio.wait_for(parked, 2)

    failed, parked = asyncio.run(scenario())
    assert failed.error_code == parked.error_code == STORAGE_ERROR
    assert len(reports.calls) == 1


def test_a_metadata_change_skips_the_partitions_of_an_offline_dir(tmp_path):
    node, _ = node_with_reports(tmp_path)
    take_offline(node)
    epoch = node.partition(0).leader_epoch
    node.cluster.change(0, leader=2)
    node.sync()  # no make_follower (it would truncate): the partition stays as it was
    assert node.partition(0).leader_epoch == epoch
    assert (TOPIC, 0) not in node.fetchers.fetching
