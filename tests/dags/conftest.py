"""Airflow for the DAG tests: a temp AIRFLOW_HOME with its own SQLite DB, set before airflow is imported."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from pipeline.config import PROJECT_ROOT

AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="reco-airflow-"))
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "60",
}
os.environ.update(AIRFLOW_ENV)


def pytest_sessionfinish(session, exitstatus):
    """The temp Airflow home goes with the session (made at import: Airflow reads it when imported)."""
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def dag_file() -> Path:
    return PROJECT_ROOT / "dags" / "recommender_nightly.py"


@pytest.fixture(scope="session")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_ROOT / "dags"))


@pytest.fixture(scope="session")
def nightly(dagbag):
    return dagbag.dags["recommender_nightly"]
