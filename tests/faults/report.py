"""The soak report: many fault trials' results in, a Markdown summary and a PNG plot out.

A trial result is a dict (``TrialResult.as_dict()`` in tests/faults/trial.py, or the JSON it wrote);
the fields read, each under either name:

| field                  | type                                          | in the report                     |
|------------------------|-----------------------------------------------|-----------------------------------|
| seed                   | int                                           | failed trials by seed             |
| schedule               | [{"at", "kind", "targets", ...}] or           | faults injected by type           |
|                        | [(time, fault type, target)]                  |                                   |
| acked / acknowledged   | int                                           | records acknowledged              |
| checked                | int                                           | records checked                   |
| failovers              | [{"stall_s" or "duration_s": s, ...}] or [s]  | failovers, durations p50/p99/max  |
| check.counts / counts  | {anomaly name: n} (checker.NAMES)             | anomaly totals, trials with each  |
| ok                     | bool                                          | trials passed                     |
| recovery_s (opt.)      | float or None                                 | time to serve again, p50/max      |
| replay, error (opt.)   | str                                           | beside each failed trial          |

``summarize`` is pure (trials in, one summary dict out); ``render_markdown`` and ``render_plot``
draw it; ``write_report`` writes ``soak.md``, ``soak.json`` and, when matplotlib is installed,
``soak.png`` into a directory. Percentiles are nearest-rank over every failover of every trial.
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter

from tests.faults.checker import ANOMALIES, NAMES


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _fault_kind(entry) -> str:
    if isinstance(entry, dict):
        return str(entry.get("kind", entry.get("type")))
    return str(entry[1])


def _duration(failover) -> float:
    if isinstance(failover, dict):
        for key in ("stall_s", "duration_s", "duration"):
            if key in failover:
                return float(failover[key])
        raise KeyError(f"failover without a duration: {failover}")
    return float(failover)


def _counts(trial: dict) -> dict[str, int]:
    return dict(trial.get("check", {}).get("counts") or trial.get("counts") or {})


def summarize(trials: list[dict]) -> dict:
    faults: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    with_anomaly: Counter[str] = Counter()
    durations: list[float] = []
    recoveries: list[float] = []
    failed = []
    for t in trials:
        faults.update(_fault_kind(f) for f in t.get("schedule", []))
        durations += [_duration(f) for f in t.get("failovers", [])]
        if t.get("recovery_s") is not None:
            recoveries.append(float(t["recovery_s"]))
        counts = _counts(t)
        totals.update(counts)
        with_anomaly.update(name for name, n in counts.items() if n)
        if not t.get("ok"):
            failed.append({"seed": t.get("seed"), "anomalies": {k: n for k, n in counts.items() if n},
                           "error": t.get("error", ""), "replay": t.get("replay", "")})
    names = list(NAMES) + sorted(set(totals) - set(NAMES))
    return {
        "trials": len(trials),
        "passed": sum(1 for t in trials if t.get("ok")),
        "failed": failed,
        "faults": dict(sorted(faults.items(), key=lambda kv: (-kv[1], kv[0]))),
        "acknowledged": sum(int(t.get("acked", t.get("acknowledged", 0))) for t in trials),
        "checked": sum(int(t.get("checked", 0)) for t in trials),
        "failovers": {"count": len(durations), "p50_s": percentile(durations, 50),
                      "p99_s": percentile(durations, 99), "max_s": max(durations, default=None)},
        "recovery": {"count": len(recoveries), "p50_s": percentile(recoveries, 50),
                     "max_s": max(recoveries, default=None)},
        "anomalies": {name: {"total": totals.get(name, 0), "trials": with_anomaly.get(name, 0)}
                      for name in names},
        "durations_s": sorted(durations),
    }


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def render_markdown(summary: dict, plot: str | None = None, about: str | None = None) -> str:
    """``about``: what was run (commit, seeds, trial length), a line under the title."""
    fo, rec = summary["failovers"], summary["recovery"]
    lines = [
        "# Fault trials",
        "",
        *([about, ""] if about else []),
        f"{summary['trials']} trials, {summary['passed']} passed, {len(summary['failed'])} failed.",
        "",
        "| | |",
        "|---|---|",
        f"| trials | {summary['trials']} |",
        f"| faults injected | {sum(summary['faults'].values())} |",
        f"| records acknowledged | {summary['acknowledged']:,} |",
        f"| records checked | {summary['checked']:,} |",
        f"| failovers | {fo['count']} |",
        f"| failover duration p50 / p99 / max | {_s(fo['p50_s'])} / {_s(fo['p99_s'])} / {_s(fo['max_s'])} |",
    ]
    if rec["count"]:
        lines.append(f"| serving again after the faults healed, p50 / max | {_s(rec['p50_s'])} / "
                     f"{_s(rec['max_s'])} |")
    lines += ["", "A failover's duration is the longest time, over the partitions, from the fault to the "
              "first acknowledgement of a record sent after it: a crash measures the move of "
              "leadership; a partition that leaves a partition's leader without an in-sync follower "
              "stalls its acks=all writes until it heals, as the rules require."]
    lines += ["", "## Faults injected by type", "", "| fault | count |", "|---|---:|"]
    lines += [f"| {kind} | {n} |" for kind, n in summary["faults"].items()]
    lines += ["", "## Anomalies", "", "| anomaly | total | trials |", "|---|---:|---:|"]
    for name, a in summary["anomalies"].items():
        note = " (judged apart)" if name == "unseen" else ""
        lines.append(f"| {name}{note} | {a['total']} | {a['trials']} |")
    if summary["failed"]:
        lines += ["", "## Failed trials", "", "| seed | anomalies | error | replay |", "|---|---|---|---|"]
        for f in summary["failed"]:
            found = ", ".join(f"{n} {k}" for k, n in f["anomalies"].items()) or "–"
            lines.append(f"| {f['seed']} | {found} | {f['error'] or '–'} | "
                         f"{'`' + f['replay'] + '`' if f['replay'] else '–'} |")
    lines.append("")
    lines.append(f"![fault trials]({plot})" if plot else "No plot: matplotlib is not installed.")
    return "\n".join(lines) + "\n"


def render_plot(summary: dict, path: str) -> None:
    """Faults injected by type, failover durations, anomaly totals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (faults, stalls, found) = plt.subplots(1, 3, figsize=(15, 4.5))
    kinds = list(summary["faults"])
    faults.barh(kinds, [summary["faults"][k] for k in kinds])
    faults.invert_yaxis()
    faults.set_xlabel("faults injected")
    for ax in (faults.xaxis, stalls.yaxis, found.xaxis):
        ax.set_major_locator(MaxNLocator(integer=True))
    durations = summary["durations_s"]
    if durations:
        stalls.hist(durations, bins=min(30, max(5, len(durations) // 3)))
        for key, style in (("p50_s", "--"), ("p99_s", ":")):
            stalls.axvline(summary["failovers"][key], color="black", linestyle=style,
                           label=f"{key[:-2]} {summary['failovers'][key]:.2f} s")
        stalls.legend(fontsize=8)
    else:
        stalls.text(0.5, 0.5, "no failovers", ha="center", transform=stalls.transAxes)
    stalls.set_xlabel("failover duration (s)")
    stalls.set_ylabel("failovers")
    names = list(summary["anomalies"])
    totals = [summary["anomalies"][n]["total"] for n in names]
    bars = found.barh(names, totals, color=["tab:red" if n in ANOMALIES and t else "tab:gray"
                                            for n, t in zip(names, totals)])
    found.bar_label(bars, [str(t) for t in totals], fontsize=8)
    found.invert_yaxis()
    found.set_xlim(0, max(1, *totals) * 1.15)
    found.set_xlabel("anomalies found (all trials)")
    fig.suptitle(f"{summary['trials']} fault trials, {summary['passed']} passed; "
                 f"{summary['acknowledged']:,} records acknowledged, {summary['checked']:,} checked")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_report(trials: list[dict], out_dir: str, about: str | None = None) -> dict[str, str]:
    """Writes soak.md, soak.json and (with matplotlib) soak.png to ``out_dir``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    summary = summarize(trials)
    paths = {"json": os.path.join(out_dir, "soak.json"), "markdown": os.path.join(out_dir, "soak.md")}
    plot = None
    if have_matplotlib():
        paths["plot"] = os.path.join(out_dir, "soak.png")
        render_plot(summary, paths["plot"])
        plot = "soak.png"
    with open(paths["json"], "w") as f:
        json.dump(summary, f, indent=1)
    with open(paths["markdown"], "w") as f:
        f.write(render_markdown(summary, plot, about))
    return paths
