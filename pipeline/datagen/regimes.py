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
DAY_KEY_EPOCH = dt.date(1970, 1, 1)     # new users' ids grow with the day: day keys count from here


def regime_spec(regime: str, **base) -> WorldSpec:
    """The spec of `regime` on top of `base` (users, items, ctr, seed): the regime's knobs win."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}: expected one of {', '.join(REGIMES)}")
    from pipeline.datagen.world import WorldSpec, with_knobs  # numpy-backed: the presets are not
    return with_knobs(WorldSpec(**base), **REGIMES[regime])


def day_key(day: dt.date) -> int:
    return (day - DAY_KEY_EPOCH).days
