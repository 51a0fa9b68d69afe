"""`python -m bench.lab.ensemble`: would averaging seed models pay for its training time? (issue #26, item 5)

`K` models trained with `train.data_order_seed` 0..K-1 on one preprocess output (bench/lab/quality.py's runs),
each scored on the eval day through its raw serving signature, as the gate scores a candidate;
an ensemble scores the mean of its members' logits. The figures per regime (demo size): each
seed's AUC, every pair's, all K's. An ensemble of K costs K trainings each night and K models
in the serving directory, so it pays only where it adds what a cheaper change cannot.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import tempfile
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.common import run_then_exit, write_result
from bench.lab.quality import SIZES, prepared, seed_runs, staged_and_trained
from pipeline.datagen.regimes import REGIMES

log = logging.getLogger("bench.lab.ensemble")
MEMBERS = 3


def _logit(prob: np.ndarray) -> np.ndarray:
    prob = np.clip(prob.astype(np.float64), 1e-7, 1 - 1e-7)
    return np.log(prob / (1 - prob))


def eval_logits(config, runs: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """(labels, each run's eval-day logits): one pass over the eval rows, every model on every batch."""
    from components.evaluate.data import EvalData
    from components.evaluate.scoring import Scorer

    scorers = [Scorer(run.model_dir, config.eval.batch_size) for run in runs]
    labels, logits = [], [[] for _ in scorers]
    for batch in EvalData(runs[0], config.eval.slices, config.eval.batch_size):
        inputs = batch.serving_inputs()
        labels.append(batch.label)
        for out, scorer in zip(logits, scorers):
            out.append(_logit(scorer(inputs)))
    return np.concatenate(labels), [np.concatenate(parts) for parts in logits]


def ensembles(work: Path, regime: str, members: int = MEMBERS) -> dict[str, float | list[float]]:
    """Single seeds, pairs and all members on `regime`'s demo-size world; keys end in `<regime>`."""
    size = {**SIZES["demo"], "generator.regime": regime}
    config, paths, _ = prepared(work, regime, size)
    runs = seed_runs(work, size, paths, members)
    train_s = [staged_and_trained(cfg, run)[1] for cfg, run in runs]     # scored below, all at once
    labels, logits = eval_logits(config, [run for _, run in runs])
    auc = lambda group: float(roc_auc_score(labels, np.mean([logits[i] for i in group], axis=0)))  # noqa: E731
    singles = [auc((i,)) for i in range(members)]
    pairs = [auc(pair) for pair in itertools.combinations(range(members), 2)]
    everyone = auc(range(members))
    log.info("%s: seeds %s, pairs %s, all %d: %.4f", regime, singles, pairs, members, everyone)
    return {f"auc_seeds_{regime}": singles, f"auc_pairs_{regime}": pairs, f"auc_all_{regime}": everyone,
            f"auc_all_over_median_seed_{regime}": everyone - statistics.median(singles),
            f"train_s_per_model_{regime}": statistics.median(train_s)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.ensemble", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv or [])      # --help only: the run takes no options
    figures: dict = {"members": MEMBERS, "regimes": list(REGIMES)}
    with tempfile.TemporaryDirectory(prefix="bench-ensemble-") as tmp:
        for regime in REGIMES:
            figures.update(ensembles(Path(tmp) / regime, regime))
    write_result("exp_ensemble", figures)
    return figures


if __name__ == "__main__":
    run_then_exit(main, "ensemble")
