"""The soak report from synthetic trial results: the numbers it aggregates and the files it writes."""
from __future__ import annotations

import json
import os

import pytest

from tests.faults import report
from tests.faults.checker import NAMES


def trial(seed: int, schedule: list, acked: int, checked: int, failovers: list, counts: dict | None = None,
          **extra) -> dict:
    counts = {**dict.fromkeys(NAMES, 0), **(counts or {})}
    ok = not any(n for k, n in counts.items() if k != "unseen")
    return {"seed": seed, "schedule": schedule, "acked": acked, "checked": checked, "failovers": failovers,
            "check": {"ok": ok, "counts": counts, "summary": ""}, "ok": ok,
            "replay": f"python -m tests.faults.trial --seed {seed}", **extra}


def fault(at: float, kind: str, targets: list[int]) -> dict:
    return {"at": at, "kind": kind, "targets": targets, "detail": "", "duration": 2.0}


TRIALS = [
    trial(1, [fault(1.0, "kill", [4]), fault(5.0, "partition-leader", [5])], 1000, 990,
          [{"kind": "kill", "stall_s": 1.0}, {"kind": "partition-leader", "stall_s": 3.0}], recovery_s=0.5),
    trial(2, [fault(2.0, "kill", [5]), fault(4.0, "pause", [6]), fault(9.0, "kill", [4])], 2000, 2000,
          [{"stall_s": 2.0}, {"stall_s": 4.0}, {"stall_s": 10.0}], {"unseen": 3}, recovery_s=1.5),
    trial(3, [(3.0, "pause", 1)], 500, 480, [5.0], {"lost": 2, "poll_skip": 1}, recovery_s=2.5,
          error=""),
]


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert report.percentile(values, 50) == 50.0
    assert report.percentile(values, 99) == 99.0
    assert report.percentile(values, 100) == 100.0
    assert report.percentile([7.0], 99) == 7.0
    assert report.percentile([], 50) is None


def test_summary_counts_trials_faults_records_failovers_and_anomalies():
    s = report.summarize(TRIALS)
    assert (s["trials"], s["passed"]) == (3, 2)
    assert [f["seed"] for f in s["failed"]] == [3]
    assert s["failed"][0]["anomalies"] == {"lost": 2, "poll_skip": 1}
    assert s["faults"] == {"kill": 3, "pause": 2, "partition-leader": 1}
    assert (s["acknowledged"], s["checked"]) == (3500, 3470)
    # durations 1, 2, 3, 4, 5, 10: nearest-rank p50 is the 3rd, p99 the 6th
    assert s["failovers"] == {"count": 6, "p50_s": 3.0, "p99_s": 10.0, "max_s": 10.0}
    assert s["recovery"] == {"count": 3, "p50_s": 1.5, "max_s": 2.5}
    assert s["anomalies"]["lost"] == {"total": 2, "trials": 1}
    assert s["anomalies"]["unseen"] == {"total": 3, "trials": 1}
    assert s["anomalies"]["duplicate"] == {"total": 0, "trials": 0}
    assert list(s["anomalies"]) == list(NAMES)


def test_markdown_states_the_numbers():
    md = report.render_markdown(report.summarize(TRIALS), "soak.png")
    assert "3 trials, 2 passed, 1 failed." in md
    assert "| records acknowledged | 3,500 |" in md
    assert "| records checked | 3,470 |" in md
    assert "| failovers | 6 |" in md
    assert "| failover duration p50 / p99 / max | 3.00 s / 10.00 s / 10.00 s |" in md
    assert "| kill | 3 |" in md and "| pause | 2 |" in md and "| partition-leader | 1 |" in md
    assert "| lost | 2 | 1 |" in md and "| duplicate | 0 | 0 |" in md
    assert "| unseen (judged apart) | 3 | 1 |" in md
    assert "| 3 | 2 lost, 1 poll_skip | – | `python -m tests.faults.trial --seed 3` |" in md
    assert "![fault trials](soak.png)" in md


def test_markdown_says_what_was_run_under_its_title():
    md = report.render_markdown(report.summarize(TRIALS), None, about="Commit abc1234; seeds 1 to 3.")
    assert md.startswith("# Fault trials\n\nCommit abc1234; seeds 1 to 3.\n\n3 trials, 2 passed")


def test_markdown_without_failovers_or_failures():
    md = report.render_markdown(report.summarize([trial(9, [], 10, 10, [])]), None)
    assert "1 trials, 1 passed, 0 failed." in md
    assert "| failover duration p50 / p99 / max | – / – / – |" in md
    assert "## Failed trials" not in md
    assert "No plot: matplotlib is not installed." in md


def test_write_report_creates_markdown_json_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "soak"
    paths = report.write_report(TRIALS, str(out))
    assert sorted(os.listdir(out)) == ["soak.json", "soak.md", "soak.png"]
    with open(paths["plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(paths["plot"]) > 10_000
    with open(paths["json"]) as f:
        assert json.load(f)["failovers"]["p99_s"] == 10.0
    with open(paths["markdown"]) as f:
        assert "| records acknowledged | 3,500 |" in f.read()


def test_write_report_plots_a_run_without_failovers(tmp_path):
    pytest.importorskip("matplotlib")
    paths = report.write_report([trial(9, [], 10, 10, [])], str(tmp_path))
    assert os.path.getsize(paths["plot"]) > 0
