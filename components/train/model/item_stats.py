"""The shown item's training-window popularity as model features (features.TARGET_STATS).

What sorting by popularity knows, the model reads from the first step: the item's click rate
over the training window, smoothed towards the window's rate by PRIOR_WEIGHT pseudo-impressions,
as log-odds relative to the window's rate, and how much
evidence it rests on, log(1 + impressions). An id embedding or bias has to learn the same from
the gradient, a few touches per tail item per epoch, and early stopping ends training before it
has; these two numbers are exact on the first step and exist for every item of the table.

Every row of an item reads the same numbers, its own label included, as an item bias fitted on
the window would hold it. Not leave-one-out: subtracting each row's own click gives an item's
clicked rows a lower rate than its unclicked ones, and together with the item's id (which tells
the model the item's total) that difference is the label itself; measured, it made the model
worse on every regime of the quality benchmark.
"""
from __future__ import annotations

import tensorflow as tf

_EPS = 1e-4
PRIOR_WEIGHT = 20.0


def smoothed_rate(clicks, shown, window_rate: float, prior_weight: float = PRIOR_WEIGHT):
    """Clicks over impressions shrunk towards the window's rate."""
    return (clicks + prior_weight * window_rate) / (shown + prior_weight)


def _logit(p):
    p = tf.clip_by_value(p, _EPS, 1 - _EPS)
    return tf.math.log(p) - tf.math.log1p(-p)


def item_stats(shown, clicks, rate: float) -> tf.Tensor:
    """[..., 2] float32 from impressions and clicks [...] and the window's click rate."""
    shown, clicks = tf.maximum(tf.cast(shown, tf.float32), 0.0), tf.maximum(tf.cast(clicks, tf.float32), 0.0)
    clicks = tf.minimum(clicks, shown)
    lift = _logit(smoothed_rate(clicks, shown, rate)) - _logit(tf.constant(rate, tf.float32))
    return tf.stack([lift, tf.math.log1p(shown)], axis=-1)
