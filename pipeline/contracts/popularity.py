"""Per-item popularity of the training window: the trivial predictor a model must beat.

A recommender that ranks worse than "how often was this item clicked when shown" should never
be served, whatever yesterday's model scored. Each item's click log-odds is estimated
empirical-Bayes (`exposure_prior_logits`): shrunk towards a prior mean fitted to the window as
a + c log(1 + impressions), so an item shown twice and clicked twice is not scored 1.0, and an
item with little evidence is expected to click like the items shown about as rarely. Why not
shrink towards the window's rate: where much of the traffic goes to popular items (most logs),
rarely shown items are mostly unpopular ones. An item the window never showed gets the window's
rate: it may be a forgotten one or a new one (the tests' tiny world's are clicked twice as often
as the rest), and extrapolating the prior to zero impressions scored the new ones last. Measured
on the quality benchmark's regimes it ranks at least as well as smoothing towards the window's
rate everywhere, by up to a few hundredths of AUC (docs/benchmarks.md): a baseline the gate uses
must be as strong as it cheaply can be. Pure numpy + pyarrow: evaluate's gate and the quality
benchmark's baseline compute it the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts.inputs import parquet_files
from pipeline.paths import RunPaths

PRIOR_PRECISION = 2.0      # of an item's log-odds around the prior mean (LR's L2 at C = 0.5)
MIN_ITEMS_FOR_SLOPE = 30   # fewer shown items: one prior mean for all (a slope from a handful extrapolates)
_CLIP = 15.0


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def exposure_prior_logits(shown, clicks, iterations: int = 100) -> np.ndarray:
    """Each item's click log-odds from its impressions and clicks (every item shown at least
    once): posterior modes under a Gaussian prior of precision PRIOR_PRECISION around
    a + c log(1 + shown), (a, c) refitted to the modes each Newton step."""
    n, k = np.asarray(shown, np.float64), np.asarray(clicks, np.float64)
    k = np.clip(k, 0.0, n)
    rate = float(np.clip(k.sum() / n.sum(), 1e-6, 1 - 1e-6))
    x = np.log1p(n)
    a, c = float(np.log(rate / (1 - rate))), 0.0
    w = np.full(len(n), a)
    slope = len(n) >= MIN_ITEMS_FOR_SLOPE and np.ptp(x) > 1e-9
    for _ in range(iterations):
        p = _sigmoid(w)
        step = (k - n * p - PRIOR_PRECISION * (w - a - c * x)) / (n * p * (1 - p) + PRIOR_PRECISION)
        w = np.clip(w + step, -_CLIP, _CLIP)
        c, a = np.polyfit(x, w, 1) if slope else (0.0, float(w.mean()))
    return w


def evidence(shown, clicks) -> np.ndarray:
    """[n, 2] float32 per item: its click log-odds estimated as above, and log(1 + impressions),
    from each item's window counts; an item with no impressions gets the window's log-odds and 0.
    What the model's last layer blends with its own logit (components/train/model/blend.py):
    how popular the item is, and how much that rests on."""
    n, k = np.asarray(shown, np.float64), np.asarray(clicks, np.float64)
    out = np.zeros((len(n), 2), np.float32)
    seen = n > 0
    if seen.any():
        rate = float(np.clip(k[seen].sum() / n[seen].sum(), 1e-6, 1 - 1e-6))
        out[:, 0] = np.log(rate / (1 - rate))
        out[seen, 0] = exposure_prior_logits(n[seen], k[seen])
    out[:, 1] = np.log1p(np.maximum(n, 0.0))
    return out


@dataclass(frozen=True)
class ItemPopularity:
    item_ids: np.ndarray    # sorted
    rates: np.ndarray       # estimated click rate per item id
    window_rate: float      # the window's click rate: what an item the window never showed is scored

    @classmethod
    def fit(cls, item_ids: np.ndarray, labels: np.ndarray) -> ItemPopularity:
        item_ids, labels = np.asarray(item_ids, dtype=np.int64), np.asarray(labels, dtype=np.float64)
        if not len(labels):
            raise ValueError("no training rows to fit item popularity on")
        ids, inverse = np.unique(item_ids, return_inverse=True)
        shown = np.bincount(inverse, minlength=len(ids))
        clicks = np.bincount(inverse, weights=labels, minlength=len(ids))
        return cls(ids, _sigmoid(exposure_prior_logits(shown, clicks)), float(labels.mean()))

    def __call__(self, item_ids: np.ndarray) -> np.ndarray:
        item_ids = np.asarray(item_ids, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.item_ids, item_ids), len(self.item_ids) - 1)  # fit: >= 1 item
        return np.where(self.item_ids[pos] == item_ids, self.rates[pos], self.window_rate)


def read_window(files: list) -> ItemPopularity:
    """Fitted on the (item_id, label) of raw event files; rows whose label is not 0/1 are left out
    (the row rules reject them before training too)."""
    table = pq.read_table(files, columns=[F.ITEM_ID, F.LABEL])
    label = table.column(F.LABEL)
    keep = pc.fill_null(pc.or_(pc.equal(label, 0), pc.equal(label, 1)), False)
    table = table.filter(keep)
    return ItemPopularity.fit(table.column(F.ITEM_ID).to_numpy(), table.column(F.LABEL).to_numpy())


def of_window(paths: RunPaths) -> ItemPopularity | None:
    """Fitted on the run's training window (never the eval day); None if it holds no event file."""
    files = [f for day in paths.train_dates for f in parquet_files(paths.events_dir(day))]
    return read_window(files) if files else None
