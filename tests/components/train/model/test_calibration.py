"""Platt scaling on the validation split: fixes overconfident probabilities, keeps the ranking."""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras
from sklearn.metrics import log_loss, roc_auc_score

from components.train.model.calibration import Calibration, calibrate, fit_platt


def _overconfident(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    labels = (rng.random(n) < 1 / (1 + np.exp(-(0.5 * z - 1)))).astype(np.int64)
    return 1 / (1 + np.exp(-(3 * z - 0.5))), labels      # the right order, three times too sure


def test_fit_platt_recovers_the_true_map_and_never_hurts():
    probs, labels = _overconfident()
    a, b = fit_platt(probs, labels)
    assert abs(a - 0.5 / 3) < 0.03 and abs(b - (-1 + 0.5 / 6)) < 0.1
    calibrated = 1 / (1 + np.exp(-(a * np.log(probs / (1 - probs)) + b)))
    assert log_loss(labels, calibrated) < log_loss(labels, probs) - 0.05
    assert roc_auc_score(labels, calibrated) == roc_auc_score(labels, probs)
    perfect = np.where(labels == 1, 0.999999, 0.000001)          # separable: no overshoot
    a2, _ = fit_platt(perfect, labels)
    assert np.isfinite(a2) and a2 > 0


def test_the_layer_is_the_identity_until_calibrated_then_fits_held_out_rows():
    probs, labels = _overconfident(4000, seed=1)
    inputs = keras.Input(shape=(1,), name="p")
    model = keras.Model(inputs, Calibration(name="calibration")(inputs))
    x = probs.astype(np.float32)[:, None]
    np.testing.assert_allclose(model(x).numpy(), x, atol=1e-5)
    data = tf.data.Dataset.from_tensor_slices((x, labels.astype(np.float32)[:, None])).batch(512)
    fitted = calibrate(model, data)
    assert fitted["calibration_a"] < 0.5 and model.get_layer("calibration").trainable_weights == []
    assert log_loss(labels, model(x).numpy().ravel()) < log_loss(labels, probs) - 0.05
