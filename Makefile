# dr-stream: `make test` and `make demo` work on a fresh clone; everything is pinned in pyproject.toml.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup jars test unit lint demo bench down clean

setup: $(STAMP) jars

# Re-installs only when the pins change; pip reuses what is already in the venv.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# Maven jars and the interceptor build; a stamp per set makes a second run download nothing.
jars: $(STAMP)
	$(PY) -m dr_stream.jvm

lint: $(STAMP)
	$(PY) -m ruff check dr_stream tests jobs bench

# The fast tests: pure rules and DataFrame steps, no brokers.
unit: setup
	$(PY) -m pytest -q -m "not integration"

test: setup lint
	$(PY) -m pytest -q

demo: setup
	$(PY) -m dr_stream.dev.demo

# dr-stream vs MirrorMaker 2 on its own two clusters (about 6 min); results in bench/results/.
bench: setup
	$(PY) -m bench.run

down:
	-$(VENV)/bin/dr-stream dev down

clean: down
	rm -rf .cache $(VENV) jvm/target
