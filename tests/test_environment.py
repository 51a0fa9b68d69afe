"""What the environment must provide for the commands the project prints to work."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker_only import WORKER_ONLY_MODULES


def test_the_tensorboard_command_the_demo_prints_exists():
    tensorboard = Path(sys.executable).with_name("tensorboard")
    assert tensorboard.exists(), "tensorboard is not installed in the project environment (setup.py)"
    out = subprocess.run([str(tensorboard), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().startswith("2.")


PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
heavy = [m for m in json.loads(sys.argv[2]) if m in sys.modules]
print(json.dumps({"errors": list(bag.import_errors), "tasks": len(bag.dags["recommender_nightly"].tasks),
                  "heavy": heavy}))
"""


@pytest.mark.packaging
def test_the_airflow_extra_installs_without_tensorflow_and_parses_the_dag(tmp_path, lean_venv):
    """The scheduler image's environment, built for real: only `.[airflow]` from the constraints."""
    from pipeline.config import PROJECT_ROOT

    python = str(lean_venv)
    find = "import importlib.util as u, json, sys; print([m for m in json.loads(sys.argv[1]) if u.find_spec(m)])"
    probe = subprocess.run([python, "-c", find, json.dumps(WORKER_ONLY_MODULES)], capture_output=True, text=True,
                           timeout=60)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr
    # kubernetes: no stage task (workers stage in pods), + push_overrides and announce around the push pod
    for backend, tasks in (("local", 11), ("kubernetes", 12)):
        env = {"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path / f"home-{backend}"),
               "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "RECO__EXECUTION__BACKEND": backend}
        done = subprocess.run([python, "-c", PARSE, str(PROJECT_ROOT / "dags"), json.dumps(WORKER_ONLY_MODULES)],
                              capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"errors": [], "tasks": tasks, "heavy": []}
