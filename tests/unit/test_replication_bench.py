"""The replication benchmark's measuring rules (bench/e2e/failover.py), its targets and its
section of the report (bench/e2e/replication.py, bench/e2e/render.py), on made-up figures."""
import os

import pytest

from bench.e2e import replication
from bench.e2e.failover import AckLog, ResumeWatch, distribution, longest_gap, paired_ratio, percentile
from bench.e2e.render import render_markdown
from bench.e2e.run import targets


def test_nearest_rank_p99_of_twenty_trials_is_the_worst():
    values = [0.1 * i for i in range(1, 21)]
    assert percentile(values, 99) == pytest.approx(2.0)
    assert percentile(values, 50) == pytest.approx(1.0)
    assert percentile(values, 90) == pytest.approx(1.8)
    assert percentile([3.0], 99) == 3.0


def test_distribution_keeps_every_value_in_trial_order():
    d = distribution([0.3, 0.1, 0.2])
    assert (d["n"], d["min"], d["p50"], d["max"]) == (3, 0.1, 0.2, 0.3)
    assert d["values"] == [0.3, 0.1, 0.2]


def test_paired_ratio_ranges_over_back_to_back_rounds():
    r = paired_ratio([60.0, 50.0, 90.0], [100.0, 100.0, 100.0])
    assert r["ratio"] == pytest.approx(0.6)
    assert (r["pair_min"], r["pair_max"]) == (pytest.approx(0.5), pytest.approx(0.9))
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])


def test_an_ack_after_the_fault_for_a_record_sent_before_it_does_not_end_the_stall():
    log = AckLog(2)
    log.add(0, sent=9.9, acked=10.01)  # the dead leader's answer, read after the kill at 10.0
    log.add(1, sent=10.2, acked=10.3)
    watch = ResumeWatch(log, [0, 1], t0=10.0)
    assert watch.check() is None
    log.add(0, sent=10.1, acked=10.8)
    assert watch.check() == pytest.approx(0.8)
    assert watch.per_partition() == {0: pytest.approx(0.8), 1: pytest.approx(0.3)}


def test_the_stall_is_the_last_of_the_victims_partitions_to_resume():
    log = AckLog(3)
    log.add(2, sent=4.0, acked=4.5)  # not led by the victim: does not count
    watch = ResumeWatch(log, [0, 1], t0=5.0)
    log.add(0, sent=5.1, acked=5.2)
    assert watch.check() is None, "partition 1 has not resumed"
    log.add(1, sent=5.0, acked=6.5)
    assert watch.check() == pytest.approx(1.5)


def test_acks_before_the_fault_are_skipped_by_bisection():
    log = AckLog(1)
    for i in range(100):
        log.add(0, sent=i / 10, acked=i / 10 + 0.01)
    watch = ResumeWatch(log, [0], t0=5.0)
    assert watch.cursor[0] == 50
    assert watch.check() == pytest.approx(0.01)


def test_longest_gap_counts_the_window_edges():
    log = AckLog(2)
    for t in (1.0, 1.1, 1.7, 1.8):
        log.add(0, sent=t - 0.01, acked=t)
    assert longest_gap(log, [0], 1.0, 2.0) == pytest.approx(0.6)
    assert longest_gap(log, [0], 0.5, 1.8) == pytest.approx(0.6)
    assert longest_gap(log, [0], 1.0, 2.5) == pytest.approx(0.7)
    silent = longest_gap(log, [0, 1], 1.0, 2.0)
    assert silent == pytest.approx(1.0), "a partition that acknowledged nothing waited the whole window"


def _stat(median, low=None, high=None):
    return {"median": median, "min": low if low is not None else median,
            "max": high if high is not None else median, "values": [median]}


def _replication_part(kill9_stalls, elected, ratio=0.7, p99_ms=2.0):
    throughput = {"workload": {"record_bytes": 1024, "partitions": 6, "acks": "1", "compression": "none",
                               "linger_ms": 5, "batch_bytes": 1 << 20},
                  "label": "1 KiB, 6 partitions, none, linger 5 ms, batch 1 MiB", "records": 1000,
                  "rf1": {"produce_msg_s": _stat(100_000.0), "produce_mb_s": _stat(100.0),
                          "produce_cpu_s_per_mb": _stat(0.002)},
                  "rf3": {"produce_msg_s": _stat(100_000.0 * ratio), "produce_mb_s": _stat(100.0 * ratio),
                          "produce_cpu_s_per_mb": _stat(0.006)},
                  "ratio": {"ratio": ratio, "pair_min": ratio - 0.1, "pair_max": ratio + 0.1,
                            "pairs": [ratio]}}
    lat = {k: _stat(v) for k, v in (("p50_ms", 1.0), ("p99_ms", p99_ms), ("p999_ms", 4.0), ("max_ms", 9.0),
                                    ("samples", 100), ("cpu_s", 1.0))}
    load = {"uptime": "up", "loadavg": [1.0, 1.1, 1.2], "date": "2026-01-01 00:00:00"}
    writer = {"records_acked": 1000, "unacknowledged": 0, "delivery_errors": 0, "first_errors": [],
              "writer_rate": 2000, "partitions": 12}
    return {"date": "2026-01-01 00:00:00", "cpus": 2, "quick": True, "reps": 1, "trials": len(kill9_stalls),
            "seed": 1, "cluster": {"controllers": 3, "brokers": 3, "min_insync_replicas": 2},
            "load_before": load, "load_after": load, "throughput": [throughput],
            "latency": [{"rate": 5000, "seconds": 1.0, "rf3": lat, "rf1": lat,
                         "labels": {"rf3": "RF=3, acks=all, librdkafka defaults",
                                    "rf1": "RF=1, acks=1, librdkafka defaults"}}],
            "failover": {"kill9": {"trials": [], "stall_s": distribution(kill9_stalls), **writer},
                         "sigterm": {"trials": [], "stall_s": distribution([0.2]), **writer,
                                     "shutdown_s": distribution([1.5]), "unclean_exits": 0},
                         "controller": {"trials": [], "elected_s": distribution(elected),
                                        "longest_ack_gap_s": distribution([0.05] * len(elected)),
                                        "longest_ack_gap_before_s": distribution([0.04] * len(elected)),
                                        **writer}}}


def _skeleton(rep):
    return {"machine": {"cpus": 2, "python": "3.11", "platform": "linux", "date": "2026-01-01"},
            "quick": True, "reps": 1, "peer": None, "workloads": [], "latency": [], "ceilings": [],
            "replication": rep}


def test_targets_judge_the_p99_of_failover_and_the_throughput_ratio():
    met = {t["target"]: t["met"] for t in replication.targets(_replication_part([0.4, 0.6], [0.3, 0.4]))}
    assert len(met) == 4 and all(met.values())
    missed = replication.targets(_replication_part([0.4, 1.2], [0.3, 0.6], ratio=0.5, p99_ms=6.0))
    assert not any(t["met"] for t in missed)


def test_a_delivery_error_fails_the_kill_target_whatever_the_stall():
    rep = _replication_part([0.1], [0.1])
    rep["failover"]["kill9"]["delivery_errors"] = 1
    kill = next(t for t in replication.targets(rep) if "kill -9" in t["target"] and "leader" in t["target"])
    assert not kill["met"]


def test_a_report_of_the_replication_part_alone_renders_without_the_single_node_sections():
    report = _skeleton(_replication_part([0.4, 0.6], [0.3, 0.4]))
    report["targets"] = targets(report)
    text = render_markdown(report)
    assert "## Replication: 3 controllers + 3 brokers" in text
    assert "## Ceilings" not in text and "## Produce and consume" not in text
    assert "**0.70×** (0.60–0.80)" in text
    assert "| kill -9 of a partition leader | 2 | 0.400 | 0.400 | 0.600 | 0.600 | 0.600 |" in text
    assert "kill -9 of the active controller" in text
    assert "| 2.00 (2.00–2.00) | 6.00 (6.00–6.00) | – | – | – | – |" in text, "no CPU split measured"


def test_the_throughput_table_splits_the_brokers_cpu_and_shows_the_producers():
    rep = _replication_part([0.4, 0.6], [0.3, 0.4])
    rep["throughput"][0]["rf1"].update(produce_kernel_cpu_s_per_mb=_stat(0.0011),
                                       client_cpu_s_per_mb=_stat(0.0025))
    rep["throughput"][0]["rf3"].update(produce_kernel_cpu_s_per_mb=_stat(0.0041),
                                       client_cpu_s_per_mb=_stat(0.0027))
    rep["page_cache"] = [{"when": "before", "page_cache_new_gb_s": 0.5, "page_cache_overwrite_gb_s": 10.0}]
    report = _skeleton(rep)
    report["targets"] = targets(report)
    text = render_markdown(report)
    assert ("| 2.00 (2.00–2.00) | 6.00 (6.00–6.00) | 1.10 (1.10–1.10) | 4.10 (4.10–4.10) | "
            "2.50 (2.50–2.50) | 2.70 (2.70–2.70) |") in text
    assert "GB/s (bench.e2e.ceilings): before 0.50 / 10.00." in text


def test_the_latency_table_comes_with_the_boxs_loopback_round_trip():
    rep = _replication_part([0.4], [0.3])
    rep["rtt"] = [{"when": "before", "rtt_100b_p50_us": 140.0, "rtt_100b_p99_us": 600.4},
                  {"when": "after the latency rounds", "rtt_100b_p50_us": 90.0, "rtt_100b_p99_us": 300.0}]
    report = _skeleton(rep)
    report["targets"] = targets(report)
    assert ("100 B loopback round trip on this box (bench.e2e.ceilings): before p50 140 µs, p99 600 µs, "
            "after the latency rounds p50 90 µs, p99 300 µs.") in render_markdown(report)
    assert "guest_halt_poll_ns" not in render_markdown(report), "not measured: not said"
    rep["load_before"] = {**rep["load_before"], "guest_halt_poll_ns": 0}
    assert "The VM's idle vCPUs poll 0 ns before they halt (guest_halt_poll_ns;" in render_markdown(report)
    del rep["rtt"]
    assert "loopback round trip on this box" not in render_markdown(report)


def test_the_latency_table_shows_the_hosts_steal_when_the_report_measured_it():
    rep = _replication_part([0.4], [0.3])
    report = _skeleton(rep)
    report["targets"] = targets(report)
    assert "host steal" not in render_markdown(report), "an older report: no column"
    for variant in ("rf3", "rf1"):
        rep["latency"][0][variant] = {**rep["latency"][0][variant], "steal_cores": _stat(0.12, 0.03, 0.43)}
    text = render_markdown(report)
    assert "| p99.9 ms | p50, p99 ÷ RF=1 acks=1's | brokers' CPU s | host steal, cores |" in text
    assert "| 4.00 (4.00–4.00) |  | 1.00 (1.00–1.00) | 0.12 (0.03–0.43) |" in text


def test_acks_all_latency_is_a_ratio_of_rf1_acks1_in_the_same_rounds():
    rounds = {"rf3": [{"p50_ms": 2.0, "p99_ms": 6.0}, {"p50_ms": 3.0, "p99_ms": 12.0}],
              "rf1": [{"p50_ms": 1.0, "p99_ms": 2.0}, {"p50_ms": 1.0, "p99_ms": 6.0}]}
    ratios = replication.latency_ratios(rounds)
    assert set(ratios) == {"rf3"}, "the base is not compared with itself"
    p99 = ratios["rf3"]["p99_ms"]
    assert p99["ratio"] == pytest.approx(9.0 / 4.0), "the ratio of the medians"
    assert (p99["pair_min"], p99["pair_max"]) == (pytest.approx(2.0), pytest.approx(3.0))
    rep = _replication_part([0.4], [0.3])
    rep["latency"][0]["vs_rf1"] = ratios
    report = _skeleton(rep)
    report["targets"] = targets(report)
    text = render_markdown(report)
    assert "| 2.50×, 2.25× (pairs 2.00–3.00) |" in text
    lat = next(t for t in report["targets"] if "latency" in t["target"])
    assert "p99 2.25x RF=1 acks=1's in the same rounds (pairs 2.00-3.00)" in lat["measured"]


def test_the_hosts_steal_is_read_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    hz = os.sysconf("SC_CLK_TCK")
    stat.write_text(f"cpu  1987755 0 395348 3354888 23816 0 60935 {12 * hz} 0 0\ncpu0 1 2 3\n")
    assert replication.host_steal_s(str(stat)) == 12.0
    stat.write_text("cpu  1 2 3\n")  # a kernel without the column
    assert replication.host_steal_s(str(stat)) is None
    assert replication.host_steal_s(str(tmp_path / "absent")) is None


def test_the_halt_poll_setting_is_read_when_the_machine_has_one(tmp_path):
    setting = tmp_path / "guest_halt_poll_ns"
    setting.write_text("200000\n")
    assert replication.guest_halt_poll_ns(str(setting)) == 200000
    assert replication.guest_halt_poll_ns(str(tmp_path / "absent")) is None
    setting.write_text("not a number\n")
    assert replication.guest_halt_poll_ns(str(setting)) is None


def test_a_ceiling_an_older_report_did_not_measure_gets_no_row():
    old = {"when": "before", "memcpy_gb_s": 12.0, "loopback_tcp_gb_s": 2.0, "sendfile_gb_s": 1.5,
           "fsync_per_s": 400.0, "fsync_p99_ms": 20.0, "rtt_100b_p50_us": 19.0, "rtt_100b_p99_us": 27.0}
    report = _skeleton(_replication_part([0.4], [0.3]))
    report["ceilings"] = [old]
    report["targets"] = targets(report)
    assert "| memcpy | 12.0 GB/s |" in render_markdown(report)
    assert "new file" not in render_markdown(report).split("## Targets")[0]
    report["ceilings"] = [{**old, "page_cache_new_gb_s": 0.5, "page_cache_overwrite_gb_s": 12.0}]
    assert "| 1 MiB writes to a new file / over cached pages | 0.50 / 12.00 GB/s |" in render_markdown(report)
