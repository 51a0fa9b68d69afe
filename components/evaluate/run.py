"""Evaluation gate: candidate vs the served model on the run date's holdout -> BLESSED or not.

Baseline = the version TF Serving serves right now (pipeline/contracts/serving.served_version:
a version pinned by hand in models.config, else the highest integer version under
<serving_base>/<model_name>), not "the last model this pipeline blessed" (a manual rollback, a
pin or a hand-pushed hotfix would make those differ, and TFX users were bitten by comparing
against the wrong one). No baseline while the serving history records versions that are gone
(a lost volume) is no first model: the gate does not bless on absolute thresholds then. Both
models score the same rows, batch by batch, through their raw serving
signatures. All outputs are built in a temp dir and published with one rename, so a reader
never sees a BLESSED marker beside another run's metrics.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from components.evaluate import gate, metrics, report
from components.evaluate.data import EvalBatch, EvalData
from pipeline import fsutil
from pipeline.config import Config
from pipeline.contracts import event_ids, popularity, rows, serving, trend
from pipeline.contracts import features as F
from pipeline.contracts.evaluation import (
    BLESSED,
    BY_ID_PROBABILITY,
    METRICS_FILE,
    NOT_BLESSED,
    REPORT_FILE,
    SAMPLE_FILE,
)
from pipeline.contracts.inputs import ValidationError
from pipeline.paths import RunPaths
from pipeline.results import EvalResult

log = logging.getLogger(__name__)
POPULARITY = "popularity"       # the training window's item popularity (contracts/popularity.py), scored like a model



class EvalError(RuntimeError):
    """The evaluation could not be carried out (no model, no usable rows, one label class)."""


def run(config: Config, paths: RunPaths) -> EvalResult:
    from components.evaluate.scoring import Scorer

    if not (paths.model_dir / "saved_model.pb").exists():
        raise EvalError(f"no candidate SavedModel at {paths.model_dir} (did training run?)")
    base_version = serving.served_version(paths.model_base)
    base_dir = serving.version_dir(paths.model_base, base_version) if base_version is not None else None
    lost = serving.lost_versions(paths.serving_base, paths.model_name) if base_dir is None else []
    log.info("candidate %s; baseline %s", paths.model_dir,
             f"served version {base_version}" if base_dir else
             f"none: recorded version(s) {lost} are gone" if lost else "none (first model)")
    data = EvalData(paths, config.eval.slices, config.eval.batch_size)
    novelty = event_ids.novelty_problems(data.ids, event_ids.window_partitions(paths),
                                         config.validate.max_eval_overlap, event_ids.earlier_digests(paths))
    if novelty:                     # also when evaluate runs alone (CLI, a rerun): the gate needs new rows
        raise ValidationError([f"evaluate: {p}" for p in novelty])
    scorers = {"candidate": Scorer(paths.model_dir, config.eval.batch_size)}
    if base_dir is not None:
        scorers["baseline"] = Scorer(base_dir, config.eval.batch_size)
    window = popularity.of_window(paths)
    if window is not None:
        scorers[POPULARITY] = lambda inputs: window(inputs[F.ITEM_ID]).astype(np.float32)

    scored = _score(data, scorers, sample_size=max(config.push.warmup_requests, 8))
    label, users = scored["label"], scored["user"]
    problem = rows.rejected_fraction_problem("eval", data.rows, dict(data.rejected),
                                             config.preprocess.max_rejected_fraction)
    if problem and data.rows:       # no rows at all is the EvalError below
        raise ValidationError([f"evaluate: {problem}"])
    if not len(label):
        raise EvalError(f"no usable eval rows for {paths.eval_date}: rejected {dict(data.rejected)}")
    if len(label) < config.eval.min_rows:  # also when evaluate runs alone: a handful of rows judges nothing
        raise ValidationError([f"evaluate: eval day ds={paths.eval_date}: {len(label)} usable rows (of {data.rows} "
                               f"read), below eval.min_rows={config.eval.min_rows}: too few to judge a model"])
    if label.min() == label.max():
        raise EvalError(f"eval day {paths.eval_date} has a single label class ({int(label[0])}): "
                        "AUC is undefined")

    probs = {name: scored[name] for name in scorers}
    cand = metrics.binary_metrics(label, probs["candidate"])
    base = metrics.binary_metrics(label, probs["baseline"]) if base_dir else None
    pop = metrics.binary_metrics(label, probs[POPULARITY]) if POPULARITY in probs else None
    bootstrap = metrics.user_bootstrap(label, users, probs["candidate"], probs.get("baseline"),
                                       config.eval.bootstrap_samples, config.eval.seed) \
        if config.eval.bootstrap_samples else None
    verdict = gate.decide(config.eval, cand, base, base_version, (bootstrap or {}).get("auc_diff"), pop, lost)
    result = {
        "run_date": paths.ds, "run_id": paths.run_id, "eval_date": paths.eval_date.isoformat(),
        "candidate_dir": str(paths.model_dir), "candidate_digest": serving.tree_digest(paths.model_dir),
        "baseline_dir": str(base_dir) if base_dir else None, "baseline_version": base_version,
        "baseline_data_date": (serving.read_push_record(base_dir) or {}).get("data_date") if base_dir else None,
        "candidate": cand, "baseline": base, "deltas": metrics.deltas(cand, base),
        POPULARITY: pop, "lift_over_popularity": _lift_over_popularity(cand, pop),
        "slices": metrics.slice_metrics(label, probs, scored["slices"], config.eval.min_slice_size),
        "bootstrap": bootstrap,
        "thresholds": {"min_auc": config.eval.min_auc, "max_log_loss": config.eval.max_log_loss,
                       "max_auc_drop": config.eval.max_auc_drop,
                       "min_lift_over_baseline": config.eval.min_lift_over_baseline},
        "rows_read": data.rows, "rejected": dict(data.rejected), rows.TRUNCATED: data.truncated,
        "verdict": verdict.to_dict(),
    }
    result["trend"] = trend.nights(paths.run_dir.parent.parent, current=result, limit=config.eval.trend_nights)
    _publish(paths.eval_dir, result, scored["sample"], label, probs)
    log.info("%s: candidate AUC %s, served model AUC %s, item popularity AUC %s; %s",
             BLESSED if verdict.blessed else NOT_BLESSED, cand["auc"], base and base["auc"], pop and pop["auc"],
             verdict.reasons or verdict.passed)
    return EvalResult(
        blessed=verdict.blessed,
        reasons=verdict.reasons if not verdict.blessed else verdict.passed,
        metrics_path=str(paths.eval_dir / METRICS_FILE),
        report_path=str(paths.eval_dir / REPORT_FILE),
        candidate_auc=cand["auc"] if cand["auc"] is not None else float("nan"),
        baseline_auc=base["auc"] if base else None,
        baseline_version=base_version,
        examples=cand["count"],
        popularity_auc=pop["auc"] if pop else None,
    )


def _lift_over_popularity(cand: dict[str, Any], pop: dict[str, Any] | None) -> float | None:
    if not pop or cand["auc"] is None or pop["auc"] is None:
        return None
    return cand["auc"] - pop["auc"]


def _score(data: EvalData, scorers: dict, sample_size: int) -> dict[str, Any]:
    """One pass over the eval rows; every model scores every batch once."""
    cols: dict[str, list[np.ndarray]] = {"label": [], "user": [], **{name: [] for name in scorers}}
    slices: dict[str, list[np.ndarray]] = {s: [] for s in data.slices}
    sample: list[dict[str, Any]] = []
    for batch in data:
        inputs = batch.serving_inputs()
        preds = {name: scorer(inputs) for name, scorer in scorers.items()}
        for name, p in preds.items():
            cols[name].append(p)
        cols["label"].append(batch.label)
        cols["user"].append(batch.user)
        for s in data.slices:
            slices[s].append(batch.slices[s])
        if len(sample) < sample_size:
            sample.extend(_sample_rows(batch, preds, sample_size - len(sample)))
    out: dict[str, Any] = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    out["slices"] = {s: np.concatenate(v) if v else np.zeros(0, dtype=object) for s, v in slices.items()}
    out["sample"] = _with_by_id(scorers["candidate"], sample)
    return out


def _with_by_id(candidate, sample: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sample rows with the candidate's by-id probability (push verifies that signature with
    it). By id and by raw features agree when the exported item table holds the eval day's
    catalog content, as a run's own table does: a difference is logged, it means they differ."""
    by_id = candidate.by_id(sample)
    if by_id is None:
        return sample
    diff = max(abs(float(p) - row["candidate_probability"]) for p, row in zip(by_id, sample, strict=True))
    if diff > 1e-4:
        log.warning("the candidate scores the sample differently by id (max |diff| %.3g): its item table "
                    "holds other content than the eval day's catalog", diff)
    return [{**row, BY_ID_PROBABILITY: float(p)} for row, p in zip(sample, by_id, strict=True)]


def _sample_rows(batch: EvalBatch, preds: dict[str, np.ndarray], k: int) -> list[dict[str, Any]]:
    """Raw features + predictions of a few rows: push turns them into warmup and checks."""
    return [{**batch.row(i), F.LABEL: int(batch.label[i]),
             **{f"{name}_probability": float(p[i]) for name, p in preds.items()}}
            for i in range(min(k, len(batch)))]


def _publish(eval_dir: Path, result: dict[str, Any], sample: list[dict[str, Any]],
             label: np.ndarray, probs: dict[str, np.ndarray]) -> None:
    eval_dir.parent.mkdir(parents=True, exist_ok=True)
    fsutil.remove_stale_temps(eval_dir.parent, eval_dir.name)
    tmp = fsutil.temp_sibling(eval_dir)
    try:
        with fsutil.disk_full_named(eval_dir.parent, f"writing the evaluation of {eval_dir.parent.name}"):
            _write_outputs(tmp, result, sample, label, probs)
            fsutil.publish_dir(tmp, eval_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)       # never a half-written verdict beside a full disk
        raise


def _write_outputs(tmp: Path, result: dict[str, Any], sample: list[dict[str, Any]],
                   label: np.ndarray, probs: dict[str, np.ndarray]) -> None:
    tmp.mkdir()
    (tmp / METRICS_FILE).write_text(json.dumps(_json_safe(result), indent=2, sort_keys=True))
    (tmp / SAMPLE_FILE).write_text(json.dumps({"examples": sample}))
    verdict = result["verdict"]
    marker = BLESSED if verdict["blessed"] else NOT_BLESSED
    lines = verdict["passed"] if verdict["blessed"] else verdict["reasons"]
    (tmp / marker).write_text("\n".join([marker, *lines, *verdict["notes"]]) + "\n")
    names = {"candidate": "candidate", "baseline": f"served v{result['baseline_version']}",
             POPULARITY: "item popularity"}
    curves = {names[k]: p for k, p in probs.items() if np.isfinite(p).all()}   # NaN breaks roc_curve
    report.plot_roc(tmp / "roc.png", label, curves)
    report.plot_calibration(tmp / "calibration.png", label, curves)
    report.plot_trend(tmp / "trend.png", result["trend"])
    report.write_html(tmp / REPORT_FILE, _json_safe(result), ["roc.png", "calibration.png", "trend.png"])


def _json_safe(value: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python: metrics.json stays strict JSON."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
