"""The quality trend from the records runs already write: latest run per date, newest N, the
current run included, broken files skipped."""
from __future__ import annotations

import json

from pipeline.contracts import trend


def _run(root, day, run_id, auc, blessed=True, pushed=None, served=None):
    folder = root / day / run_id
    (folder / "eval").mkdir(parents=True)
    metrics = {"run_date": day, "run_id": run_id, "candidate": {"auc": auc}, "baseline": served and {"auc": 0.7},
               "baseline_version": served, "popularity": {"auc": 0.6}, "verdict": {"blessed": blessed}}
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
                       "served_version": 1, "popularity_auc": 0.6, "blessed": True, "pushed_version": 2}
    assert rows[1]["popularity_auc"] is None and rows[1]["pushed_version"] is None
    lines = trend.table_lines(trend.nights(tmp_path, current))
    assert len(lines) == 4 and lines[1].startswith("2026-11-01     0.7000") and "NOT_BLESSED" not in lines[2]
