"""The model's last layer, fitted on the validation split after training: Platt scaling, and a
blend of the model's logit with the shown item's popularity and the linear member's logit.

Platt scaling. Early stopping keeps the epoch with the best validation AUC, and by then the model
is usually overconfident: its ranking is the best it gets, its probabilities are not (log loss
worse than predicting the base rate). p -> sigmoid(a * logit(p) + b) fitted on held-out rows
fixes the probabilities without changing the ranking and costs two scalars.

The popularity blend (`model.stack_popularity`). Where clicks follow the item, counting an item's
clicks over the window ranks better than the item bias a network learns from a few touches per
epoch, and the network's other signals (the user, the history's taste) are what counting lacks.
So the last layer adds c1 q + c2 s + c3 q s + c4 m s to a * m + b: m the model's logit, q the item's
popularity log-odds and s = log(1 + its impressions), by item-table row
(pipeline/contracts/popularity.py `evidence`: the gate's estimate); the s terms let the blend trust
the counts where they are many and the model where they are few. The network never reads q while
it trains (a rate that holds a row's own label says more on the training rows than on tomorrow's,
which is why the window statistics as inputs lost and were removed); the blend is fitted on the
held-out rows with q and s from the window's counts minus those rows (`held_out_evidence`), as
the eval day will see them.

The linear member (`model.linear_member`, linear.py): a logistic regression on the example's
ids fitted on the training rows after the network; the last layer adds c5 l, l its logit, so
the held-out rows decide how much of it is served beside the network.

Both fits start at the identity, are pulled towards it by one row's weight (a validation split of a
few dozen rows cannot blow the weights up), and never end worse than it on the validation rows
(log loss). The weights are non-trainable weights of the model, so the export, TF Serving and TF
Lite serve them.
"""
from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf
import tf_keras as keras

from pipeline.contracts import item_table as IT
from pipeline.contracts.popularity import evidence as item_evidence

log = logging.getLogger(__name__)
_EPS = 1e-6
MIN_SLOPE = 1e-3
_RIDGES = (0.0, 1e-3, 1e-1, 10.0)
PULL = 1.0
STACK_TERMS = ("popularity", "evidence", "popularity_x_evidence", "model_x_evidence", "linear")
POPULARITY_TERMS = tuple(range(4))          # STACK_TERMS' indices the evidence feeds
LINEAR_TERM = 4                             # ... and the linear member's logit (model/linear.py)


def _stack_terms(m, q, s, concat):
    return concat([q, s, q * s, m * s])


class CalibratedBlend(keras.layers.Layer):
    """(p, evidence [.., 2] or None, the linear member's logit [.., 1] or None) ->
    sigmoid(a logit(p) + b + the blend's terms); the identity (a = 1, b = 0, blend 0) until
    `calibrate` sets them. Training calls it without evidence (and the linear member's weight is
    zero while the network trains: the member is fitted after it)."""

    def build(self, input_shape):
        self.a = self.add_weight(name="a", shape=(), initializer="ones", trainable=False)
        self.b = self.add_weight(name="b", shape=(), initializer="zeros", trainable=False)
        self.stack = self.add_weight(name="stack", shape=(len(STACK_TERMS),), initializer="zeros", trainable=False)
        super().build(input_shape)

    def call(self, p, evidence=None, linear=None):
        p = tf.clip_by_value(tf.cast(p, tf.float32), _EPS, 1 - _EPS)
        m = tf.math.log(p) - tf.math.log1p(-p)
        z = self.a * m + self.b
        if evidence is not None:
            evidence = tf.cast(evidence, tf.float32)
            terms = _stack_terms(m, evidence[..., :1], evidence[..., 1:], lambda t: tf.concat(t, axis=-1))
            z += tf.reduce_sum(terms * self.stack[: len(POPULARITY_TERMS)], axis=-1, keepdims=True)
        if linear is not None:
            z += self.stack[LINEAR_TERM] * tf.cast(linear, tf.float32)
        return tf.sigmoid(z)

    def values(self) -> np.ndarray:
        """[a, b, *blend weights]: the layer as fit_last_layer's `start`."""
        return np.concatenate([[float(self.a.numpy()), float(self.b.numpy())], self.stack.numpy()])

    def reset(self) -> None:
        self.a.assign(1.0)
        self.b.assign(0.0)
        self.stack.assign(tf.zeros_like(self.stack))


def _loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, start: np.ndarray, offset: np.ndarray | float = 0.0) -> float:
    z = x @ w + offset
    return float(np.mean(np.logaddexp(0, z) - y * z) + PULL * np.sum((w - start) ** 2) / (2 * len(y)))


def fit_logistic(x: np.ndarray, y: np.ndarray, start: np.ndarray, steps: int = 100,
                 offset: np.ndarray | float = 0.0) -> np.ndarray:
    """Weights minimising the log loss of sigmoid(x @ w + offset) on (x, y) plus an L2 pull towards `start`
    (PULL: what one row weighs; it keeps the weights finite on a small or separable validation
    split and fades with more rows), never worse than `start` on these rows. Newton steps with
    backtracking (confident predictions make plain Newton overshoot), damped harder where the
    Newton step finds no decrease (a saturated or constant model makes the Hessian nearly
    singular; the most damped step is a gradient step)."""
    start = np.asarray(start, np.float64)
    w, n, eye = start.copy(), len(y), np.eye(len(start))
    loss = _loss(x, y, w, start, offset)
    for _ in range(steps):
        q = 1 / (1 + np.exp(-(x @ w + offset)))
        hessian = x.T @ (x * (q * (1 - q))[:, None]) / n + PULL / n * eye
        gradient = x.T @ (q - y) / n + PULL / n * (w - start)
        for ridge in _RIDGES:
            step = np.linalg.solve(hessian + ridge * eye, gradient)
            shrink = 1.0
            while shrink > 1e-4 and _loss(x, y, w - shrink * step, start, offset) > loss:
                shrink /= 2
            if shrink > 1e-4:
                break
        else:
            break
        w, new = w - shrink * step, _loss(x, y, w - shrink * step, start, offset)
        if loss - new < 1e-10:
            break
        loss = new
    return w


def _design(probs: np.ndarray, evidence: np.ndarray | None,
            linear: np.ndarray | None) -> tuple[np.ndarray, list[int]]:
    """[m, 1, the stack terms given], and those terms' indices in STACK_TERMS."""
    p = np.clip(np.asarray(probs, np.float64).ravel(), _EPS, 1 - _EPS)
    m = np.log(p / (1 - p))[:, None]
    columns, used = [m, np.ones_like(m)], []
    if evidence is not None:
        e = np.asarray(evidence, np.float64).reshape(-1, 2)
        columns.append(_stack_terms(m, e[:, :1], e[:, 1:], lambda t: np.concatenate(t, axis=1)))
        used += POPULARITY_TERMS
    if linear is not None:
        columns.append(np.asarray(linear, np.float64).reshape(-1, 1))
        used.append(LINEAR_TERM)
    return np.concatenate(columns, axis=1), used


def fit_last_layer(probs: np.ndarray, labels: np.ndarray, evidence: np.ndarray | None = None,
                   start: np.ndarray | None = None, platt: bool = True, linear: np.ndarray | None = None):
    """(a, b, blend weights) for the layer: Platt alone without `evidence` and `linear` (the
    linear member's logits; blend zeros where not given). `a`
    stays positive: the model's own ranking is never turned upside down, even by a model no
    better than chance on the validation rows. Where the fit wants it below MIN_SLOPE, `a` is
    held there and the other weights are fitted again around it (clamping `a` alone would leave
    them fitted to a slope the layer does not apply). `start` ([a, b, *blend]; default the
    identity) is where the fit starts and what it is pulled towards: a warm-started model's own
    layer, so an incremental night's few validation rows adjust the served blend rather than
    pull it back to the identity. `platt` false (an ablation, components/train/gang/lab.py): a
    and b stay 1 and 0 and only the blend's weights are fitted, around the model's own logit."""
    (x, used), y = _design(probs, evidence, linear), np.asarray(labels, np.float64).ravel()
    full = np.eye(2 + len(STACK_TERMS))[0] if start is None else np.asarray(start, np.float64)
    if len(full) != 2 + len(STACK_TERMS):           # a layer of before the linear term: Platt kept, blend anew
        full = np.concatenate([full[:2], np.zeros(len(STACK_TERMS))])
    start = full[[0, 1, *(2 + i for i in used)]]
    stack = np.zeros(len(STACK_TERMS))
    if not platt:
        if used:
            stack[used] = fit_logistic(x[:, 2:], y, start[2:], offset=x[:, 0])
        return 1.0, 0.0, stack.astype(np.float32)
    w = fit_logistic(x, y, start)
    if w[0] < MIN_SLOPE:
        rest = fit_logistic(x[:, 1:], y, start[1:], offset=MIN_SLOPE * x[:, 0])
        w = np.concatenate([[MIN_SLOPE], rest])
    stack[used] = w[2:]
    return float(w[0]), float(w[1]), stack.astype(np.float32)


def held_out_evidence(shown: np.ndarray, clicks: np.ndarray, rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """`evidence` for held-out rows (item-table rows and labels) from the window's counts by row
    without those rows: their own labels are not in it, as the eval day's are not."""
    size = len(shown)
    rows = np.minimum(np.asarray(rows, np.int64).ravel(), IT.clip_row(size))     # as the export gathers
    labels = np.asarray(labels, np.float64).ravel()
    rest_shown = np.maximum(np.asarray(shown, np.float64) - np.bincount(rows, minlength=size), 0.0)
    rest_clicks = np.clip(np.asarray(clicks, np.float64) - np.bincount(rows, weights=labels, minlength=size),
                          0.0, rest_shown)
    return item_evidence(rest_shown, rest_clicks)[rows]


def calibrate(layer: CalibratedBlend, probs: np.ndarray, labels: np.ndarray,
              evidence: np.ndarray | None = None, start: np.ndarray | None = None,
              platt: bool = True, linear: np.ndarray | None = None) -> dict[str, float]:
    """Fit `layer` on validation rows: the model's uncalibrated probabilities, their labels and,
    for the blend, their items' held-out evidence and the linear member's logits; from `start`
    (see fit_last_layer). Returns the fitted weights by name."""
    labels = np.asarray(labels).ravel()
    if len(np.unique(labels)) < 2:
        log.warning("calibration skipped: the validation split has one label class or no rows")
        return weights(layer)
    a, b, stack = fit_last_layer(probs, labels, evidence, start, platt, linear)
    layer.a.assign(a)
    layer.b.assign(b)
    layer.stack.assign(stack)
    fitted = weights(layer)
    log.info("calibration on %d validation rows: %s", len(labels),
             ", ".join(f"{k}={v:.3f}" for k, v in fitted.items()))
    return fitted


def weights(layer: CalibratedBlend) -> dict[str, float]:
    stack = layer.stack.numpy()
    return {"calibration_a": float(layer.a.numpy()), "calibration_b": float(layer.b.numpy()),
            **{f"stack_{name}": float(v) for name, v in zip(STACK_TERMS, stack, strict=True)}}
