"""Item popularity of the training window (empirical Bayes), on rows small enough to check by hand."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.contracts.popularity import PRIOR_PRECISION, ItemPopularity, exposure_prior_logits, read_window

pytestmark = pytest.mark.unit


def _logit(p):
    return np.log(p / (1 - p))


def test_a_few_items_shrink_towards_one_fitted_prior_mean():
    """Item 5 clicked 2 of 2, item 9 0 of 2: each posterior mode balances its clicks against the
    prior (precision 2) around their shared mean, so neither is scored 1.0 or 0.0; symmetric
    data, so the mean is even odds; an item never shown gets the window's rate."""
    pop = ItemPopularity.fit(np.array([5, 5, 9, 9]), np.array([1, 1, 0, 0]))
    assert pop.window_rate == 0.5
    p5, p9, p7 = pop(np.array([5, 9, 7]))
    assert 0.5 < p5 < 0.9 and p9 == pytest.approx(1 - p5) and p7 == pytest.approx(0.5)
    w = _logit(p5)                                   # the mode: clicks - n p = precision x (w - mean)
    assert 2 - 2 * p5 == pytest.approx(PRIOR_PRECISION * w, abs=1e-6)
    with pytest.raises(ValueError, match="no training rows"):
        ItemPopularity.fit(np.array([]), np.array([]))


def _exposure_window(items: int = 400, seed: int = 0):
    """Item i's click log-odds -3 + 0.5 log(1 + impressions): popular items are shown more."""
    rng = np.random.default_rng(seed)
    shown = rng.integers(1, 200, size=items)
    truth = -3.0 + 0.5 * np.log1p(shown)
    clicks = rng.binomial(shown, 1 / (1 + np.exp(-truth)))
    ids = np.repeat(np.arange(1, items + 1), shown)
    labels = np.concatenate([np.r_[np.ones(c), np.zeros(n - c)] for n, c in zip(shown, clicks)])
    return ids, labels, shown, truth


def test_an_item_with_little_evidence_is_expected_to_click_like_items_shown_as_rarely():
    """Fitted to the window, the estimates follow the truth better than smoothing towards the
    window's rate: an item shown a few times is pulled towards the low rate of rarely shown
    items, not up to the window's; an item the window never showed gets the window's rate
    (it may be new: no evidence either way)."""
    ids, labels, shown, truth = _exposure_window()
    pop = ItemPopularity.fit(ids, labels)
    assert pop(np.array([10_000]))[0] == pop.window_rate == labels.mean()
    estimate = _logit(pop(np.arange(1, len(shown) + 1)))
    rate = labels.mean()
    smoothed = _logit((np.bincount(ids, weights=labels)[1:] + 20 * rate) / (shown + 20))
    assert np.abs(estimate - truth).mean() < np.abs(smoothed - truth).mean()
    rare = shown < 10
    assert np.abs(estimate - truth)[rare].mean() < np.abs(smoothed - truth)[rare].mean()


def test_estimates_stay_finite_even_when_every_item_was_always_clicked():
    ids, labels, shown, _ = _exposure_window(items=50)
    logits = exposure_prior_logits(shown, np.bincount(ids, weights=labels)[1:])
    assert len(logits) == 50 and np.isfinite(logits).all()
    all_clicked = exposure_prior_logits(np.array([3.0] * 40), np.array([3.0] * 40))
    assert (all_clicked < 15).all()                          # clipped, finite: never a certain 1.0


def test_read_window_leaves_out_labels_that_are_not_clicks_or_not(tmp_path):
    pq.write_table(pa.table({F.ITEM_ID: [1, 1, 2, 2], F.LABEL: pa.array([1, None, 2, 0], pa.int64())}),
                   tmp_path / "part-0.parquet")
    pop = read_window([tmp_path / "part-0.parquet"])
    assert pop.window_rate == 0.5 and pop.item_ids.tolist() == [1, 2]
