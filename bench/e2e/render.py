"""The end-to-end report as a Markdown table and a PNG (bench.e2e.run's JSON in, text/plot out)."""
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
        ("4 KiB append + fdatasync", lambda c: f"{c['fsync_per_s']:,.0f}/s (p99 {c['fsync_p99_ms']:.1f} ms)"),
        ("100 B loopback round trip",
         lambda c: f"p50 {c['rtt_100b_p50_us']:.0f} µs, p99 {c['rtt_100b_p99_us']:.0f} µs"),
    ]
    for name, cell in rows:
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
    lines += [
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
    return "\n".join(lines) + "\n"


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
