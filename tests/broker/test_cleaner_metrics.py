"""kafka.log:type=LogCleaner's gauges move with a clean: max-clean-time-secs is the last clean's
time, cleaner-recopy-percent its bytes written as a percentage of its bytes read;
LogCleanerManager's max-dirty-percent is the last pass's greatest dirty ratio."""
import asyncio

from broker.off_loop import CLEAN_TIME, MAX_DIRTY_PERCENT, RECOPY_PERCENT, CleanerThread, cleaner_values
from strom.config import PROPERTIES
from tests.engine.test_cleaner import NOW, compacted_config
from tests.engine.test_cleaner_manager import _fill, _manager

CLEANER_PROPERTIES = ("log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.threads",
                      "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
                      "log.cleaner.io.max.bytes.per.second")


def test_the_cleaners_gauges_are_its_last_cleans_time_and_recopy_percent(tmp_path):
    manager = _manager(tmp_path)
    config = {name: PROPERTIES[name][1] for name in CLEANER_PROPERTIES}
    config["log.cleaner.dedupe.buffer.size"] = 1 << 20
    try:
        lg = manager.get_or_create_log("compacted", 0, compacted_config())
        _fill(lg, 3, 10)  # 30 records of 3 keys: a clean keeps 3
        thread = CleanerThread(manager, config, clock=lambda: NOW)
        assert cleaner_values(thread) == {CLEAN_TIME: 0.0, RECOPY_PERCENT: 0, MAX_DIRTY_PERCENT: 0}
        assert cleaner_values(None) == {CLEAN_TIME: 0.0, RECOPY_PERCENT: 0, MAX_DIRTY_PERCENT: 0}

        async def clean() -> None:
            task = asyncio.get_running_loop().create_task(thread.run())
            async with asyncio.timeout(10):
                while thread.last_bytes_read == 0:
                    await asyncio.sleep(0.01)
            await thread.stop()
            task.cancel()
        asyncio.run(clean())
        values = cleaner_values(thread)
        assert values[CLEAN_TIME] > 0
        assert 0 < values[RECOPY_PERCENT] < 50
        assert values[RECOPY_PERCENT] == 100 * thread.last_bytes_written // thread.last_bytes_read
    finally:
        manager.shutdown()


def test_max_dirty_percent_is_the_last_passs_dirtiest_cleanable_ratio_as_kafkas_gauge(tmp_path):
    """Kafka's LogCleanerManager sets dirtiestLogCleanableRatio at each grabFilthiestCompactedLog
    and max-dirty-percent is (100 * it).toInt: a log of 30 records never cleaned is all dirty
    below its active segment, and the pass after its clean finds nothing dirty."""
    manager = _manager(tmp_path)
    try:
        lg = manager.get_or_create_log("compacted", 0, compacted_config())
        _fill(lg, 3, 10)
        thread = CleanerThread(manager, {name: PROPERTIES[name][1] for name in CLEANER_PROPERTIES},
                               clock=lambda: NOW)
        seen: list[int] = []

        async def passes() -> None:
            thread._loop = asyncio.get_running_loop()
            for _ in range(2):
                await thread._loop.run_in_executor(None, manager.clean_once, thread.cleaner, NOW,
                                                   thread._surveyed)
                seen.append(cleaner_values(thread)[MAX_DIRTY_PERCENT])
        asyncio.run(passes())
        assert seen == [100, 0]
    finally:
        manager.shutdown()
