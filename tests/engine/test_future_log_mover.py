"""The move's asyncio edge (replication/log_dir_mover.py) over a LogManager of two log dirs:
appends go on while the copy runs, the swap leaves nothing behind, and the copy's bytes stay
within replica.alter.log.dirs.io.max.bytes.per.second."""
import asyncio

from engine.manager import LogManager, format_log_dir
from replication import log_dir_mover
from replication.log_dir_mover import LogDirMover
from tests.engine.batches import producer_batch


def _logs(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        format_log_dir(d, "MkU3OEVBNTcwNTJENDM2Qg", 1)
    logs = LogManager(dirs)
    logs.startup()
    return logs, dirs


def _contents(log_):
    found = log_.read(log_.log_start_offset, 1 << 30)
    return b"" if found.records is None else found.records.read()


def test_appends_during_the_move_are_all_in_the_log_it_swaps_in(tmp_path):
    async def main():
        logs, (a, b) = _logs(tmp_path)
        current = logs.get_or_create_log("t", 0)
        for _ in range(20):
            current.append_as_leader(bytearray(producer_batch(10)), leader_epoch=1)
        swapped = []
        mover = LogDirMover(logs, lambda tp, lg: swapped.append(lg))
        target = b if current.parent_dir == a else a
        logs.create_future_log("t", 0, target)
        mover.start(("t", 0))
        appended = 0
        while not swapped:  # a producer writes to whichever log is current, a batch a ms at most
            if appended < 300:
                logs.get_log("t", 0).append_as_leader(bytearray(producer_batch(10)), leader_epoch=1)
                appended += 1
            await asyncio.sleep(0.001)
        [moved] = swapped
        assert moved is logs.get_log("t", 0) and moved.parent_dir == target
        assert moved.log_end_offset == 200 + 10 * appended
        assert not mover.moving(("t", 0)) and logs.future_logs == {}
        logs.shutdown()
    asyncio.run(main())


def test_the_copy_stays_within_the_alter_log_dirs_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(log_dir_mover, "CHUNK_BYTES", 2000)
    now = [0.0]

    async def sleep(seconds):  # the clock moves only while the copy waits
        now[0] += seconds
        await asyncio.sleep(0)

    async def main():
        logs, (a, b) = _logs(tmp_path)
        current = logs.get_or_create_log("t", 0)
        for _ in range(50):
            current.append_as_leader(bytearray(producer_batch(10)), leader_epoch=1)
        size = current.size_in_bytes
        done = asyncio.Event()
        mover = LogDirMover(logs, lambda tp, lg: done.set(), rate=lambda: 5000.0,
                            clock=lambda: now[0], sleep=sleep)
        logs.create_future_log("t", 0, b if current.parent_dir == a else a)
        mover.start(("t", 0))
        await done.wait()
        assert mover.copied_bytes == size
        # the last chunk goes at once; everything before it took its time at 5000 B/s
        assert (size - 2000 * 1.5) / 5000 <= now[0] <= size / 5000 + 0.01
        logs.shutdown()
    asyncio.run(main())
