"""Metric, bootstrap and threshold logic on synthetic arrays (no TensorFlow)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from components.evaluate import gate, metrics
from pipeline.config import EvalConfig as _EvalConfig


def EvalConfig(**kwargs):  # noqa: N802 - the gate's other rules, without the popularity floor
    return _EvalConfig(**{"min_lift_over_baseline": None, **kwargs})


def _scores(n=600, seed=0, signal=1.0):
    rng = np.random.default_rng(seed)
    label = (rng.random(n) < 0.3).astype(np.int64)
    prob = 1 / (1 + np.exp(-(signal * label + rng.normal(size=n))))
    return label, np.round(prob, 2)          # rounding creates ties, which sklearn counts as 1/2


def test_weighted_auc_matches_sklearn_with_ties_and_weights():
    label, prob = _scores()
    weights = np.random.default_rng(1).integers(0, 4, size=(5, len(label))).astype(float)
    got = metrics.weighted_auc(label, prob, weights)
    want = [roc_auc_score(label, prob, sample_weight=w) for w in weights]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_user_bootstrap_is_seeded_and_brackets_the_observed_gap():
    label, good = _scores(signal=1.5)
    _, weak = _scores(signal=0.3, seed=5)
    users = np.arange(len(label)) // 6
    a = metrics.user_bootstrap(label, users, good, weak, samples=200, seed=3)
    b = metrics.user_bootstrap(label, users, good, weak, samples=200, seed=3)
    assert a == b
    observed = roc_auc_score(label, good) - roc_auc_score(label, weak)
    assert a["auc_diff"]["low"] < observed < a["auc_diff"]["high"]
    assert a["users"] == 100 and a["unit"] == "user_id"


def test_user_bootstrap_keeps_users_together():
    """Duplicating every row 20x within each user adds no evidence: the user CI must not shrink,
    while a row-level bootstrap would treat the copies as independent and shrink ~4.5x."""
    label, prob = _scores(n=300)
    users = np.arange(300)
    once = metrics.user_bootstrap(label, users, prob, None, samples=300, seed=0)["candidate_auc"]
    rep = metrics.user_bootstrap(np.repeat(label, 20), np.repeat(users, 20), np.repeat(prob, 20), None,
                                 samples=300, seed=0)["candidate_auc"]
    assert rep["std"] == pytest.approx(once["std"], rel=0.25)


def test_identical_models_have_a_zero_gap():
    label, prob = _scores()
    out = metrics.user_bootstrap(label, np.arange(len(label)) % 50, prob, prob.copy(), samples=50, seed=0)
    assert out["auc_diff"]["low"] == out["auc_diff"]["high"] == 0.0


def test_binary_metrics_calibration_and_accuracy():
    label = np.array([0, 0, 1, 1])
    m = metrics.binary_metrics(label, np.array([0.1, 0.6, 0.4, 0.9]))
    assert m["auc"] == 0.75 and m["accuracy"] == 0.5
    assert m["calibration"] == pytest.approx(0.5 / 0.5)
    assert metrics.binary_metrics(label, np.array([0.1, np.nan, 0.4, 0.9]))["non_finite_predictions"] == 1


def _m(auc, loss=0.4, bad=0):
    return {"auc": auc, "log_loss": loss, "non_finite_predictions": bad}


def test_gate_fails_closed_without_thresholds():
    v = gate.decide(EvalConfig(min_auc=None, max_log_loss=None, max_auc_drop=None), _m(0.99), _m(0.5), 1)
    assert not v.blessed and gate.NO_THRESHOLDS in v.reasons[0]


def test_gate_refuses_a_candidate_that_does_not_beat_item_popularity_by_the_lift():
    cfg = EvalConfig(min_auc=0.55, max_auc_drop=0.01, min_lift_over_baseline=0.01)
    v = gate.decide(cfg, _m(0.70), _m(0.70), 3, popularity=_m(0.65))
    assert v.blessed and any("item popularity" in p and ">= item popularity" in p for p in v.passed)
    v = gate.decide(cfg, _m(0.655), _m(0.64), 3, popularity=_m(0.65))
    assert not v.blessed and v.reasons == [
        "AUC 0.6550 is below item popularity of the training window AUC 0.6500 "
        "+ eval.min_lift_over_baseline 0.01 = 0.6600"]
    # A lift of 0 still means "beat it": a tie with sorting by popularity is no model.
    assert not gate.decide(EvalConfig(min_lift_over_baseline=0.0), _m(0.65), None, None, popularity=_m(0.65)).blessed
    # Fail closed: the floor is set but popularity could not be scored.
    v = gate.decide(cfg, _m(0.9), None, None, popularity=None)
    assert not v.blessed and "popularity baseline could not be scored" in v.reasons[0]
    # The floor alone is a threshold (no "no thresholds configured").
    only = EvalConfig(min_auc=None, max_auc_drop=None, min_lift_over_baseline=0.0)
    assert gate.decide(only, _m(0.7), None, None, popularity=_m(0.6)).blessed


def test_gate_relative_only_and_no_baseline_fails_closed():
    v = gate.decide(EvalConfig(min_auc=None, max_log_loss=None, max_auc_drop=0.01), _m(0.99), None, None)
    assert not v.blessed and "no applicable threshold" in v.reasons[0]


def test_gate_checks_every_configured_threshold():
    cfg = EvalConfig(min_auc=0.6, max_log_loss=0.5, max_auc_drop=0.01)
    assert gate.decide(cfg, _m(0.70), _m(0.705), 4).blessed
    v = gate.decide(cfg, _m(0.65, loss=0.6), _m(0.70), 4)
    assert not v.blessed and len(v.reasons) == 2
    assert any("max_log_loss" in r for r in v.reasons) and any("served version 4" in r for r in v.reasons)
    assert not gate.decide(cfg, _m(0.7, bad=3), _m(0.7), 4).blessed


def test_gate_does_not_flag_a_drop_the_paired_bootstrap_cannot_tell_from_noise():
    """The significance rule (eval.drop_needs_significance, off by default since the replays):
    0.627 vs 0.641, paired interval of the difference [-0.037, +0.008]."""
    cfg = EvalConfig(min_auc=0.55, max_auc_drop=0.01, drop_needs_significance=True)
    noise = {"low": -0.037, "high": 0.008}
    v = gate.decide(cfg, _m(0.627), _m(0.641), 1, noise)
    assert v.blessed and any("indistinguishable" in p for p in v.passed)
    real = {"low": -0.05, "high": -0.012}        # worse with 95 % confidence
    v = gate.decide(cfg, _m(0.627), _m(0.641), 1, real)
    assert not v.blessed and "served version 1" in v.reasons[0]
    strict = EvalConfig(min_auc=0.55, max_auc_drop=0.01, drop_needs_significance=False)
    assert not gate.decide(strict, _m(0.627), _m(0.641), 1, noise).blessed
    # Absolute thresholds stay absolute: a chance-level candidate fails whatever the interval.
    assert not gate.decide(cfg, _m(0.50), _m(0.51), 1, {"low": -0.03, "high": 0.01}).blessed


def test_by_default_the_served_model_stays_unless_the_candidate_is_at_least_as_good():
    """The rule the replays chose (docs/benchmarks.md): demo night 2 pushed a candidate 0.015 below
    the served model because the interval [-0.0294, +0.0006] reached 0; the default keeps it."""
    cfg = EvalConfig(min_lift_over_baseline=None)
    demo_night_2 = {"low": -0.0294, "high": 0.0006}
    v = gate.decide(cfg, _m(0.7895), _m(0.8041), 1, demo_night_2)
    assert not v.blessed and "served version 1" in v.reasons[0]
    assert gate.decide(cfg, _m(0.8041), _m(0.8041), 1, {"low": -0.01, "high": 0.01}).blessed
    assert gate.decide(cfg, _m(0.81), _m(0.8041), 1, None).blessed


def test_a_paired_bootstrap_separates_noise_from_a_real_drop():
    """End to end on arrays: a rescored copy of the same model is noise; a model that lost its
    signal on half the users is a real drop the gate refuses."""
    rng = np.random.default_rng(4)
    users = rng.integers(0, 400, 6000)
    taste = rng.normal(size=400)[users]
    label = (rng.random(6000) < 1 / (1 + np.exp(-(taste * 1.5 - 2)))).astype(np.int64)
    served = 1 / (1 + np.exp(-(taste * 1.5 - 2 + rng.normal(0, 0.8, 6000))))
    same = 1 / (1 + np.exp(-(taste * 1.5 - 2 + rng.normal(0, 0.8, 6000))))
    broken = np.where(users % 2 == 0, rng.random(6000), same)
    cfg = EvalConfig(min_auc=0.55, max_auc_drop=0.0, drop_needs_significance=True)
    for candidate, blessed in ((same, True), (broken, False)):
        diff = metrics.user_bootstrap(label, users, candidate, served, samples=200, seed=0)["auc_diff"]
        cand, base = metrics.binary_metrics(label, candidate), metrics.binary_metrics(label, served)
        assert gate.decide(cfg, cand, base, 1, diff).blessed is blessed
