"""The linear member (components/train/model/linear.py): the layer serves exactly the
regression it was fitted to, and the last layer weighs it by what it adds on held-out rows."""
from __future__ import annotations

import numpy as np
import tensorflow as tf
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from components.train.model import linear
from components.train.model.blend import LINEAR_TERM, fit_last_layer
from pipeline.contracts import features as F

ITEMS, USERS = 8, 6          # rows: 0 = padding, ids 1..7 and buckets 1..5


def _rows(n=3000, seed=0):
    """Planted: item 3 clicked, item 5 not; user 2 clicks; a history holding item 4 clicks."""
    rng = np.random.default_rng(seed)
    target, user = rng.integers(1, ITEMS, n), rng.integers(1, USERS, n)
    history = rng.integers(1, ITEMS, (n, 4)) * (rng.random((n, 4)) < 0.7)        # some padding
    z = -0.5 + 2.0 * (target == 3) - 2.0 * (target == 5) + 1.5 * (user == 2) + 1.5 * (history == 4).any(axis=1)
    labels = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.int64)
    return {F.TARGET_ID: target, F.USER_BUCKET: user, F.HISTORY_IDS: history}, labels


def _member(users=USERS):
    layer = linear.LinearMember(ITEMS, users)
    layer.build(None)
    return layer


def test_the_layer_serves_the_regression_it_was_fitted_to_and_finds_the_planted_effects():
    rows, labels = _rows()
    weights = linear.fit(rows, labels, ITEMS, USERS)
    layer = _member()
    layer.assign(weights)
    served = layer.logit({k: tf.constant(v) for k, v in rows.items()}).numpy().ravel()
    x = linear.design(rows, ITEMS, USERS)
    reference = LogisticRegression(C=linear.C, max_iter=1000).fit(x, labels).decision_function(x)
    np.testing.assert_allclose(served, reference, atol=1e-4)
    assert weights["item"][3] > 1 > -1 > weights["item"][5] and weights["user"][2] > 1
    assert weights["history"][4] > 1 and abs(weights["history"][6]) < 0.5


def test_one_label_class_is_not_fitted_and_a_model_without_users_reads_none():
    rows, labels = _rows(200)
    assert linear.fit(rows, np.zeros_like(labels), ITEMS, USERS) is None
    weights = linear.fit(rows, labels, ITEMS, 1)
    assert linear.design(rows, ITEMS, 1).shape[1] == 2 * ITEMS and weights["user"].tolist() == [0.0]
    layer = _member(users=0)
    layer.assign(weights)
    a, b = ({**rows, F.USER_BUCKET: np.full(len(labels), u)} for u in (1, 4))
    np.testing.assert_array_equal(layer.logit(a).numpy(), layer.logit(b).numpy())


def test_the_blend_weighs_the_member_by_what_it_adds_on_held_out_rows():
    """A network that knows half the signal and a member that knows the other half: the blend
    gives the member a clear weight and ranks better than either; a member of noise gets ~0."""
    rng = np.random.default_rng(1)
    n = 4000
    u, v = rng.normal(size=(2, n))
    labels = (rng.random(n) < 1 / (1 + np.exp(-(u + v)))).astype(np.int64)
    network = 1 / (1 + np.exp(-u))
    a, b, stack = fit_last_layer(network, labels, linear=v)
    blended = a * u + b + stack[LINEAR_TERM] * v
    assert 0.7 < stack[LINEAR_TERM] < 1.3 and np.abs(np.delete(stack, LINEAR_TERM)).max() == 0
    assert roc_auc_score(labels, blended) > max(roc_auc_score(labels, u), roc_auc_score(labels, v)) + 0.03
    _, _, stack = fit_last_layer(network, labels, linear=rng.normal(size=n))
    assert abs(stack[LINEAR_TERM]) < 0.1
