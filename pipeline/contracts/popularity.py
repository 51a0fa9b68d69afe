"""Smoothed per-item popularity of the training window: the trivial predictor a model must beat.

A recommender that ranks worse than "how often was this item clicked when shown" should never
be served, whatever yesterday's model scored. The rate is shrunk towards the window's click rate
by PRIOR_WEIGHT pseudo-impressions, so an item shown twice and clicked twice is not scored 1.0,
and an item the window never showed gets the window's rate. Pure numpy + pyarrow: evaluate's
gate and the quality benchmark's baseline compute it the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts.inputs import parquet_files
from pipeline.paths import RunPaths

PRIOR_WEIGHT = 20.0


def smoothed_rate(clicks, shown, window_rate: float, prior_weight: float = PRIOR_WEIGHT):
    """Clicks over impressions shrunk towards the window's rate; arithmetic only, so the gate's
    numpy arrays and the model's tensors (components/train/model/item_stats.py) share it."""
    return (clicks + prior_weight * window_rate) / (shown + prior_weight)


@dataclass(frozen=True)
class ItemPopularity:
    item_ids: np.ndarray    # sorted
    rates: np.ndarray       # smoothed click rate per item id
    window_rate: float      # what an item the window never showed is scored

    @classmethod
    def fit(cls, item_ids: np.ndarray, labels: np.ndarray, prior_weight: float = PRIOR_WEIGHT) -> ItemPopularity:
        item_ids, labels = np.asarray(item_ids, dtype=np.int64), np.asarray(labels, dtype=np.float64)
        if not len(labels):
            raise ValueError("no training rows to fit item popularity on")
        rate = float(labels.mean())
        ids, inverse = np.unique(item_ids, return_inverse=True)
        shown = np.bincount(inverse, minlength=len(ids))
        clicks = np.bincount(inverse, weights=labels, minlength=len(ids))
        return cls(ids, smoothed_rate(clicks, shown, rate, prior_weight), rate)

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
