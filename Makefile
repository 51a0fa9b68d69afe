# The two commands of the README: `make demo` and `make test`. Everything else supports them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONPATH := $(CURDIR)

.PHONY: setup test test-fast lint demo airflow bench clean

# Idempotent: reinstalls only when setup.py or the constraints changed.
setup: $(STAMP)
$(STAMP): setup.py constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[airflow,worker,dev]'
	@touch $(STAMP)

test: setup
	$(PY) -m ruff check pipeline components dags tests bench
	$(PY) -m pytest -q --durations=15 tests

test-fast: setup
	$(PY) -m pytest -q -m "not slow" tests

lint: setup
	$(PY) -m ruff check pipeline components dags tests bench

demo: setup
	$(PY) -m pipeline demo

airflow: setup
	bash scripts/airflow_standalone.sh

bench: setup
	$(PY) -m bench

clean:
	rm -rf var
