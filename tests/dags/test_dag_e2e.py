"""End to end through real Airflow: `airflow dags test` on a temp SQLite home, tiny generated data.

The story on-call lives through: a first model is served; a day whose labels carry no signal
is NOT_BLESSED and the push is skipped while the run succeeds; a backfill of an older date
produces its own outputs but never replaces the model trained on newer data. Each test builds
the state it needs through the `served` fixture (the first run, done once per module), so any
of them passes alone (`-k`) as well as together, in any order.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.config import PROJECT_ROOT
from tests.conftest import make_tiny_config
from tests.dags.conftest import AIRFLOW_ENV

pytestmark = pytest.mark.airflow
FIRST, SERVED_DAY, SHUFFLED_DAY, BACKFILL_DAY = (dt.date(2026, 11, d) for d in (1, 5, 6, 4))


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    from pipeline.datagen import generate

    root = tmp_path_factory.mktemp("e2e")
    # A chance-level absolute gate where the gate is not under test (a first model needs one
    # threshold): BLESSED whatever a tiny model's luck; the NOT_BLESSED story sets its own, on a
    # day with no signal at all. One worker, one epoch: the gang's own stories are
    # tests/components/train and the scheduler night.
    config = make_tiny_config(root, **{"schedule.retries": 0, "train.epochs": 1, "train.workers": 1,
                                       "eval.min_auc": 0.0})
    (root / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    g = config.generator
    generate(config.data.raw_root, FIRST, 6, users=g.users, items=g.items, events_per_day=g.events_per_day,
             seed=g.seed, faults={SHUFFLED_DAY: ["shuffled_labels"]}, with_ceiling=False)
    env = {**os.environ, **AIRFLOW_ENV, "AIRFLOW_HOME": str(root / "airflow"), "RECO_CONFIG": str(root / "params.yaml"),
           "PYTHONPATH": str(PROJECT_ROOT), "TF_USE_LEGACY_KERAS": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    init = subprocess.run(["bash", "-c", f"source {PROJECT_ROOT}/scripts/airflow_env.sh && reco_airflow_init"],
                          env=env, capture_output=True, text=True)
    assert init.returncode == 0, init.stdout + init.stderr
    return config, env, root


def dags_test(e2e, day: dt.date, conf: dict | None = None, expect_success: bool = True) -> str:
    _, env, root = e2e
    # The time the nightly run for D starts (D+1 02:00, the tiny config's cron in UTC): Airflow
    # infers the run's data interval [D 02:00, D+1 02:00) and the run takes D from it.
    cmd = ["airflow", "dags", "test", "recommender_nightly", f"{day + dt.timedelta(days=1)}T02:00:00+00:00"]
    if conf:
        cmd += ["--conf", json.dumps(conf)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    (root / f"dag_{day}.log").write_text(log)
    assert (done.returncode == 0) == expect_success, log[-6000:]
    assert ("state=success" in log) == expect_success, log[-6000:]
    return log


def summary_of(config, day: dt.date) -> dict:
    found = sorted((config.data.artifact_root / "runs" / day.isoformat()).glob("*/summary.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def served_events(e2e) -> list[dict]:
    """The served-model asset's events in the run's Airflow DB (what a downstream DAG is
    scheduled on), oldest first."""
    import sqlite3

    with sqlite3.connect(e2e[2] / "airflow" / "airflow.db") as db:
        rows = db.execute("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                          "WHERE a.name = 'reco_served_model' ORDER BY e.timestamp, e.id").fetchall()
    return [json.loads(extra) for (extra,) in rows]


@pytest.fixture(scope="module")
def served(e2e) -> dict:
    """The first nightly run, which serves version 1: what the other runs are judged against."""
    dags_test(e2e, SERVED_DAY)
    return summary_of(e2e[0], SERVED_DAY)


def test_first_run_serves_a_model(e2e, served):
    config, summary = e2e[0], served
    assert summary["blessed"] and summary["pushed"], summary
    assert summary["baseline_version"] is None and summary["served_version"] == 1
    assert summary["train_examples"] > 3000 and 0 < summary["candidate_auc"] < 1   # learning: tests/components/train
    served = config.data.serving_base / config.push.model_name / "1"
    assert (served / "saved_model.pb").exists()
    # The push records what TF Serving needs: nothing for the default model's plain export
    # (XLA only where it pays, model.serving_xla; the XLA case is tests/components/train/model/test_model.py).
    record = json.loads((served / "assets.extra" / "push_record.json").read_text())
    assert record["tf_serving_flags"] == []
    assert Path(summary["report"]).exists() and Path(summary["tensorboard"]).exists()
    # Downstream DAGs hear of it: one served-model event, BLESSED, naming the version and day.
    (event,) = served_events(e2e)
    assert event["blessed"] and (event["version"], event["run_date"]) == (1, SERVED_DAY.isoformat()), event
    assert event["auc"] == summary["candidate_auc"]


def test_signal_free_day_is_not_blessed_and_push_is_skipped(e2e, served):
    config = e2e[0]
    # Labels shuffled on the eval day: every model scores AUC 0.5 give or take ~0.02 here, so an
    # absolute gate of 0.6 refuses it every time.
    log = dags_test(e2e, SHUFFLED_DAY, conf={"min_auc": 0.6})
    summary = summary_of(config, SHUFFLED_DAY)
    assert summary["blessed"] is False and summary["pushed"] is False, summary
    assert summary["baseline_version"] == 1 and summary["served_version"] == 1
    assert "GATE NOT_BLESSED" in log and "NOT_BLESSED" in summary["gate"]
    assert "starting task_id=gate" in log and "starting task_id=push" not in log   # skipped, never ran
    assert "starting task_id=summary" in log
    assert [e["version"] for e in served_events(e2e)] == [1]        # nothing announced: nothing served
    # The summary's quality trend: the served night and this refused one, one line each.
    assert "TREND of the last 2 nights" in log, log[-3000:]
    assert f"{SERVED_DAY.isoformat()}" in log and "NOT_BLESSED" in log


def test_backfilled_older_date_never_replaces_the_newer_model(e2e, served):
    config = e2e[0]
    # Only the chance-level absolute gate, so the candidate is BLESSED and the push policy itself must
    # refuse. (Against the served model it would lose anyway: day D-1 is inside that model's training window.)
    dags_test(e2e, BACKFILL_DAY, conf={"max_auc_drop": None})
    summary = summary_of(config, BACKFILL_DAY)
    assert summary["blessed"] is True, summary
    assert summary["pushed"] is False and summary["served_version"] == 1, summary
    assert "older" in summary["push_reason"].lower() or "backfill" in summary["push_reason"].lower(), summary
    assert [e["version"] for e in served_events(e2e)] == [1]
    run_dir = next((config.data.artifact_root / "runs" / BACKFILL_DAY.isoformat()).iterdir())
    assert (run_dir / "examples" / "manifest.json").exists() and (run_dir / "train" / "model").exists()


def test_bad_params_fail_before_any_work_with_one_clear_line(e2e):
    config = e2e[0]
    log = dags_test(e2e, dt.date(2026, 11, 3), conf={"force_push": True}, expect_success=False)
    assert "param 'force_reason': required when force_push is true" in log
    assert "RECO FAILED dag=recommender_nightly" in log and "task=resolve_run" in log
    assert not (config.data.artifact_root / "runs" / "2026-11-03").exists()
