"""KRaft's metrics (KIP-595's ``kafka.server:type=raft-metrics``, KIP-853's voter counts), read
from the raft core on scrape.

``raft_values(core, log_end_offset)`` is pure: it reads the role, the quorum and the log, and
returns each metric under the name Prometheus' JMX exporter gives it with Strimzi's rules
(``kafka_server_raftmetrics_`` and the attribute, dashes as underscores). ``RaftTimings`` holds
the latencies the driver measures, in plain integers: nothing is computed until a scrape.
"""
from __future__ import annotations

from dataclasses import dataclass

from raft.quorum_state import Candidate, Follower, Leader, Prospective, Resigned, Unattached

PREFIX = "kafka_server_raftmetrics_"
# Every gauge raft_values answers (current-state is a label of its own gauge).
RAFT_NAMES = tuple(PREFIX + name for name in (
    "current_leader", "current_epoch", "current_vote", "high_watermark", "log_end_offset", "log_end_epoch",
    "number_of_voters", "number_of_observers", "uncommitted_voter_change", "commit_latency_avg",
    "commit_latency_max", "election_latency_avg", "election_latency_max", "append_records_total"))


def current_state(core) -> str:
    """KafkaRaftMetrics' current-state: leader, candidate, voted, follower, observer or
    unattached (a prospective voter reads as candidate, a resigned leader as leader)."""
    s = core.state
    if isinstance(s, (Leader, Resigned)):
        return "leader"
    if isinstance(s, (Candidate, Prospective)):
        return "candidate"
    if isinstance(s, Follower):
        return "follower" if core.quorum.is_voter else "observer"
    if isinstance(s, Unattached) and s.voted_id >= 0:
        return "voted"
    return "unattached"


@dataclass
class RaftTimings:
    """What the driver counts as it runs: commit latency (append to commit, on the leader),
    election latency (an election's start to its leader), appended records."""

    commit_count: int = 0
    commit_sum_ms: int = 0
    commit_max_ms: int = 0
    election_count: int = 0
    election_sum_ms: int = 0
    election_max_ms: int = 0
    append_records_total: int = 0

    def commit(self, latency_ms: int) -> None:
        self.commit_count += 1
        self.commit_sum_ms += latency_ms
        self.commit_max_ms = max(self.commit_max_ms, latency_ms)

    def election(self, latency_ms: int) -> None:
        self.election_count += 1
        self.election_sum_ms += latency_ms
        self.election_max_ms = max(self.election_max_ms, latency_ms)


def _avg(total: int, count: int) -> float:
    return total / count if count else 0.0


def raft_values(core, log_end_offset: int, timings: RaftTimings | None = None) -> dict[str, float]:
    """Every gauge of raft-metrics but current-state (a label, see current_state), by name."""
    q = core.quorum
    s = core.state
    voters = core.voter_set.ids()
    hw = core.log.high_watermark
    observers = len(core.observers) if isinstance(s, Leader) else 0
    values = {
        "current_leader": q.leader_id(),
        "current_epoch": q.epoch,
        "current_vote": s.election_state().voted_id,
        "high_watermark": hw if hw >= 0 else -1,
        "log_end_offset": log_end_offset,
        "log_end_epoch": core.log.end_offset().epoch,
        "number_of_voters": len(voters),
        "number_of_observers": observers,
        "uncommitted_voter_change": 1 if getattr(core, "_pending_change", None) is not None else 0,
    }
    t = timings or RaftTimings()
    values.update({
        "commit_latency_avg": _avg(t.commit_sum_ms, t.commit_count),
        "commit_latency_max": t.commit_max_ms,
        "election_latency_avg": _avg(t.election_sum_ms, t.election_count),
        "election_latency_max": t.election_max_ms,
        "append_records_total": t.append_records_total,
    })
    return {PREFIX + name: value for name, value in values.items()}


def register_raft(registry, driver, timings: RaftTimings | None = None) -> None:
    """raft-metrics in a process's registry (protocol/metrics.py's Registry), read on scrape as
    the JMX exporter with Strimzi's rules renders them: current-state a 1 labelled with the state,
    the others gauges (append-records-total a counter of the driver's plain count). ``driver()``
    is the RaftDriver, None before it exists; nothing is served for a replica not started."""
    def values() -> dict[str, float]:
        raft = driver()
        if raft is None or getattr(raft, "core", None) is None:
            return {}
        return raft_values(raft.core, raft.log.end_offset().offset, timings or getattr(raft, "timings", None))

    def state() -> dict[tuple[str, ...], int]:
        raft = driver()
        if raft is None or getattr(raft, "core", None) is None:
            return {}
        return {(current_state(raft.core),): 1}

    registry.gauge(PREFIX + "current_state", "KRaft's current-state", state, ("current_state",))
    for name in RAFT_NAMES:
        add = registry.counter_fn if name.endswith("_total") else registry.gauge
        add(name, "KRaft's raft-metrics", lambda name=name: values().get(name, 0))
