"""The serving policies a replay judges, on hand-made nights (no model, no pipeline)."""
import pytest

from pipeline import replay_policies as P


def _nights(script):
    """script: per night (candidate, {model: AUC on that night's day}, gate pushed?)."""
    replay, out = P.Replay(), []
    for k, (aucs, pushed) in enumerate(script):
        out.append(replay.night(f"d{k}", f"d{k}", aucs, {}, pushed, aucs.get("popularity")))
    return replay, out


def test_each_policy_is_judged_by_what_it_served_on_the_next_day():
    # d1's candidate is worse than d0's on d1 itself and on d2; the gate pushed it anyway.
    replay, nights = _nights([
        ({"d0": 0.70, "popularity": 0.60}, True),
        ({"d0": 0.72, "d1": 0.69, "popularity": 0.61}, True),
        ({"d0": 0.73, "d1": 0.66, "d2": 0.75, "popularity": 0.62}, False),
    ])
    assert nights[1]["next_day"]["gate"] == 0.72             # d0 served after night 0, scored on d1
    assert nights[2]["next_day"]["gate"] == 0.66             # the gate pushed d1: users got 0.66
    assert nights[2]["next_day"]["keep_unless_better"] == 0.73   # kept d0 (0.69 < 0.72 on d1)
    assert nights[2]["next_day"]["always_push"] == 0.66
    assert nights[2]["next_day"]["never_retrain"] == 0.73
    assert nights[2]["next_day"]["oracle"] == 0.73           # better of d1 (candidate) and d0 (served before)
    assert nights[2]["next_day"]["popularity"] == 0.62
    assert replay.served["keep_unless_better"] == "d2" and replay.served["gate"] == "d1"
    summary = P.summary(nights)
    assert summary["keep_unless_better"]["mean_next_day_auc"] == pytest.approx((0.72 + 0.73) / 2)
    assert summary["gate"]["regret_to_oracle"] == pytest.approx(0.07 / 2)
    assert summary["never_retrain"]["nights"] == 2


def test_the_significance_rules_read_the_bootstrap_interval():
    assert P.push_unless_worse(0.70, 0.75, {"low": -0.08, "high": 0.01})      # a drop the interval cannot tell
    assert not P.push_unless_worse(0.70, 0.75, {"low": -0.08, "high": -0.01})
    assert P.push_unless_worse(0.745, 0.75, None)                             # within max_drop
    assert not P.better_with_confidence(0.76, 0.75, {"low": -0.01, "high": 0.03})
    assert P.better_with_confidence(0.78, 0.75, {"low": 0.01, "high": 0.05})


def test_a_failed_night_keeps_every_policys_model():
    replay = P.Replay()
    replay.night("d0", "d0", {"d0": 0.7}, {}, True, None)
    step = replay.night("d1", None, {"d0": 0.71}, {}, False, None)
    assert step["next_day"]["gate"] == 0.71 and replay.served["always_push"] == "d0"
    assert replay.models_to_score("d2") == {"d0", "d2"}
