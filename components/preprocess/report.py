"""The row-level validation report (validation_dir/rows.json) built from the pipeline's counts."""
from __future__ import annotations

from typing import Any

from pipeline.contracts.rows import EVENT_REASONS, ITEM_REASONS, KEPT_NOTES, rejected_fraction_problem


def row_report(counts: dict[str, int], max_fraction: float) -> dict[str, Any]:
    """Counts per split and reason (rejected rows; and the kept rows' notes, rows.KEPT_NOTES); a
    problem per split whose rejected fraction is too high.

    The threshold applies to each split on its own: a clean training window must not hide a
    broken eval day (or the reverse) by averaging.
    """
    reasons = (*EVENT_REASONS, *ITEM_REASONS)
    splits, problems, total = {}, [], {}
    for split in ("train", "eval"):
        rows = counts.get(f"{split}:rows", 0)
        rejected = {r: counts[f"{split}:{r}"] for r in reasons if counts.get(f"{split}:{r}")}
        fraction = sum(rejected.values()) / rows if rows else 0.0
        splits[split] = {"rows": rows, "kept": counts.get(f"{split}:kept", 0), "rejected": rejected,
                         "rejected_fraction": fraction,
                         **{note: counts.get(f"{split}:{note}", 0) for note in KEPT_NOTES}}
        for reason, n in rejected.items():
            total[reason] = total.get(reason, 0) + n
        problem = rejected_fraction_problem(split, rows, rejected, max_fraction)
        if problem:
            problems.append(problem)
    items = {r: counts[f"items:{r}"] for r in ITEM_REASONS if counts.get(f"items:{r}")}
    return {
        "max_rejected_fraction": max_fraction,
        "splits": splits,
        "items": {"rows": counts.get("items:rows", 0), "rejected": items},
        "rejected": {"events": total, "items": items},
        "passed": not problems,
        "problems": problems,
    }
