"""The linear member (`model.linear_member`): a logistic regression on one-hot item and user and
the multi-hot history, solved after training and stacked with the network by the last layer.

Why: on real ratings (MovieTweetings) this regression alone (the LR baseline,
bench/lab/baselines.py) is level with the network or above it, and the two err differently: the
network generalises through content and taste, the regression fits every id's own rate to its
optimum (a convex fit, the same every run, where the network's per-id terms move with a few
dozen stochastic steps a night). Averaging their logits beat both on every night measured. How
much of each is served is not a constant: the last layer (blend.py) fits the regression's
weight on the held-out rows beside the network's, so where the regression adds nothing (an
item-driven world the network already reads) its weight goes to about zero.

Why not inside the network (a wide part trained with it, or a fitted regression the network
corrects): both were measured worse on the same nights (docs/benchmarks.md, replay rounds 12
and 13): trained jointly, the per-id weights inherit the network's noise; frozen under the
network, the network overfits what the regression left.

The fit reads the training split (not the held-out rows the blend is fitted on), at most
MAX_ROWS of it (an even sample beyond), on the chief after training. The weights are
non-trainable model variables: exported, served and warm-started by item row like the others.
"""
from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf
import tf_keras as keras
from scipy import sparse

from components.train.model.embedding import gather_rows
from pipeline.contracts import features as F

log = logging.getLogger(__name__)

C = 0.5                 # sklearn's inverse L2 strength, as the LR baseline (bench/lab/baselines.py)
MAX_ROWS = 500_000      # training rows the fit reads at most (memory: ~1 KiB a row of a 50-long history)
LAYER = "linear_member"
INPUTS = (F.TARGET_ID, F.USER_BUCKET, F.HISTORY_IDS)


@keras.saving.register_keras_serializable(package="reco_nightly")
class LinearMember(keras.layers.Layer):
    """(shown item id [B], user bucket [B], history ids [B, L]) -> logit [B, 1]: item weight +
    user weight + the mean of the history items' weights + bias; zero until `assign`."""

    def __init__(self, items: int, users: int, **kwargs):
        super().__init__(**kwargs)
        self.items, self.users = items, users

    def build(self, input_shape):
        zeros = {"initializer": "zeros", "trainable": False}
        self.item = self.add_weight(name="item", shape=(self.items, 1), **zeros)
        self.user = self.add_weight(name="user", shape=(max(self.users, 1), 1), **zeros)
        self.history = self.add_weight(name="history", shape=(self.items, 1), **zeros)
        self.bias = self.add_weight(name="bias", shape=(), **zeros)
        super().build(input_shape)

    def call(self, target_id, user, history_ids):
        mask = tf.cast(tf.not_equal(history_ids, 0), tf.float32)
        history = tf.reduce_sum(gather_rows(self.history, history_ids)[..., 0] * mask, axis=1, keepdims=True)
        history /= tf.maximum(tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)
        out = tf.reshape(gather_rows(self.item, target_id), [-1, 1]) + history + self.bias
        if self.users > 1:
            out += tf.reshape(gather_rows(self.user, user), [-1, 1])
        return out

    def assign(self, weights: dict[str, np.ndarray]) -> None:
        for name, value in weights.items():
            getattr(self, name).assign(np.asarray(value, np.float32).reshape(getattr(self, name).shape))

    def logit(self, features: dict) -> tf.Tensor:
        return self(*(features[name] for name in INPUTS))

    def get_config(self):
        return {**super().get_config(), "items": self.items, "users": self.users}


def find(model: keras.Model) -> LinearMember | None:
    return next((x for x in model.submodules if isinstance(x, LinearMember)), None)


def design(rows: dict[str, np.ndarray], items: int, users: int) -> sparse.csr_matrix:
    """The regression's inputs in the layer's order: one-hot item, one-hot user (none when the
    model reads no users: `users` <= 1), the history's items (1 / length each; an item twice in
    a history weighs twice)."""
    target, user, ids = (np.asarray(rows[name], np.int64) for name in INPUTS)
    n = len(target)
    length = np.maximum((ids != 0).sum(axis=1), 1)
    r, col = np.nonzero(ids)
    history = sparse.csr_matrix((1.0 / length[r], (r, ids[r, col])), shape=(n, items))
    one_hot = lambda v, size: sparse.csr_matrix((np.ones(n), (np.arange(n), v)), shape=(n, size))  # noqa: E731
    blocks = [one_hot(target, items), *([one_hot(user, users)] if users > 1 else []), history]
    return sparse.hstack(blocks).tocsr()


def fit(rows: dict[str, np.ndarray], labels: np.ndarray, items: int, users: int) -> dict[str, np.ndarray] | None:
    """The layer's weights by name (L2-penalised logistic regression, sklearn lbfgs on `design`);
    None where the rows hold one label class (nothing to fit)."""
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(labels).ravel()
    if len(np.unique(labels)) < 2:
        log.warning("linear member: the training rows hold one label class; not fitted")
        return None
    model = LogisticRegression(C=C, max_iter=1000).fit(design(rows, items, users), labels)
    coef = model.coef_.ravel()
    width = users if users > 1 else 0
    return {"item": coef[:items], "user": coef[items:items + width] if width else np.zeros(1),
            "history": coef[items + width:], "bias": np.float64(model.intercept_[0])}
