import datetime as dt
import json
import os
import subprocess
import sys

import pendulum
import pytest

from pipeline import orchestration as orch
from pipeline.config import PROJECT_ROOT
from tests.dags.conftest import AIRFLOW_ENV
from tests.worker_only import WORKER_ONLY_MODULES


def test_dagbag_has_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "recommender_nightly" in dagbag.dag_ids


def test_task_graph(nightly):
    downstream = {t.task_id: sorted(t.downstream_task_ids) for t in nightly.tasks}
    assert downstream == {
        "resolve_run": sorted(["wait_for_data", "validate", "preprocess", "stage", "train", "evaluate", "gate",
                               "push", "summary"]),
        "wait_for_data": ["validate"],
        "validate": ["preprocess"],
        "preprocess": ["stage", "summary"],
        "stage": ["train"],
        "train": ["evaluate", "summary"],
        "evaluate": ["gate", "push", "summary"],
        "gate": ["approve_forced_push"],
        "approve_forced_push": ["push"],
        "push": ["summary"],
        "summary": [],
    }
    assert nightly.get_task("train").pool == "training" and nightly.get_task("train").queue == "training"
    assert nightly.get_task("preprocess").pool == nightly.get_task("evaluate").pool == "heavy"
    assert nightly.get_task("summary").trigger_rule == "none_failed"
    # runs may overlap (a data wait holds no one up); the pools keep their heavy steps apart
    assert nightly.max_active_runs == 4 and nightly.catchup is False
    assert all(t.execution_timeout for t in nightly.tasks
               if t.task_id not in ("gate", "summary", "wait_for_data", "approve_forced_push"))
    assert nightly.get_task("approve_forced_push").response_timeout == dt.timedelta(hours=4)
    assert nightly.get_task("approve_forced_push").defaults == ["Reject"]
    assert nightly.doc_md and all(t.doc_md for t in nightly.tasks)


def test_schedule_has_day_long_data_intervals(nightly):
    """A bare cron string gives zero-length intervals in Airflow 3; the timetable must not."""
    from airflow.timetables.base import DataInterval

    from airflow_glue.plugin import NightlyTimetable

    assert isinstance(nightly.timetable, NightlyTimetable)
    assert nightly.timetable.summary == "0 2 * * *"
    last = DataInterval(pendulum.datetime(2026, 11, 6, 2, tz="UTC"), pendulum.datetime(2026, 11, 7, 2, tz="UTC"))
    nxt = nightly.timetable.next_dagrun_info(last_automated_data_interval=last, restriction=_unrestricted())
    assert nxt.data_interval.end - nxt.data_interval.start == dt.timedelta(days=1)
    assert nxt.logical_date == pendulum.datetime(2026, 11, 7, 2, tz="UTC")


def test_scheduled_and_backfill_run_ids_name_the_data_date_and_survive_serialization(nightly):
    """The runs list shows run ids only: a scheduled or backfill run's id starts with its data date
    (the day its tasks process), a manual run's stays Airflow's (its date is the form's). The
    scheduler reads the DAG back from its serialized form: the plugin's class must come back."""
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.timetables.base import DataInterval
    from airflow.utils.types import DagRunType

    timetable = DagSerialization.from_dict(DagSerialization.to_dict(nightly)).timetable
    assert type(timetable).__name__ == "NightlyTimetable"
    interval = DataInterval(pendulum.datetime(2026, 11, 5, 2, tz="UTC"), pendulum.datetime(2026, 11, 6, 2, tz="UTC"))
    run_after = interval.end
    ids = {kind: timetable.generate_run_id(run_type=kind, run_after=run_after, data_interval=interval)
           for kind in (DagRunType.SCHEDULED, DagRunType.BACKFILL_JOB, DagRunType.MANUAL)}
    assert ids[DagRunType.SCHEDULED] == "scheduled__data-2026-11-05__2026-11-06T02:00:00+00:00"
    assert ids[DagRunType.BACKFILL_JOB] == "backfill__data-2026-11-05__2026-11-06T02:00:00+00:00"
    assert ids[DagRunType.MANUAL] == "manual__2026-11-06T02:00:00+00:00"
    spec = orch.resolve_run({}, interval.start, run_after, ids[DagRunType.SCHEDULED], interval.end)
    assert spec.run_date == "2026-11-05"


def _unrestricted():
    from airflow.timetables.base import TimeRestriction

    return TimeRestriction(earliest=None, latest=None, catchup=True)


@pytest.mark.parametrize(
    ("param", "value"),
    [("workers", 0), ("epochs", "ten"), ("min_auc", 1.5), ("train_days", 0), ("skip_push", "maybe"),
     ("run_date", "11/05/2026"), ("run_date", "2026-11-05xyz"), ("run_date", "2026-13-01")],
)
def test_form_refuses_out_of_range_params(nightly, param, value):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dict(nightly.params.items()))
    params.validate()  # the defaults are valid
    with pytest.raises(ParamValidationError, match=f"param {param}"):
        params[param] = value


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"force_push": True}, "param 'force_reason': required"),
        ({"force_push": True, "force_reason": "  "}, "param 'force_reason'"),
        ({"force_push": True, "force_reason": "hotfix", "skip_push": True}, "param 'skip_push'"),
        ({"run_date": "08/11/2026"}, "param 'run_date'"),
        ({"workers": 0}, "param 'workers'"),
        ({"min_auc": 3}, "param 'min_auc'"),
        ({"epoch": 1}, r"unknown param\(s\) 'epoch'; valid: .*\bepochs\b"),
    ],
)
def test_resolve_run_refuses_bad_params_naming_them(params, message):
    with pytest.raises(orch.ParamError, match=message):
        orch.resolve_run(params, pendulum.datetime(2026, 11, 4, tz="UTC"), None, "manual__x")


def test_a_run_date_after_the_last_complete_day_is_refused_naming_that_day():
    """Triggered on 12-04 at 06:09: the last complete interval starts 12-03; 12-10 would wait a
    week for its data, holding the run slot."""
    end, after = pendulum.datetime(2026, 12, 4, 2, tz="UTC"), pendulum.datetime(2026, 12, 4, 6, 9, tz="UTC")
    with pytest.raises(orch.ParamError, match=r"param 'run_date': 2026-12-10 is not a complete day yet; "
                                              r"the last complete day is 2026-12-03"):
        orch.resolve_run({"run_date": "2026-12-10"}, after, after, "manual__x", end)
    with pytest.raises(orch.ParamError, match="2026-12-04 is not a complete day"):
        orch.resolve_run({"run_date": "2026-12-04"}, after, after, "manual__x", end)
    for day in ("2026-12-03", "2026-11-01"):          # the last complete day, and a backfill
        assert orch.resolve_run({"run_date": day}, after, after, "manual__x", end).run_date == day


@pytest.mark.parametrize("run_id", [".", "..", "a/b", "../x", "", ":", ".hidden"])
def test_a_run_id_that_is_not_one_path_component_is_refused(run_id):
    """`.` collapsed a run's folders onto its date's: stage then replaced every staged run of that
    date (Airflow accepts the run id `.`)."""
    with pytest.raises(orch.ParamError, match="run id"):
        orch.resolve_run({"run_date": "2026-11-01"}, None, pendulum.datetime(2026, 11, 9, tz="UTC"), run_id)


def test_data_date_falls_back_from_param_to_data_interval_to_logical_date_to_run_after():
    logical, after = pendulum.datetime(2026, 11, 4, 2, tz="UTC"), pendulum.datetime(2026, 11, 9, 12, tz="UTC")
    end = pendulum.datetime(2026, 11, 4, 2, tz="UTC")
    assert orch.data_date({"run_date": "2026-11-01"}, logical, after, end) == dt.date(2026, 11, 1)
    assert orch.data_date({"run_date": None}, logical, after, end) == dt.date(2026, 11, 3)
    assert orch.data_date({"run_date": None}, logical, after) == dt.date(2026, 11, 4)
    assert orch.data_date({}, None, after) == dt.date(2026, 11, 8)


@pytest.mark.parametrize(("zone", "interval_end", "day"), [
    # 02:00 local. Tokyo's 02:00 on 11-04 is 17:00 UTC on 11-03: UTC day 11-03 is still being written.
    ("Asia/Tokyo", pendulum.datetime(2026, 11, 4, 2, tz="Asia/Tokyo"), dt.date(2026, 11, 2)),
    ("Pacific/Auckland", pendulum.datetime(2026, 11, 4, 2, tz="Pacific/Auckland"), dt.date(2026, 11, 2)),
    # New York leaves DST on 11-01: 02:00 EDT is 06:00 UTC on 10-31, 02:00 EST 07:00 UTC on 11-02.
    ("America/New_York", pendulum.datetime(2026, 10, 31, 2, tz="America/New_York"), dt.date(2026, 10, 30)),
    ("America/New_York", pendulum.datetime(2026, 11, 2, 2, tz="America/New_York"), dt.date(2026, 11, 1)),
])
def test_the_data_date_and_its_deadline_follow_the_partitions_utc_days_in_any_zone(zone, interval_end, day):
    """Partitions are UTC days: a run takes the last UTC day complete when its interval ends, and
    waits for it until `data_wait_h` after that UTC day closes (Tokyo's local midnight was 15:00
    UTC, before the partition closed)."""
    from airflow.timetables.interval import CronDataIntervalTimetable as SchedulerTimetable

    from airflow_glue.data_landed import landing_deadline

    timetable = SchedulerTimetable("0 2 * * *", zone)
    interval = timetable.infer_manual_data_interval(run_after=interval_end.add(hours=1))
    assert interval.end == interval_end
    assert orch.data_date({}, interval.start, interval.end, interval.end) == day
    assert orch.last_complete_day(interval.end) == day
    closes = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)
    assert landing_deadline(day.isoformat(), 8) == closes + dt.timedelta(hours=8)
    with pytest.raises(orch.ParamError, match="not a complete day"):   # triggered then: UTC day D+1 is open
        orch.resolve_run({"run_date": (day + dt.timedelta(days=1)).isoformat()}, None, interval.end, "m", None)


def test_manual_run_now_gets_the_last_complete_interval_like_the_scheduled_run(nightly):
    """The UI form pre-fills Logical Date = now: Airflow infers the data interval from the
    timetable, and D is the day that interval starts, the same D the 02:00 run used."""
    from airflow.timetables.base import DataInterval

    timetable = nightly.timetable
    triggered = pendulum.datetime(2026, 12, 1, 6, 9, tz="UTC")
    interval = timetable.infer_manual_data_interval(run_after=triggered)
    assert orch.data_date({}, triggered, triggered, interval.end) == dt.date(2026, 11, 30)
    last = DataInterval(pendulum.datetime(2026, 11, 29, 2, tz="UTC"), pendulum.datetime(2026, 11, 30, 2, tz="UTC"))
    scheduled = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=_unrestricted())
    assert scheduled.run_after == pendulum.datetime(2026, 12, 1, 2, tz="UTC")
    assert orch.data_date({}, scheduled.logical_date, scheduled.run_after,
                          scheduled.data_interval.end) == dt.date(2026, 11, 30)


def test_the_dag_params_are_the_ones_resolve_run_accepts(nightly):
    assert set(nightly.params.keys()) == orch.RUN_PARAMS
    # a text field: a "date" format makes the UI show a locale date picker (mm/dd/yyyy)
    assert "format" not in nightly.params.get_param("run_date").schema


def test_resolve_run_turns_params_into_config_overrides():
    spec = orch.resolve_run({"workers": 3, "epochs": 1, "min_auc": None, "skip_push": True},
                            None, pendulum.datetime(2026, 11, 9, tz="UTC"), "manual__2026-11-09T00:00:00+00:00")
    config, paths = spec.load()
    assert config.train.workers == 3 and config.train.epochs == 1 and spec.skip_push
    assert config.eval.min_auc is None and config.eval.max_auc_drop == 0.0    # empty = off; absent = configured
    assert paths.run_id == "manual__2026-11-09T00_00_00_00_00" and spec.run_date == "2026-11-08"


def test_dag_file_parses_fast_without_tensorflow_beam_or_database(dag_file, tmp_path):
    """Parse hygiene: no TF/Beam import, no metadata-DB access (the DB URL points nowhere)."""
    code = f"""
import importlib.util, json, sys, time
import airflow.sdk, pendulum  # the DAG processor has these loaded already
from airflow.sdk import dag, task, Param, CronDataIntervalTimetable
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("nightly", {str(dag_file)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "heavy": [m for m in {WORKER_ONLY_MODULES!r} if m in sys.modules]}}))
"""
    env = {**AIRFLOW_ENV, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/missing/dir/airflow.db",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert result["seconds"] < 1.0, result


@pytest.mark.parametrize("backend", ["local", "kubernetes"])
def test_dag_parses_where_only_the_airflow_extra_is_installed(backend):
    """The scheduler image has `.[airflow]` only: the worker extra's packages are made
    unimportable here (not merely unimported), and the DagBag must still load the DAG."""
    code = """
import json, sys
WORKER_ONLY = set(json.loads(sys.argv[2]))
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in WORKER_ONLY:
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NotInstalled())
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"errors": {k: v[-300:] for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
                  "tasks": len(bag.dags["recommender_nightly"].tasks) if bag.dag_ids else 0}))
"""
    env = {**os.environ, **AIRFLOW_ENV, "RECO__EXECUTION__BACKEND": backend}
    done = subprocess.run([sys.executable, "-c", code, str(PROJECT_ROOT / "dags"), json.dumps(WORKER_ONLY_MODULES)],
                          capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["dags"] == ["recommender_nightly"] and result["tasks"] >= 10


def test_kubernetes_backend_runs_heavy_steps_as_pods(tmp_path):
    """What the scale-out switch would submit: same CLIs, worker image, run date from resolve_run."""
    code = """
import json
from airflow.dag_processing.dagbag import DagBag
import sys
def env_dict(env):
    return env if isinstance(env, dict) else {e.name: e.value for e in env}
from kubernetes.client import ApiClient
dag = DagBag(dag_folder=sys.argv[1]).dags["recommender_nightly"]
out = {}
for task_id in ("preprocess", "train", "evaluate", "push"):
    t = dag.get_task(task_id)
    out[task_id] = {"type": type(t).__name__, "image": t.image, "cmds": t.cmds, "arguments": t.arguments,
                    "namespace": t.namespace, "pool": t.pool, "env": env_dict(t.env_vars),
                    "upstream": sorted(t.upstream_task_ids), "service_account": t.service_account_name,
                    "mounts": {m.mount_path: [m.name, bool(m.read_only)] for m in t.volume_mounts},
                    "claims": {v.name: v.persistent_volume_claim.claim_name for v in t.volumes},
                    "pod": ApiClient().sanitize_for_serialization(t.build_pod_request_obj(dry_run=True))}
out["tasks"] = sorted(dag.task_ids)
out["announce_upstream"] = sorted(dag.get_task("announce").upstream_task_ids)
print(json.dumps(out))
"""
    env = {**os.environ, **AIRFLOW_ENV, "RECO__EXECUTION__BACKEND": "kubernetes",
           "RECO__EXECUTION__IMAGE": "reco-worker:1.2", "RECO__EXECUTION__NAMESPACE": "ml",
           "RECO__PREPROCESS__RUNNER": "DataflowRunner",
           "RECO__PREPROCESS__BEAM_ARGS": "['--project=acme', '--region=europe-west4']"}
    done = subprocess.run([sys.executable, "-c", code, str(PROJECT_ROOT / "dags")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    pods = json.loads(done.stdout.strip().splitlines()[-1])
    pre, train = pods["preprocess"], pods["train"]
    assert pre["type"] == train["type"] == "KubernetesPodOperator"
    assert pre["image"] == train["image"] == "reco-worker:1.2" and pre["namespace"] == "ml"
    assert pre["cmds"] == ["python", "-m", "components.preprocess"]
    assert "--runner=DataflowRunner" in pre["arguments"] and "--project=acme" in pre["arguments"]
    assert train["cmds"] == ["python", "-m", "components.train"] and "kubernetes" in train["arguments"]
    assert "resolve_run" in pre["arguments"][1] and "/airflow/xcom/return.json" in train["arguments"]
    assert train["pool"] == "training" and train["upstream"] == ["preprocess"]
    assert "stage" not in pods["tasks"]                   # worker pods stage onto their own nodes
    assert train["service_account"] == "reco-launcher" and pre["service_account"] in (None, "default")
    artifacts = pre["env"]["RECO__DATA__ARTIFACT_ROOT"]
    assert train["mounts"] == {artifacts: ["artifacts", False]}        # reads the chief's result.json
    assert pre["mounts"] == {artifacts: ["artifacts", False], pre["env"]["RECO__DATA__RAW_ROOT"]: ["raw", True]}
    assert pre["claims"] == {"artifacts": "reco-artifacts", "raw": "reco-raw"}
    assert pre["env"]["TF_USE_LEGACY_KERAS"] == "1" and "RECO__DATA__SERVING_BASE" in pre["env"]
    # The TensorFlow steps after training are pods too (the Airflow image has no TensorFlow);
    # their verdicts (NOT_BLESSED, a skipped push) are results, not pod failures.
    evaluate, push = pods["evaluate"], pods["push"]
    serving_base = pre["env"]["RECO__DATA__SERVING_BASE"]
    assert evaluate["cmds"] == ["python", "-m", "components.evaluate"] and "--exit-zero" in evaluate["arguments"]
    assert evaluate["upstream"] == ["train"]
    assert evaluate["mounts"] == {artifacts: ["artifacts", False], serving_base: ["serving", True]}
    assert push["cmds"] == ["python", "-m", "components.push"] and push["arguments"][0] == "push"
    assert "--exit-zero" in push["arguments"] and push["upstream"] == ["push_overrides"]
    assert "push_overrides" in push["arguments"][push["arguments"].index("--overrides-json") + 1]
    assert push["mounts"] == {artifacts: ["artifacts", False], serving_base: ["serving", False]}
    assert push["claims"] == {"artifacts": "reco-artifacts", "serving": "reco-serving"}
    assert pods["announce_upstream"] == ["evaluate", "push", "resolve_run"]
    from tests.components.train.k8s.test_kubernetes import _api_schema_round_trip

    for task_id in ("preprocess", "train", "evaluate", "push"):     # the V1Pod each would submit
        pod = pods[task_id]["pod"]
        assert pod["kind"] == "Pod" and _api_schema_round_trip(pod, "V1Pod") == pod, task_id
        (container,) = (c for c in pod["spec"]["containers"] if c["name"] == "base")
        assert container["command"] == pods[task_id]["cmds"] and container["volumeMounts"], task_id
        # The result comes back through the XCom sidecar, which shares an "xcom" volume with it.
        assert {v["name"] for v in pod["spec"]["volumes"]} == {*pods[task_id]["claims"], "xcom"}, task_id
        assert "airflow-xcom-sidecar" in {c["name"] for c in pod["spec"]["containers"]}, task_id


@pytest.mark.parametrize("error", [orch.ParamError("param 'x'"), None])
def test_failures_a_retry_cannot_change_fail_at_once_and_others_retry(dag_file, error):
    import importlib.util

    from airflow.sdk.exceptions import AirflowFailException

    from pipeline.contracts.inputs import ValidationError

    spec = importlib.util.spec_from_file_location("nightly_module", dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    permanent = error or ValidationError(["2026-11-05: missing partition events"])

    def broken(_):
        raise permanent

    with pytest.raises(AirflowFailException, match=type(permanent).__name__):   # no retry
        module._no_retry_if_permanent(broken)(None)

    def killed_worker(_):
        raise RuntimeError("worker-1 exited with code -9")

    with pytest.raises(RuntimeError, match="code -9"):                          # retried by Airflow
        module._no_retry_if_permanent(killed_worker)(None)


def test_assets_declared_and_the_served_model_only_announced_when_published(nightly):
    from airflow_glue import assets

    assert {a.name for a in nightly.get_task("validate").inlets} == {"reco_raw_events", "reco_raw_items"}
    assert [a.name for a in nightly.get_task("preprocess").outlets] == ["reco_transformed_examples"]
    assert [a.name for a in nightly.get_task("push").outlets] == ["reco_served_model"]   # its producing task
    # evaluate reads the served model: the asset is the DAG's own, so the Assets view lists it
    assert [a.name for a in nightly.get_task("evaluate").inlets] == ["reco_served_model"]
    evaluation = {"blessed": True, "reasons": [], "metrics_path": "m", "report_path": "r", "candidate_auc": 0.7,
                  "baseline_auc": 0.69, "baseline_version": 3, "examples": 100, "popularity_auc": 0.61}
    refused = {"pushed": False, "reason": "backfill: served model has newer data"}
    assert assets.served_model_extra("2026-11-04", evaluation, refused) is None
    published = {"pushed": True, "reason": "BLESSED", "version": 4, "version_dir": "/srv/recommender/4"}
    assert assets.served_model_extra("2026-11-04", evaluation, published) == {
        "version": 4, "run_date": "2026-11-04", "auc": 0.7, "popularity_auc": 0.61, "blessed": True,
        "reason": "BLESSED", "path": "/srv/recommender/4"}


def test_forced_push_records_who_approved_it():
    spec = orch.RunSpec("2026-11-04", "manual__1", force_push=True, force_reason="hotfix for bad catalog")
    approved = {"chosen_options": ["Approve"], "responded_by_user": {"id": "7", "name": "oncall"}}
    assert orch.with_approval(spec, approved).force_reason == "hotfix for bad catalog (approved by oncall)"
    assert orch.with_approval(spec, None) == spec   # approval off, or the run was BLESSED
    assert orch.with_approval(orch.RunSpec("2026-11-04", "r"), approved).force_reason is None


def test_serve_deadline_alert_only_when_configured(nightly):
    assert not nightly.deadline
    code = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(dag_folder=sys.argv[1]).dags["recommender_nightly"]
alert = dag.deadline[0] if isinstance(dag.deadline, list) else dag.deadline
print(json.dumps({"ref": type(alert.reference).__name__, "minutes": alert.interval.total_seconds() / 60,
                  "callback": alert.callback.path, "kwargs": alert.callback.kwargs}))
"""
    env = {**os.environ, **AIRFLOW_ENV, "RECO__SCHEDULE__SERVE_DEADLINE_MINUTES": "300"}
    done = subprocess.run([sys.executable, "-c", code, str(PROJECT_ROOT / "dags")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "ref": "DagRunQueuedAtDeadline", "minutes": 300.0, "callback": "pipeline.alerts.serve_deadline_missed",
        "kwargs": {"minutes": 300}}


def test_deadline_callback_logs_one_line_on_call_can_alert_on(caplog):
    import asyncio

    from pipeline.alerts import serve_deadline_missed

    with caplog.at_level("WARNING"):
        asyncio.run(serve_deadline_missed(300, context={"dag_run": {"run_id": "scheduled__2026-11-30"}}))
    assert "RECO DEADLINE run=scheduled__2026-11-30: the nightly model is not served 300 minutes" in caplog.text
