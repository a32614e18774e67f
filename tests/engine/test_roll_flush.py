"""A rolled segment is flushed in the background and the recovery point follows, as Kafka's
UnifiedLog.roll schedules flushUptoOffsetExclusive(new segment's base offset) on its scheduler
thread: after a crash, recovery then scans the segments from the last roll on, not the whole
log since the last clean shutdown. The fsyncs run on a worker thread from a FlushPlan (fds of
their own, so the log may delete or close a segment meanwhile); the log takes the result back
with ``flushed``, which a truncation in between voids."""
from __future__ import annotations

import os
import threading

from engine.log import Log
from tests.engine.test_recovery import CONFIG, NOW, abandon, build


def rolled_log(path: str) -> Log:
    log = build(path, batches=20)
    assert len(log.segments) >= 3
    return log


def flush_in_a_thread(log: Log) -> None:
    plan = log.flush_plan(log.flush_wanted)
    worker = threading.Thread(target=plan.run)
    worker.start()
    worker.join()
    log.flushed(plan, NOW)


def test_a_roll_asks_for_the_segments_before_the_new_one_to_be_flushed(tmp_path):
    log = rolled_log(str(tmp_path / "t-0"))
    assert log.flush_wanted == log.active_segment.base_offset
    assert log.recovery_point == 0, "the roll itself fsyncs nothing"
    flush_in_a_thread(log)
    assert log.recovery_point == log.active_segment.base_offset
    assert log.flush_plan(log.flush_wanted) is None, "nothing left to flush up to there"
    log.close()


def test_a_plan_holds_its_own_descriptors_and_closes_them_all(tmp_path):
    log = rolled_log(str(tmp_path / "t-0"))
    plan = log.flush_plan(log.flush_wanted)
    rolled = [s for s in log.segments if s.base_offset < log.flush_wanted]
    fds = plan.fds()
    snapshots = sorted(name for name in os.listdir(log.dir) if name.endswith(".snapshot"))
    assert len(snapshots) == len(rolled), "each roll wrote the producer snapshot at its new segment"
    assert len(fds) == 4 * len(rolled) + 1, \
        "each rolled segment's log and two indexes, the producer snapshot of each roll, and the dir"
    opened = sorted(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in plan.snapshot_fds)
    assert opened == snapshots
    assert not {s.fd for s in log.segments} & set(fds)
    log.close()  # the log closes its files while the plan is under way: the plan's stay open
    plan.run()
    for fd in fds:
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise AssertionError(f"fd {fd} left open")


def test_a_truncation_while_flushing_leaves_the_recovery_point(tmp_path):
    log = rolled_log(str(tmp_path / "t-0"))
    plan = log.flush_plan(log.flush_wanted)
    log.truncate_to(log.segments[1].base_offset + 3)
    plan.run()
    log.flushed(plan, NOW)
    assert log.recovery_point == 0, "what was fsynced is not the log any more"
    log.close()


def test_a_clean_flush_meanwhile_is_never_moved_back(tmp_path):
    log = rolled_log(str(tmp_path / "t-0"))
    plan = log.flush_plan(log.flush_wanted)
    log.flush()
    plan.run()
    log.flushed(plan, NOW)
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_after_a_crash_only_what_follows_the_flushed_roll_is_recovered(tmp_path):
    """Kafka's rule below the recovery point: a flipped byte there is not looked for. Above it
    the torn tail goes. So the flushed roll shows in what recovery reads."""
    path = str(tmp_path / "t-0")
    log = rolled_log(path)
    flush_in_a_thread(log)
    recovery_point = log.recovery_point
    assert recovery_point == log.active_segment.base_offset > log.segments[0].base_offset
    first, active = log.segments[0].log_path, log.active_segment.log_path
    end = log.log_end_offset
    abandon(log)
    with open(first, "r+b") as f:  # below the recovery point: trusted, not scanned
        f.seek(100)
        f.write(b"\x00")
    with open(active, "r+b") as f:  # a torn tail in the active segment
        f.truncate(os.path.getsize(active) - 10)
    recovered = Log(path, CONFIG, recovery_point=recovery_point, had_clean_shutdown=False)
    assert recovered.log_end_offset < end, "the torn tail is cut"
    assert recovered.log_end_offset >= recovery_point, (
        "the damaged first segment would have been cut at its first batch, had it been scanned")
    recovered.close()
