"""TF Lite: the raw-feature export needs Select TF ops; the batch-1 core converts with builtins."""
from __future__ import annotations

import numpy as np
import pytest

from components.push import tflite
from pipeline.config import ModelConfig

pytestmark = pytest.mark.integration      # TF Lite conversions: seconds of CPU each (tests/tiers.py)

TINY = ModelConfig(title_len=6, history_len=8, embedding_dim=4, lstm_units=4, image_units=(8,), hidden_units=8,
                   architecture="reference", user_buckets=10)
DIN = ModelConfig(title_len=6, history_len=8, embedding_dim=4, image_units=(8,), hidden_units=8, user_buckets=10)


def _export(root, cfg, core: bool = True):
    """The model saved the way the training export saves it: a tf.Module holding the Keras
    model's variables and the item vectors of a 12-row item table, the export's own
    `serving_transformed` (dynamic batch) and, unless `core` is off (an older export), its
    `core_batch1` signature."""
    import tensorflow as tf

    from components.train.model.build import VocabSizes, build_model
    from components.train.worker.scoring import Scoring, core_batch1_fn, transformed_fn
    from pipeline.contracts import features as F
    from pipeline.contracts import item_table as IT

    model = build_model(cfg, VocabSizes(title=30, items=40, users=11))
    rng = np.random.default_rng(0)
    content = {IT.TITLE_IDS: rng.integers(0, 30, (12, cfg.title_len)), IT.EMBEDDING_ID: np.arange(12) % 11,
               IT.IMAGE: rng.normal(size=(12, F.IMAGE_DIM)).astype(np.float32),
               IT.SHOWN: rng.integers(0, 30, 12).astype(np.float32),
               IT.CLICKS: rng.integers(0, 5, 12).astype(np.float32)}
    scoring = Scoring(model, content, cfg)
    module = tf.Module()
    module.model_variables, module.item_vectors = scoring.model_variables, scoring.vectors
    signatures = {"serving_transformed": transformed_fn(scoring, cfg)}
    if core:
        signatures["core_batch1"] = core_batch1_fn(scoring, cfg)
    tf.saved_model.save(module, str(root), signatures=signatures)
    return root


@pytest.fixture(scope="module")
def core_export(tmp_path_factory):
    """The reference architecture (masked LSTMs) as the training export saves it."""
    return _export(tmp_path_factory.mktemp("core") / "model", TINY)


def test_dynamic_batch_core_needs_tensorlists_so_builtins_refuse_it(core_export):
    """Why `tflite._core` retraces with batch 1 (docs/serving.md): traced with a dynamic batch,
    the masked LSTM loop keeps its state in a TensorList of non-static shape."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(str(core_export), signature_keys=["serving_transformed"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    with pytest.raises(Exception, match="tensor list"):  # noqa: B017 - ConverterError has no stable import path
        converter.convert()


def test_batch1_core_converts_with_builtins_and_agrees(core_export, tmp_path):
    report = tflite._core(core_export, tmp_path / "model.tflite", runs=20)
    assert report["mode"] == "builtins" and (tmp_path / "model.tflite").stat().st_size > 0
    assert report["max_abs_diff_vs_savedmodel"] < 1e-5
    assert report["tflite"]["p50_ms"] > 0 and np.isfinite(report["savedmodel_core"]["p50_ms"])


def test_the_default_target_aware_model_converts_with_builtins_too(tmp_path):
    report = tflite._core(_export(tmp_path / "din", DIN), tmp_path / "din.tflite", runs=20)
    assert report.get("mode") == "builtins", report
    assert report["max_abs_diff_vs_savedmodel"] < 1e-5


def test_an_export_without_the_core_signature_is_reported_not_converted(tmp_path):
    report = tflite._core(_export(tmp_path / "old", DIN, core=False), tmp_path / "old.tflite", runs=5)
    assert "no 'core_batch1' signature" in report["errors"]["export"]
    assert not (tmp_path / "old.tflite").exists()
