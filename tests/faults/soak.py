"""Many fault trials in a row and their report: ``make soak`` (100 trials of every fault kind).

    python -m tests.faults.soak --trials 100 --length 60 --seed 1000 --out soak-report

Trial i runs with seed ``seed + i`` and every kind of tests/faults/nemesis.py. Each result is
written to ``<out>/trials/<seed>.json`` as it ends (a failed one with its history, for a
post-mortem), and the report (tests/faults/report.py: soak.md, soak.json, soak.png) is rewritten
after every trial, so an interrupted soak still leaves one. The exit code is 1 if any trial failed;
each failed trial's summary names its replay command.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time

from tests.faults import checker as C
from tests.faults.hosts import available, exit_on_sigterm
from tests.faults.nemesis import KINDS
from tests.faults.report import write_report
from tests.faults.trial import TrialResult, run_trial


def _run_one(seed: int, kinds: list[str], length: float, secure: bool = False) -> TrialResult:
    try:
        return run_trial(seed, kinds, length, secure=secure)
    except Exception as e:  # a trial that cannot even run is a failed trial, not the end of the soak
        result = TrialResult(seed, kinds, length, secure=secure)
        result.error = f"{type(e).__name__}: {e}"
        return result


def _commit() -> str:
    """The commit the soak runs (with "+changes" if the tree differs from it), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+changes" if dirty else "")) if head else "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run fault trials and write their report")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--length", type=float, default=60.0, help="seconds of faults per trial")
    parser.add_argument("--seed", type=int, default=1000, help="the first trial's seed")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", default="soak-report")
    parser.add_argument("--verbose", action="store_true", help="show the clients' own log lines")
    parser.add_argument("--secure", action="store_true",
                        help="SASL_SSL on every listener, the controllers' and the inter-broker one included")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("strom.faults.client").setLevel(logging.INFO if args.verbose else logging.CRITICAL)
    exit_on_sigterm()
    why = available()
    if why is not None:
        print(f"soak: cannot run fault trials here: {why}", file=sys.stderr)
        return 2
    os.makedirs(os.path.join(args.out, "trials"), exist_ok=True)
    about = (f"Commit {_commit()}; seeds {args.seed} to {args.seed + args.trials - 1}, "
             f"{args.length:g} s of faults each, kinds: {args.kinds.replace(',', ', ')}"
             f"{'; SASL_SSL on every listener' if args.secure else ''}.")
    results, failed = [], 0
    for i in range(args.trials):
        started = time.monotonic()
        result = _run_one(args.seed + i, args.kinds.split(","), args.length, args.secure)
        record = result.as_dict()
        if not result.ok:
            failed += 1
            record["history"] = C.to_json(result.history)
        with open(os.path.join(args.out, "trials", f"{result.seed}.json"), "w") as f:
            json.dump(record, f, default=str)
        results.append(result.as_dict())
        write_report(results, args.out, about)
        print(f"[{i + 1}/{args.trials}] seed {result.seed}: {'ok' if result.ok else 'FAILED'} "
              f"acked {result.acked}, {time.monotonic() - started:.0f}s", flush=True)
        if not result.ok:
            print(result.summary(), flush=True)
    print(f"soak: {args.trials - failed}/{args.trials} trials passed; report in {args.out}/soak.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
