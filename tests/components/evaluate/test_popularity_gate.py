"""The gate knows the trivial predictor: a trained model that ranks worse than item popularity is
refused, whatever the served model and the absolute thresholds say."""
from __future__ import annotations

import json
import shutil

import pytest

from components import evaluate, train
from components.evaluate import NOT_BLESSED
from pipeline.paths import RunPaths
from tests.conftest import ONE_WORKER, RUN_DATE, make_tiny_config


def _untrained_run(tmp_path, tiny_config, run_paths, **overrides):
    """A real training (one worker) on the session's staged shards, at a learning rate too small to
    learn anything: a model that loses to popularity for sure, trained the way every model is.
    Without the last layer's popularity blend and linear member, which would hand it popularity's
    (or a regression's) ranking: the gate's rule is what is under test."""
    config = make_tiny_config(tmp_path, **{
        "data.raw_root": str(tiny_config.data.raw_root), "data.staging_root": str(tiny_config.data.staging_root),
        "train.learning_rate": 1e-9, "train.epochs": 1, "model.stack_popularity": False,
        "model.linear_member": False,
        "eval.min_lift_over_baseline": 0.01, **ONE_WORKER, **overrides})
    paths = RunPaths.for_run(config, RUN_DATE, run_paths.run_id)   # same run id: the staged dir is shared
    shutil.copytree(run_paths.transform_dir, paths.transform_dir)
    train.run(config, paths)
    return config, paths


@pytest.mark.integration
def test_a_trained_model_that_loses_to_popularity_is_refused(tmp_path, tiny_config, run_paths, staged):
    config, paths = _untrained_run(tmp_path, tiny_config, run_paths,
                                   **{"eval.min_auc": None, "eval.max_auc_drop": None})
    result = evaluate.run(config, paths)
    metrics = json.loads((paths.eval_dir / "metrics.json").read_text())
    popularity, candidate = metrics["popularity"]["auc"], metrics["candidate"]["auc"]
    assert popularity > candidate + config.eval.min_lift_over_baseline
    assert not result.blessed and result.popularity_auc == popularity
    reason = f"AUC {candidate:.4f} is below item popularity of the training window AUC {popularity:.4f}"
    assert any(r.startswith(reason) for r in result.reasons), result.reasons
    assert reason in (paths.eval_dir / NOT_BLESSED).read_text()
    assert metrics["lift_over_popularity"] == candidate - popularity
    page = (paths.eval_dir / "report.html").read_text()
    assert "item popularity" in page and "popularity AUC" in page
    # The same model with the lift rule off passes what is left: the popularity rule refused it.
    blind = make_tiny_config(tmp_path, **{
        "data.raw_root": str(tiny_config.data.raw_root), "data.staging_root": str(tiny_config.data.staging_root),
        "eval.min_auc": 0.0, "eval.max_auc_drop": None, "eval.min_lift_over_baseline": None})
    assert evaluate.run(blind, paths).blessed
