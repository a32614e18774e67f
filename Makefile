# The two commands: `make run` and `make test` (see README.md). Each sets everything up first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip --disable-pip-version-check -q
export PIP_ROOT_USER_ACTION := ignore

.PHONY: setup run test test-all bench annotate clean

# Installs the dependencies and builds the extensions in place; redone when they change.
setup: .setup-done
.setup-done: pyproject.toml setup.py $(wildcard ext/*.pyx ext/*.pxd)
	$(PIP) install -e '.[test]'
	@touch $@

run: setup
	$(PYTHON) -m strom demo

test: setup
	$(PYTHON) -m ruff check .
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
	rm -rf build *.egg-info ext/*.c ext/*.so ext/*.html .setup-done
