"""Fixtures of the training tests: a tiny config and a real tf.Transform run on learnable rows.

The data is made here (see tft_fixture.py) rather than by the session's preprocess fixture so
the training tests control what is learnable and can map transformed rows back to raw rows
for the skew check; the transform graph itself is the preprocess stage's real one.
"""
from __future__ import annotations

import os

import pytest

from tests.conftest import ONE_WORKER, make_tiny_config

TRAIN_ROWS, EVAL_ROWS = 960, 120
TRAIN_EXTRA = {
    "model.title_len": 8,
    "model.history_len": 10,
    "train.batch_size_per_replica": 8,
    "train.epochs": 4,
    "train.learning_rate": 0.0025,
    "train.kill_grace_s": 2.0,
    "train.startup_timeout_s": 120.0,
    "train.timeout_s": 600.0,
    **ONE_WORKER,          # the gang's own tests (test_train_e2e.py) take GANG
}
GANG = {"train.workers": 2}


@pytest.fixture(scope="session")
def train_config(tmp_path_factory):
    return make_tiny_config(tmp_path_factory.mktemp("train"), **TRAIN_EXTRA)


@pytest.fixture(scope="session")
def train_data(train_config):
    """(paths, raw eval rows): transform_dir + staged shards written by tf.Transform on Beam."""
    from pipeline.paths import RunPaths
    from tests.components.train.tft_fixture import run_in_subprocess

    paths = RunPaths.for_run(train_config, "2026-11-04", "train-test")
    eval_raw = run_in_subprocess(train_config, paths, TRAIN_ROWS, EVAL_ROWS, num_shards=4)
    return paths, eval_raw


def worker_processes(index=None, root: int | None = None):
    """Live training workers below process `root` (default: this test process), optionally
    only worker `index`."""
    import json

    import psutil

    found = []
    for p in psutil.Process(root or os.getpid()).children(recursive=True):
        try:
            if "components.train.worker" not in " ".join(p.cmdline()):
                continue
            task = json.loads(p.environ().get("TF_CONFIG", "{}")).get("task", {})
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if index is None or task.get("index") == index:
            found.append(p)
    return found


def saved_epoch(backup_dir) -> int | None:
    """The last epoch (0-based) the training backup holds, read from the checkpoint itself
    (None: no backup)."""
    import tensorflow as tf

    path = tf.train.latest_checkpoint(str(backup_dir / "chief"))
    if path is None:
        return None
    reader = tf.train.load_checkpoint(path)
    key = next(k for k in reader.get_variable_to_shape_map() if "ckpt_saved_epoch" in k)
    return int(reader.get_tensor(key))
