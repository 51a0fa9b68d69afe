"""Nightly retraining of the multimodal CTR recommender (Airflow 3, TaskFlow).

Thin wiring only: every task calls one function of `pipeline.orchestration`, which imports its
component (and with it TensorFlow or Beam) at run time, so this file parses in milliseconds.
"""
from __future__ import annotations

import datetime as dt
import logging

import pendulum
from airflow.sdk import (
    AsyncCallback,
    DeadlineAlert,
    DeadlineReference,
    Param,
    dag,
    get_current_context,
    task,
)
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_glue import assets
from airflow_glue.approval import ForcedPushApproval
from airflow_glue.data_landed import WaitForData
from airflow_glue.plugin import NightlyTimetable
from pipeline import alerts, native_logs
from pipeline import orchestration as orch
from pipeline.config import load_config

log = logging.getLogger(__name__)
CONFIG = load_config()  # a YAML read, no database: safe at parse time

DOC = """
### Nightly recommender retraining

wait for data → validate → preprocess → stage → train → evaluate against the served model →
gate → approval of a forced push → push to TF Serving → summary. What each param does, how the
gate decides, backfills, retries and the on-call lines: the project's README ("Using it from the Airflow UI") and
docs/operations.md.
"""

PARAMS = {
    # A text field, not format="date": the browser's date picker shows the user's locale (mm/dd/yyyy)
    # while the data date is written YYYY-MM-DD everywhere else.
    "run_date": Param(None, type=["null", "string"], pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$",
                      description="Data date D, YYYY-MM-DD (a UTC day). Empty: the last complete day of the "
                                  "run's data interval."),
    "train_days": Param(CONFIG.window.train_days, type="integer", minimum=1, maximum=90,
                        description="Days before D in the training window."),
    "epochs": Param(CONFIG.train.epochs, type="integer", minimum=1, maximum=100,
                    description="Training epochs."),
    "workers": Param(CONFIG.train.workers, type="integer", minimum=1, maximum=64,
                     description="MultiWorkerMirroredStrategy workers (all launched by one task)."),
    "min_auc": Param(CONFIG.eval.min_auc, type=["null", "number"], minimum=0, maximum=1,
                     description="Absolute gate: candidate AUC must reach this. Empty: none."),
    "max_auc_drop": Param(CONFIG.eval.max_auc_drop, type=["null", "number"], minimum=0, maximum=1,
                          description="Relative gate: AUC may drop at most this below the served model."),
    "min_lift_over_baseline": Param(CONFIG.eval.min_lift_over_baseline, type=["null", "number"],
                                    minimum=-1, maximum=1,
                                    description="Popularity floor: AUC must beat the training window's "
                                                "item popularity by this. Empty: off."),
    "skip_push": Param(False, type="boolean", description="Evaluate but never push."),
    "force_push": Param(False, type="boolean",
                        description="Push even if NOT_BLESSED (requires force_reason)."),
    "force_reason": Param(None, type=["null", "string"], description="Why the push is forced; recorded."),
    "allow_backfill_push": Param(CONFIG.push.allow_backfill, type="boolean",
                                 description="Let a run older than the served model's data serve."),
}


def _log_failure(context, retrying: bool = False) -> None:
    """One clear line for on-call on every failed try: which run, task, try, what broke, and
    whether Airflow retries it."""
    ti = context["ti"]
    log.error(alerts.failure_line(ti.dag_id, ti.run_id, ti.task_id, ti.try_number, retrying, context.get("exception")))


def _log_retry(context) -> None:
    _log_failure(context, retrying=True)


def _on_task_start(context) -> None:
    """Where every task process starts: TensorFlow's native start-up lines go to the task log at
    their own severity, not as errors (pipeline/native_logs.py); a retry names the try it
    replaces, since a try killed with its process logged nothing itself."""
    native_logs.to_task_log()
    ti = context["ti"]
    if ti.try_number > 1:
        log.warning(alerts.retry_line(ti.dag_id, ti.run_id, ti.task_id, ti.try_number))


def _spec(spec: dict) -> orch.RunSpec:
    return orch.RunSpec.from_dict(spec)


def _deadline() -> DeadlineAlert | None:
    minutes = CONFIG.schedule.serve_deadline_minutes
    if minutes is None:
        return None
    return DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=dt.timedelta(minutes=minutes),
                         callback=AsyncCallback("pipeline.alerts.serve_deadline_missed", kwargs={"minutes": minutes}))


SERVED_MODEL = assets.served_model(CONFIG)


def _announce_served(spec: dict, evaluation: dict, pushed: dict) -> None:
    """A push that published a version is the served-model asset event (the asset is the task's
    outlet, so its page names the producing task); a push that published nothing ends skipped,
    because an outlet's event is emitted on every success. Its result stays in the XCom."""
    extra = assets.served_model_extra(spec["run_date"], evaluation, pushed)
    if extra is None:
        get_current_context()["ti"].xcom_push(key="return_value", value=pushed)
        raise AirflowSkipException(f"nothing published: {pushed.get('reason')}")
    get_current_context()["outlet_events"][SERVED_MODEL].extra = extra


def _no_retry_if_permanent(step):
    """Run a task body; a failure no retry can change fails the task at once (no retry delay)."""
    def body(*args):
        try:
            return step(*args)
        except orch.permanent_errors() as err:
            raise AirflowFailException(f"{type(err).__name__}: {err}") from err
    return body


@task(retries=0, execution_timeout=dt.timedelta(minutes=2))
def resolve_run() -> dict:
    """Check the form's params and fix the data date; bad params fail here, before any work."""
    ctx = get_current_context()
    dag_run = ctx["dag_run"]
    resolve = _no_retry_if_permanent(orch.resolve_run)
    return resolve(dict(ctx["params"]), dag_run.logical_date, dag_run.run_after,
                   dag_run.run_id, dag_run.data_interval_end).to_dict()


@task(execution_timeout=dt.timedelta(minutes=20), inlets=[assets.raw_events(CONFIG), assets.raw_items(CONFIG)])
def validate(spec: dict) -> dict:
    """Partitions present, schemas right, row counts and label rate vs the day before."""
    return _no_retry_if_permanent(orch.run_validate)(_spec(spec))


@task(pool=CONFIG.schedule.heavy_pool, execution_timeout=dt.timedelta(hours=2), outlets=[assets.examples(CONFIG)])
def preprocess(spec: dict, _validated: dict) -> dict:
    """Beam + tf.Transform → transformed TFRecord shards (idempotent: reruns replace)."""
    result = _no_retry_if_permanent(orch.run_preprocess)(_spec(spec))
    get_current_context()["outlet_events"][assets.examples(CONFIG)].extra = \
        assets.examples_extra(spec["run_date"], result)
    return result


@task(execution_timeout=dt.timedelta(hours=1))
def stage(spec: dict, _pre: dict) -> dict:
    """Copy each worker's shards to local SSD, verified and published atomically."""
    return _no_retry_if_permanent(orch.run_stage)(_spec(spec))


@task(pool=CONFIG.schedule.training_pool, queue=CONFIG.schedule.training_queue,
      execution_timeout=dt.timedelta(seconds=CONFIG.train.timeout_s + 600))
def train(spec: dict, _staged: dict) -> dict:
    """ONE task launches and supervises all workers (mapped tasks are not co-scheduled)."""
    return _no_retry_if_permanent(orch.run_train)(_spec(spec))


@task(pool=CONFIG.schedule.heavy_pool, execution_timeout=dt.timedelta(hours=1), inlets=[assets.served_model(CONFIG)])
def evaluate(spec: dict, _trained: dict) -> dict:
    """Candidate vs the version TF Serving serves now, on the day-D holdout."""
    return _no_retry_if_permanent(orch.run_evaluate)(_spec(spec))


@task.short_circuit(ignore_downstream_trigger_rules=False, retries=0)
def gate(spec: dict, evaluation: dict) -> bool:
    """NOT_BLESSED (or skip_push) skips the push; the run still succeeds."""
    go, reason = orch.gate(_spec(spec), evaluation)
    log.info("GATE %s", reason)
    return go


@task(execution_timeout=dt.timedelta(minutes=30), outlets=[SERVED_MODEL])
def push(spec: dict, evaluation: dict) -> dict:
    """Atomic publish of a new version into TF Serving's model directory; announces it as
    the served-model asset event."""
    approval = get_current_context()["ti"].xcom_pull(task_ids="approve_forced_push")
    result = _no_retry_if_permanent(orch.run_push)(orch.with_approval(_spec(spec), approval))
    _announce_served(spec, evaluation, result)
    return result


@task(retries=0, execution_timeout=dt.timedelta(minutes=2))
def push_overrides(spec: dict) -> dict:
    """The push pod's config overrides: the run's, and a forced push's reason naming who approved it."""
    approval = get_current_context()["ti"].xcom_pull(task_ids="approve_forced_push")
    return orch.with_approval(_spec(spec), approval).config_overrides()


@task(retries=0, execution_timeout=dt.timedelta(minutes=2), outlets=[SERVED_MODEL])
def announce(spec: dict, evaluation: dict, pushed: dict) -> None:
    """The push pod's result as the served-model asset event (a pod cannot emit one)."""
    _announce_served(spec, evaluation, pushed)


@task(trigger_rule="none_failed", retries=0)
def summary(spec: dict, preprocessed: dict, trained: dict, evaluation: dict) -> dict:
    """The run's summary: rows, AUCs, blessing, served version, report and TensorBoard paths."""
    ctx = get_current_context()
    pushed = ctx["ti"].xcom_pull(task_ids="push")
    approval = ctx["ti"].xcom_pull(task_ids="approve_forced_push")
    _, reason = orch.gate(_spec(spec), evaluation)
    results = {"preprocess": preprocessed, "train": trained, "evaluate": evaluation, "push": pushed,
               "approval": (approval or {}).get("decision")}
    return orch.summarize(_spec(spec), results, reason)


def _local_steps(spec, validated):
    """The local shape: each heavy step a task on this Airflow's workers (Beam's runner from
    preprocess.runner; stage copies shards to this host's SSD; one task launches the gang)."""
    preprocessed = preprocess(spec, validated)
    trained = train(spec, stage(spec, preprocessed))
    return preprocessed, trained, evaluate(spec, trained)


def _pod_steps(spec, validated):
    """The pod shape: the same CLIs as pods of the worker image (the Airflow image has no
    TensorFlow); each training worker pod stages its own shards (no stage task)."""
    from airflow_glue import k8s_operators as pods

    heavy = CONFIG.schedule.heavy_pool
    preprocess_op = pods.preprocess_pod(CONFIG, pool=heavy, execution_timeout=dt.timedelta(hours=2),
                                        doc_md="Beam launcher pod (runner from config).")
    train_op = pods.train_pod(CONFIG, pool=CONFIG.schedule.training_pool, queue=CONFIG.schedule.training_queue,
                              execution_timeout=dt.timedelta(seconds=CONFIG.train.timeout_s + 600),
                              doc_md="Gang launcher pod: each worker pod stages its own shards "
                                     "onto its node's SSD (init container), then trains.")
    evaluate_op = pods.evaluate_pod(CONFIG, pool=heavy, execution_timeout=dt.timedelta(hours=1),
                                    inlets=[assets.served_model(CONFIG)],
                                    doc_md="Candidate vs the served version (serving volume read-only).")
    validated >> preprocess_op >> train_op >> evaluate_op
    return preprocess_op.output, train_op.output, evaluate_op.output


def _local_push(spec, evaluation, approved):
    pushed = push(spec, evaluation)
    approved >> pushed
    return pushed


def _pod_push(spec, evaluation, approved):
    """The push pod cannot emit an asset event: `announce` turns its result into one."""
    from airflow_glue import k8s_operators as pods

    push_op = pods.push_pod(CONFIG, "push_overrides", execution_timeout=dt.timedelta(minutes=30),
                            doc_md="Atomic publish into TF Serving's model base (serving volume).")
    approved >> push_overrides(spec) >> push_op
    return announce(spec, evaluation, push_op.output)


SHAPES = {"local": (_local_steps, _local_push), "kubernetes": (_pod_steps, _pod_push)}


@dag(
    dag_id="recommender_nightly",
    schedule=NightlyTimetable(CONFIG.schedule.cron, CONFIG.schedule.timezone),
    start_date=pendulum.datetime(2026, 1, 1, tz=CONFIG.schedule.timezone),
    catchup=False,
    # More than one run at a time: a run deferred on its data wait holds no slot another needs;
    # the heavy steps take turns in their pools (heavy: preprocess + evaluate; training: the gang).
    max_active_runs=CONFIG.schedule.max_active_runs,
    params=PARAMS,
    doc_md=DOC,
    tags=["recommender", "training"],
    deadline=_deadline(),
    default_args={
        "retries": CONFIG.schedule.retries,
        "retry_delay": dt.timedelta(seconds=CONFIG.schedule.retry_delay_s),
        "on_failure_callback": _log_failure,
        "on_retry_callback": _log_retry,
        "on_execute_callback": _on_task_start,
    },
)
def recommender_nightly():
    """Wiring only: the task bodies are above, the shape comes from `execution.backend`."""
    steps, push_step = SHAPES[CONFIG.execution.backend]
    spec = resolve_run()
    waited = WaitForData(task_id="wait_for_data", spec_task_id="resolve_run", retries=0,
                         wait_h=CONFIG.schedule.data_wait_h, poke_s=CONFIG.schedule.data_poke_s,
                         doc_md="Defers until the run's partitions have their _SUCCESS markers.")
    validated = validate(spec)
    spec >> waited >> validated
    preprocessed, trained, evaluation = steps(spec, validated)
    approved = ForcedPushApproval(
        task_id="approve_forced_push", spec_task_id="resolve_run", eval_task_id="evaluate", retries=0,
        enabled=CONFIG.push.force_needs_approval, approvers=CONFIG.push.approvers,
        response_timeout=dt.timedelta(seconds=CONFIG.push.approval_timeout_s),
        doc_md="Waits for Approve in Required Actions when a NOT_BLESSED model is forced.")
    gate(spec, evaluation) >> approved
    push_step(spec, evaluation, approved) >> summary(spec, preprocessed, trained, evaluation)


recommender_nightly()
