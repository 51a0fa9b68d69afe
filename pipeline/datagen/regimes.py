"""Named regimes of the synthetic world: the kinds of real behaviour data a model must also win on.

The default world (all users return, content shows most of an item's appeal, taste dominates)
is the easiest kind. Real logs often look like the others: most eval-day users new, clicks that
follow the item more than the user, images that say little beyond the category, a high base
rate (ratings turned into likes). `ratings_like` combines them. docs/data.md lists each preset's
knobs; the quality benchmark runs the model and the baselines on every one.
"""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.datagen.world import WorldSpec

REGIMES: dict[str, dict] = {
    "default": {},
    "cold_start": {"new_user_share": 0.6},
    "popularity": {"taste_strength": 0.7, "hidden_appeal": 1.2},
    "weak_content": {"image_content": "category"},
    "high_base_rate": {"ctr": 0.41},
    "ratings_like": {"new_user_share": 0.8, "taste_strength": 0.7, "hidden_appeal": 1.2,
                     "image_content": "category", "ctr": 0.41},
}
# Worlds that move day by day (pipeline/datagen/drift.py): the default world's knobs, and items that
# arrive and retire every day (a slot's item lives 14-56 days: about 3.5 % of the catalog new each
# day), an appeal that trends up and down (sd 0.7, a turning point every 7 days), users who come
# and go (each 3-60 days: about 5 % of a day's users new that day) and tastes that move (half of
# a taste's variance, a turning point every 14 days). Not in REGIMES: the quality benchmark's
# regime matrix judges one window and one night, a drifting world is judged night after night.
DRIFTING: dict[str, dict] = {
    "drifting": {"drift": {"item_life_days": (14, 56), "retired_kept_days": 14, "appeal_trend": 0.7,
                           "appeal_period_days": 7, "user_life_days": (3, 60), "taste_drift": 0.5,
                           "taste_period_days": 14}},
}
PRESETS: dict[str, dict] = {**REGIMES, **DRIFTING}     # every name regime_spec and `--regime` take
DAY_KEY_EPOCH = dt.date(1970, 1, 1)     # new users' ids grow with the day: day keys count from here


def regime_spec(regime: str, **base) -> WorldSpec:
    """The spec of `regime` on top of `base` (users, items, ctr, seed): the regime's knobs win."""
    if regime not in PRESETS:
        raise ValueError(f"unknown regime {regime!r}: expected one of {', '.join(PRESETS)}")
    from pipeline.datagen.world import WorldSpec, with_knobs  # numpy-backed: the presets are not
    return with_knobs(WorldSpec(**base), **PRESETS[regime])


def day_key(day: dt.date) -> int:
    return (day - DAY_KEY_EPOCH).days
