"""The model's last layer on the validation split: Platt scaling fixes overconfident
probabilities and keeps the ranking; the popularity blend adds what counting an item's clicks
knows, from counts that leave the held-out rows' own labels out."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from sklearn.metrics import log_loss, roc_auc_score

from components.train.model.blend import MIN_SLOPE, CalibratedBlend, calibrate, fit_last_layer, held_out_evidence
from pipeline.contracts.popularity import evidence as item_evidence


def _overconfident(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    labels = (rng.random(n) < 1 / (1 + np.exp(-(0.5 * z - 1)))).astype(np.int64)
    return 1 / (1 + np.exp(-(3 * z - 0.5))), labels      # the right order, three times too sure


def _layer():
    layer = CalibratedBlend(name="calibration")
    layer.build((None, 1))
    return layer


def test_platt_alone_recovers_the_true_map_and_never_hurts():
    probs, labels = _overconfident()
    a, b, stack = fit_last_layer(probs, labels)
    assert abs(a - 0.5 / 3) < 0.03 and abs(b - (-1 + 0.5 / 6)) < 0.1 and not stack.any()
    calibrated = 1 / (1 + np.exp(-(a * np.log(probs / (1 - probs)) + b)))
    assert log_loss(labels, calibrated) < log_loss(labels, probs) - 0.05
    assert roc_auc_score(labels, calibrated) == roc_auc_score(labels, probs)
    perfect = np.where(labels == 1, 0.999999, 0.000001)          # separable: no overshoot
    a2, _, _ = fit_last_layer(perfect, labels)
    assert np.isfinite(a2) and a2 > 0


def test_the_layer_is_the_identity_until_calibrated_then_fits_held_out_rows():
    probs, labels = _overconfident(4000, seed=1)
    inputs = keras.Input(shape=(1,), name="p")
    model = keras.Model(inputs, CalibratedBlend(name="calibration")(inputs))
    x = probs.astype(np.float32)[:, None]
    np.testing.assert_allclose(model(x).numpy(), x, atol=1e-5)
    fitted = calibrate(model.get_layer("calibration"), probs, labels)
    assert fitted["calibration_a"] < 0.5 and model.get_layer("calibration").trainable_weights == []
    assert log_loss(labels, model(x).numpy().ravel()) < log_loss(labels, probs) - 0.05
    one_class = calibrate(_layer(), probs, np.zeros_like(labels))     # nothing to fit: the identity
    assert one_class["calibration_a"] == 1.0 and one_class["stack_popularity"] == 0.0


def _item_world(seed=0, items=300, window=30_000, held=6_000):
    """Clicks = the item's appeal + the user's: the model knows the user, the item only roughly;
    the window's counts know the item. Returns the window's counts by item and held-out rows."""
    rng = np.random.default_rng(seed)
    appeal = rng.normal(-1.5, 1.0, items)
    shown_p = np.exp(rng.normal(0, 1.2, items))
    shown_p /= shown_p.sum()

    def rows(n):
        item, user = rng.choice(items, n, p=shown_p), rng.normal(0, 1.0, n)
        label = (rng.random(n) < 1 / (1 + np.exp(-(appeal[item] + user)))).astype(np.int64)
        model_logit = user + 0.3 * appeal[item] + rng.normal(0, 0.5, n) - 1.0
        return item, label, 1 / (1 + np.exp(-model_logit))

    w_item, w_label, _ = rows(window)
    shown = np.bincount(w_item, minlength=items).astype(float)
    clicks = np.bincount(w_item, weights=w_label, minlength=items)
    return shown, clicks, rows(held), rows(held)


def test_the_blend_beats_the_model_and_popularity_on_new_rows():
    shown, clicks, (v_item, v_label, v_p), (e_item, e_label, e_p) = _item_world()
    layer = _layer()
    fitted = calibrate(layer, v_p, v_label, item_evidence(shown, clicks)[v_item])
    assert fitted["stack_popularity"] > 0
    evidence = item_evidence(shown, clicks)[e_item]
    blended = layer(e_p.astype(np.float32)[:, None], evidence=evidence).numpy().ravel()
    model_auc, popularity_auc = roc_auc_score(e_label, e_p), roc_auc_score(e_label, evidence[:, 0])
    assert roc_auc_score(e_label, blended) > max(model_auc, popularity_auc) + 0.01
    assert log_loss(e_label, blended) < log_loss(e_label, e_p)
    # Called without evidence (training), the layer is Platt alone.
    platt = layer(e_p.astype(np.float32)[:, None]).numpy().ravel()
    assert roc_auc_score(e_label, platt) == pytest.approx(roc_auc_score(e_label, e_p), abs=1e-6)


def test_a_model_that_learned_nothing_gets_popularitys_ranking():
    """Saturated and constant (a diverged training): the Newton steps must still leave the identity."""
    shown, clicks, (v_item, v_label, _), (e_item, e_label, _) = _item_world(seed=2)
    layer = _layer()
    constant = np.full(len(v_label), 1 - 1e-7)
    fitted = calibrate(layer, constant, v_label, item_evidence(shown, clicks)[v_item])
    evidence = item_evidence(shown, clicks)[e_item]
    blended = layer(np.full((len(e_label), 1), 1 - 1e-7, np.float32), evidence=evidence).numpy().ravel()
    assert fitted["stack_popularity"] > 0.1
    assert roc_auc_score(e_label, blended) > roc_auc_score(e_label, evidence[:, 0]) - 0.01
    assert log_loss(e_label, blended) < 0.7


def test_a_model_ranked_upside_down_keeps_its_ranking_and_the_blend_is_fitted_around_it():
    """The fit wants a negative slope on the model: the slope is held at its floor and the other
    weights fitted for that slope, so the layer beats the base rate on the rows it was fitted on."""
    shown, clicks, (v_item, v_label, v_p), _ = _item_world(seed=3)
    upside_down = 1 - v_p
    layer = _layer()
    fitted = calibrate(layer, upside_down, v_label, item_evidence(shown, clicks)[v_item])
    got = layer(upside_down.astype(np.float32)[:, None],
                evidence=tf.constant(item_evidence(shown, clicks)[v_item])).numpy().ravel()
    assert fitted["calibration_a"] == pytest.approx(MIN_SLOPE)
    assert log_loss(v_label, got) < log_loss(v_label, np.full(len(v_label), v_label.mean()))
    assert roc_auc_score(v_label, got) > 0.6                     # popularity's ranking, not the model's


def test_the_layer_computes_what_was_fitted():
    shown, clicks, (v_item, v_label, v_p), _ = _item_world(seed=1)
    layer = _layer()
    evidence = item_evidence(shown, clicks)[v_item]
    fitted = calibrate(layer, v_p, v_label, evidence)
    m = np.log(v_p / (1 - v_p))
    q, s = evidence[:, 0].astype(np.float64), evidence[:, 1].astype(np.float64)
    z = (fitted["calibration_a"] * m + fitted["calibration_b"] + fitted["stack_popularity"] * q
         + fitted["stack_evidence"] * s + fitted["stack_popularity_x_evidence"] * q * s
         + fitted["stack_model_x_evidence"] * m * s)
    got = layer(v_p.astype(np.float32)[:, None], evidence=tf.constant(evidence)).numpy().ravel()
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-z)), atol=1e-4)


def test_held_out_rows_do_not_count_their_own_labels():
    shown, clicks = np.array([0, 4, 1, 0, 0], float), np.array([0, 3, 1, 0, 0], float)   # rows 0..4, 4 = clip
    rows, labels = np.array([1, 1, 2, 9]), np.array([1, 0, 1, 0])
    got = held_out_evidence(shown, clicks, rows, labels)
    rest = item_evidence(np.array([0, 2, 0, 0, 0]), np.array([0, 2, 0, 0, 0]))
    np.testing.assert_allclose(got, rest[[1, 1, 2, 4]])
    # Row 1 without its two held-out rows: 2 shown, 2 clicked; row 2 was only ever held out, as
    # a row beyond the table (9 reads the clip row): the window's rate, no evidence.
    assert got[0, 1] == np.float32(np.log(3.0)) and got[2, 1] == 0 and got[3, 1] == 0
    assert got[2, 0] == got[3, 0] == rest[0, 0]


def test_a_few_validation_rows_adjust_the_layer_it_starts_from_rather_than_reset_it():
    """An incremental night: a warm-started model's layer (the served blend) meets a few dozen
    validation rows; the fit stays near it, where from the identity it would stay near that."""
    shown, clicks, (v_item, v_label, v_p), _ = _item_world()
    full = fit_last_layer(v_p, v_label, item_evidence(shown, clicks)[v_item])
    served = np.array([full[0], full[1], *full[2]])
    few = slice(0, 40)
    evidence = item_evidence(shown, clicks)[v_item[few]]
    from_served = fit_last_layer(v_p[few], v_label[few], evidence, start=served)
    from_identity = fit_last_layer(v_p[few], v_label[few], evidence)
    distance = lambda fit: np.abs(np.array([fit[0], fit[1], *fit[2]]) - served).sum()  # noqa: E731
    assert distance(from_served) < 0.5 * distance(from_identity)
    layer = _layer()
    layer.a.assign(served[0])
    layer.b.assign(served[1])
    layer.stack.assign(served[2:].astype(np.float32))
    np.testing.assert_allclose(layer.values(), served, rtol=1e-6)


def test_without_platt_the_scale_stays_the_identity_and_the_blend_is_still_fitted():
    """The ablation's switch (RECO_TRAIN_LAB {"platt": false}): a and b stay 1 and 0."""
    probs, labels = _overconfident(4000, seed=3)
    a, b, stack = fit_last_layer(probs, labels, platt=False)
    assert (a, b) == (1.0, 0.0) and not stack.any()
    shown, clicks, (v_item, v_label, v_p), _ = _item_world(seed=4)
    a, b, stack = fit_last_layer(v_p, v_label, item_evidence(shown, clicks)[v_item], platt=False)
    assert (a, b) == (1.0, 0.0) and stack[0] > 0
