"""The quality trend from the records runs already write: latest run per date, newest N, the
current run included, broken files skipped."""
from __future__ import annotations

import json

from pipeline.contracts import trend


def _run(root, day, run_id, auc, blessed=True, pushed=None, served=None, served_auc=0.7, served_date=None):
    folder = root / day / run_id
    (folder / "eval").mkdir(parents=True)
    metrics = {"run_date": day, "run_id": run_id, "candidate": {"auc": auc}, "baseline": served and {"auc": served_auc},
               "baseline_version": served, "baseline_data_date": served_date, "popularity": {"auc": 0.6},
               "verdict": {"blessed": blessed}}
    (folder / "eval" / "metrics.json").write_text(json.dumps(metrics))
    if pushed:
        (folder / "push").mkdir()
        (folder / "push" / "push_record.json").write_text(json.dumps({"pushed": True, "version": pushed}))
    return metrics


def test_the_latest_run_of_each_date_newest_dates_first_broken_files_skipped(tmp_path):
    _run(tmp_path, "2026-11-01", "a", 0.70, pushed=1)
    _run(tmp_path, "2026-11-02", "old", 0.50, blessed=False)
    _run(tmp_path, "2026-11-02", "rerun", 0.72, pushed=2, served=1)       # written later: wins
    (tmp_path / "2026-11-03" / "x" / "eval").mkdir(parents=True)
    (tmp_path / "2026-11-03" / "x" / "eval" / "metrics.json").write_text("{half")
    current = {"run_date": "2026-11-04", "run_id": "now", "candidate": {"auc": 0.74}, "baseline": {"auc": 0.72},
               "baseline_version": 2, "popularity": None, "verdict": {"blessed": True}}
    rows = trend.nights(tmp_path, current, limit=2)
    assert [(r["run_date"], r["run_id"]) for r in rows] == [("2026-11-02", "rerun"), ("2026-11-04", "now")]
    assert rows[0] == {"run_date": "2026-11-02", "run_id": "rerun", "candidate_auc": 0.72, "served_auc": 0.7,
                       "served_note": None, "served_version": 1, "popularity_auc": 0.6, "blessed": True,
                       "pushed_version": 2, "pushed_next_day_auc": 0.72}      # version 2, judged on 11-04
    assert rows[1]["popularity_auc"] is None and rows[1]["pushed_version"] is None
    lines = trend.table_lines(trend.nights(tmp_path, current))
    assert len(lines) == 4 and lines[1].startswith("2026-11-01     0.7000") and "NOT_BLESSED" not in lines[2]


def test_each_pushed_model_is_shown_on_the_next_day_and_a_backfill_judged_on_its_training_days_is_not():
    """The trend plots what users got: the model pushed on night D, scored on D+1 (the next
    night's served-model AUC). A backfill night judged against a model that trained on it showed
    a served AUC of 0.926: left out, with the reason."""
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp())
    _run(root, "2026-11-05", "n1", 0.71, pushed=1)
    _run(root, "2026-11-06", "n2", 0.69, pushed=2, served=1, served_auc=0.73, served_date="2026-11-05")
    _run(root, "2026-11-07", "n3", 0.70, blessed=False, served=2, served_auc=0.66, served_date="2026-11-06")
    _run(root, "2026-11-02", "backfill", 0.80, blessed=False, served=2, served_auc=0.926, served_date="2026-11-06")
    rows = {r["run_date"]: r for r in trend.nights(root)}
    assert rows["2026-11-05"]["pushed_next_day_auc"] == 0.73
    assert rows["2026-11-06"]["pushed_next_day_auc"] == 0.66        # the pushed candidate was worse the next day
    assert rows["2026-11-07"]["pushed_next_day_auc"] is None          # not pushed
    assert rows["2026-11-02"]["served_auc"] is None
    assert rows["2026-11-02"]["served_note"] == "served model of 2026-11-06 trained on this day: not shown"
    assert "0.7300" in trend.table_lines(list(rows.values()))[2]
