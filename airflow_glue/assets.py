"""The pipeline's Airflow Assets: raw partitions in, transformed examples and the served model out.

Why declare them: the Assets view then shows what the nightly DAG reads and produces, and a
downstream DAG (a shadow scorer, a TF Lite packager, an index rebuild) can be scheduled on a
newly served model (`schedule=[served_model(config)]`) and read the version, data date, AUC and
blessing from the event's `extra` instead of polling the serving directory.

The served model is the push task's outlet, so its asset page names the producing task. An
outlet's event is emitted whenever the task succeeds, and a push that publishes nothing (a
backfill refused, not blessed) must not wake downstream DAGs: such a push ends *skipped*, with
its result in the XCom (dags/recommender_nightly.py `_announce_served`). `evaluate` lists the
served model as an inlet (it reads it as the baseline), which also makes the asset the DAG's own,
so the Assets view shows it before any downstream DAG refers to it.
"""
from __future__ import annotations

from pathlib import Path

from airflow.sdk import Asset

from pipeline.config import Config
from pipeline.results import EvalResult, PreprocessResult, PushResult


def _uri(path: Path) -> str:
    return Path(path).resolve().as_uri()


def raw_events(config: Config) -> Asset:
    return Asset(name="reco_raw_events", uri=_uri(config.data.raw_root / "events"), group="reco")


def raw_items(config: Config) -> Asset:
    return Asset(name="reco_raw_items", uri=_uri(config.data.raw_root / "items"), group="reco")


def examples(config: Config) -> Asset:
    return Asset(name="reco_transformed_examples", uri=_uri(config.data.artifact_root / "runs"), group="reco")


def served_model(config: Config) -> Asset:
    return Asset(name="reco_served_model", uri=_uri(config.data.serving_base / config.push.model_name),
                 group="reco")


def examples_extra(run_date: str, preprocessed: dict) -> dict:
    """What a consumer of the transformed examples needs: where and how many."""
    result = PreprocessResult.from_dict(preprocessed)
    return {"run_date": run_date, "examples_dir": result.examples_dir,
            "train_examples": result.train_examples, "eval_examples": result.eval_examples}


def served_model_extra(run_date: str, evaluation: dict, pushed: dict) -> dict | None:
    """The push's metadata for the served-model asset event, or None when nothing was published."""
    push = PushResult.from_dict(pushed)
    if not push.pushed:
        return None
    ev = EvalResult.from_dict(evaluation)
    return {"version": push.version, "run_date": run_date, "auc": ev.candidate_auc,
            "popularity_auc": ev.popularity_auc,
            "blessed": ev.blessed, "reason": push.reason, "path": push.version_dir}
