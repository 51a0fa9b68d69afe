"""Cheap input checks with pyarrow only: partitions exist, schemas match, daily stats and drift.

These run before any Beam worker starts, read Parquet footers and the label column only, and
fail with messages that name the table, the partition and the column, so a broken upstream
export is diagnosed in seconds instead of as a stack trace from deep inside a Beam stage.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import features as F
from pipeline.paths import RunPaths


class ValidationError(RuntimeError):
    """Input data is missing or wrong; the message lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("input validation failed:\n  - " + "\n  - ".join(self.problems))


_DS = re.compile(r"^ds=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Inputs:
    """The raw files one run reads: events per date (train window + eval day) and items."""

    train: dict[dt.date, list[Path]]
    eval: dict[dt.date, list[Path]]
    items_date: dt.date
    items: list[Path]

    @property
    def event_files(self) -> dict[dt.date, list[Path]]:
        return {**self.train, **self.eval}


def _parquet_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def latest_items_snapshot(paths: RunPaths, day: dt.date) -> dt.date | None:
    """The items snapshot of `day`, else the latest one before it (catalogs change slowly)."""
    root = paths.raw_root / "items"
    dates = []
    for child in root.iterdir() if root.is_dir() else []:
        match = _DS.match(child.name)
        if match and _parquet_files(child):
            snap = dt.date.fromisoformat(match.group(1))
            if snap <= day:
                dates.append(snap)
    return max(dates) if dates else None


def resolve_inputs(paths: RunPaths) -> Inputs:
    """Find every input partition; fail listing ALL missing dates, not just the first."""
    files = {day: _parquet_files(paths.events_dir(day)) for day in [*paths.train_dates, paths.eval_date]}
    problems = [f"events partition ds={day} is missing or has no Parquet files ({paths.events_dir(day)})"
                for day, found in files.items() if not found]
    items_date = latest_items_snapshot(paths, paths.eval_date)
    if items_date is None:
        problems.append(f"no items snapshot at or before ds={paths.eval_date} under {paths.raw_root / 'items'}")
    if problems:
        missing = sorted({str(d) for d, f in files.items() if not f})
        raise ValidationError([f"missing dates: {', '.join(missing) or 'none'}", *problems])
    return Inputs(
        train={d: files[d] for d in paths.train_dates},
        eval={paths.eval_date: files[paths.eval_date]},
        items_date=items_date,
        items=_parquet_files(paths.items_dir(items_date)),
    )


def schema_problems(table: str, partition: str, path: Path, expected: dict[str, str]) -> list[str]:
    """Missing, renamed (missing + unexpected) or mistyped columns of one Parquet file."""
    schema = pq.read_schema(path)
    found = {name: str(schema.field(name).type) for name in schema.names}
    where = f"{table} partition {partition} ({path.name})"
    missing = [c for c in expected if c not in found]
    extra = [c for c in found if c not in expected]
    problems = []
    for col in missing:
        hint = f"; found unexpected column(s) {extra} (renamed?)" if extra else ""
        problems.append(f"{where}: column {col!r} is missing{hint}")
    for col, want in expected.items():
        if col in found and found[col] != want:
            problems.append(f"{where}: column {col!r} has type {found[col]}, expected {want}")
    return problems


def check_schemas(inputs: Inputs) -> list[str]:
    """Validate every file of every partition; raise with all problems, return warnings."""
    problems = []
    for day, files in sorted(inputs.event_files.items()):
        for path in files:
            problems += schema_problems("events", f"ds={day}", path, F.EVENT_COLUMNS)
    for path in inputs.items:
        problems += schema_problems("items", f"ds={inputs.items_date}", path, F.ITEM_COLUMNS)
    if problems:
        raise ValidationError(problems)
    return []


def day_stats(files: list[Path]) -> dict[str, float | int]:
    """Row count (from footers) and label rate (label column only) of one events partition."""
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
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
