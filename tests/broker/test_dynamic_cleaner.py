"""The log cleaner's properties changed without a restart (Kafka's LogCleaner.reconfigure): the
running CleanerThread takes a new Cleaner with them for its next pass and still cleans."""
import asyncio

from broker.off_loop import CleanerThread
from strom.config import PROPERTIES
from tests.broker.test_cleaner_metrics import CLEANER_PROPERTIES
from tests.engine.test_cleaner import NOW, compacted_config
from tests.engine.test_cleaner_manager import _fill, _manager


def test_a_reconfigured_cleaner_cleans_with_its_new_throttle_buffers_and_backoff(tmp_path):
    manager = _manager(tmp_path)
    config = {name: PROPERTIES[name][1] for name in CLEANER_PROPERTIES}
    config["log.cleaner.dedupe.buffer.size"] = 1 << 20
    try:
        thread = CleanerThread(manager, config, clock=lambda: NOW)
        before = thread.cleaner
        thread.reconfigure({**config, "log.cleaner.io.max.bytes.per.second": 1048576.0,
                            "log.cleaner.io.buffer.size": 65536, "log.cleaner.backoff.ms": 250,
                            "log.cleaner.dedupe.buffer.size": 2 << 20, "log.cleaner.threads": 2})
        assert thread.cleaner is not before
        assert thread.cleaner.throttler.rate == 1048576.0
        assert thread.cleaner.chunk_size == 65536
        assert thread.backoff_s == 0.25
        lg = manager.get_or_create_log("compacted", 0, compacted_config())
        _fill(lg, 3, 10)  # 30 records of 3 keys: a clean keeps 3

        async def clean() -> None:
            task = asyncio.get_running_loop().create_task(thread.run())
            async with asyncio.timeout(10):
                while thread.last_bytes_read == 0:
                    await asyncio.sleep(0.01)
            await thread.stop()
            task.cancel()
        asyncio.run(clean())
        assert thread.last_bytes_written < thread.last_bytes_read
    finally:
        manager.shutdown()
