"""Benchmarks run with `make bench` (timed). In the default test run pytest-benchmark is
disabled and each benchmark body runs once, so the suites cannot rot."""
