"""The quality trend: the last N nights' evaluations side by side, so "is it getting worse?" is one
picture (evaluate's trend.png beside report.html) and one table (the report and the summary
task's log).

Read from the records every run already writes (`runs/<D>/<run_id>/eval/metrics.json` and
`push/push_record.json`), never from a separate store that could drift from them: the latest run
of each data date, newest N dates, the current run included.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pipeline.contracts.evaluation import METRICS_FILE

log = logging.getLogger(__name__)


def _auc(metrics: dict[str, Any], key: str) -> float | None:
    return (metrics.get(key) or {}).get("auc")


def night(metrics: dict[str, Any], push_record: dict[str, Any] | None) -> dict[str, Any]:
    """One row of the trend from one run's metrics.json (and its push record, if it pushed).

    A backfill night is judged against the model served now, which trained on later data: its
    "served model AUC" was scored on a day that model trained on (a flattering 0.93), so it is
    left out (`served_note` says why)."""
    pushed = push_record.get("version") if push_record and push_record.get("pushed") else None
    served_auc, note = _auc(metrics, "baseline"), None
    trained_through = metrics.get("baseline_data_date")
    if served_auc is not None and trained_through and trained_through > metrics["run_date"]:
        served_auc, note = None, f"served model of {trained_through} trained on this day: not shown"
    return {"run_date": metrics["run_date"], "run_id": metrics["run_id"],
            "candidate_auc": _auc(metrics, "candidate"), "served_auc": served_auc, "served_note": note,
            "served_version": metrics.get("baseline_version"), "popularity_auc": _auc(metrics, "popularity"),
            "blessed": bool((metrics.get("verdict") or {}).get("blessed")), "pushed_version": pushed,
            "pushed_next_day_auc": None}


def with_next_day(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pushed model's AUC on the next night's eval day, the first day users had it: the next
    night's served-model AUC, when that night was judged against this version (filled in once the
    next night has been evaluated)."""
    for row, following in zip(rows, rows[1:]):
        if row["pushed_version"] is not None and following["served_version"] == row["pushed_version"]:
            row["pushed_next_day_auc"] = following["served_auc"]
    return rows


def nights(runs_root: Path, current: dict[str, Any] | None = None, limit: int = 14) -> list[dict[str, Any]]:
    """The latest evaluation of each of the newest `limit` data dates, oldest first; `current`
    (this run's metrics, not published yet) replaces its date's row. Only the newest `limit`
    date folders are read: the history grows by one every night, the trend does not."""
    latest: dict[str, tuple[float, dict[str, Any]]] = {}
    dates = sorted(d for d in runs_root.glob("*") if d.is_dir())[-limit:]
    for path in (p for d in dates for p in d.glob(f"*/eval/{METRICS_FILE}")):
        try:
            metrics = json.loads(path.read_text())
            push_path = path.parent.parent / "push" / "push_record.json"
            row = night(metrics, json.loads(push_path.read_text()) if push_path.exists() else None)
        except (OSError, ValueError, KeyError) as err:      # a half-written or foreign file: not a night
            log.warning("trend: skipping %s: %s", path, err)
            continue
        stamp = path.stat().st_mtime
        if row["run_date"] not in latest or stamp >= latest[row["run_date"]][0]:
            latest[row["run_date"]] = (stamp, row)
    if current is not None:
        latest[current["run_date"]] = (float("inf"), night(current, None))
    return with_next_day([row for _, (_, row) in sorted(latest.items())][-limit:])


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The trend as fixed-width text lines (the summary task's log)."""
    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)

    head = "date        candidate  served (v)     popularity  verdict      pushed  next day"
    return [head] + [f"{r['run_date']}  {cell(r['candidate_auc']):>9}  {cell(r['served_auc']):>6} "
                     f"({cell(r['served_version']):>3})  {cell(r['popularity_auc']):>10}  "
                     f"{'BLESSED' if r['blessed'] else 'NOT_BLESSED':<11}  {cell(r['pushed_version']):>6}  "
                     f"{cell(r.get('pushed_next_day_auc'))}" for r in rows]
