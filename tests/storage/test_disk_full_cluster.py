"""A broker whose log dir fills up, on a real cluster (3 controllers, 3 brokers; root only: the
broker's data directory is a small tmpfs mounted after formatting, before the start).

An idempotent acks=all producer on an RF=3, min.insync.replicas=2 topic fills the disk. The
broker must halt with exit code 1 and one ERROR line naming its log dir and the OS error (no
traceback); the controller moves its leaderships; the producer keeps being acknowledged by the
other two; once space returns and it restarts, it recovers, rejoins every ISR, and every
replica in the ISR holds every acknowledged record exactly once, in order."""
from __future__ import annotations

import re
import shutil
import time

import pytest

from tests.integration.replicated_cluster import AckedRecords, ReplicatedCluster
from tests.storage import tmpfs

pytestmark = pytest.mark.timeout(150)
VICTIM = 6
BROKERS = {4, 5, 6}
TOPIC = "disk-full"
PARTITIONS = 3
DISK_KIB = 1024  # about 900 records of 1 KiB fill it, with the files of 3 partitions
SPACE_AGAIN_KIB = 64 * 1024
FILL_BOUND_S = 30.0
AFTER_FAILURE = 600  # records produced once the broker is gone: all must be acknowledged
PAD = b"x" * 1000


def test_a_broker_whose_log_dir_fills_halts_with_one_error_line_and_rejoins_once_space_returns():
    reason = tmpfs.can_mount()
    if reason is not None:
        pytest.skip(reason)
    from confluent_kafka import Producer

    cluster = ReplicatedCluster()
    data = cluster.brokers[VICTIM].metadata_dir
    formatted = data + ".formatted"
    shutil.move(data, formatted)
    try:
        with tmpfs.mounted(data, DISK_KIB):
            tmpfs.copy_into(formatted, data)
            try:
                cluster.start()
                cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
                acks = AckedRecords()
                producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                     "enable.idempotence": True, "linger.ms": 5,
                                     "message.timeout.ms": 60000})
                sent = fill_until_the_broker_halts(cluster, producer, acks)
                victim = cluster.brokers[VICTIM]
                assert victim.proc.returncode == 1, victim.failure("the broker did not halt with exit 1")
                check_one_clear_error_line(victim.log_path, data)

                for p in range(PARTITIONS):
                    cluster.wait_for_leader(TOPIC, p, exclude={VICTIM})
                before = acks.count()
                for i in range(sent, sent + AFTER_FAILURE):
                    producer.produce(TOPIC, value(i), partition=i % PARTITIONS, on_delivery=acks)
                    producer.poll(0)
                assert producer.flush(30) == 0
                assert acks.errors == [], acks.errors[:5]
                assert acks.count() - before >= AFTER_FAILURE

                tmpfs.resize(data, SPACE_AGAIN_KIB)  # space returns
                cluster.restart(VICTIM)
                for p in range(PARTITIONS):
                    cluster.wait_for_isr(TOPIC, p, BROKERS)
                cluster.assert_all_acknowledged(acks)
                assert "Traceback" not in read(victim.log_path)
            finally:
                cluster.close()
    finally:
        shutil.rmtree(cluster.quorum.base, ignore_errors=True)


def value(i: int) -> bytes:
    return b"%08d-" % i + PAD


def fill_until_the_broker_halts(cluster: ReplicatedCluster, producer, acks: AckedRecords) -> int:
    """Produce until the victim's process exits; returns how many records were sent."""
    victim = cluster.brokers[VICTIM]
    deadline = time.monotonic() + FILL_BOUND_S
    i = 0
    while victim.running:
        assert time.monotonic() < deadline, victim.failure(f"still running after {i} records")
        for _ in range(50):
            producer.produce(TOPIC, value(i), partition=i % PARTITIONS, on_delivery=acks)
            i += 1
        producer.poll(0.02)
    return i


def check_one_clear_error_line(log_path: str, data: str) -> None:
    text = read(log_path)
    assert "Traceback" not in text and "Bus error" not in text, text[-3000:]
    failures = [line for line in text.splitlines() if " ERROR " in line and "failed while" in line]
    assert len(failures) == 1, text[-3000:]
    assert re.search(rf"log dir {re.escape(data)} failed while .*: \[Errno 28\] No space left on device; "
                     rf"no log dir is left online: halting broker {VICTIM}", failures[0]), failures[0]


def read(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()
