"""Which raw files a run reads, each Parquet footer read once, and the schema check over them.

One rule for every reader: the events partitions of the training window and the eval day,
and the items snapshot of the eval day or else the latest one before it (catalogs change
slowly). Validate, preprocess and evaluate all resolve their inputs here, so they never
disagree on which snapshot a run uses. A file whose footer cannot be read (truncated, not
Parquet) is a problem naming the file, not a pyarrow traceback.

A writer marks a finished partition with an empty `_SUCCESS` file (Hadoop's convention, also
written by Spark and the generator); the DAG's data-landed wait trusts only marked partitions.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.contracts import raw
from pipeline.paths import RunPaths, items_partition

log = logging.getLogger(__name__)
_DS = re.compile(r"^ds=(\d{4}-\d{2}-\d{2})$")


class ValidationError(RuntimeError):
    """Input data is missing or wrong; the message lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("input validation failed:\n  - " + "\n  - ".join(self.problems))


@dataclass(frozen=True)
class Footer:
    """What a Parquet footer says about one file: enough to check and size it without data."""

    path: Path
    rows: int
    schema: pa.Schema
    row_groups: tuple[int, ...] = ()     # rows per row group, in file order


@dataclass(frozen=True)
class Inputs:
    """The raw files one run reads: events per date (train window + eval day) and items."""

    train: dict[dt.date, list[Path]]
    eval: dict[dt.date, list[Path]]
    items_date: dt.date
    items: list[Path]
    footers: dict[Path, Footer]

    @property
    def event_files(self) -> dict[dt.date, list[Path]]:
        return {**self.train, **self.eval}

    def rows(self, files: list[Path]) -> int:
        return sum(self.footers[f].rows for f in files)

    @property
    def event_rows(self) -> int:
        return sum(self.rows(files) for files in self.event_files.values())

    @property
    def item_rows(self) -> int:
        return self.rows(self.items)

    def with_train_days(self, days) -> Inputs:
        """The same inputs with the training days cut to `days` (ISO dates or dates): what an
        incremental night transforms (pipeline/contracts/training_plan.py)."""
        keep = {str(d) for d in days}
        return replace(self, train={d: f for d, f in self.train.items() if d.isoformat() in keep})


SUCCESS_MARKER = "_SUCCESS"


def mark_landed(folder: Path) -> None:
    """Mark a partition complete: written last, after every data file is closed."""
    (folder / SUCCESS_MARKER).touch()


def unlanded_partitions(paths: RunPaths) -> list[str]:
    """The partitions a run still waits for: each events partition of the training window and
    the eval day without its marker, and the items snapshot the run would read (the same
    `latest_items_snapshot` rule validate and preprocess use) without its marker; D's own
    snapshot folder, once it exists, is waited for even before it holds a file."""
    waiting = [f"events ds={day}" for day in [*paths.train_dates, paths.eval_date]
               if not (paths.events_dir(day) / SUCCESS_MARKER).exists()]
    if paths.items_dir(paths.eval_date).is_dir():
        snapshot = paths.eval_date
    else:
        snapshot = latest_items_snapshot(paths.raw_root, paths.eval_date)
    if snapshot is None:
        waiting.append(f"items ds<={paths.eval_date}")
    elif not (paths.items_dir(snapshot) / SUCCESS_MARKER).exists():
        waiting.append(f"items ds={snapshot}")
    return waiting


def parquet_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def latest_items_snapshot(raw_root: Path, day: dt.date) -> dt.date | None:
    """The items snapshot of `day`, else the latest one before it that holds Parquet files."""
    root = raw_root / "items"
    dates = []
    for child in root.iterdir() if root.is_dir() else []:
        match = _DS.match(child.name)
        if match and parquet_files(child):
            snap = dt.date.fromisoformat(match.group(1))
            if snap <= day:
                dates.append(snap)
    if not dates:
        return None
    if max(dates) != day:
        log.warning("no items snapshot for %s: using ds=%s", day, max(dates))
    return max(dates)


def read_footer(path: Path) -> Footer:
    """The footer of one file; ValidationError naming the file when it cannot be read."""
    try:
        meta = pq.ParquetFile(path)
        groups = tuple(meta.metadata.row_group(g).num_rows for g in range(meta.metadata.num_row_groups))
        return Footer(path, meta.metadata.num_rows, meta.schema_arrow, groups)
    except (pa.ArrowException, OSError) as err:
        raise ValidationError([f"{path}: not a readable Parquet file (truncated or corrupt?): {err}"]) from err


def resolve_inputs(paths: RunPaths) -> Inputs:
    """Find every input partition and read its footers; fail listing ALL missing dates."""
    files = {day: parquet_files(paths.events_dir(day)) for day in [*paths.train_dates, paths.eval_date]}
    problems = [f"events partition ds={day} is missing or has no Parquet files ({paths.events_dir(day)})"
                for day, found in files.items() if not found]
    items_date = latest_items_snapshot(paths.raw_root, paths.eval_date)
    if items_date is None:
        problems.append(f"no items snapshot at or before ds={paths.eval_date} under {paths.raw_root / 'items'}")
    if problems:
        missing = sorted({str(d) for d, f in files.items() if not f})
        raise ValidationError([f"missing dates: {', '.join(missing) or 'none'}", *problems])
    items = parquet_files(items_partition(paths.raw_root, items_date))
    footers, unreadable = {}, []
    for path in [*(f for found in files.values() for f in found), *items]:
        try:
            footers[path] = read_footer(path)
        except ValidationError as err:
            unreadable += err.problems
    if unreadable:
        raise ValidationError(unreadable)
    return Inputs(
        train={d: files[d] for d in paths.train_dates},
        eval={paths.eval_date: files[paths.eval_date]},
        items_date=items_date,
        items=items,
        footers=footers,
    )


def check_schemas(inputs: Inputs) -> None:
    """Check every file of every partition against the contract; raise with all problems."""
    problems = []
    for day, files in sorted(inputs.event_files.items()):
        for path in files:
            problems += raw.schema_problems("events", f"events partition ds={day} ({path.name})",
                                            inputs.footers[path].schema)
    for path in inputs.items:
        problems += raw.schema_problems("items", f"items partition ds={inputs.items_date} ({path.name})",
                                        inputs.footers[path].schema)
    if problems:
        raise ValidationError(problems)


def check_inputs(paths: RunPaths) -> Inputs:
    """Partitions + schemas only (footers): validate runs it first, preprocess again before
    starting Beam (the files may have changed between the two tasks)."""
    inputs = resolve_inputs(paths)
    check_schemas(inputs)
    return inputs
