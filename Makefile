# The two commands of the README: `make demo` and `make test`. Everything else supports them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONPATH := $(CURDIR)

.PHONY: setup test test-fast test-integration test-airflow test-packaging lint demo airflow airflow-celery bench clean

# Idempotent: reinstalls only when setup.py or the constraints changed.
setup: $(STAMP)
# The celery extra and Debian's PostgreSQL + Redis: `make airflow-celery` and the live-Airflow tests
# run the production-shaped stack (scripts/install_stack.sh installs what is missing).
$(STAMP): setup.py constraints.txt scripts/install_stack.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[airflow,celery,worker,dev]'
	bash scripts/install_stack.sh
	@touch $(STAMP)

# xdist workers: each heavy group runs on one worker (tests/tiers.py); 0 = no xdist.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# Every tier, in one session (the heavy set-ups are built once): tests/tiers.py says what each holds.
test: setup
	$(PY) -m ruff check pipeline components airflow_glue dags tests bench
	$(PYTEST) --durations=15 tests

# The unit tier: no Beam pipeline, no gang, no Airflow process (tests/tiers.py enforces it).
test-fast: setup
	$(PYTEST) -m unit tests

test-integration: setup
	$(PY) -m pytest -q -m integration tests

test-airflow: setup
	$(PY) -m pytest -q -m airflow tests

test-packaging: setup
	$(PY) -m pytest -q -m packaging tests

lint: setup
	$(PY) -m ruff check pipeline components airflow_glue dags tests bench

demo: setup
	$(PY) -m pipeline demo

airflow: setup
	bash scripts/airflow_standalone.sh

# The same on PostgreSQL + Redis + CeleryExecutor (two workers, training on its own queue).
airflow-celery: setup
	RECO_AIRFLOW_STACK=celery bash scripts/airflow_standalone.sh

bench: setup
	$(PY) -m bench

clean:
	rm -rf var
