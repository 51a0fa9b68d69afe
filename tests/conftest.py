"""Session-wide fixtures: one tiny world, generated once, and (lazily) the real stages run once on it.

Downstream tests (train, evaluate, push, DAG) reuse the outputs of the real upstream components
instead of faking them, and the suite stays fast because each heavy stage runs once per session.
"""
from __future__ import annotations

import datetime as dt
import os

import pytest

pytest_plugins = ["tests.tiers", "tests.live_airflow"]
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RUN_DATE = dt.date(2026, 11, 4)       # eval day; the three days before it are the training window
FIRST_DAY = dt.date(2026, 11, 1)
DAYS = 4
TINY = {
    "window.train_days": 3,
    "generator.users": 300,
    "generator.items": 200,
    "generator.events_per_day": 1500,
    "model.title_vocab_size": 500,
    "model.item_vocab_size": 300,
    "model.embedding_dim": 8,
    "model.lstm_units": 8,
    "model.image_units": [16, 8],
    "model.hidden_units": 16,
    "model.user_buckets": 10_000,        # 300 users: 1.5 % share a bucket; the default's tables would only cost time
    "train.workers": 2,
    "train.epochs": 2,
    "train.batch_size_per_replica": 64,
    "train.learning_rate": 0.005,
    "train.startup_timeout_s": 90.0,
    "train.backup_interval_s": 0.0,      # epochs of a second: the resume tests need every one backed up
    "eval.min_auc": 0.55,
    # An 8-d model trained 2 epochs on a few hundred users ranks within a few hundredths of item
    # popularity, either side (measured 0.666 vs 0.705 and 0.757 vs 0.710 on two e2e days): the
    # popularity floor would make every tier's first model a coin flip. Tests of the floor set it.
    "eval.min_lift_over_baseline": None,
    "eval.bootstrap_samples": 50,
    "eval.min_slice_size": 50,
    "preprocess.direct_num_workers": 1,
    # A few hundred users make daily click rates swing by tens of percent: only the real data's
    # bounds are tight; these tests inject drift explicitly where they test it.
    "validate.max_label_rate_drift": 2.0,
    "validate.max_row_count_drift": 2.0,
}


# Tests that train but whose subject is not the gang train one worker: on these tiny runs a
# 2-worker gang costs about 2.6 times the CPU of one worker (two TensorFlow processes, eager
# collective setup), and the suite is CPU-bound. The gang keeps its own tests on 2 workers
# (tests/components/train/test_train_e2e.py, gang/), and so do the README walk-through and the
# preprocess/stage layout (shards per worker), which read TINY's 2.
ONE_WORKER = {"train.workers": 1}


def tiny_overrides(root) -> dict:
    return {
        **TINY,
        "data.raw_root": str(root / "raw"),
        "data.artifact_root": str(root / "artifacts"),
        "data.staging_root": str(root / "ssd"),
        "data.serving_base": str(root / "serving"),
    }


def make_tiny_config(root, **extra):
    from pipeline.config import load_config

    return load_config(overrides={**tiny_overrides(root), **extra}, env={})


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="session")
def tiny_config(tiny_root):
    return make_tiny_config(tiny_root)


@pytest.fixture(scope="session")
def raw_data(tiny_config):
    """Four clean days: 2026-11-01..04 (train window 01-03, eval day 04)."""
    from pipeline.datagen import generate

    g = tiny_config.generator
    return generate(tiny_config.data.raw_root, FIRST_DAY, DAYS, users=g.users, items=g.items,
                    events_per_day=g.events_per_day, ctr=g.ctr, seed=g.seed)


@pytest.fixture(scope="session")
def run_paths(tiny_config):
    from pipeline.paths import RunPaths

    return RunPaths.for_run(tiny_config, RUN_DATE, "session")


@pytest.fixture(scope="session")
def preprocessed(tiny_config, run_paths, raw_data):
    """The real preprocess stage, once per session, on the tiny clean days."""
    from components import preprocess, validate

    validate.run(tiny_config, run_paths)
    return preprocess.run(tiny_config, run_paths)


@pytest.fixture(scope="session")
def staged(tiny_config, run_paths, preprocessed):
    from components import stage

    return stage.run(tiny_config, run_paths)


@pytest.fixture(scope="session")
def trained(tiny_config, run_paths, staged):
    """The real training launch (one worker: ONE_WORKER), once per session."""
    from components import train

    return train.run(tiny_config.with_overrides(ONE_WORKER), run_paths)


@pytest.fixture(scope="session")
def lean_venv():
    """The python of a venv with only the `[airflow]` extra (tests/lean_venv.py)."""
    from tests.lean_venv import lean_python

    return lean_python()


_EXIT_STATUS = {"code": 0}


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS["code"] = int(exitstatus)


def pytest_unconfigure(config):
    """Leave without the interpreter's final garbage collection.

    A process that ran a tf.Transform Beam pipeline segfaults during interpreter teardown
    (reproduced with a 10-row scale_to_z_score pipeline on this stack), which would turn a green
    session into exit 139. Everything is reported by now; exit with pytest's own status.
    """
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS["code"])
