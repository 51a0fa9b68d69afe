"""The row-level validation report (validation_dir/rows.json) built from the pipeline's counts."""
from __future__ import annotations

from typing import Any

from pipeline.contracts.rows import EVENT_REASONS, ITEM_REASONS, TRUNCATED


def row_report(counts: dict[str, int], max_fraction: float) -> dict[str, Any]:
    """Counts per split and reason; a problem per split whose rejected fraction is too high.

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
                         "rejected_fraction": fraction, TRUNCATED: counts.get(f"{split}:{TRUNCATED}", 0)}
        for reason, n in rejected.items():
            total[reason] = total.get(reason, 0) + n
        if rows == 0:
            problems.append(f"{split} split has no events")
        elif fraction > max_fraction:
            detail = ", ".join(f"{r}={n}" for r, n in sorted(rejected.items()))
            problems.append(f"{split} split: {fraction:.2%} of {rows} events rejected ({detail}), "
                            f"above preprocess.max_rejected_fraction={max_fraction:.2%}")
    items = {r: counts[f"items:{r}"] for r in ITEM_REASONS if counts.get(f"items:{r}")}
    return {
        "max_rejected_fraction": max_fraction,
        "splits": splits,
        "items": {"rows": counts.get("items:rows", 0), "rejected": items},
        "rejected": {"events": total, "items": items},
        "passed": not problems,
        "problems": problems,
    }
