# kafka-selfheal: `make demo` and `make test` bootstrap everything they need on a fresh
# machine (Debian packages, a venv, the JVM jars); a second run re-downloads nothing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
MVN    := mvn -q -B -Dstyle.color=never -s jvm/settings.xml -f jvm/pom.xml
JARS   := jvm/lib
# One folder of jars per role: each supported Kafka line (sandbox/versions.py), Spark's
# Kafka connector, the JMX exporter agent.
JVM_ROLES := kafka-3.9 kafka-4.4 spark agent
APT_STAMP := .make/apt.stamp
# Debian packages the tests and the demo run: a JDK and Maven for the broker jars (javac
# for the bench's Java harness, jvm/bench/),
# Chromium for the approval-page browser test, Alertmanager for the webhook test,
# Prometheus (and its promtool) for the alert rules and the dashboards' queries.
# systemd for `systemd-analyze verify` over the units in deploy/systemd/
APT_PACKAGES := openjdk-17-jdk-headless maven chromium prometheus-alertmanager prometheus systemd

.PHONY: demo test chaos bench lint jars venv deps clean-sandbox help dashboards config-reference
.DEFAULT_GOAL := help

help:
	@echo "make demo    bring up the sandbox cluster, break a disk, watch it heal"
	@echo "             (Kafka 4.4 KRaft; make demo KAFKA=3.9 MODE=zk for the ZooKeeper road;"
	@echo "             make demo SECURITY=sasl_ssl for TLS, SCRAM and least-privilege ACLs)"
	@echo "make test    lint, then every test (unit, integration on the sandbox, e2e)"
	@echo "make chaos   only the chaos suite (faults injected into the whole loop; make test runs it too)"
	@echo "make bench   print performance figures"
	@echo "make lint    ruff and mypy"
	@echo "make dashboards  write the Grafana dashboards' JSON to dashboards/json/"
	@echo "make config-reference  write docs/config-reference.md and the example TOML files"

deps: $(APT_STAMP) $(VENV)/.installed $(JARS)/.stamp

$(APT_STAMP): Makefile
	@mkdir -p .make
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	 if [ -n "$$missing" ]; then \
	   echo ">> installing Debian packages:$$missing"; \
	   SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	   log=.make/apt.log; \
	   { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; } >$$log 2>&1 \
	     || { tail -30 $$log; echo "apt-get failed; the whole output is in $$log"; exit 1; }; \
	 fi
	@touch $@

$(VENV)/.installed: pyproject.toml
	@echo ">> creating $(VENV) and installing kafka-selfheal with its dev extras"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@mkdir -p .make
	@{ $(PIP) install -q --upgrade pip && $(PIP) install -q -e '.[dev]'; } >.make/pip.log 2>&1 \
	  || { tail -30 .make/pip.log; echo "pip install failed; the whole output is in .make/pip.log"; exit 1; }
	@$(PIP) check
	@touch $@

$(JARS)/.stamp: jvm/pom.xml jvm/settings.xml $(APT_STAMP)
	@echo ">> fetching JVM jars with Maven ($(JVM_ROLES))"
	@rm -rf $(JARS)
	@mkdir -p .make; for role in $(JVM_ROLES); do \
	   $(MVN) -P $$role dependency:copy-dependencies -DoutputDirectory=lib/$$role \
	     >.make/mvn.log 2>&1 || { tail -30 .make/mvn.log; echo "Maven failed for $$role; the whole output is in .make/mvn.log"; exit 1; }; \
	 done
	@touch $@

jars: $(JARS)/.stamp
venv: $(VENV)/.installed

# The default is the newest Kafka line in KRaft mode; `make demo KAFKA=3.9 MODE=zk` runs
# the ZooKeeper road.
demo: deps
	$(VENV)/bin/selfheal demo $(if $(KAFKA),--kafka $(KAFKA)) $(if $(MODE),--mode $(MODE)) \
	    $(if $(SECURITY),--security $(SECURITY))

# Lint first: a tree that does not lint is not green, whatever the tests say.
# Three workers (pytest-xdist), each with sandboxes of its own: one runs the chaos suite
# in order, and all share every other module, one module at a time (tests/conftest.py
# schedules them). The suite mostly waits on the JVMs and the loop, not on the 2 cores:
# three took the same summed test time as two (3,237 s), in 18 minutes instead of 28.
# TEST_WORKERS=0 runs everything in this one process.
TEST_WORKERS ?= 3
test: deps lint
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 -n $(TEST_WORKERS) \
	  --dist loadscope --no-loadscope-reorder --junitxml=.make/junit.xml
	$(PY) -m tests.matrix

# The chaos suite alone (tests/chaos, ~15 min): make test runs it with everything else.
chaos: deps
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 tests/chaos

bench: deps
	$(PY) -m bench

dashboards: $(VENV)/.installed
	$(PY) -m dashboards.build

config-reference: $(VENV)/.installed
	$(PY) -m selfheal.config_reference

lint: deps
	$(VENV)/bin/ruff check schemas core streams remediation dashboards sandbox selfheal tests bench $(wildcard airflow)
	$(VENV)/bin/mypy schemas core remediation streams

# --- The compiled planning core (issue 33; docs/native.md) ---------------------------
# native/ (Rust, PyO3) built by maturin into the venv as the module selfheal_native.
# Without cargo: one line, and the planners run their Python reference (same plans).
# The stamp holds while no crate file changes, so a second `make` builds nothing.
NATIVE_STAMP := $(VENV)/.native
NATIVE_SRC   := native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)
.PHONY: native
native: $(NATIVE_STAMP)
deps: $(NATIVE_STAMP)

$(NATIVE_STAMP): $(VENV)/.installed $(NATIVE_SRC)
	@mkdir -p .make
	@if ! command -v cargo >/dev/null 2>&1; then \
	   echo ">> native core: no cargo on this machine; the planners run the Python reference (same plans, slower)"; \
	 else \
	   echo ">> building the native core (native/, cargo release profile)"; \
	   { $(PIP) install -q 'maturin>=1.7,<2' && \
	     VIRTUAL_ENV=$(abspath $(VENV)) $(abspath $(VENV))/bin/maturin develop --release \
	       -m native/Cargo.toml; } >.make/native.log 2>&1 \
	   || { tail -n 30 .make/native.log; echo ">> native core: build failed (.make/native.log)"; exit 1; }; \
	   touch $@; \
	 fi
