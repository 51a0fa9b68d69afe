"""The nightly DAG under a real scheduler: `make airflow-celery`'s script (PostgreSQL, Redis,
CeleryExecutor with a default and a training worker) in a temp AIRFLOW_HOME on loopback (the
session's one live Airflow, tests/live_airflow.py), runs triggered through the REST API as a
person or a CI job would.

Three stories: conf refusals; one night that meets everything on-call meets: the run waits for
its data to land, the training queue's Celery worker is SIGKILLed mid-train with everything below
it (a lost host), the scheduler fails the task on its missing heartbeat, the restarted worker
runs the retry and it resumes from the backup,
the model is NOT_BLESSED and forced, the requester's own Approve is refused without using the
request up, and the push waits for the approver's Approve given through the HITL API, then serves
and announces the version; and a forced push the approver rejects, skipped and recorded.
"""
from __future__ import annotations

import datetime as dt
import json

import psutil
import pytest

from pipeline.contracts.inputs import SUCCESS_MARKER, mark_landed
from pipeline.paths import events_partition
from tests.components.train.conftest import worker_processes
from tests.docs import readme_ui
from tests.live_airflow import DAG_ID, STORY_DAY, TRAINING_WORKER_BATCH

pytestmark = pytest.mark.airflow


def run_id_of(reply) -> str:
    assert reply.status_code == 200, reply.text
    return reply.json()["dag_run_id"]


def test_the_timetable_plugin_is_loaded_where_the_runs_are_named(live):
    """The API server lists our timetable from the package's entry point, and the scheduler
    parsed the DAG with it (a DAG whose timetable were unknown would fail to load and no run
    would start): scheduled and backfill runs are named by data date (test_dag_structure)."""
    _, airflow = live
    plugins = {p["name"]: p for p in airflow.api("GET", "/plugins").json()["plugins"]}
    assert any("NightlyTimetable" in t for t in plugins["recommender"]["timetables"]), plugins
    assert airflow.api("GET", f"/dags/{DAG_ID}").json()["timetable_summary"] == "0 2 1 1 *"


def test_conf_refusals(live):
    _, airflow = live
    for bad in ({"workers": 0}, {"epochs": "two"}, {"run_date": "2026-13-01"}):
        reply = airflow.trigger(bad)
        assert reply.status_code == 400 and next(iter(bad)) in reply.text, (bad, reply.text)
    future = run_id_of(airflow.trigger({"run_date": "2099-01-01"}))   # not a complete day: refused at once
    assert airflow.wait_for_run(future, timeout=180) == "failed"
    log = airflow.task_log(future, "resolve_run")
    assert "2099-01-01 is not a complete day yet; the last complete day is" in log, log[-3000:]


def _a_typo_fails_while_another_run_waits(airflow, waiting: str) -> None:
    """Another run is not held behind a run deferred on its data: the typo'd run gets its own
    slot and fails in resolve_run while `waiting` is still deferred."""
    run_id = run_id_of(airflow.trigger({"run_date": "2026-11-04", "epoch": 1}))     # a typo: not a Param
    assert airflow.wait_for_run(run_id, timeout=180) == "failed"
    assert airflow.task_state(run_id, "resolve_run") == "failed"
    assert airflow.task_state(run_id, "wait_for_data") == "upstream_failed"
    log = airflow.task_log(run_id, "resolve_run")
    assert "unknown param(s) 'epoch'" in log and "epochs" in log, log[-3000:]
    assert airflow.task_state(waiting, "wait_for_data") == "deferred"


def served_events(airflow) -> list[dict]:
    """The served-model asset's events, oldest first: what a downstream DAG is scheduled on."""
    assets = airflow.api("GET", "/assets", params={"name_pattern": "reco_served_model"}).json()["assets"]
    if not assets:
        return []
    reply = airflow.api("GET", "/assets/events", params={"asset_id": assets[0]["id"], "order_by": "timestamp"})
    return [event["extra"] for event in reply.json()["asset_events"]]


def served_version(config) -> int:
    from pipeline.contracts import serving

    return serving.served_version(config.data.serving_base / config.push.model_name) or 0


def run_file(config, day: dt.date, name: str) -> dict:
    return json.loads(next((config.data.artifact_root / "runs" / day.isoformat()).glob(f"*/{name}")).read_text())


def _cmdline(process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return ""


def _kill_the_training_worker_after_epoch_one(config, airflow) -> list[int]:
    """SIGKILL the training queue's Celery worker and everything below it (its pool, the train
    task, the gang) at once, as a lost host or an OOM-killed container would; the pids killed."""
    progress = list((config.data.artifact_root / "runs" / STORY_DAY.isoformat()).glob("*/train/progress.json"))
    if not progress or json.loads(progress[0].read_text())["backed_up_epochs"] < 1:
        return []
    workers = [p for p in psutil.Process(airflow.proc.pid).children(recursive=True)    # the main process, not
               if "celery worker --queues training" in _cmdline(p)                       # its forked pool
               and "celery worker --queues training" not in _cmdline(p.parent())]
    assert len(workers) == 1, workers
    victims = [workers[0], *workers[0].children(recursive=True)]
    assert worker_processes(root=workers[0].pid), "the gang runs below the training worker"
    for victim in victims:
        victim.kill()
    return [victim.pid for victim in victims]


def parks(airflow, run_id: str) -> int:
    """How often the scheduler has seen the approval task's attempt end parked (awaiting input).

    Airflow 3.3 race: an answer before the executor has reported the parked attempt as done
    makes the scheduler see "state changed externally" and fail the task. A person is never
    that fast; the tests wait for the scheduler's own line saying it got that report."""
    line = ("Received executor event with state success for task instance TaskInstanceKey("
            f"dag_id='{DAG_ID}', task_id='approve_forced_push', run_id='{run_id}'")
    return (airflow.home / "logs" / "scheduler.log").read_text().count(line)


def test_a_night_waits_for_its_data_survives_a_killed_celery_worker_and_a_forced_push_waits_for_approval(live):
    config, airflow = live
    conf = {"run_date": STORY_DAY.isoformat(), "epochs": 3, "min_auc": 0.99, "force_push": True,
            "force_reason": "scheduler test"}
    before, announced = served_version(config), len(served_events(airflow))
    landing = events_partition(config.data.raw_root, STORY_DAY)
    (landing / SUCCESS_MARKER).unlink(missing_ok=True)                      # still "landing"
    run_id = run_id_of(airflow.trigger(conf))
    airflow.wait_for("wait_for_data to defer", lambda: airflow.task_state(run_id, "wait_for_data") == "deferred",
                     timeout=240)
    assert airflow.task_state(run_id, "validate") in (None, "none", "scheduled", "queued")
    _a_typo_fails_while_another_run_waits(airflow, run_id)
    mark_landed(landing)                                                   # the upstream export finishes
    killed = airflow.wait_for("a training worker to finish epoch 1",
                              lambda: _kill_the_training_worker_after_epoch_one(config, airflow),
                              timeout=600, every=0.2)
    train = airflow.wait_for("train to succeed on its retry",
                             lambda: (ti := airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train")
                                      .json())["state"] == "success" and ti, timeout=600)
    assert train["try_number"] == 2, train
    assert run_file(config, STORY_DAY, "train/result.json")["initial_epoch"] >= 1      # resumed, not retrained
    assert not [pid for pid in killed if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    worker_log = (airflow.home / "logs" / "worker-training.log").read_text()
    assert "RECO WORKER EXITED (137): restarting it" in worker_log, worker_log[-3000:]
    second_try = airflow.task_log(run_id, "train", 2)
    assert f"RECO RETRY dag={DAG_ID} run={run_id} task=train try=2: try 1 did not succeed" in second_try, \
        second_try[-3000:]
    # One config per run: the training worker's own environment differs, the run's config is used.
    run_batch = run_file(config, STORY_DAY, "config.json")["config"]["eval"]["batch_size"]
    assert run_batch != TRAINING_WORKER_BATCH
    assert run_file(config, STORY_DAY, "train/config.json")["eval"]["batch_size"] == run_batch
    assert (f"eval.batch_size={TRAINING_WORKER_BATCH} (run: {run_batch}); the run's config is used"
            in second_try), second_try[-3000:]

    hitl = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_forced_push/-1/hitlDetails"
    airflow.wait_for("the approval request", lambda: airflow.task_state(run_id, "approve_forced_push")
                     == "awaiting_input", timeout=300)
    detail = airflow.api("GET", hitl).json()
    assert "NOT_BLESSED" in detail["body"] and "scheduler test" in detail["body"], detail
    assert "Requested by: admin" in detail["body"] and set(detail["params"]) == {"reason"}, detail
    assert airflow.task_state(run_id, "push") in (None, "none", "scheduled", "queued")
    # (`parks`: an Airflow 3.3 race a person is never fast enough to meet.)
    airflow.wait_for("the scheduler to see the parked attempt end", lambda: parks(airflow, run_id) >= 1, timeout=120)
    # Four eyes, with push.approvers left empty (the default): Airflow lets anyone answer, so it
    # takes the requester's own Approve (HTTP 200); the operator refuses it and opens the request
    # again, still waiting, for someone else.
    own = airflow.api("PATCH", hitl, json={"chosen_options": ["Approve"], "params_input": {"reason": "mine"}})
    assert own.status_code == 200, own.text
    airflow.wait_for("the refused self-approval to open the request again", lambda: parks(airflow, run_id) >= 2,
                     timeout=300)
    assert airflow.task_state(run_id, "approve_forced_push") == "awaiting_input"
    reopened = airflow.api("GET", hitl).json()
    assert not reopened["response_received"] and reopened["chosen_options"] is None, reopened
    refusal = "FORCED PUSH REFUSED: admin asked for this forced push and cannot approve it (four eyes)"
    assert refusal in airflow.task_log(run_id, "approve_forced_push")
    assert airflow.task_state(run_id, "push") in (None, "none", "scheduled", "queued")
    # The approver answers with the README's own command.
    approve = readme_ui.the(f"curl -s -X PATCH http://127.0.0.1:8080/api/v2/dags/{DAG_ID}/dagRuns/<run_id>/")
    answered = readme_ui.curl_json(readme_ui.fill(approve, airflow.url, {
        "run_id": run_id, "approver access_token": airflow.token_of("approver"), "why": "INC-9 checked"}))
    assert answered["chosen_options"] == ["Approve"], answered
    assert airflow.wait_for_run(run_id) == "success"
    record = json.loads((config.data.serving_base / config.push.model_name / str(before + 1) / "assets.extra" /
                         "push_record.json").read_text())
    assert record["forced"] and record["force_reason"] == "scheduler test (approved by approver)", record
    events = served_events(airflow)
    assert len(events) == announced + 1 and not events[-1]["blessed"]
    asset = airflow.api("GET", "/assets", params={"name_pattern": "reco_served_model"}).json()["assets"][0]
    assert [t["task_id"] for t in asset["producing_tasks"]] == ["push"], asset     # the asset page names it
    assert (events[-1]["version"], events[-1]["run_date"]) == (before + 1, STORY_DAY.isoformat())
    summary = run_file(config, STORY_DAY, "summary.json")
    assert summary["pushed"] and summary["served_version"] == before + 1, summary
    assert {k: summary["approval"][k] for k in ("decision", "by", "requested_by", "reason")} == \
        {"decision": "Approve", "by": "approver", "requested_by": "admin", "reason": "INC-9 checked"}, summary
    [refused] = summary["approval"]["refused"]
    assert {k: refused[k] for k in ("decision", "by", "requested_by", "reason")} == \
        {"decision": "refused", "by": "admin", "requested_by": "admin",
         "reason": "admin asked for this forced push and cannot approve it (four eyes)"}, summary
    assert dt.datetime.fromisoformat(refused["at"]) < dt.datetime.fromisoformat(summary["approval"]["at"])
    assert "FORCED PUSH APPROVED by approver (requested by admin): INC-9 checked" in \
        airflow.task_log(run_id, "approve_forced_push")
    assert events[-1]["auc"] == summary["candidate_auc"]
    # The stack production runs: the run is in PostgreSQL; the gang launcher ran on the training
    # queue's worker, everything else on the default one.
    assert airflow.sql(f"SELECT count(*) FROM dag_run WHERE run_id = '{run_id}'") == "1"
    assert train["queue"] == "training"
    logs = airflow.home / "logs"
    assert "task_id=train/" in (logs / "worker-training.log").read_text()
    default_log = (logs / "worker-default.log").read_text()
    assert "task_id=push/" in default_log and "task_id=train/" not in default_log
    # Quiet logs: TensorFlow's native start-up lines are in the task logs, none at error level.
    assert airflow.red_lines(run_id) == {}
    assert '"logger": "native"' in airflow.task_log(run_id, "evaluate")
    waited = airflow.task_log(run_id, "wait_for_data")
    assert "waiting until" in waited and f"for events ds={STORY_DAY.isoformat()}" in waited, waited[-3000:]


def test_a_rejected_forced_push_is_skipped_and_recorded(live):
    """The approver's Reject: Airflow skips the push (DownstreamTasksSkipped, before the approval
    task returns anything); the decision is still logged and in summary.json."""
    from pipeline.paths import RunPaths

    config, airflow = live
    day, before = STORY_DAY - dt.timedelta(days=1), served_version(config)
    run_id = run_id_of(airflow.trigger({"run_date": day.isoformat(), "epochs": 1, "min_auc": 0.99,
                                        "force_push": True, "force_reason": "reject test"}))
    hitl = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_forced_push/-1/hitlDetails"
    airflow.wait_for("the approval request", lambda: airflow.task_state(run_id, "approve_forced_push")
                     == "awaiting_input", timeout=900, every=2.0)
    airflow.wait_for("the scheduler to see the parked attempt end", lambda: parks(airflow, run_id) >= 1, timeout=120)
    answered = airflow.api("PATCH", hitl, as_user="approver",
                           json={"chosen_options": ["Reject"], "params_input": {"reason": "CTR looks wrong"}})
    assert answered.status_code == 200, answered.text
    assert airflow.wait_for_run(run_id) == "success"
    assert airflow.task_state(run_id, "push") == "skipped" and served_version(config) == before
    summary = json.loads((RunPaths.for_run(config, day, run_id).run_dir / "summary.json").read_text())
    assert not summary["pushed"], summary
    assert {k: summary["approval"][k] for k in ("decision", "by", "requested_by", "reason", "refused")} == \
        {"decision": "Reject", "by": "approver", "requested_by": "admin", "reason": "CTR looks wrong",
         "refused": []}, summary
    assert summary["approval"]["at"], summary
    log = airflow.task_log(run_id, "approve_forced_push")
    assert "FORCED PUSH REJECTED by approver: CTR looks wrong; the push is skipped" in log, log[-3000:]
    assert airflow.red_lines(run_id) == {}
