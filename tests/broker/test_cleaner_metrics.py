"""kafka.log:type=LogCleaner's gauges move with a clean: max-clean-time-secs is the last clean's
time, cleaner-recopy-percent its bytes written as a percentage of its bytes read."""
import asyncio

from broker.off_loop import CLEAN_TIME, RECOPY_PERCENT, CleanerThread, cleaner_values
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
        assert cleaner_values(thread) == {CLEAN_TIME: 0.0, RECOPY_PERCENT: 0}
        assert cleaner_values(None) == {CLEAN_TIME: 0.0, RECOPY_PERCENT: 0}

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
