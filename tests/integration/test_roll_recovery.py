"""A real node whose partitions roll: the segments a log rolled away from are fsynced in the
background and the recovery point follows them to the disk (recovery-point-offset-checkpoint)
with no clean shutdown, as Kafka's roll does; killed with kill -9 and restarted, the node
recovers from there and every acknowledged record is read back once. A topic's flush.ms
moves the recovery point to the log end with no roll at all."""
import os
import time

import pytest

from engine.checkpoint import read_offset_checkpoint
from engine.manager import RECOVERY_POINT_CHECKPOINT
from tests.integration.clients import confluent as reference
from tests.integration.cluster import StromNode
from tests.integration.test_clients import new_topic, text_messages

pytestmark = pytest.mark.timeout(180)
SEGMENT_BYTES = 16384
SLICE = 40  # records of ~200 bytes
WAIT_S = 30.0


def _segment_bases(node: StromNode, topic: str) -> list[int]:
    names = os.listdir(os.path.join(node.log_dir, f"{topic}-0"))
    return sorted(int(name[:-4]) for name in names if name.endswith(".log"))


def test_a_node_killed_after_rolls_recovers_from_the_flushed_roll_and_keeps_every_acked_record(tmp_path):
    node = StromNode(str(tmp_path), extra={"log.flush.offset.checkpoint.interval.ms": 200})
    try:
        node.start()
        topic = new_topic(node, partitions=1, config={"segment.bytes": str(SEGMENT_BYTES)})
        sent = text_messages(600, "rolled")
        for i in range(0, len(sent), SLICE):  # a producer each: batches well under a segment
            reference.produce(node.bootstrap, topic, sent[i:i + SLICE], acks="all")
        bases = _segment_bases(node, topic)
        assert len(bases) >= 4, bases
        checkpoint = os.path.join(node.log_dir, RECOVERY_POINT_CHECKPOINT)
        deadline = time.monotonic() + WAIT_S
        while (point := read_offset_checkpoint(checkpoint).get((topic, 0), 0)) != bases[-1]:
            assert time.monotonic() < deadline, f"recovery point {point}, last roll at {bases[-1]}"
            time.sleep(0.1)
        node.kill9()
        node.restart()
        records = reference.consume_assign(node.bootstrap, topic, [0], len(sent), timeout=60)
        assert [(r.offset, r.key, r.value) for r in records] == [
            (i, key, value) for i, (key, value, _) in enumerate(sent)], "each acked record once, in order"
        assert reference.end_offsets(node.bootstrap, topic, [0]) == {0: len(sent)}
    finally:
        node.cleanup()


def test_flush_ms_moves_the_recovery_point_to_the_log_end_without_a_roll(tmp_path):
    node = StromNode(str(tmp_path), extra={"log.flush.offset.checkpoint.interval.ms": 200,
                                           "log.flush.scheduler.interval.ms": 100})
    try:
        node.start()
        timed = new_topic(node, partitions=1, config={"flush.ms": "200"})
        untimed = new_topic(node, partitions=1)
        sent = text_messages(50, "timed")
        for topic in (timed, untimed):
            reference.produce(node.bootstrap, topic, sent, acks="all")
        checkpoint = os.path.join(node.log_dir, RECOVERY_POINT_CHECKPOINT)
        deadline = time.monotonic() + WAIT_S
        while (point := read_offset_checkpoint(checkpoint).get((timed, 0), 0)) != len(sent):
            assert time.monotonic() < deadline, f"recovery point {point}, log end {len(sent)}"
            time.sleep(0.1)
        assert _segment_bases(node, timed) == [0], "no roll moved it"
        assert read_offset_checkpoint(checkpoint).get((untimed, 0), 0) == 0, "Kafka's default flush.ms: never"
    finally:
        node.cleanup()
