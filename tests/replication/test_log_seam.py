"""engine.log.Log keeps the PartitionLog seam (replication/log.py) exactly as the in-memory log
the core is tested against: one set of tests, run against both."""
import pytest

from engine.log import Log
from ext.batch import build_batch
from replication.log import MemoryPartitionLog


class EngineLog:
    def __init__(self, tmp_path):
        self.log = Log(str(tmp_path / "t-0"))

    def append(self, n: int, epoch: int) -> None:
        batch = bytearray(build_batch([(None, b"v%d" % i, [], 1_700_000_000_000) for i in range(n)]))
        self.log.append_as_leader(batch, epoch)


class MemoryLog:
    def __init__(self, tmp_path):
        self.log = MemoryPartitionLog()

    def append(self, n: int, epoch: int) -> None:
        self.log.append_as_leader([b"v%d" % i for i in range(n)], epoch, 0)


@pytest.fixture(params=[EngineLog, MemoryLog], ids=["engine", "memory"])
def subject(request, tmp_path):
    return request.param(tmp_path)


def test_end_offset_for_epoch_is_the_start_of_the_next_epoch_or_the_log_end(subject):
    log = subject.log
    subject.append(5, 0)
    subject.append(3, 2)
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == (0, 5)  # never led: the largest earlier epoch
    assert log.end_offset_for_epoch(2) == (2, 8)
    assert log.end_offset_for_epoch(3) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_a_new_leader_epoch_starts_at_the_assigned_offset(subject):
    log = subject.log
    subject.append(5, 0)
    log.assign_epoch_start_offset(1, 5)
    assert log.latest_epoch == 1
    assert log.end_offset_for_epoch(0) == (0, 5)


def test_the_high_watermark_only_rises_never_past_the_log_end_and_says_when_it_moved(subject):
    log = subject.log
    subject.append(5, 0)
    assert log.maybe_increment_high_watermark(3) is True
    assert log.maybe_increment_high_watermark(2) is False and log.high_watermark == 3
    assert log.maybe_increment_high_watermark(9) is True and log.high_watermark == 5
    assert log.maybe_increment_high_watermark(9) is False


def test_truncating_at_the_log_end_drops_an_epoch_that_never_wrote(subject):
    """A leader cached its epoch's start, lost leadership before writing: as a follower it must
    not claim that epoch in its fetches."""
    log = subject.log
    subject.append(5, 0)
    log.assign_epoch_start_offset(1, 5)
    assert log.truncate_to(5) is False
    assert log.latest_epoch == 0


def test_truncation_takes_the_high_watermark_and_the_epochs_with_it(subject):
    log = subject.log
    subject.append(5, 0)
    subject.append(5, 1)
    log.maybe_increment_high_watermark(8)
    assert log.truncate_to(5) is True
    assert (log.log_end_offset, log.high_watermark, log.latest_epoch) == (5, 5, 0)
