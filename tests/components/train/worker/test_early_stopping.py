"""Validation carved from the training shards, and early stopping that exports the best epoch."""
from __future__ import annotations

import json

import pytest
import tensorflow as tf
import tf_keras as keras

from components import train
from components.train.gang.lab import LabOptions
from components.train.worker.input import Split, make_dataset
from components.train.worker.main import _fit_metrics
from pipeline.contracts import features as F
from pipeline.contracts import manifest as M
from pipeline.paths import RunPaths
from tests.components.train.synthetic import write_with_manifest
from tests.conftest import ONE_WORKER, make_tiny_config

SHARDS, PER_SHARD = 8, 32


def test_hold_out_keeps_each_workers_share_aligned():
    files = [f"f{i}" for i in range(8)]
    split = Split(files, 80, sizes=(10,) * 8)
    rest, held = split.hold_out(1, 2)
    assert rest.files == files[:6] and held.files == files[6:] and (rest.examples, held.examples) == (60, 20)
    # Worker w's shards of either part are among its shards of the full list (what stage copied).
    for w in range(2):
        full = set(M.worker_share(files, w, 2))
        assert set(M.worker_share(rest.files, w, 2)) | set(M.worker_share(held.files, w, 2)) <= full
    assert split.hold_out(0, 2) == (split, None)
    assert Split(files, 80).hold_out(1, 2)[1] is None                      # no counts: no hold-out
    assert Split(files, 80, sizes=(10,) * 6 + (0, 0)).hold_out(1, 2)[1] is None   # nothing held


def test_fit_metrics_report_the_best_epoch():
    history = {"loss": [0.6, 0.5, 0.4], "auc": [0.6, 0.7, 0.8], "val_loss": [0.5, 0.45, 0.6],
               "val_auc": [0.61, 0.66, 0.64]}
    out = _fit_metrics(history)
    assert out == {"train_loss": 0.4, "train_auc": 0.8, "val_loss": 0.45, "val_auc": 0.66,
                   "best_epoch": 2.0, "epochs_run": 3.0}


@pytest.mark.integration
@pytest.mark.parametrize("ema_momentum", [0.0, 0.9], ids=["last-step-weights", "averaged-weights"])
def test_the_exported_model_is_the_best_validation_epoch(tmp_path, train_data, ema_momentum):
    """With averaging, the round's validation, the weights kept and the export are the average's."""
    transform_paths, _ = train_data
    config = make_tiny_config(tmp_path, **{"train.epochs": 3, "train.early_stopping_patience": 1,
                                           "train.ema_momentum": ema_momentum, **ONE_WORKER,
                                           "model.stack_popularity": False, "model.linear_member": False,
                                           "train.batch_size_per_replica": 8, "train.learning_rate": 0.02,
                                           "model.title_len": 8, "model.history_len": 10})
    paths = RunPaths.for_run(config, "2026-11-04", "early-stopping")
    data = tmp_path / "data"
    write_with_manifest(data, config.model, SHARDS, PER_SHARD, random_labels=True)
    paths.transform_dir.parent.mkdir(parents=True, exist_ok=True)
    paths.transform_dir.symlink_to(transform_paths.transform_dir)
    result = train.run(config, paths, data_dir=data)
    m = result.metrics
    assert 1 <= m["best_epoch"] <= m["epochs_run"] <= 3 and m["best_epoch"].is_integer() and "val_auc" in m
    # The held-out shards (the last one of each worker), scored by the export's model part with
    # its Platt calibration undone (Keras' AUC bins probabilities, so squeezing them moves it;
    # the popularity blend and the linear member, which change the ranking, are off):
    # the same AUC fit() reported for the best epoch, i.e. its weights were restored.
    held = sorted((data / "train").glob("*.tfrecord"))[-config.train.workers:]
    loaded = tf.saved_model.load(str(paths.model_dir))
    auc = keras.metrics.AUC()
    a, b = m["calibration_a"], m["calibration_b"]
    assert a > 0
    for features, label in make_dataset(held, config.model, 64, training=False):
        names = F.example_input_names(config.model)
        probs = loaded.signatures["serving_transformed"](**{k: features[k] for k in names})
        p = tf.cast(probs["probability"], tf.float64)
        auc.update_state(label, tf.sigmoid((tf.math.log(p) - tf.math.log1p(-p) - b) / a))
    assert float(auc.result()) == pytest.approx(m["val_auc"], abs=2e-3)
    assert not any(v for k, v in m.items() if k.startswith("stack_"))      # the blend is off


@pytest.mark.integration
def test_a_run_without_export_needs_no_transform_graph(tmp_path, monkeypatch):
    """The lab's `export: false` (benchmarks) scores the eval split without a serving module."""
    monkeypatch.setenv(*LabOptions(export=False).env().popitem())
    config = make_tiny_config(tmp_path, **{"train.epochs": 1, **ONE_WORKER,
                                           "train.batch_size_per_replica": 8,
                                           "model.title_len": 8, "model.history_len": 10})
    paths = RunPaths.for_run(config, "2026-11-04", "no-export")
    data = tmp_path / "data"
    write_with_manifest(data, config.model, SHARDS, PER_SHARD, random_labels=True)
    assert not paths.transform_dir.exists()
    result = train.run(config, paths, data_dir=data)
    assert result.model_dir == "" and not paths.model_dir.exists()
    assert 0.0 <= result.metrics["eval_auc"] <= 1.0
    assert json.loads((paths.train_dir / "model_card.json").read_text()).get("export") is None
