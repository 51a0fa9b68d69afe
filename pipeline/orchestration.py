"""What each DAG task does, as plain functions of a small `RunSpec`: the DAG file only wires them.

Why here and not in the DAG file: the same functions serve the Airflow tasks, `make demo` and the
tests, and the DAG file stays cheap to parse (components, and with them TensorFlow and Beam, are
imported inside the functions, at task run time only). Tasks exchange `RunSpec` and the typed
step results as JSON dicts: paths, counts and metrics, never data.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import run_config
from pipeline.config import Config, ConfigError, load_config
from pipeline.contracts import trend
from pipeline.paths import RunPaths, parse_date, safe_run_id
from pipeline.results import EvalResult, PreprocessResult, PushResult, StepResult, TrainResult

log = logging.getLogger(__name__)

# Form param -> config key it overrides. The form's defaults are the configured values, so a
# param that is present always overrides; an empty threshold (None) switches that check off.
PARAM_TO_CONFIG = {
    "train_days": "window.train_days",
    "epochs": "train.epochs",
    "workers": "train.workers",
    "min_auc": "eval.min_auc",
    "max_auc_drop": "eval.max_auc_drop",
    "min_lift_over_baseline": "eval.min_lift_over_baseline",
    "allow_backfill_push": "push.allow_backfill",
}


class ParamError(ValueError):
    """A run's form params are unusable; raised before any work, naming the param."""


def permanent_errors() -> tuple[type[Exception], ...]:
    """Failures a retry cannot change: bad params or config, and input data that fails its
    checks (missing partitions, schema errors, drift), a model that a rollback took away. The
    DAG fails them at once, without retries; anything else (a killed worker, I/O, a full disk
    once on-call frees space) is retried and resumes."""
    from pipeline.contracts.inputs import ValidationError
    from pipeline.contracts.serving import RolledBackError

    return (ParamError, ConfigError, ValidationError, RolledBackError)


@dataclass(frozen=True)
class RunSpec(StepResult):
    run_date: str
    run_id: str
    overrides: dict[str, Any] = field(default_factory=dict)
    skip_push: bool = False
    force_push: bool = False
    force_reason: str | None = None
    config: dict[str, Any] = field(default_factory=dict)   # the run's effective config (resolve_run)
    config_digest: str = ""

    def config_overrides(self) -> dict[str, Any]:
        """The form's overrides plus the forced push, as a step's config sees them."""
        force = {"push.force": True, "push.force_reason": self.force_reason} if self.force_push else {}
        return {**self.overrides, **force}

    def load(self) -> tuple[Config, RunPaths]:
        """The run's config: the one resolve_run fixed (whatever this worker's params file and
        environment say; a difference is logged), else (a spec built by hand) this process's."""
        if self.config:
            config = run_config.adopt(self.config, self.config_digest, self.config_overrides())
        else:
            config = load_config(overrides=self.config_overrides())
        return config, RunPaths.for_run(config, self.run_date, self.run_id)


RUN_PARAMS = frozenset({"run_date", "skip_push", "force_push", "force_reason", *PARAM_TO_CONFIG})


def data_date(params: dict, logical_date: dt.datetime | None, run_after: dt.datetime | None,
              data_interval_end: dt.datetime | None = None) -> dt.date:
    """The data date D of a run: the run-date param, else the last UTC day complete when its data
    interval ends, else the UTC day of the logical date, else the UTC day before run_after.

    Partitions are UTC days (`ds=D` holds D 00:00-24:00 UTC), whatever `schedule.timezone` the
    cron runs in, so "complete" is judged in UTC: the 02:00 UTC nightly run of 12-01 takes
    D = 11-30, and so does a run triggered at 06:09 on 12-01 (for a manual run Airflow infers the
    last complete interval before that time: never a half-written today). A schedule east of UTC
    (02:00 in Tokyo is 17:00 UTC the day before) takes the UTC day before that: its own day is
    still being written.
    """
    if params.get("run_date"):
        try:
            return parse_date(params["run_date"])
        except ValueError as err:
            raise ParamError(f"param 'run_date': {err}") from err
    if data_interval_end is not None:
        return last_complete_day(data_interval_end)
    if logical_date is not None:
        return logical_date.astimezone(dt.UTC).date()
    if run_after is not None:
        return last_complete_day(run_after)
    raise ParamError("param 'run_date': no run date, data interval, logical date or run_after to derive it from")


def last_complete_day(when: dt.datetime) -> dt.date:
    """The last UTC day (a partition) that has ended at `when`."""
    return when.astimezone(dt.UTC).date() - dt.timedelta(days=1)


def _refuse_incomplete_day(run_date: dt.date, params: dict, logical_date, run_after) -> None:
    """A run_date that has not ended yet (in UTC, the partitions' days, when the run was
    triggered) would wait, holding its run slot, for data that cannot have landed: refuse it now,
    naming the last day that can run. Yesterday is complete even before the nightly run's hour:
    its data may still be landing, which the data-landed wait is for."""
    triggered = run_after or logical_date
    if not params.get("run_date") or triggered is None:
        return
    last = last_complete_day(triggered)
    if run_date > last:
        raise ParamError(f"param 'run_date': {run_date} is not a complete day yet; the last complete day "
                         f"is {last} (run_date {last} or earlier)")


def resolve_run(params: dict, logical_date, run_after, run_id: str, data_interval_end=None) -> RunSpec:
    """Check the form's params and turn them into a RunSpec, before any work is done; the spec
    carries the run's effective config, which every task of the run then uses."""
    unknown = sorted(set(params) - RUN_PARAMS)
    if unknown:
        raise ParamError(f"unknown param(s) {', '.join(map(repr, unknown))}; valid: {', '.join(sorted(RUN_PARAMS))}")
    try:
        safe_run_id(run_id)
    except ValueError as err:
        raise ParamError(f"run id: {err}") from err
    run_date = data_date(params, logical_date, run_after, data_interval_end)
    _refuse_incomplete_day(run_date, params, logical_date, run_after)
    if params.get("force_push") and not (params.get("force_reason") or "").strip():
        raise ParamError("param 'force_reason': required when force_push is true")
    if params.get("force_push") and params.get("skip_push"):
        raise ParamError("param 'skip_push': cannot be combined with force_push")
    overrides = {}
    for name, key in PARAM_TO_CONFIG.items():
        if name in params:
            overrides[key] = params[name]
            try:
                load_config(overrides={key: params[name]})
            except ConfigError as err:
                raise ParamError(f"param {name!r}: {err}") from err
    spec = RunSpec(run_date.isoformat(), run_id, overrides, bool(params.get("skip_push")),
                   bool(params.get("force_push")), params.get("force_reason"))
    config = load_config(overrides=spec.config_overrides())  # the whole config must load with these overrides
    spec = dataclasses.replace(spec, config=config.to_dict(), config_digest=run_config.digest(config))
    log.info("run %s: data date %s, overrides %s, config %s", run_id, spec.run_date, overrides or "none",
             spec.config_digest)
    return spec


def _run_component(spec: RunSpec, step: str) -> dict:
    """Import the step's component at run time, run it, and record how long its body took.
    With `data.artifact_store` set, the run's published outputs are fetched first and what the
    step wrote is published after (pipeline/storage.py): tasks need not share a filesystem."""
    from pipeline import storage

    module = importlib.import_module(f"components.{step}")
    config, paths = spec.load()
    with storage.mirrored(config, paths):
        if spec.config:
            run_config.write(paths.run_dir, config, spec.config_digest)
        start = time.perf_counter()
        result = module.run(config, paths)
        seconds = time.perf_counter() - start
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    with open(paths.run_dir / "timings.jsonl", "a") as out:
        out.write(json.dumps({"step": step, "seconds": seconds}) + "\n")
    log.info("%s finished in %.1f s", step, seconds)
    return result.to_dict()


def run_validate(spec: RunSpec) -> dict:
    return _run_component(spec, "validate")


def run_preprocess(spec: RunSpec) -> dict:
    return _run_component(spec, "preprocess")


def run_stage(spec: RunSpec) -> dict:
    return _run_component(spec, "stage")


def run_train(spec: RunSpec) -> dict:
    """Train; a staged copy that is gone (a retry days later) or fails verification (a flipped
    bit on the SSD) is staged again first, so the retry can succeed."""
    from pipeline.contracts.staged import StagedDataError

    try:
        return _run_component(spec, "train")
    except StagedDataError as err:
        log.warning("train: %s: staging again, then training", err)
        _run_component(spec, "stage")
        return _run_component(spec, "train")


def run_evaluate(spec: RunSpec) -> dict:
    return _run_component(spec, "evaluate")


def gate(spec: RunSpec, evaluation: dict) -> tuple[bool, str]:
    """Should the push run? Returns (go, reason); the reason is logged and lands in the summary."""
    result = EvalResult.from_dict(evaluation)
    if spec.skip_push:
        return False, "push skipped: the run's skip_push param is set"
    if result.blessed:
        return True, f"BLESSED: candidate AUC {result.candidate_auc:.4f}"
    if spec.force_push:
        return True, f"NOT_BLESSED but force_push: {spec.force_reason}"
    return False, "NOT_BLESSED: " + "; ".join(result.reasons)


def with_approval(spec: RunSpec, approval: dict | None) -> RunSpec:
    """The spec whose recorded force reason names who approved the forced push (if anyone did)."""
    if not (spec.force_push and approval and approval.get("chosen_options") == ["Approve"]):
        return spec
    user = approval.get("responded_by_user") or {}
    who = user.get("name") or user.get("id") or "unknown user"
    return dataclasses.replace(spec, force_reason=f"{spec.force_reason} (approved by {who})")


def run_push(spec: RunSpec) -> dict:
    return _run_component(spec, "push")


def summarize(spec: RunSpec, results: dict[str, dict | None], gate_reason: str | None = None) -> dict:
    """One record a person reads first: rows, AUCs, blessing, served version, where things are."""
    from pipeline.contracts import serving

    config, paths = spec.load()
    validation = paths.validation_dir / "report.json"
    validated = json.loads(validation.read_text()) if validation.exists() else {}
    pre = PreprocessResult.from_dict(results["preprocess"]) if results.get("preprocess") else None
    train = TrainResult.from_dict(results["train"]) if results.get("train") else None
    ev = EvalResult.from_dict(results["evaluate"]) if results.get("evaluate") else None
    pushed = PushResult.from_dict(results["push"]) if results.get("push") else None
    summary = {
        "run_date": spec.run_date,
        "run_id": spec.run_id,
        "train_examples": pre.train_examples if pre else None,
        "eval_examples": pre.eval_examples if pre else None,
        "rejected_rows": pre.rejected if pre else None,
        "items_snapshot": validated.get("items_snapshot"),
        "items_fallback": validated.get("items_fallback"),   # validate's warning: D had no items snapshot
        "candidate_auc": ev.candidate_auc if ev else None,
        "baseline_auc": ev.baseline_auc if ev else None,
        "baseline_version": ev.baseline_version if ev else None,
        "popularity_auc": ev.popularity_auc if ev else None,
        "blessed": ev.blessed if ev else None,
        "gate": gate_reason,
        "pushed": bool(pushed and pushed.pushed),
        "push_reason": pushed.reason if pushed else gate_reason,
        "approval": results.get("approval"),      # a forced push's decision: who, when, why
        "served_version": serving.served_version(paths.model_base),
        "served_path": str(paths.model_base),
        "report": ev.report_path if ev else None,
        "tensorboard": train.tensorboard_dir if train else None,
        "training_examples_per_s": train.examples_per_s if train else None,
    }
    out = paths.run_dir / "summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    log.info("SUMMARY %s", json.dumps(summary))
    if ev and Path(ev.metrics_path).exists():       # read now: tonight's push record exists by now
        nights = trend.nights(paths.run_dir.parent.parent, limit=config.eval.trend_nights)
        log.info("TREND of the last %d nights (%s):\n%s", len(nights), Path(ev.report_path).parent / "trend.png",
                 "\n".join(trend.table_lines(nights)))
    return summary

