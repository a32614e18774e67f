"""The end-to-end report as a Markdown table and a PNG (bench.e2e.run's JSON in, text/plot out).

A section whose part was not run (no ceilings, no workloads, no replication) is left out."""
from __future__ import annotations


def _fig(stat: dict, fmt: str, scale: float = 1.0) -> str:
    return (f"{format(stat['median'] * scale, fmt)} "
            f"({format(stat['min'] * scale, fmt)}–{format(stat['max'] * scale, fmt)})")


def _ratio(r: dict | None) -> str:
    if r is None:
        return "–"
    return f"{r['ratio']:.2f}×{' ≈' if r['within_noise'] else ''}"


def render_markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# End-to-end: Strom and the peer, same box, same run",
        "",
        f"{m['date']}, {m['cpus']} cores, Python {m['python']}, {m['platform']}. "
        f"Peer: {report['peer'] or 'not installed (Strom alone)'}. "
        f"{report['reps']} rounds per workload and broker, alternating, each on a fresh topic in a "
        "fresh client process; figures are medians with the range over the rounds. Ratios are "
        "Strom/peer of medians; **≈** marks a ratio whose ranges overlap (within noise). Strom "
        "writes to disk (page cache, Kafka's default flush policy); the peer keeps data in memory. "
        "Client: confluent-kafka (librdkafka); `wire` is a Fetch-by-hand consumer that drops record "
        "bytes unread (what the broker can serve).",
    ]
    if report["ceilings"]:
        lines += [
            "",
            "## Ceilings (measured before, between and after the workloads)",
            "",
            "| what | " + " | ".join(c["when"] for c in report["ceilings"]) + " |",
            "|---|" + "---|" * len(report["ceilings"]),
        ]
    rows = [
        ("memcpy", lambda c: f"{c['memcpy_gb_s']:.1f} GB/s"),
        ("loopback TCP, one stream", lambda c: f"{c['loopback_tcp_gb_s']:.2f} GB/s"),
        ("sendfile to loopback", lambda c: f"{c['sendfile_gb_s']:.2f} GB/s"),
        ("1 MiB writes to a new file / over cached pages",
         lambda c: f"{c['page_cache_new_gb_s']:.2f} / {c['page_cache_overwrite_gb_s']:.2f} GB/s"
         if "page_cache_new_gb_s" in c else "–"),
        ("4 KiB append + fdatasync", lambda c: f"{c['fsync_per_s']:,.0f}/s (p99 {c['fsync_p99_ms']:.1f} ms)"),
        ("100 B loopback round trip",
         lambda c: f"p50 {c['rtt_100b_p50_us']:.0f} µs, p99 {c['rtt_100b_p99_us']:.0f} µs"),
    ]
    for name, cell in rows if report["ceilings"] else ():
        if all(cell(c) == "–" for c in report["ceilings"]):
            continue  # measured by a later version of bench.e2e.ceilings than this report's
        lines.append(f"| {name} | " + " | ".join(cell(c) for c in report["ceilings"]) + " |")
    lines += [
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |")
    if report["workloads"]:
        lines += _single_node(report)
    if report.get("replication"):
        lines += render_replication(report["replication"])
    return "\n".join(lines) + "\n"


def _single_node(report: dict) -> list[str]:
    lines = [
        "",
        "## Produce and consume",
        "",
        "| workload | broker | produce msg/s | produce MB/s | broker CPU ms/MB | consume MB/s (client) | "
        "consume MB/s (wire) |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in report["workloads"]:
        for name in ("strom", "peer"):
            if name not in e:
                continue
            s = e[name]
            lines.append(
                f"| {e['label']} | {name} | {_fig(s['produce_msg_s'], ',.0f')} | "
                f"{_fig(s['produce_mb_s'], '.0f')} | "
                f"{_fig(s['produce_cpu_s_per_mb'], '.2f', 1e3)} | {_fig(s['consume_mb_s'], '.0f')} | "
                f"{_fig(s['wire_mb_s'], '.0f')} |")
        if "ratios" in e:
            r = e["ratios"]
            lines.append(f"| | **Strom/peer** | **{_ratio(r['produce_msg_s'])}** | | "
                         f"**{_ratio(r['produce_cpu_s_per_mb'])}** | **{_ratio(r['consume_mb_s'])}** | "
                         f"**{_ratio(r['wire_mb_s'])}** |")
    lines += [
        "",
        "## End-to-end latency (100 B, 1 partition, acks=1, linger.ms=0)",
        "",
        "| rate | broker | p50 ms | p99 ms | p99.9 ms | broker CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for e in report["latency"]:
        for name in ("strom", "peer"):
            if name in e:
                s = e[name]
                lines.append(f"| {e['rate']:,} msg/s | {name} | {_fig(s['p50_ms'], '.2f')} | "
                             f"{_fig(s['p99_ms'], '.2f')} | {_fig(s['p999_ms'], '.2f')} | "
                             f"{_fig(s['cpu_s'], '.2f')} |")
    return lines


def _dist(d: dict) -> str:
    return " | ".join(f"{d[k]:.3f}" for k in ("min", "p50", "p90", "p99", "max"))


def _load(entry: dict) -> str:
    avg = entry["loadavg"]
    return f"{avg[0]:.2f} / {avg[1]:.2f} / {avg[2]:.2f} ({entry['date']})"


def render_replication(rep: dict) -> list[str]:
    """The replication part (bench.e2e.replication): throughput ratio, latency, failovers."""
    kinds = {"kill9": "kill -9 of a partition leader", "sigterm": "SIGTERM of a partition leader "
             "(controlled shutdown)"}
    lines = [
        "",
        f"## Replication: {rep['cluster']['controllers']} controllers + {rep['cluster']['brokers']} brokers "
        "on loopback",
        "",
        f"{rep['date']}, {rep['cpus']} cores shared by every process and the clients. Load average "
        f"(1 / 5 / 15 min) before: {_load(rep['load_before'])}, after: {_load(rep['load_after'])}. "
        f"Separate `strom controller` and `strom broker` processes, default settings; RF=3 topics "
        f"with min.insync.replicas {rep['cluster']['min_insync_replicas']}. {rep['reps']} rounds per "
        "configuration, alternating RF=1 and RF=3, each on a fresh topic in a fresh client process; "
        "figures are medians with the range over the rounds.",
        "",
        "### Produce throughput: RF=3 acks=all against RF=1 acks=1",
        "",
        "| workload | RF=1 acks=1 msg/s | RF=3 acks=all msg/s | RF=3 / RF=1 (pairs) | "
        "brokers' CPU ms/MB, RF=1 | RF=3 | brokers' kernel CPU ms/MB, RF=1 | RF=3 | "
        "the producer's CPU ms/MB, RF=1 | RF=3 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cpu(summary: dict, key: str) -> str:
        return _fig(summary[key], ".2f", 1e3) if key in summary else "–"

    for e in rep["throughput"]:
        r = e["ratio"]
        lines.append(f"| {e['label']} | {_fig(e['rf1']['produce_msg_s'], ',.0f')} | "
                     f"{_fig(e['rf3']['produce_msg_s'], ',.0f')} | **{r['ratio']:.2f}×** "
                     f"({r['pair_min']:.2f}–{r['pair_max']:.2f}) | "
                     + " | ".join(cpu(e[rf], key) for key in ("produce_cpu_s_per_mb",
                                                               "produce_kernel_cpu_s_per_mb",
                                                               "client_cpu_s_per_mb")
                                  for rf in ("rf1", "rf3")) + " |")
    if rep.get("page_cache"):
        figures = ", ".join(f"{c['when']} {c['page_cache_new_gb_s']:.2f} / "
                            f"{c['page_cache_overwrite_gb_s']:.2f}" for c in rep["page_cache"])
        lines += ["", "1 MiB writes to a new file / over pages already cached, GB/s (bench.e2e.ceilings): "
                  f"{figures}. Every replica writes each byte into new page-cache pages, so RF=3 makes "
                  "three times the writes of the first kind that RF=1 makes."]
    lines += [
        "",
        "### Produce latency (100 B, 1 partition, linger.ms=0; produce() to its delivery report)",
        "",
    ]
    # The host's steal during each round, where the report measured it (older ones did not).
    steal = any("steal_cores" in e[name] for e in rep["latency"] for name in e["labels"])
    lines += ["| rate | topic, acks | p50 ms | p99 ms | p99.9 ms | p50, p99 ÷ RF=1 acks=1's "
              "| brokers' CPU s |" + (" host steal, cores |" if steal else ""),
              "|---|---|---|---|---|---|---|" + ("---|" if steal else "")]
    for e in rep["latency"]:
        for name, label in e["labels"].items():
            s = e[name]
            ratio = e.get("vs_rf1", {}).get(name)
            vs = (f"{ratio['p50_ms']['ratio']:.2f}×, {ratio['p99_ms']['ratio']:.2f}× (pairs "
                  f"{ratio['p99_ms']['pair_min']:.2f}–{ratio['p99_ms']['pair_max']:.2f})" if ratio else "")
            row = (f"| {e['rate']:,} msg/s | {label} | {_fig(s['p50_ms'], '.2f')} | "
                   f"{_fig(s['p99_ms'], '.2f')} | {_fig(s['p999_ms'], '.2f')} | {vs} | "
                   f"{_fig(s['cpu_s'], '.2f')} |")
            if steal:
                row += f" {_fig(s['steal_cores'], '.2f')} |" if "steal_cores" in s else " |"
            lines.append(row)
    if rep.get("rtt"):
        figures = ", ".join(f"{c['when']} p50 {c['rtt_100b_p50_us']:.0f} µs, "
                            f"p99 {c['rtt_100b_p99_us']:.0f} µs" for c in rep["rtt"])
        lines += ["", f"100 B loopback round trip on this box (bench.e2e.ceilings): {figures}. An acks=all "
                  "produce at RF=3 makes four such hops between processes (produce, the followers' "
                  "fetch answers, their next fetches, the answer)."]
        poll = rep["load_before"].get("guest_halt_poll_ns")
        if poll is not None:
            lines[-1] += (f" The VM's idle vCPUs poll {poll:,} ns before they halt (guest_halt_poll_ns; "
                          "at 0 each wake-up of an idle one goes through the host).")
    lines += [
        "",
        "An acks=all produce does not hold its connection while it waits for replication (Kafka's "
        "broker does): the broker appends it, handles the produce requests behind it meanwhile and answers "
        "in request order, so librdkafka's default of 1,000,000 requests in flight, a record or two "
        "each, costs one replication round trip per record rather than a queue of them.",
    ]
    failover = rep["failover"]
    lines += [
        "",
        "### Failover (seconds; p99 is nearest-rank: under 100 trials, the maximum)",
        "",
        "| fault | trials | min | p50 | p90 | p99 | max | timed until |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for how, label in kinds.items():
        if how in failover:
            f = failover[how]
            lines.append(f"| {label} | {f['stall_s']['n']} | {_dist(f['stall_s'])} | every partition it led "
                         "acknowledged a record sent after the fault |")
    controller = failover.get("controller")
    if controller:
        lines.append(f"| kill -9 of the active controller | {controller['elected_s']['n']} | "
                     f"{_dist(controller['elected_s'])} | DescribeQuorum names a new leader that "
                     "committed its epoch |")
        gaps = controller["longest_ack_gap_s"]
        lines.append(f"| the same: the producer's longest wait for an ack | {gaps['n']} | {_dist(gaps)} | "
                     "(any partition, from the kill to 0.5 s after the new leader) |")
        if "longest_ack_gap_before_s" in controller:
            gaps = controller["longest_ack_gap_before_s"]
            lines.append(f"| no fault: the same wait in as long a window before each kill | {gaps['n']} | "
                         f"{_dist(gaps)} | |")
    lines.append("")
    first = next(iter(failover.values()), None)
    if first:
        lines.append(f"Under an idempotent acks=all confluent-kafka producer at {first['writer_rate']:,} "
                     f"msg/s over {first['partitions']} partitions (linger.ms 5, librdkafka's other "
                     "defaults); each fault's broker or controller restarts after the trial, and the "
                     "preferred leaders are elected again before the next.")
    for how, label in (*kinds.items(), ("controller", "kill -9 of the active controller")):
        if how in failover:
            f = failover[how]
            values = f["stall_s" if how != "controller" else "elected_s"]["values"]
            extra = ""
            if "shutdown_s" in f:
                extra = (f"; the broker stopped in p50 {f['shutdown_s']['p50']:.2f} s, max "
                         f"{f['shutdown_s']['max']:.2f} s, {f['unclean_exits']} without exit code 0")
            lines.append(f"- {label}: " + " ".join(f"{v:.3f}" for v in values)
                         + f" ({f['records_acked']:,} records acknowledged, {f['delivery_errors']} delivery "
                           f"errors{extra})")
    return lines


def render_plot(report: dict, path: str) -> None:
    """Strom/peer ratios per workload (log scale, 1 = parity); latency p99 beside them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    entries = [e for e in report["workloads"] if "ratios" in e]
    fig, (ax, lat) = plt.subplots(1, 2, figsize=(15, max(5, 0.32 * len(entries) + 3)),
                                  gridspec_kw={"width_ratios": [3, 1]})
    if entries:
        keys = [("produce_msg_s", "produce msg/s"), ("produce_cpu_s_per_mb", "peer CPU/MB ÷ Strom CPU/MB"),
                ("consume_mb_s", "consume MB/s (client)"), ("wire_mb_s", "consume MB/s (wire)")]
        height = 0.8 / len(keys)
        lo, hi = 1.0, 1.0
        for i, (key, label) in enumerate(keys):
            ratios = [e["ratios"][key]["ratio"] for e in entries]
            if key == "produce_cpu_s_per_mb":
                ratios = [1 / r for r in ratios]  # drawn so that right of 1 is Strom ahead
            lo, hi = min(lo, *ratios), max(hi, *ratios)
            ax.barh([j + i * height for j in range(len(entries))], ratios, height, label=label)
        ax.set_yticks([j + 0.4 - height / 2 for j in range(len(entries))])
        ax.set_yticklabels([e["label"] for e in entries], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xticks([t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16) if lo / 2 <= t <= hi * 2])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}×"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("Strom / peer, ratio of medians (right of 1: Strom ahead)")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    else:
        ax.text(0.5, 0.5, "no peer in this run", ha="center")
    names = [n for n in ("strom", "peer") if report["latency"] and n in report["latency"][0]]
    for i, name in enumerate(names):
        rates = [e["rate"] for e in report["latency"]]
        p99 = [e[name]["p99_ms"]["median"] for e in report["latency"]]
        bars = lat.bar([j + i * 0.4 for j in range(len(rates))], p99, 0.4, label=name)
        lat.bar_label(bars, [f"{v:.3g}" for v in p99], fontsize=7)
        lat.set_xticks([j + 0.2 for j in range(len(rates))])
        lat.set_xticklabels([f"{r:,} msg/s" for r in rates])
    lat.set_yscale("log")
    lat.set_ylabel("end-to-end p99 (ms)")
    lat.axhline(5.0, color="red", linewidth=0.8, linestyle="--", label="5 ms target")
    lat.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fig.suptitle(f"Strom vs peer, {report['machine']['cpus']} cores, {report['machine']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
