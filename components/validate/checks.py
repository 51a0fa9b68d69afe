"""Daily statistics, drift and the whole-partition rules, with pyarrow only.

Partitions and schemas are checked by `pipeline.contracts.inputs` (the same rules preprocess and
evaluate use); the row rules and event-id rules are `pipeline.contracts.rows` and
`pipeline.contracts.event_ids`. What is here is validate's own: per-day counts of what those
rules would reject, so that a day with too much of it fails before any Beam work starts.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import event_ids, raw, rows
from pipeline.contracts import features as F
from pipeline.contracts.inputs import Inputs

_DAY_COLUMNS = [F.EVENT_TS, F.HOUR, F.LABEL]


def day_stats(day: dt.date, files: list[Path], inputs: Inputs) -> tuple[dict, event_ids.PartitionIds]:
    """Rows, labels, repeats, misdated rows and the id digest of one day, and its ids."""
    rows_ = inputs.rows(files)
    ids = event_ids.read_partition(day, files)
    stats = {"rows": rows_, "null_labels": 0, "label_rate": 0.0, "non_binary_labels": {},
             "duplicate_event_ids": ids.repeated, "event_ts_outside_partition": 0, "hour_mismatch": 0,
             "digest": ids.digest}
    if not files:
        return stats, ids
    table = raw.normalize(pq.read_table(files, columns=_DAY_COLUMNS), "events")
    labels = table.column(F.LABEL)
    values, counts = np.unique(labels.drop_null().to_numpy(), return_counts=True)
    clicks = int(pc.sum(labels).as_py() or 0)
    labelled = rows_ - labels.null_count
    for reason, mask in rows.time_masks(table, day).items():
        stats[reason] = int(mask.sum())
    stats.update(null_labels=labels.null_count, label_rate=clicks / labelled if labelled else 0.0,
                 non_binary_labels={str(v): int(c) for v, c in zip(values.tolist(), counts.tolist())
                                    if v not in (0, 1)})
    return stats, ids


def day_problems(day: dt.date, stats: dict, bounds, max_rejected: float) -> tuple[list[str], list[str]]:
    """(warnings, problems) of one day's counts against the validate bounds."""
    n = stats["rows"] or 1
    warnings, problems = [], []
    misdated = stats["event_ts_outside_partition"] + stats["hour_mismatch"]
    checks = [
        (stats["duplicate_event_ids"], bounds.max_duplicate_fraction, "validate.max_duplicate_fraction",
         f"{stats['duplicate_event_ids']} rows repeat an earlier event_id (a re-delivered file?)"),
        (misdated, bounds.max_misdated_fraction, "validate.max_misdated_fraction",
         f"{stats['event_ts_outside_partition']} rows have event_ts outside the day and "
         f"{stats['hour_mismatch']} an hour_of_day that is not event_ts's UTC hour (a time-zone bug?)"),
        (sum(stats["non_binary_labels"].values()), max_rejected, "preprocess.max_rejected_fraction",
         "label values " + ", ".join(f"{v} ({c} rows)" for v, c in stats["non_binary_labels"].items())
         + " are not 0/1"),
    ]
    for count, bound, key, what in checks:
        if count == 0:
            continue
        line = f"events partition ds={day}: {what}: {count / n:.2%} of {stats['rows']} rows"
        if count / n > bound:
            problems.append(f"{line}, above {key}={bound:.2%}")
        else:
            warnings.append(f"{line}; those rows are rejected")
    return warnings, problems


def item_stats(files: list[Path]) -> dict[str, int]:
    ids = pq.read_table(files, columns=[F.ITEM_ID]).column(F.ITEM_ID)
    return {"items": len(ids), "distinct_ids": int(pc.count_distinct(ids).as_py())}


def drift(today: float, yesterday: float) -> float:
    """Relative change |today / yesterday - 1| (0 when both are 0, inf from 0 to >0)."""
    if yesterday == 0:
        return 0.0 if today == 0 else float("inf")
    return abs(today / yesterday - 1.0)
