"""Several models on one eval day, with no verdict: what a replay needs to judge serving policies.

The gate (run.py) compares tonight's candidate with the served model. A replay also asks how the
models that *other* policies would serve score on the same day (pipeline/replay.py), through the
same rows, the same raw serving signature and the same paired user bootstrap as the gate.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from components.evaluate import metrics
from components.evaluate.data import EvalData
from pipeline.config import Config
from pipeline.contracts import features as F
from pipeline.contracts import popularity
from pipeline.paths import RunPaths

POPULARITY = "popularity"


def score_models(config: Config, paths: RunPaths, models: dict[str, Path]) -> dict[str, np.ndarray]:
    """{"label", "user", each model's name, "popularity"}: probabilities on the eval day's rows."""
    from components.evaluate.scoring import Scorer

    scorers: dict[str, Any] = {name: Scorer(Path(d), config.eval.batch_size) for name, d in models.items()}
    window = popularity.of_window(paths)
    if window is not None:
        scorers[POPULARITY] = lambda inputs: window(inputs[F.ITEM_ID]).astype(np.float32)
    cols: dict[str, list[np.ndarray]] = {"label": [], "user": [], **{name: [] for name in scorers}}
    for batch in EvalData(paths, (), config.eval.batch_size):
        inputs = batch.serving_inputs()
        for name, scorer in scorers.items():
            cols[name].append(scorer(inputs))
        cols["label"].append(batch.label)
        cols["user"].append(batch.user)
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}


def compare(config: Config, paths: RunPaths, models: dict[str, Path], candidate: str | None) -> dict[str, Any]:
    """AUC of every model (and popularity) on the eval day, and the paired bootstrap interval of
    `candidate` - each other model (the gate's evidence for replacing it)."""
    scored = score_models(config, paths, models)
    label, users = scored["label"], scored["user"]
    names = [n for n in scored if n not in ("label", "user")]
    aucs = {n: metrics.binary_metrics(label, scored[n])["auc"] for n in names}
    diffs: dict[str, dict | None] = {}
    if candidate is not None and config.eval.bootstrap_samples:
        for other in names:
            if other not in (candidate, POPULARITY):
                diffs[other] = metrics.user_bootstrap(label, users, scored[candidate], scored[other],
                                                      config.eval.bootstrap_samples, config.eval.seed)["auc_diff"]
    return {"aucs": aucs, "diffs": diffs, "rows": int(len(label))}
