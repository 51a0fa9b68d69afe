"""The README's UI walk-through, run command by command as a newcomer would type it.

`python -m pipeline generate-data` writes the data, `make airflow` starts Airflow (SQLite,
LocalExecutor: the README's first choice), the token call logs in, the PATCH unpauses the DAG,
the POST triggers a run for a date the generated data covers, and that run must serve a model.
Only the README's placeholders are filled in (port, password, token); the config file points the
data, artifacts and Airflow home at a temp dir, as `RECO_CONFIG` does for any user. The section's
last command, approving a forced push, needs a run that waits for approval: the scheduler story
(tests/dags/test_scheduler_e2e.py) executes it, on `make airflow-celery`'s stack.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import subprocess
import sys

import pytest
import yaml

from pipeline.contracts.inputs import SUCCESS_MARKER
from pipeline.paths import events_partition
from tests.docs import readme_ui
from tests.live_airflow import DAG_ID, LiveAirflow

pytestmark = pytest.mark.airflow


def _generate_data(command: str, env: dict, config) -> None:
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-m"], argv
    subprocess.run([sys.executable, *argv[1:]], env=env, check=True, timeout=300, capture_output=True)
    start = dt.date.fromisoformat(argv[argv.index("--start") + 1])
    days = [start + dt.timedelta(days=n) for n in range(int(argv[argv.index("--days") + 1]))]
    for day in days:
        assert (events_partition(config.data.raw_root, day) / SUCCESS_MARKER).exists(), day


def test_every_command_of_the_readme_ui_section_is_one_the_tests_run():
    """A command added to the section without a test that runs it fails here."""
    expected = ["python -m pipeline generate-data", "make airflow",
                "curl -s -X POST http://127.0.0.1:8080/auth/token",
                f"curl -s -X PATCH http://127.0.0.1:8080/api/v2/dags/{DAG_ID}",
                f"curl -s -X POST http://127.0.0.1:8080/api/v2/dags/{DAG_ID}/dagRuns",
                f"curl -s -X PATCH http://127.0.0.1:8080/api/v2/dags/{DAG_ID}/dagRuns/<run_id>/taskInstances/"
                "approve_forced_push/-1/hitlDetails",
                "make airflow-celery"]
    commands = readme_ui.commands()
    assert len(commands) == len(expected), commands
    for command, start in zip(commands, expected):
        assert command == start or command.startswith(start + " "), (command, start)
    # The live-Airflow tests start scripts/airflow_standalone.sh as `make airflow-celery` does.
    recipe = subprocess.run(["make", "-n", "--no-print-directory", "airflow-celery"], capture_output=True,
                            text=True, check=True, cwd=readme_ui.PROJECT_ROOT).stdout
    assert "RECO_AIRFLOW_STACK=celery bash scripts/airflow_standalone.sh" in recipe, recipe


def test_the_readme_walkthrough_serves_a_model(tmp_path):
    from tests.conftest import make_tiny_config

    # A yearly cron: unpausing schedules no interval of its own, only the README's run exists.
    config = make_tiny_config(tmp_path, **{"schedule.cron": "0 2 1 1 *", "train.epochs": 1})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    env = {**os.environ, "RECO_CONFIG": str(tmp_path / "params.yaml")}
    _generate_data(readme_ui.the("python -m pipeline generate-data"), env, config)

    assert "make airflow" in readme_ui.commands()
    airflow = LiveAirflow(tmp_path / "airflow", {"RECO_CONFIG": env["RECO_CONFIG"]}, stack="local",
                          make_target="airflow")
    try:
        airflow.start()
        values = {"admin password from var/airflow/simple_auth_manager_passwords.json.generated":
                  airflow.password_of("admin")}
        token = readme_ui.curl_json(readme_ui.fill(readme_ui.the("curl -s -X POST http://127.0.0.1:8080/auth/token"),
                                                   airflow.url, values))["access_token"]
        values["access_token"] = token
        assert airflow.login().status_code == 201
        airflow.wait_for_dag()                       # what the newcomer waits for in the UI
        unpause = readme_ui.the(f"curl -s -X PATCH http://127.0.0.1:8080/api/v2/dags/{DAG_ID} ")
        assert readme_ui.curl_json(readme_ui.fill(unpause, airflow.url, values))["is_paused"] is False
        trigger = readme_ui.the(f"curl -s -X POST http://127.0.0.1:8080/api/v2/dags/{DAG_ID}/dagRuns ")
        run = readme_ui.curl_json(readme_ui.fill(trigger, airflow.url, values))
        assert airflow.wait_for_run(run["dag_run_id"]) == "success", airflow.component_logs()
        run_date = run["conf"]["run_date"]
        summary = json.loads(next((config.data.artifact_root / "runs" / run_date).glob("*/summary.json")).read_text())
        assert summary["pushed"] and summary["served_version"] == 1, summary
        # Quiet logs: TensorFlow's native start-up lines are in the task log, none at error level.
        assert airflow.red_lines(run["dag_run_id"]) == {}
        assert '"logger": "native"' in airflow.task_log(run["dag_run_id"], "evaluate")
    finally:
        output = airflow.stop()
    assert "stopped" in output, output[-3000:]
