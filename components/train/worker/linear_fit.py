"""Fit the linear member (components/train/model/linear.py) on the chief, after training and
before the last layer's fit, which weighs it against the network on the held-out rows.

It reads the whole training split (the chief's own shards from the staged dir; when this host
staged only its share, the split from the artifact store, as the held-out rows are read). An
incremental night keeps the served model's member (warm-started by item row): one new day is
too few rows to refit a window's regression on.
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np

from components.train.model import linear
from components.train.worker.input import Split, make_dataset, read_split
from pipeline.config import Config
from pipeline.contracts.training_plan import INCREMENTAL, Plan
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)

READ_BATCH = 4096


def fit_linear_member(model, config: Config, paths: RunPaths, split: Split, plan: Plan,
                      workers: int) -> dict[str, float]:
    """Set `model`'s linear member from the training split; its facts for the model card ({}
    when the model has none or the night keeps the served one)."""
    layer = linear.find(model)
    if layer is None:
        return {}
    if plan.mode == INCREMENTAL:
        log.info("linear member: an incremental night keeps the served model's")
        return {}
    if split.missing():
        split = read_split(paths.examples_dir, "train").hold_out(config.train.validation_shards, workers)[0]
    started = time.time()
    rows, labels = read_rows(config, split)
    weights = linear.fit(rows, labels, layer.items, layer.users)
    if weights is None:
        return {}
    layer.assign(weights)
    seconds = time.time() - started
    log.info("linear member fitted on %d training rows in %.1f s", len(labels), seconds)
    return {"linear_member_rows": float(len(labels)), "linear_member_seconds": round(seconds, 2)}


def read_rows(config: Config, split: Split) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The split's item, user and history ids and labels as arrays, in file order; past
    linear.MAX_ROWS, every k-th batch."""
    sizes = [s for s in (split.sizes or ()) if s > 0] or None
    ds = make_dataset(split.non_empty, config.model, READ_BATCH, training=False, deterministic=True,
                      compression=split.compression, sizes=sizes)
    stride = max(1, math.ceil(split.examples / linear.MAX_ROWS))
    if stride > 1:
        ds = ds.shard(stride, 0)
    parts, labels = {name: [] for name in linear.INPUTS}, []
    for features, label in ds.as_numpy_iterator():
        for name in linear.INPUTS:
            parts[name].append(features[name])
        labels.append(label.ravel())
    if not labels:
        return {name: np.zeros(0, np.int64) for name in linear.INPUTS}, np.zeros(0, np.int64)
    return {k: np.concatenate(v) for k, v in parts.items()}, np.concatenate(labels)
