"""Daily statistics and drift, with pyarrow only: row counts from the footers, the label column.

Partitions and schemas are checked by `pipeline.contracts.inputs` (the same rules preprocess and
evaluate use); what is here is validate's own: the day-over-day comparison.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts.inputs import Inputs


def day_stats(files: list[Path], inputs: Inputs) -> dict[str, float | int]:
    """Row count (from the footers already read) and label rate (label column only) of one day."""
    rows = inputs.rows(files)
    labels = pq.read_table(files, columns=[F.LABEL]).column(F.LABEL) if files else None
    clicks = int(pc.sum(labels).as_py() or 0) if labels is not None else 0
    nulls = labels.null_count if labels is not None else 0
    labelled = rows - nulls
    return {"rows": rows, "null_labels": nulls, "label_rate": clicks / labelled if labelled else 0.0}


def item_stats(files: list[Path]) -> dict[str, int]:
    ids = pq.read_table(files, columns=[F.ITEM_ID]).column(F.ITEM_ID)
    return {"items": len(ids), "distinct_ids": int(pc.count_distinct(ids).as_py())}


def drift(today: float, yesterday: float) -> float:
    """Relative change |today / yesterday - 1| (0 when both are 0, inf from 0 to >0)."""
    if yesterday == 0:
        return 0.0 if today == 0 else float("inf")
    return abs(today / yesterday - 1.0)
