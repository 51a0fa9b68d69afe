"""Shared by the preprocess, validate and stage tests: generate raw data, run preprocess once."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

FIRST_DAY = dt.date(2026, 11, 1)
RUN_DATE = dt.date(2026, 11, 4)


def generate_raw(config, days: int = 4, faults: dict | None = None, **overrides):
    """Four tiny days (train window 01-03, eval day 04) under config.data.raw_root."""
    from pipeline.datagen import generate

    g = config.generator
    kwargs = dict(users=g.users, items=g.items, events_per_day=g.events_per_day, ctr=g.ctr, seed=g.seed)
    kwargs.update(overrides)
    return generate(Path(config.data.raw_root), FIRST_DAY, days, faults=faults, **kwargs)


def read_split(folder: Path, split: str, model) -> dict[str, np.ndarray]:
    """All examples of a split, in shard order, parsed with the transformed feature spec."""
    import tensorflow as tf

    from components.train.worker.input import feature_spec
    from pipeline.contracts.manifest import shard_files

    spec = feature_spec(model)
    files = [str(f) for f in shard_files(folder, split)]
    parsed = [tf.io.parse_example(batch, spec)
              for batch in tf.data.TFRecordDataset(files).batch(4096)]
    return {k: np.concatenate([p[k].numpy() for p in parsed]) for k in spec}
