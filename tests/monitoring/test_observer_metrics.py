"""A broker's raft-metrics as a KRaft observer of the metadata log (KafkaRaftMetrics as a
broker's raft client registers it): current-state "observer", the leader, epoch and high
watermark it has learned, the voters it knows, and the records it has fetched, read from a real
observer core of a simulated quorum and rendered by the process's registry."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from broker.metadata_follower import ObserverLog, register_observer_metrics
from protocol.metrics import Registry
from raft.metrics import PREFIX, RaftTimings
from tests.raft.harness import Cluster


class Replica:
    """What the registration reads of a RaftDriver: its core, its log and its timings."""

    def __init__(self, core) -> None:
        self.core = core
        self.log = core.log
        self.timings = RaftTimings()


def scrape(registry: Registry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(registry.render().decode()) for s in family.samples}


def test_a_broker_serves_raft_metrics_as_an_observer_of_the_metadata_log():
    log = ObserverLog()
    c = Cluster(voters=3, observers=1, logs={100: log})
    c.run(500)
    c.append(["a", "b", "c"])
    c.run(200)
    leader = c.cores[c.leader()]
    registry = Registry()
    register_observer_metrics(registry, lambda: Replica(c.cores[100]))
    values = scrape(registry)
    assert values[(PREFIX + "current_state", (("current_state", "observer"),))] == 1
    assert values[(PREFIX + "current_leader", ())] == c.leader()
    assert values[(PREFIX + "current_epoch", ())] == leader.quorum.epoch
    assert values[(PREFIX + "high_watermark", ())] == leader.log.high_watermark > 0
    assert values[(PREFIX + "log_end_offset", ())] == leader.log.end_offset().offset
    assert values[(PREFIX + "log_end_epoch", ())] == leader.log.end_offset().epoch == leader.quorum.epoch
    assert values[(PREFIX + "number_of_voters", ())] == 3
    assert values[(PREFIX + "number_of_observers", ())] == 0  # only the leader knows them
    assert values[(PREFIX + "append_records_total", ())] == 0  # an observer never leads
    # fetch-records: every entry the observer appended came from a fetch of the leader's log
    fetched = values[(PREFIX + "fetch_records_total", ())]
    assert fetched == log.fetched_records == leader.log.end_offset().offset


def test_fetched_records_count_each_entry_the_observer_appends():
    log = ObserverLog()
    c = Cluster(voters=3, observers=1, logs={100: log})
    c.run(500)
    before = log.fetched_records
    c.append(["x", "y"])
    c.run(200)
    assert log.fetched_records == before + 2


def test_nothing_is_served_before_the_metadata_log_replica_starts():
    registry = Registry()
    register_observer_metrics(registry, lambda: None)
    values = scrape(registry)
    assert not any(name == PREFIX + "current_state" for name, _ in values)
    assert values[(PREFIX + "fetch_records_total", ())] == 0
