"""`run(config, paths) -> ValidateResult`: cheap pyarrow checks of a run's raw inputs.

It checks that the training-window and eval-day events partitions and an items snapshot exist
(listing every missing date), that every file's schema matches the raw contract
(`pipeline/contracts/raw.py`), that its text columns hold UTF-8, and compares each day's row
count and label rate with the previous day's (from `paths.validation_history_dir`).
Whole-partition rules fail a day early: repeated event ids, rows dated outside their day, label
values other than 0/1 (above their bounds), an eval day that overlaps the training window or has
fewer rows than `eval.min_rows`, a day whose event ids equal another day's (its digest is
recorded in the report and the history). The items snapshot as a whole: a partition marked
complete without a Parquet file fails, a catalog that shrank by more than
`validate.max_catalog_drop` from the snapshot before fails naming both sizes, and a run that
reads an earlier snapshot than its own day's says so in the report (`items_fallback` and a
warning). Row-level rejects (NaN images, unknown items, ...) happen inside the Beam preprocess
step, which adds its counts to the same folder.

Report: `paths.validation_dir/report.json`; per-date stats history:
`paths.validation_history_dir/ds=YYYY-MM-DD.json` (written only when validation passes, so a
bad day never becomes tomorrow's baseline).
"""
from __future__ import annotations

import datetime as dt
import json
import logging

from components.validate.checks import (
    catalog_drop,
    day_problems,
    day_stats,
    drift,
    fallback_warning,
    item_stats,
    marked_without_data,
    user_bucket_warning,
)
from pipeline.config import Config
from pipeline.contracts import event_ids
from pipeline.contracts.inputs import ValidationError, check_inputs, latest_items_snapshot
from pipeline.fsutil import write_json_atomic
from pipeline.paths import RunPaths
from pipeline.results import ValidateResult

log = logging.getLogger(__name__)


def _history_path(paths: RunPaths, day: dt.date):
    return paths.validation_history_dir / f"ds={day.isoformat()}.json"


def _baseline(paths: RunPaths, day: dt.date, stats: dict) -> dict | None:
    """Stats of the day before `day`: from this window if present, else from the history."""
    prev = day - dt.timedelta(days=1)
    if prev in stats:
        return stats[prev]
    path = _history_path(paths, prev)
    return json.loads(path.read_text()) if path.exists() else None


def _drift_checks(config: Config, paths: RunPaths, stats: dict) -> tuple[list[str], list[str], dict]:
    bounds_cfg = config.validate
    bounds = {"label_rate": (bounds_cfg.warn_label_rate_drift, bounds_cfg.max_label_rate_drift),
              "rows": (bounds_cfg.warn_row_count_drift, bounds_cfg.max_row_count_drift)}
    warnings, failures, drifts = [], [], {}
    for day in sorted(stats):
        base = _baseline(paths, day, stats)
        if base is None:
            warnings.append(f"ds={day}: no previous-day report, drift not checked")
            continue
        drifts[str(day)] = {}
        for metric, (warn, fail) in bounds.items():
            value = drift(stats[day][metric], base[metric])
            drifts[str(day)][metric] = value
            msg = (f"ds={day}: {metric} {stats[day][metric]:.4g} vs {base[metric]:.4g} the day before "
                   f"(drift {value:.1%})")
            if value > fail:
                failures.append(f"{msg} exceeds the bound {fail:.0%}")
            elif value > warn:
                warnings.append(f"{msg} exceeds the warning level {warn:.0%}")
    return warnings, failures, drifts


def run(config: Config, paths: RunPaths) -> ValidateResult:
    """Check the run's inputs; write the report; raise ValidationError on any failure."""
    report_path = paths.validation_dir / "report.json"
    try:
        inputs = check_inputs(paths)
    except ValidationError as err:
        snapshot = latest_items_snapshot(paths.raw_root, paths.eval_date)
        problems = [*err.problems, *marked_without_data(paths.raw_root, snapshot, paths.eval_date, snapshot)]
        write_json_atomic(report_path, {"run_date": paths.ds, "run_id": paths.run_id, "passed": False,
                                        "warnings": [], "problems": problems})
        raise ValidationError(problems) from err
    problems = marked_without_data(paths.raw_root, inputs.items_date, paths.eval_date, inputs.items_date)
    fallback = fallback_warning(inputs.items_date, paths.eval_date)
    items, text_problems = item_stats(inputs)
    problems += text_problems
    if items["distinct_ids"] != items["items"]:
        problems.append(f"items partition ds={inputs.items_date}: {items['items'] - items['distinct_ids']} "
                        f"duplicate item_id rows")
    items["previous"], catalog_warnings, catalog_problems = catalog_drop(
        paths.raw_root, inputs.items_date, items["distinct_ids"], config.validate.max_catalog_drop)
    problems += catalog_problems
    read = {day: day_stats(day, files, inputs) for day, files in sorted(inputs.event_files.items())}
    stats = {day: r.stats for day, r in read.items()}
    problems += [p for r in read.values() for p in r.problems]
    users, user_warnings = user_bucket_warning([read[d].users for d in inputs.train], config.model.user_buckets)
    problems += [f"events partition ds={d}: no rows" for d, s in stats.items() if s["rows"] == 0]
    eval_rows = stats[paths.eval_date]["rows"]
    if 0 < eval_rows < config.eval.min_rows:
        problems.append(f"eval day ds={paths.eval_date}: {eval_rows} rows, below eval.min_rows={config.eval.min_rows}: "
                        f"too few to judge a model (evaluate would refuse it after training)")
    warnings, failures, drifts = _drift_checks(config, paths, stats)
    warnings = [*([fallback] if fallback else []), *catalog_warnings, *user_warnings, *warnings]
    problems += failures
    for day, day_stat in stats.items():
        day_warnings, day_failures = day_problems(day, day_stat, config.validate,
                                                  config.preprocess.max_rejected_fraction)
        warnings += day_warnings
        problems += day_failures
    problems += event_ids.novelty_problems(read[paths.eval_date].ids, [read[d].ids for d in inputs.train],
                                           config.validate.max_eval_overlap, event_ids.earlier_digests(paths))
    report = {
        "run_date": paths.ds, "run_id": paths.run_id, "passed": not problems,
        "items_snapshot": str(inputs.items_date), "items_fallback": fallback, "items": items,
        "days": {str(d): s for d, s in stats.items()}, "users": users, "drift": drifts,
        "warnings": warnings, "problems": problems,
    }
    write_json_atomic(report_path, report)
    for w in warnings:
        log.warning("validate: %s", w)
    if problems:
        raise ValidationError(problems)
    for day, day_stat in stats.items():
        write_json_atomic(_history_path(paths, day), {**day_stat, "run_id": paths.run_id})
    return ValidateResult(
        run_date=paths.ds,
        train_dates=[str(d) for d in paths.train_dates],
        rows={str(d): s["rows"] for d, s in stats.items()},
        label_rate={str(d): s["label_rate"] for d, s in stats.items()},
        report_path=str(report_path),
        warnings=warnings,
    )
