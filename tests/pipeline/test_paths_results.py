import datetime as dt

import pytest

from pipeline.config import load_config
from pipeline.paths import RunPaths, parse_date, safe_run_id
from pipeline.results import EvalResult, PushResult


def test_run_paths_are_keyed_by_date_and_run_id():
    config = load_config(env={}, overrides={"window.train_days": 3})
    paths = RunPaths.for_run(config, "2026-11-08", "scheduled__2026-11-08T02:00:00+00:00")
    assert paths.train_dates == [dt.date(2026, 11, 5), dt.date(2026, 11, 6), dt.date(2026, 11, 7)]
    assert paths.eval_date == dt.date(2026, 11, 8)
    assert paths.run_dir.parts[-2:] == ("2026-11-08", "scheduled__2026-11-08T02_00_00_00_00")
    assert paths.staged_dir.is_relative_to(config.data.staging_root)
    assert paths.model_base == config.data.serving_base / "recommender"


def test_bad_dates_and_run_ids_are_refused():
    with pytest.raises(ValueError, match="not YYYY-MM-DD"):
        parse_date("11/08/2026")
    with pytest.raises(ValueError, match="no usable characters"):
        safe_run_id("::")


def test_results_round_trip_and_reject_unknown_fields():
    result = EvalResult(True, [], "m.json", "r.html", 0.71, None, None, 100)
    assert EvalResult.from_dict(result.to_dict()) == result
    with pytest.raises(ValueError, match="unknown fields"):
        PushResult.from_dict({"pushed": True, "reason": "ok", "colour": "red"})
