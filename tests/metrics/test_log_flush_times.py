"""LogFlushStats' LogFlushRateAndTimeMs: every flush of a log's segments is timed, the scheduler's
and the rolls' (a plan run in a worker thread, observed on the loop once it returns) and
flush.messages' (inline, at the append), and the broker's histogram observes each."""
import asyncio

from prometheus_client.parser import text_string_to_metric_families

from broker.metrics import register_broker_metrics
from broker.off_loop import flush_dirty_off_loop
from engine.config import LogConfig
from engine.manager import LogManager, format_log_dir
from ext.batch import build_batch
from protocol.metrics import Registry

CLUSTER_ID = "c2Ryb20tbWV0cmljcy10ZXN0"


def manager(tmp_path, **config) -> LogManager:
    log_dir = str(tmp_path / "data")
    format_log_dir(log_dir, CLUSTER_ID, 1)
    logs = LogManager([log_dir], LogConfig(**config), cluster_id=CLUSTER_ID, node_id=1)
    logs.startup()
    return logs


def append(log_, n: int) -> None:
    log_.append_as_leader(bytearray(build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)] * n)), 0)


class _Replicas:
    partitions: dict = {}
    isr_shrinks = isr_expands = 0
    purgatory: list = []


def flushes_observed(registry: Registry) -> float:
    for family in text_string_to_metric_families(registry.render().decode()):
        for sample in family.samples:
            if sample.name == "kafka_log_logflushstats_logflushrateandtimems_count":
                return sample.value
    raise AssertionError("no LogFlushRateAndTimeMs")


def test_a_scheduled_flush_and_an_inline_one_are_each_observed_once(tmp_path):
    logs = manager(tmp_path, flush_messages=5, flush_ms=1)
    registry = Registry()
    register_broker_metrics(registry, _Replicas(), None, lambda: 3, logs)
    log_ = logs.get_or_create_log("t", 0)
    append(log_, 2)  # below flush.messages: nothing flushed yet
    assert flushes_observed(registry) == 0
    append(log_, 3)  # reaches flush.messages: flushed inline, at the append
    assert flushes_observed(registry) == 1
    append(log_, 1)
    moved = asyncio.run(flush_dirty_off_loop(logs, lambda: 2**62))  # flush.ms long past
    assert moved == 1 and flushes_observed(registry) == 2
    logs.shutdown()
