"""Replication in the end-to-end report: what RF=3 costs, and how long failures stall a producer.

    python -m bench.e2e --replication [--quick]    # this part alone, merged into the report

The cluster is tests/integration/replicated_cluster.py's: 3 ``strom controller`` and 3 ``strom
broker`` processes on 127.0.0.1 (controllers 1-3, brokers 4-6), each in its own session, with
default settings but default.replication.factor 3 and min.insync.replicas 2. Every part runs on
that one cluster, in this order (the failover trials restart processes, so they come last):

* throughput: 1 KiB records with the single-node workloads' client settings (linger.ms 5,
  batch.size 1 MiB; in the full run also 64 KiB batches, and 1 partition), 6 partitions over the
  3 brokers: RF=1 acks=1, then RF=3 acks=all (min.insync.replicas 2), alternating, ``reps``
  rounds each, every round on a fresh topic in a fresh client process (workloads.run_round).
  Figures: msg/s, MB/s, the three brokers' CPU per MB; the RF=3/RF=1 ratio of the medians and
  its range over the back-to-back pairs.
* latency: 100 B records, 1 partition, linger.ms 0, paced at 5 k msg/s, RF=3 acks=all and RF=1
  acks=1 alternating; p50/p99/p99.9 of produce() to its delivery report.
* leader kill -9: under a SteadyWriter (idempotent acks=all, 2 k msg/s over 12 partitions),
  SIGKILL the leader of partition i mod 12; the stall is from the kill until every partition it
  led has acknowledged a record sent after the kill (bench.e2e.failover.ResumeWatch). Then the
  broker restarts and, once every ISR is full again, the preferred leaders are elected
  (ElectLeaders through a broker), so every trial starts from the same balanced cluster.
* leader SIGTERM: the same with a controlled shutdown (its duration is recorded too).
* controller kill -9: SIGKILL the active controller under the same writer; timed until
  DescribeQuorum on a survivor names a new leader that has committed its epoch
  (quorum_cluster.QuorumView.committed_own_epoch, polled every 20 ms), with the writer's longest
  acknowledgement gap from the kill to CONTROLLER_GAP_TAIL_S after; then the controller restarts
  and must catch up.

Every kill comes after a seeded random pause of up to KILL_PAUSE_MAX_S (longer than a broker
heartbeat interval and a Fetch long poll), so kills do not line up with the last heartbeat or
fetch. The machine's load (``uptime``) is recorded before and after: on a shared 2-core box it
moves every figure here.
"""
from __future__ import annotations

import itertools
import os
import random
import subprocess
import time
from collections.abc import Callable

from bench.e2e import ceilings
from bench.e2e import workloads as W
from bench.e2e.failover import ResumeWatch, SteadyWriter, distribution, longest_gap, paired_ratio
from tests.integration.cluster import NodeError
from tests.integration.replicated_cluster import ReplicatedCluster

PARTITIONS = 12  # the failover topics (the cluster test)
MIN_INSYNC = {"min.insync.replicas": "2"}
WRITER_RATE = 2000
LATENCY_RATE = 5000
KILL_PAUSE_MAX_S = 2.5
RESUME_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 90.0
CONTROLLER_GAP_TAIL_S = 0.5  # the writer's ack gaps are watched until this long after the new leader


def throughput_workloads(quick: bool) -> list[W.Workload]:
    main = W.Workload(record_bytes=1024, partitions=6)
    if quick:
        return [main]
    return [main, W.Workload(record_bytes=1024, partitions=6, batch_bytes=64 << 10),
            W.Workload(record_bytes=1024, partitions=1)]


def records_for(w: W.Workload, quick: bool) -> int:
    """As many bytes per round as the single-node 1 KiB workloads (bench.e2e.run)."""
    return (150 if quick else 250) * 1_000_000 // w.record_bytes


def trials_for(quick: bool) -> int:
    return 3 if quick else 20


def machine_load() -> dict:
    try:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        uptime = ""
    return {"uptime": uptime, "loadavg": [round(x, 2) for x in os.getloadavg()],
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "guest_halt_poll_ns": guest_halt_poll_ns()}


HALT_POLL = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
PROC_STAT = "/proc/stat"


def guest_halt_poll_ns(path: str = HALT_POLL) -> int | None:
    """How long an idle vCPU of this VM polls before it halts (Linux's cpuidle-haltpoll; None on
    a machine without it). At 0 every idle vCPU halts at once, and waking it is a trip through the
    host: measured 2026-11-27 on this box, the 100 B loopback round trip was p50 110-140 µs at 0 and
    21-26 µs at the kernel's default of 200,000."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def broker_pids(cluster: ReplicatedCluster) -> list[int]:
    return [b.proc.pid for b in cluster.brokers.values()]


def all_brokers(cluster: ReplicatedCluster) -> str:
    """Every broker's address, live or not: a client that outlives a restart reconnects."""
    return ",".join(b.bootstrap for b in cluster.brokers.values())


def _spec(cluster: ReplicatedCluster, topic: str, replication_factor: int, **fields) -> dict:
    return {"bootstrap": all_brokers(cluster), "broker_pid": broker_pids(cluster), "topic": topic,
            "replication_factor": replication_factor,
            "topic_config": MIN_INSYNC if replication_factor == 3 else {}, **fields}


_topics = itertools.count()


def _summarize(rounds: list[dict]) -> dict:
    from bench.e2e.run import summarize

    return summarize(rounds)


def host_steal_s(path: str = PROC_STAT) -> float | None:
    """CPU time the hypervisor has taken from this VM's vCPUs since boot, in seconds (the steal
    column of /proc/stat's cpu line; None where there is none). On a shared VM it moves every
    latency figure: measured 2026-11-27 on this box, up to 0.43 of a core within a 6 s round."""
    try:
        with open(path) as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# ---- throughput and latency --------------------------------------------------------------------


def throughput(cluster: ReplicatedCluster, w: W.Workload, records: int, reps: int,
               log: Callable[[str], None] = print) -> dict:
    """``reps`` rounds each of RF=1 acks=1 and RF=3 acks=all, alternating."""
    rf1, rf3 = w, W.Workload(**{**w.as_dict(), "acks": "all"})
    rounds: dict[str, list[dict]] = {"rf1": [], "rf3": []}
    for _ in range(reps):
        for name, work, rf in (("rf1", rf1, 1), ("rf3", rf3, 3)):
            spec = _spec(cluster, f"repl-bench-{next(_topics)}", rf, kind="produce", workload=work.as_dict(),
                         records=records)
            r = W.run_round(spec)
            rounds[name].append(r)
            log(f"replicated {name} {work.label}: {r['produce_msg_s']:,.0f} msg/s {r['produce_mb_s']:.0f} "
                f"MB/s, brokers' cpu {r['produce_cpu_s_per_mb'] * 1e3:.2f} ms/MB (kernel "
                f"{r['produce_kernel_cpu_s_per_mb'] * 1e3:.2f}), client "
                f"{r['client_cpu_s_per_mb'] * 1e3:.2f} ms/MB")
    ratio = paired_ratio([r["produce_msg_s"] for r in rounds["rf3"]],
                         [r["produce_msg_s"] for r in rounds["rf1"]])
    return {"workload": w.as_dict(), "label": w.label.replace(", acks=1", ""), "records": records,
            "rf1": _summarize(rounds["rf1"]), "rf3": _summarize(rounds["rf3"]), "ratio": ratio}


# (key, label, replication factor, acks, producer settings beyond linger.ms 0). The first is the
# target's: librdkafka's defaults, max.in.flight.requests.per.connection 1,000,000, a record or
# two per request at linger.ms 0. A broker handles the produce requests behind an acks=all one
# while it waits for replication and answers in request order (protocol/net.py); the others
# cap the requests in flight, so records batch while they wait: the idempotent producer (5 in
# flight, the Java producer's default since Kafka 3.0) and 1.
LATENCY_VARIANTS = (
    ("rf3", "RF=3, acks=all, librdkafka defaults", 3, "all", {}),
    ("rf3_idempotent", "RF=3, acks=all, enable.idempotence (5 in flight)", 3, "all",
     {"enable.idempotence": True}),
    ("rf3_inflight1", "RF=3, acks=all, max.in.flight 1", 3, "all",
     {"max.in.flight.requests.per.connection": 1}),
    ("rf1", "RF=1, acks=1, librdkafka defaults", 1, "1", {}),
)


def latency(cluster: ReplicatedCluster, rate: int, seconds: float, reps: int,
            log: Callable[[str], None] = print) -> dict:
    """Produce latency at ``rate`` for each of LATENCY_VARIANTS, in alternating rounds."""
    rounds: dict[str, list[dict]] = {key: [] for key, *_ in LATENCY_VARIANTS}
    for _ in range(reps):
        for key, label, rf, acks, config in LATENCY_VARIANTS:
            spec = _spec(cluster, f"repl-lat-{next(_topics)}", rf, kind="ack_latency", rate=rate,
                         seconds=seconds, acks=acks, producer_config=config)
            stolen, began = host_steal_s(), time.monotonic()
            r = W.run_round(spec)
            after = host_steal_s()
            if stolen is not None and after is not None:  # cores the host took during the round
                r["steal_cores"] = (after - stolen) / (time.monotonic() - began)
            rounds[key].append(r)
            log(f"produce latency at {rate} msg/s, {label}: p50 {r['p50_ms']:.2f} ms "
                f"p99 {r['p99_ms']:.2f} ms p99.9 {r['p999_ms']:.2f} ms"
                + (f", host steal {r['steal_cores']:.2f} cores" if "steal_cores" in r else ""))
    return {"rate": rate, "seconds": seconds, "labels": {key: label for key, label, *_ in LATENCY_VARIANTS},
            **{key: _summarize(rs) for key, rs in rounds.items()},
            "vs_rf1": latency_ratios(rounds)}


def latency_ratios(rounds: dict[str, list[dict]], base: str = "rf1") -> dict:
    """Each variant's p50 and p99 as a ratio of RF=1 acks=1's in the same rounds (the i-th round
    of each ran back to back): this VM's absolute latency moves with its host, the ratio far less."""
    out = {}
    for key, rs in rounds.items():
        if key != base and len(rs) == len(rounds[base]) and rs:
            out[key] = {q: paired_ratio([r[q] for r in rs], [r[q] for r in rounds[base]])
                        for q in ("p50_ms", "p99_ms")}
    return out


# ---- failover ----------------------------------------------------------------------------------


def _partitions(cluster: ReplicatedCluster, topic: str) -> dict:
    view = cluster.metadata(cluster.live_brokers()[0])
    return {} if view is None else {p.partition: p for p in view.partitions if p.topic == topic}


def restore_preferred_leaders(cluster: ReplicatedCluster, topic: str, partitions: int) -> None:
    """Wait for full ISRs, then elect the preferred leaders (ElectLeaders through a broker, as an
    operator would) and wait until every live broker sees each partition led by its first replica."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    everyone = set(cluster.brokers)
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, everyone, SETTLE_TIMEOUT_S)
    moved = [p.partition for p in _partitions(cluster, topic).values() if p.leader != p.replicas[0]]
    if moved:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in moved]).result(30)

    def preferred(views):
        for view in views.values():
            mine = [p for p in view.partitions if p.topic == topic] if view is not None else []
            if len(mine) != partitions or any(p.leader != p.replicas[0] for p in mine):
                return False
        return True

    cluster.wait_until(f"{topic}: not every partition led by its preferred replica", preferred,
                       SETTLE_TIMEOUT_S)


def _stop_writer(writer: SteadyWriter) -> dict:
    left = writer.stop()
    return {"records_acked": writer.log.count(), "unacknowledged": left,
            "delivery_errors": len(writer.errors), "first_errors": writer.errors[:5]}


def leader_failover(cluster: ReplicatedCluster, how: str, trials: int, rng: random.Random,
                    log: Callable[[str], None] = print) -> dict:
    """``trials`` faults (``how``: "kill9" or "sigterm") of a partition leader under a steady
    writer; the stall of each (see the module's table)."""
    topic = f"failover-{how}-{next(_topics)}"
    cluster.create_topic(topic, PARTITIONS, 3, MIN_INSYNC)
    writer = SteadyWriter(all_brokers(cluster), topic, PARTITIONS, WRITER_RATE).start()
    out = []
    try:
        time.sleep(1.0)
        for i in range(trials):
            restore_preferred_leaders(cluster, topic, PARTITIONS)
            time.sleep(rng.uniform(0, KILL_PAUSE_MAX_S))
            info = _partitions(cluster, topic)
            victim = info[i % PARTITIONS].leader
            led = sorted(p for p, q in info.items() if q.leader == victim)
            t0 = time.monotonic()
            shutdown_s = exit_code = None
            if how == "kill9":
                cluster.kill9(victim)
            else:
                try:
                    exit_code = cluster.terminate(victim)
                except NodeError as e:  # killed after STOP_TIMEOUT_S; the stall is still measured
                    log(f"broker {victim} did not stop on SIGTERM: {str(e)[-1500:]}")
                shutdown_s = time.monotonic() - t0
            watch = ResumeWatch(writer.log, led, t0)
            while (stall := watch.check()) is None:
                if time.monotonic() - t0 > RESUME_TIMEOUT_S:
                    raise TimeoutError(f"{how} of broker {victim}: partitions {led} took no write for "
                                       f"{RESUME_TIMEOUT_S} s (resumed: {watch.per_partition()})")
                time.sleep(0.005)
            out.append({"victim": victim, "led": led, "stall_s": round(stall, 4), "shutdown_s": shutdown_s,
                        "exit_code": exit_code,
                        "per_partition_s": {str(p): round(s, 4) for p, s in watch.per_partition().items()}})
            log(f"{how} of broker {victim} (led {len(led)} partitions): stall {stall:.3f} s"
                + (f", stopped in {shutdown_s:.2f} s with exit code {exit_code}" if how == "sigterm" else ""))
            cluster.restart(victim, SETTLE_TIMEOUT_S)
    finally:
        writer_info = _stop_writer(writer)
    result = {"how": how, "trials": out, "stall_s": distribution([t["stall_s"] for t in out]), **writer_info,
              "writer_rate": WRITER_RATE, "partitions": PARTITIONS}
    if how == "sigterm":
        result["shutdown_s"] = distribution([t["shutdown_s"] for t in out])
        result["unclean_exits"] = sum(1 for t in out if t["exit_code"] != 0)
    return result


def controller_failover(cluster: ReplicatedCluster, trials: int, rng: random.Random,
                        log: Callable[[str], None] = print) -> dict:
    """``trials`` kill -9s of the active controller under a steady writer: the time to a new leader
    that committed its epoch, and the writer's longest ack gap from the kill to shortly after."""
    quorum = cluster.quorum
    topic = f"failover-controller-{next(_topics)}"
    cluster.create_topic(topic, PARTITIONS, 3, MIN_INSYNC)
    writer = SteadyWriter(all_brokers(cluster), topic, PARTITIONS, WRITER_RATE).start()
    out = []
    try:
        time.sleep(1.0)
        for i in range(trials):
            quorum.wait_for_leader(SETTLE_TIMEOUT_S)
            time.sleep(rng.uniform(0, KILL_PAUSE_MAX_S))
            old = quorum.wait_for_leader(SETTLE_TIMEOUT_S)
            victim = quorum.controllers[old.leader_id]
            t0 = time.monotonic()
            victim.kill9()
            new = quorum.wait_for(
                lambda v, old=old: v.leader_epoch > old.leader_epoch and v.committed_own_epoch(),
                RESUME_TIMEOUT_S, f"kill {i}: no new leader committed after killing {old.leader_id}")
            elected = time.monotonic() - t0
            end = t0 + elected + CONTROLLER_GAP_TAIL_S
            time.sleep(max(0.0, end - time.monotonic()) + 0.1)  # let the window's acks arrive
            gap = longest_gap(writer.log, range(PARTITIONS), t0, end)
            before = longest_gap(writer.log, range(PARTITIONS), t0 - (end - t0), t0)  # as long, no fault
            out.append({"victim": old.leader_id, "new_leader": new.leader_id, "elected_s": round(elected, 4),
                        "longest_ack_gap_s": round(gap, 4), "longest_ack_gap_before_s": round(before, 4)})
            log(f"kill -9 of controller {old.leader_id}: controller {new.leader_id} leads epoch "
                f"{new.leader_epoch} after {elected:.3f} s; longest ack gap {gap:.3f} s "
                f"({before:.3f} s in as long a window before the kill)")
            victim.start()
            quorum.wait_for(lambda v, k=old.leader_id: any(
                r.replica_id == k and r.log_end_offset >= v.high_watermark for r in v.voters),
                SETTLE_TIMEOUT_S, f"kill {i}: controller {old.leader_id} did not rejoin")
    finally:
        writer_info = _stop_writer(writer)
    return {"trials": out, "elected_s": distribution([t["elected_s"] for t in out]),
            "longest_ack_gap_s": distribution([t["longest_ack_gap_s"] for t in out]),
            "longest_ack_gap_before_s": distribution([t["longest_ack_gap_before_s"] for t in out]),
            **writer_info, "writer_rate": WRITER_RATE, "partitions": PARTITIONS}


# ---- the part, and its targets -----------------------------------------------------------------


def run(quick: bool, reps: int, log: Callable[[str], None] = print, trials: int | None = None,
        seed: int = 1) -> dict:
    trials = trials_for(quick) if trials is None else trials
    rng = random.Random(seed)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(),
                    "quick": quick, "reps": reps, "trials": trials, "seed": seed,
                    "cluster": {"controllers": 3, "brokers": 3, "min_insync_replicas": 2},
                    "load_before": machine_load(), "throughput": [], "latency": [], "failover": {}}
    log(f"replication: load before {report['load_before']['uptime']}")
    report["page_cache"] = [{"when": "before", **ceilings.page_cache_writes(1.0)}]
    # The box's own 100-byte loopback round trip: the floor under every latency figure below.
    report["rtt"] = [{"when": "before", **ceilings.rtt_100b(1.0)}]
    with ReplicatedCluster() as cluster:
        for w in throughput_workloads(quick):
            report["throughput"].append(throughput(cluster, w, records_for(w, quick), reps, log))
        report["page_cache"].append({"when": "after the throughput rounds",
                                     **ceilings.page_cache_writes(1.0)})
        report["latency"].append(latency(cluster, LATENCY_RATE, 3.0 if quick else 5.0, reps, log))
        report["rtt"].append({"when": "after the latency rounds", **ceilings.rtt_100b(1.0)})
        report["failover"]["kill9"] = leader_failover(cluster, "kill9", trials, rng, log)
        report["failover"]["sigterm"] = leader_failover(cluster, "sigterm", trials, rng, log)
        report["failover"]["controller"] = controller_failover(cluster, trials, rng, log)
    report["load_after"] = machine_load()
    log(f"replication: load after {report['load_after']['uptime']}")
    return report


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def targets(rep: dict) -> list[dict]:
    """The issue's replication targets, judged on this part of the run."""
    out = []
    main = next((e for e in rep["throughput"] if e["workload"]["partitions"] == 6
                 and e["workload"]["batch_bytes"] == 1 << 20), None)
    if main is not None:
        r = main["ratio"]
        out.append({"target": "RF=3 acks=all msg/s >= 0.6x RF=1 acks=1, 1 KiB (Kafka's published: 0.51)",
                    "measured": f"{r['ratio']:.2f}x (back-to-back pairs "
                                f"{r['pair_min']:.2f}-{r['pair_max']:.2f})",
                    "met": r["ratio"] >= 0.6})
    for entry in rep["latency"]:
        if entry["rate"] == LATENCY_RATE and "rf3" in entry:
            s = entry["rf3"]
            measured = (f"librdkafka defaults: p50 {_ms(s['p50_ms']['median'])}, p99 "
                        f"{_ms(s['p99_ms']['median'])} (max over rounds {_ms(s['p99_ms']['max'])})")
            for key in ("rf3_idempotent", "rf3_inflight1"):
                if key in entry:
                    p50, p99 = entry[key]["p50_ms"]["median"], entry[key]["p99_ms"]["median"]
                    measured += f"; {entry['labels'][key].split(', ')[-1]}: p50 {_ms(p50)}, p99 {_ms(p99)}"
            ratio = entry.get("vs_rf1", {}).get("rf3")
            if ratio is not None:
                measured += (f"; p99 {ratio['p99_ms']['ratio']:.2f}x RF=1 acks=1's in the same rounds "
                             f"(pairs {ratio['p99_ms']['pair_min']:.2f}-{ratio['p99_ms']['pair_max']:.2f})")
            out.append({"target": "acks=all (RF=3) produce latency p99 <= 5 ms at 5 k msg/s, linger.ms=0",
                        "measured": measured, "met": s["p99_ms"]["max"] <= 5.0})
    kill9 = rep["failover"].get("kill9")
    if kill9:
        d = kill9["stall_s"]
        out.append({"target": "producer resumes within 1 s (p99) of a partition leader's kill -9",
                    "measured": f"p50 {d['p50']:.3f} s, p99 {d['p99']:.3f} s over {d['n']} kills",
                    "met": d["p99"] <= 1.0 and kill9["delivery_errors"] == 0})
    controller = rep["failover"].get("controller")
    if controller:
        d = controller["elected_s"]
        out.append({"target": "new active controller within 0.5 s (p99) of its kill -9",
                    "measured": f"p50 {d['p50']:.3f} s, p99 {d['p99']:.3f} s over {d['n']} kills",
                    "met": d["p99"] <= 0.5})
    return out
