# The two commands: `make run` and `make test` (see README.md). Each sets everything up first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip --disable-pip-version-check -q
export PIP_ROOT_USER_ACTION := ignore

.PHONY: setup run test test-all bench annotate clean

setup:
	$(PIP) install -e '.[test]'

run: setup
	$(PYTHON) -m strom demo

test: setup
	$(PYTHON) -m pytest -q

test-all: setup
	$(PYTHON) -m pytest -q -m "slow or not slow"

bench: setup
	mkdir -p .benchmarks
	$(PYTHON) -m pytest bench -q --benchmark-enable --benchmark-only --benchmark-json=.benchmarks/latest.json
	$(PYTHON) -m bench.report .benchmarks/latest.json

annotate:
	STROM_ANNOTATE=1 $(PYTHON) setup.py build_ext --inplace

clean:
	rm -rf build *.egg-info ext/*.c ext/*.so ext/*.html
