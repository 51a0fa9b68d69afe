"""Where the regime goal sits against the ceilings: the goal's arithmetic, and one tiny world end to end."""
from __future__ import annotations

import pytest

from bench.lab import goal_reach

pytestmark = pytest.mark.unit


def _base(**aucs: float) -> dict[str, dict[str, float]]:
    return {name: {"auc": auc, "log_loss": 0.5} for name, auc in aucs.items()}


@pytest.mark.parametrize(("aucs", "content", "goal"), [
    ({"constant": 0.5, "item_ctr": 0.80, "lr_user_item": 0.815}, 0.86, 0.825),    # room above: + 0.01
    ({"constant": 0.5, "item_ctr": 0.80, "lr_user_item": 0.815}, 0.84, 0.82),     # little room: + 0.005
    ({"constant": 0.5, "item_ctr": 0.80, "lr_user_item": 0.815}, 0.845, 0.825),   # exactly 0.03 of room: + 0.01
])
def test_the_goal_asks_the_full_lift_only_where_the_content_ceiling_leaves_room(aucs, content, goal):
    assert goal_reach.goal_auc(_base(**aucs), content) == pytest.approx(goal)


def test_a_tiny_popularity_world_records_its_goal_beside_the_ceilings(tmp_path):
    out = goal_reach.reach(tmp_path, "popularity", 600)
    key = "popularity_600"
    assert out[f"window_rows_{key}"] == 1800
    room = out[f"ceiling_content_auc_{key}"] - out[f"auc_best_baseline_{key}"]
    lift = 0.01 if room >= 0.03 else 0.005
    assert out[f"goal_auc_{key}"] == pytest.approx(out[f"auc_best_baseline_{key}"] + lift)
    assert out[f"ceiling_content_auc_{key}"] > out[f"ceiling_appeal_auc_{key}"] > 0.7
    assert out[f"goal_over_content_{key}"] == pytest.approx(out[f"goal_auc_{key}"] - out[f"ceiling_content_auc_{key}"])
