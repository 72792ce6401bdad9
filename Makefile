# dr-stream: `make test` and `make demo` work on a fresh clone; everything is pinned in pyproject.toml.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: profile setup jars bytecode dist test test-jvm test-yarn test-k8s test-upgrade test-pressure unit lint demo demo-yarn bench bench-poller bench-batch bench-trickle bench-held bench-idle bench-scale soak aging down clean

setup: $(STAMP) jars bytecode

# The package's bytecode, as pip writes it for an installed package: with PYTHONDONTWRITEBYTECODE
# set (as here) an editable install would compile its 150 modules again in every command, about
# 0.6 s of CPU before a failover starts. Only changed files are compiled again.
bytecode: $(STAMP)
	@$(PY) -m compileall -q dr_stream bench tools

# Re-installs only when the pins change; pip reuses what is already in the venv.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# Maven jars and the interceptor build; a stamp per set makes a second run download nothing.
jars: $(STAMP)
	$(PY) -m dr_stream.runtime.jvm

# What a cluster runs (the wheel, the driver's packed Python environment, the jars), rebuilt
# only when the package or its pins change; spark-submit.sh builds it before a YARN submission.
DIST := .cache/dist
dist: $(DIST)/pyenv.tar.gz

$(DIST)/pyenv.tar.gz: pyproject.toml jobs/replicate.py $(shell find dr_stream -name '*.py') | jars
	$(PY) -m dr_stream.runtime.dist

lint: $(STAMP)
	$(PY) -m ruff check dr_stream tests jobs bench tools
	$(PY) -m mypy
	$(PY) -m tools.module_sizes dr_stream

# The fast tests: pure rules and DataFrame steps, no brokers.
unit: setup
	$(PY) -m pytest -q -m "not integration"

# `make test TEST_WORKERS=N` runs the suite's modules on N pytest-xdist workers (at most 4), all of a
# module's tests on one (its module fixtures start once); each worker has its own Spark and its
# own session clusters, on ports of its own (tests/clusters.py). The default is one process: on 2
# cores the suite is bound by CPU, so two workers took it only from 43 to 38 min, with both cores
# 89% busy, and starved the tests that wait on a flow for a bounded time (two index upkeep tests
# ran out of their waits while the bench smoke test held both cores). On more cores, use more.
TEST_WORKERS ?= 0
test: setup lint dist test-jvm
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# jvm/'s JUnit tests, the golden contract fixtures (tests/contracts/) among them.
test-jvm: setup
	$(PY) -m dr_stream.runtime.jvm --test

# Only the cases on the local HDFS and YARN (cluster and client mode, restarts, state on HDFS).
test-yarn: setup dist
	$(PY) -m pytest -q -m yarn

# The dev Kubernetes end to end (`dr-stream dev k8s`): Kubernetes and CoreDNS built from the Go
# module proxy, containerd from Debian's packages, dr-stream's image from debootstrap, a Spark
# application in cluster mode, and the Helm chart installed, upgraded and uninstalled with helm
# built from the Go module proxy. Kubernetes and helm are built once into ~/.cache/dr-stream, outside
# the checkout (the first build about 30 min; then a fresh clone's run takes minutes). Not part of
# `make test`.
test-k8s: setup dist
	$(PY) -m pytest -q -m kube tests/kube

# A flow run by the previous release (its code from git history: needs a clone with history) stopped
# and resumed by this code, exactly once, groups translated across (about 2 min). Not part of
# `make test`, which is over its 30 minutes already.
test-upgrade: setup
	$(PY) -m pytest -q -m upgrade tests/upgrade

# The demo, failover, failback and restarting-cluster tests with one core held busy, three times
# in a row (tools/cpu_pressure.py; about 40 min). `PRESSURE_ARGS=--share-core` pins them to the busy
# core too; `PRESSURE_ARGS="--rounds 10" PRESSURE_TESTS=...` for other runs.
PRESSURE_TESTS ?= tests/test_demo_output.py tests/operations/test_failback.py tests/operations/test_restarting_cluster.py \
	tests/positions/test_offset_translation.py \
	tests/index/test_write_path_index.py::test_failover_with_the_source_gone_starts_no_jvm_and_commits_the_exact_offset
test-pressure: setup
	$(PY) -m tools.cpu_pressure --rounds 3 $(PRESSURE_ARGS) -- $(PY) -m pytest -q $(PRESSURE_TESTS)

demo: setup
	$(PY) -m dr_stream.dev.demo

# The flow conf/dc1-to-dc2.yaml in yarn-cluster mode on the local YARN, its state on HDFS.
demo-yarn: setup dist
	$(PY) -m dr_stream.dev.demo_yarn

# dr-stream, a plain Spark copy and MirrorMaker 2 on their own two clusters, 3 alternating runs
# each on the whole machine and 3 on one core (the constrained arm), then the long catch-up
# (about 45 min); results in bench/results/.
bench: setup
	$(PY) -m bench.run

# Where each replicator's CPU goes in `make bench`'s catch-up and steady phases: Java Flight
# Recorder and py-spy, one run each (about 17 min); bench/results/profile-<date>-<label>.md and
# .json, flame graphs in .cache/bench/profiles/. PROFILE_ARGS="--label after" names the report.
profile: setup
	$(PY) -m bench.profile $(PROFILE_ARGS)

# The group poller's two paths (__consumer_offsets, admin) at 5,000 groups (about 5 min);
# results in bench/results/poller/.
bench-poller: setup
	$(PY) -m bench.poller_paths

# One micro-batch's cost per source partition at 10 to 1,000 partitions (about 12 min);
# results in bench/results/batch/. `BATCH_ARGS=--jfr` also keeps a flight recording of each flow.
bench-batch: setup
	$(PY) -m bench.batch_cost $(BATCH_ARGS)

# A trickle over 300 partitions with the micro-batch trigger fixed and allowed to widen (about
# 25 min); results in bench/results/trickle/.
bench-trickle: setup
	$(PY) -m bench.trickle $(TRICKLE_ARGS)

# One partition held at a refused record among 1,000: the others' latency with and without it (about 9 min).
bench-held: setup
	$(PY) -m bench.held_partition $(HELD_ARGS)

# What each replicator costs while nothing arrives, dr-stream with and without translation against
# MirrorMaker 2, 3 alternating runs (about 15 min); bench/results/idle/.
bench-idle: setup
	$(PY) -m bench.idle_cost $(IDLE_ARGS)

# dr-stream vs MirrorMaker 2 at 1,000, 300 and 10 partitions with 5 groups a partition, twice
# (about 90 min; `SCALE_ARGS=--smoke` runs one small size in about 5 min); results in
# bench/results/scale/.
bench-scale: setup
	$(PY) -m bench.scale $(SCALE_ARGS)

# A real flow for an hour under a steady mixed load (half the topics transactional, local records
# in a quarter of the copies as identical names both ways leave), a broker restart every 10
# minutes; RSS, CPU per record, state on disk and the translation log's read at each interval,
# and every record checked copied once; bench/results/soak/. SOAK_ARGS="--minutes 20".
soak: setup
	$(PY) -m bench.soak $(SOAK_ARGS)

# A real flow aged to day 1, 7 and 30 in compressed time (a day in two minutes, 7 days' retention;
# about 75 min): failover with the source gone, status, drill, start-up, the memory of the flow
# started at each age and state on disk; bench/results/aging/flow-*. AGING_ARGS="--day-seconds 20"
# for a quick look.
aging: setup
	$(PY) -m bench.aging $(AGING_ARGS)

down:
	-$(VENV)/bin/dr-stream dev down
	-$(VENV)/bin/dr-stream dev yarn down

clean: down
	rm -rf .cache $(VENV) jvm/target
