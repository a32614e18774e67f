# The two commands: `make run` and `make test` (see README.md); `make check` is the fast loop.
# Each sets everything up first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip --disable-pip-version-check -q
export PIP_ROOT_USER_ACTION := ignore
# A run of the tests starts hundreds of Python processes (nodes, `strom` commands, clients, xdist
# workers): each reads compiled bytecode instead of compiling every module it imports, whatever
# the environment says (PYTHONDONTWRITEBYTECODE costs each node start about 0.3 CPU-seconds).
unexport PYTHONDONTWRITEBYTECODE
COMPILE := $(PYTHON) -m compileall -q -j 0 -x '(node_modules|/build/|\.git)' .

.PHONY: setup run check test test-all bench bench-e2e annotate clean soak

# Installs the dependencies and builds the extensions in place; redone when they change.
# The integration tests also need Debian's kcat and node + npm (kafkajs in tests/integration/js),
# the fault trials iptables (tests/faults, in network namespaces);
# apt-get runs only for what is missing (and only as root), npm only without node_modules.
JS_DIR := tests/integration/js
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Use-Pty=0

setup: .setup-done
.setup-done: pyproject.toml setup.py $(wildcard ext/*.pyx ext/*.pxd protocol/*.pyx protocol/*.pxd) $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	$(PIP) install -e '.[test]'
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "setup: not root, not installing$$missing (their integration tests will skip)"; \
	else echo "setup: apt-get install$$missing"; $(APT_GET) update >/dev/null && $(APT_GET) install$$missing >/dev/null; fi
	@if [ -d $(JS_DIR)/node_modules ]; then :; \
	elif command -v npm >/dev/null 2>&1; then echo "setup: npm ci in $(JS_DIR)"; \
		cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "setup: npm is missing, kafkajs tests will skip"; fi
	@touch $@

run: setup
	$(PYTHON) -m strom run

# The tiers (markers set in tests/conftest.py): the in-process tests need nothing but the test
# process; `processes` start strom nodes, clients or Python children, `netns` network namespaces
# (root), `spark` a JVM; `slow` is left out of the default run. Tests run in parallel (pytest-xdist):
# the process tiers mostly wait on their nodes, so more workers than cores pay; a module that
# starts processes, and every Spark test, stays on one worker (--dist loadgroup).
IN_PROCESS := not processes and not netns and not spark and not slow
CHECK_WORKERS ?= 2
TEST_WORKERS ?= 6
XDIST := --dist loadgroup --no-loadscope-reorder

# The fast loop: lint, types, the in-process tier (under 3 minutes on 2 cores), with a fifth of
# the seeded raft and replication simulations (make test runs all 1,000 of each).
CHECK_SEEDS := STROM_RAFT_SIM_SEEDS=200 STROM_REPLICATION_SIM_SEEDS=200
check: setup
	$(PYTHON) -m ruff check .
	$(MAKE) --no-print-directory typecheck
	$(COMPILE)
	$(CHECK_SEEDS) $(PYTHON) -m pytest -q -n $(CHECK_WORKERS) $(XDIST) -m "$(IN_PROCESS)"

# Everything but `slow`, lint and types first: what CI runs (.ci/run). The slowest tests are
# listed before pytest's closing line, to see the long poles of a run.
test: setup
	$(PYTHON) -m ruff check .
	$(MAKE) --no-print-directory typecheck
	$(COMPILE)
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) $(XDIST) --durations=15

test-all: setup
	$(COMPILE)
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) $(XDIST) -m "slow or not slow"

bench: setup
	$(PIP) install -e '.[test,bench]'
	mkdir -p .benchmarks
	$(PYTHON) -m pytest bench -q --benchmark-enable --benchmark-only --benchmark-json=.benchmarks/latest.json
	$(PYTHON) -m bench.report .benchmarks/latest.json

# Strom and the peer side by side, the machine's ceilings in the same run, then a replicated
# cluster (RF=3 vs RF=1, acks=all latency, failover stalls): the table, the JSON and the plot go
# to bench/results/ (e2e.md, e2e.json, e2e.png). QUICK=1 for the target workloads only.
bench-e2e: setup
	$(PIP) install -e '.[test,bench]'
	$(PYTHON) -m bench.e2e $(if $(QUICK),--quick)

# 100 fault trials (tests/faults) and their report: TRIALS=n, LENGTH=seconds, SEED=first seed,
# SECURE=1 for SASL_SSL on every listener.
soak: setup
	$(PIP) install -e '.[test,bench]'
	$(PYTHON) -m tests.faults.soak --trials $(or $(TRIALS),100) --length $(or $(LENGTH),60) \
		--seed $(or $(SEED),1000) --out $(or $(OUT),soak-report) $(if $(SECURE),--secure)

# mypy over the pure cores (which: [tool.mypy] in pyproject.toml), the stub of the message
# classes checked against the schemas first (python -m protocol.stubgen rewrites it).
.PHONY: typecheck
typecheck: setup
	$(PYTHON) -m protocol.stubgen --check
	$(PYTHON) -m mypy

# The live fuzz of a node's listeners (tests/fuzz/live.py): FRAMES mutated frames (1,000,000).
.PHONY: fuzz
fuzz: setup
	$(PYTHON) -m tests.fuzz.live --frames $(or $(FRAMES),1000000)

annotate:
	STROM_ANNOTATE=1 $(PYTHON) setup.py build_ext --inplace

clean:
	rm -rf build *.egg-info ext/*.c ext/*.so ext/*.html .setup-done
