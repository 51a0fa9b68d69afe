"""Platt scaling fitted on the validation split, kept inside the model as its last layer.

Early stopping keeps the epoch with the best validation AUC, and by then the model is usually
overconfident: its ranking is the best it gets, its probabilities are not (log loss worse than
predicting the base rate). A monotone map p -> sigmoid(a * logit(p) + b) fitted on held-out
rows fixes the probabilities without changing the ranking (AUC) and costs two scalars. It lives
in the model (non-trainable weights), so the export, TF Serving and TF Lite all serve it.
"""
from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf
import tf_keras as keras

log = logging.getLogger(__name__)
_EPS = 1e-6
MIN_SLOPE = 1e-3


class Calibration(keras.layers.Layer):
    """p -> sigmoid(a * logit(p) + b); a = 1, b = 0 (identity) until `fit_platt` sets them."""

    def build(self, input_shape):
        self.a = self.add_weight(name="a", shape=(), initializer="ones", trainable=False)
        self.b = self.add_weight(name="b", shape=(), initializer="zeros", trainable=False)

    def call(self, p):
        p = tf.clip_by_value(tf.cast(p, tf.float32), _EPS, 1 - _EPS)
        return tf.sigmoid(self.a * (tf.math.log(p) - tf.math.log1p(-p)) + self.b)


def _log_loss(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    z = x @ w
    return float(np.mean(np.logaddexp(0, z) - y * z))


def fit_platt(probs: np.ndarray, labels: np.ndarray, steps: int = 50) -> tuple[float, float]:
    """(a, b) minimising the log loss of sigmoid(a * logit(p) + b) on (probs, labels).

    Newton steps with backtracking (confident predictions make plain Newton overshoot); never
    worse than the identity (1, 0) on these rows. `a` stays positive: a calibration must keep
    the ranking, even of a model no better than chance on the validation rows."""
    p = np.clip(np.asarray(probs, np.float64).ravel(), _EPS, 1 - _EPS)
    y = np.asarray(labels, np.float64).ravel()
    x = np.stack([np.log(p / (1 - p)), np.ones_like(p)], axis=1)
    w = np.array([1.0, 0.0])
    loss = _log_loss(x, y, w)
    for _ in range(steps):
        q = 1 / (1 + np.exp(-x @ w))
        hessian = x.T @ (x * (q * (1 - q))[:, None]) / len(y) + 1e-6 * np.eye(2)
        step = np.linalg.solve(hessian, x.T @ (q - y) / len(y))
        shrink = 1.0
        while shrink > 1e-4 and _log_loss(x, y, w - shrink * step) > loss:
            shrink /= 2
        if shrink <= 1e-4:
            break
        w, new = w - shrink * step, _log_loss(x, y, w - shrink * step)
        if loss - new < 1e-10:
            break
        loss = new
    return max(float(w[0]), MIN_SLOPE), float(w[1])


def calibrate(model: keras.Model, dataset: tf.data.Dataset) -> dict[str, float]:
    """Fit the model's Calibration layer on `dataset` (validation batches); returns a, b."""
    layer = model.get_layer("calibration")
    before = float(layer.a.numpy()), float(layer.b.numpy())
    layer.a.assign(1.0)
    layer.b.assign(0.0)
    probs, labels = [], []
    for features, label in dataset:
        probs.append(model(features, training=False).numpy())
        labels.append(label.numpy())
    if not probs or len(np.unique(np.concatenate(labels))) < 2:
        log.warning("calibration skipped: the validation split has one label class or no rows")
        layer.a.assign(before[0])
        layer.b.assign(before[1])
        return {"calibration_a": before[0], "calibration_b": before[1]}
    a, b = fit_platt(np.concatenate(probs), np.concatenate(labels))
    layer.a.assign(a)
    layer.b.assign(b)
    log.info("Platt calibration on %d validation rows: a=%.3f b=%.3f", sum(len(x) for x in labels), a, b)
    return {"calibration_a": a, "calibration_b": b}
