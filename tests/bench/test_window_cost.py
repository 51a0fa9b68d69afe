"""The window-cost benchmark's figures from two nights' costs per window (no pipeline run)."""
import pytest

from bench.window_cost import figures_of


def _cost(plan, total):
    return {"plan": plan, "preprocess": total / 2, "stage": 0.0, "train": total / 2, "total_s": total,
            "validate_s": 0.1, "bytes_written": 10}


def test_warm_nights_are_compared_with_their_cold_night_and_across_windows():
    out = figures_of({7: (_cost("full", 40.0), _cost("incremental", 10.0)),
                      14: (_cost("full", 80.0), _cost("incremental", 12.0))}, events_per_day=100, epochs=1)
    assert out["warm_over_cold_7d"] == pytest.approx(0.25)
    assert out["warm14_over_warm7"] == pytest.approx(1.2)
    assert out["cold_total_s_14d"] == 80.0 and out["warm_bytes_written_7d"] == 10
    assert "warm14_over_warm7" not in figures_of({1: (_cost("full", 5.0), _cost("incremental", 5.0))}, 100, 1)


def test_a_night_at_another_daily_volume_is_written_under_its_own_name():
    from bench.window_cost import EVENTS_PER_DAY, result_name

    assert result_name(EVENTS_PER_DAY) == "window_cost"
    assert result_name(100_000) == "window_cost_100k"
