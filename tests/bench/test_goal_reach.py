"""Where the regime goal sits against the ceilings: the goal's arithmetic, and one tiny world end to end."""
from __future__ import annotations

import pytest

from bench import goal_reach

pytestmark = pytest.mark.unit


def _base(**aucs: float) -> dict[str, dict[str, float]]:
    return {name: {"auc": auc, "log_loss": 0.5} for name, auc in aucs.items()}


@pytest.mark.parametrize(("aucs", "goal"), [
    ({"constant": 0.5, "item_ctr": 0.80, "lr_user_item": 0.815}, 0.825),   # the best baseline's margin binds
    ({"constant": 0.5, "item_ctr": 0.80, "lr_user_item": 0.805}, 0.82),    # item popularity's margin binds
])
def test_the_goal_is_the_stricter_of_the_two_margins_the_benchmark_states(aucs, goal):
    assert goal_reach.goal_auc(_base(**aucs)) == pytest.approx(goal)


def test_a_tiny_popularity_world_records_its_goal_beside_the_ceilings(tmp_path):
    out = goal_reach.reach(tmp_path, "popularity", 600)
    key = "popularity_600"
    assert out[f"window_rows_{key}"] == 1800
    assert out[f"goal_auc_{key}"] >= out[f"auc_item_ctr_{key}"] + 0.02
    assert out[f"goal_auc_{key}"] >= out[f"auc_best_baseline_{key}"] + 0.01
    assert out[f"ceiling_content_auc_{key}"] > out[f"ceiling_appeal_auc_{key}"] > 0.7
    assert out[f"goal_over_content_{key}"] == pytest.approx(out[f"goal_auc_{key}"] - out[f"ceiling_content_auc_{key}"])
