"""The request ceilings: what history reading is worth differs by world, and they see it."""
from __future__ import annotations

import pytest

from bench.lab.ceilings import request_ceilings
from pipeline.datagen.regimes import regime_spec
from pipeline.datagen.world import World

pytestmark = pytest.mark.unit


def _ceilings(regime: str) -> dict[str, float]:
    world = World(regime_spec(regime, users=300, items=200, seed=3))
    return request_ceilings(world, [10, 11, 12], 13, train_requests=6000, eval_requests=6000)


def test_where_taste_drives_clicks_the_history_is_worth_far_more_than_popularity():
    out = _ceilings("default")
    assert out["content"] > out["appeal"] + 0.05


def test_where_clicks_follow_the_item_popularity_alone_is_most_of_the_signal():
    out = _ceilings("popularity")
    assert out["appeal"] > 0.75 and 0 < out["content"] - out["appeal"] < 0.05
