"""Daily statistics, drift and the whole-partition rules, with pyarrow only.

Partitions and schemas are checked by `pipeline.contracts.inputs` (the same rules preprocess and
evaluate use); the row rules and event-id rules are `pipeline.contracts.rows` and
`pipeline.contracts.event_ids`. What is here is validate's own: per-day counts of what those
rules would reject (or keep with a note, as unknown platforms), so that a day with too much of
it fails before any Beam work starts; text that is not UTF-8 (`raw.text_problems`), named by
file; and the items snapshot as a whole: which one the run uses, a partition marked complete
without a file, a catalog that shrank overnight.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import event_ids, raw, rows
from pipeline.contracts import features as F
from pipeline.contracts.inputs import SUCCESS_MARKER, Inputs, parquet_files

_DAY_COLUMNS = [F.EVENT_TS, F.HOUR, F.LABEL, F.PLATFORM, F.USER_ID]
USERS_SHARING_WARN = 0.5     # the window's users sharing a hashed bucket with another, above which validate warns
_NAMED_VALUES = 5            # platform values named in a warning, most frequent first


def _where(table: str, day: dt.date, path: Path) -> str:
    return f"{table} partition ds={day} ({path.name})"


class DayRead(NamedTuple):
    """What validate reads of one day: its stats (recorded in the history), event ids, text
    problems and distinct users."""

    stats: dict
    ids: event_ids.PartitionIds
    problems: list[str]
    users: np.ndarray


def day_stats(day: dt.date, files: list[Path], inputs: Inputs) -> DayRead:
    """Rows, labels, repeats, misdated rows, unknown platforms and the id digest of one day; its
    ids; its text problems (bytes that are not UTF-8, per file and column); its distinct users."""
    rows_ = inputs.rows(files)
    ids = event_ids.read_partition(day, files)
    stats = {"rows": rows_, "null_labels": 0, "label_rate": 0.0, "non_binary_labels": {},
             "duplicate_event_ids": ids.repeated, "event_ts_outside_partition": 0, "hour_mismatch": 0,
             "unknown_platforms": {}, "digest": ids.digest}
    problems = _event_id_text_problems(day, files, ids)
    if not files:
        return DayRead(stats, ids, problems, np.zeros(0, np.int64))
    tables, unknown = [], []
    for path in sorted(files):
        part = pq.read_table(path, columns=_DAY_COLUMNS)
        text = raw.text_problems("events", _where("events", day, path), part)
        problems += text
        part = raw.normalize(part, "events")
        if not text:                     # the text functions refuse such bytes: counted once fixed
            platforms = part.column(F.PLATFORM)
            unknown.append(platforms.filter(pa.array(rows.unknown_platform_mask(platforms))))
        tables.append(part)
    table = pa.concat_tables(tables)
    labels = table.column(F.LABEL)
    values, counts = np.unique(labels.drop_null().to_numpy(), return_counts=True)
    clicks = int(pc.sum(labels).as_py() or 0)
    labelled = rows_ - labels.null_count
    for reason, mask in rows.time_masks(table, day).items():
        stats[reason] = int(mask.sum())
    stats.update(null_labels=labels.null_count, label_rate=clicks / labelled if labelled else 0.0,
                 non_binary_labels={str(v): int(c) for v, c in zip(values.tolist(), counts.tolist())
                                    if v not in (0, 1)},
                 unknown_platforms=_value_counts(unknown))
    users = pc.unique(table.column(F.USER_ID).drop_null()).to_numpy()
    stats["users"] = len(users)
    return DayRead(stats, ids, problems, users)


def users_sharing_buckets(users: int, buckets: int) -> float:
    """The share of `users` distinct users hashed into `buckets` buckets that share theirs with
    another, expected under uniform hashing: 1 - (1 - 1/B)^(U - 1)."""
    if users < 2 or buckets < 1:
        return 0.0
    return float(-np.expm1((users - 1) * np.log1p(-1.0 / buckets)))


def user_bucket_warning(days: list[np.ndarray], buckets: int) -> tuple[dict, list[str]]:
    """The training window's distinct users against `model.user_buckets`, and a warning when more than
    USERS_SHARING_WARN of them share a bucket (the model reads a user through their bucket)."""
    users = len(np.unique(np.concatenate(days))) if days else 0
    sharing = users_sharing_buckets(users, buckets)
    record = {"distinct": users, "buckets": buckets, "sharing_a_bucket": round(sharing, 4)}
    if sharing <= USERS_SHARING_WARN:
        return record, []
    return record, [f"the training window has {users:,} users for model.user_buckets={buckets:,}: about "
                    f"{sharing:.0%} of them share a bucket with another user, whose rows the model then reads "
                    f"as theirs (raise model.user_buckets; docs/training.md)"]


def _event_id_text_problems(day: dt.date, files: list[Path], ids: event_ids.PartitionIds) -> list[str]:
    """The distinct ids are already read: one validation of them; only when it fails is each
    file's `event_id` read again, to name the file and row."""
    try:
        ids.unique.validate(full=True)
        return []
    except pa.ArrowInvalid:
        pass
    return [problem for path in sorted(files)
            for problem in raw.text_problems("events", _where("events", day, path),
                                             pq.read_table(path, columns=[F.EVENT_ID]))]


def _value_counts(parts: list[pa.ChunkedArray]) -> dict[str, int]:
    """{value: rows}, most frequent first (Arrow counts; Python sees only the distinct values)."""
    column = pa.chunked_array([c for part in parts for c in part.chunks], pa.string())
    counted = pc.value_counts(column)
    pairs = zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())
    return dict(sorted(pairs, key=lambda pair: (-pair[1], pair[0])))


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
    unknown = stats.get("unknown_platforms") or {}
    if unknown:
        named = ", ".join(f"{v!r} ({c} rows)" for v, c in list(unknown.items())[:_NAMED_VALUES])
        more = f" and {len(unknown) - _NAMED_VALUES} more" if len(unknown) > _NAMED_VALUES else ""
        count = sum(unknown.values())
        warnings.append(f"events partition ds={day}: platform values {named}{more} are not "
                        f"{', '.join(F.PLATFORMS[:-1])} or {F.PLATFORMS[-1]}: {count / n:.2%} of {stats['rows']} "
                        f"rows, kept with the platform unknown ({rows.UNKNOWN_PLATFORM})")
    return warnings, problems


def item_stats(inputs: Inputs) -> tuple[dict, list[str]]:
    """Rows and distinct ids of the run's snapshot, and its text problems (per file and column)."""
    ids, problems = [], []
    for path in inputs.items:
        table = pq.read_table(path, columns=[F.ITEM_ID, *raw.TEXT_COLUMNS["items"]])
        problems += raw.text_problems("items", _where("items", inputs.items_date, path), table)
        ids.append(raw.normalize(table.select([F.ITEM_ID]), "items").column(F.ITEM_ID))
    column = pa.chunked_array([c for part in ids for c in part.chunks], pa.int64())
    return {"items": len(column), "distinct_ids": int(pc.count_distinct(column).as_py())}, problems


def _item_folders(raw_root: Path) -> dict[dt.date, Path]:
    """Every `items/ds=YYYY-MM-DD` folder, with or without files."""
    root = raw_root / "items"
    folders = {}
    for child in root.iterdir() if root.is_dir() else []:
        if not (child.is_dir() and child.name.startswith("ds=")):
            continue
        try:
            folders[dt.date.fromisoformat(child.name.removeprefix("ds="))] = child
        except ValueError:
            continue
    return folders


def marked_without_data(raw_root: Path, after: dt.date | None, through: dt.date,
                        used: dt.date | None) -> list[str]:
    """Items partitions dated in (after, through] whose writer marked them complete (`_SUCCESS`)
    but which hold no Parquet file: the snapshot rule skips them, so the run would silently read
    an older catalog (`used`)."""
    instead = f"the run would use ds={used}'s catalog instead" if used else "no earlier snapshot exists either"
    return [f"items partition ds={day} is marked complete ({SUCCESS_MARKER}) but holds no Parquet file "
            f"({folder}): {instead}; write its file(s), or remove the marker if the day has no snapshot"
            for day, folder in sorted(_item_folders(raw_root).items())
            if (after is None or day > after) and day <= through
            and (folder / SUCCESS_MARKER).exists() and not parquet_files(folder)]


def fallback_warning(items_date: dt.date, eval_date: dt.date) -> str | None:
    """The run reads an earlier snapshot than its own day's: worth a line in the report."""
    if items_date == eval_date:
        return None
    days = (eval_date - items_date).days
    return (f"items: no snapshot for ds={eval_date}: the run uses ds={items_date}'s catalog "
            f"({days} day{'s' if days > 1 else ''} older)")


def previous_snapshot(raw_root: Path, before: dt.date) -> tuple[dt.date, list[Path]] | None:
    """The latest items snapshot dated before `before` that holds Parquet files."""
    earlier = [(day, files) for day, folder in _item_folders(raw_root).items()
               if day < before and (files := parquet_files(folder))]
    return max(earlier) if earlier else None


def catalog_drop(raw_root: Path, items_date: dt.date, distinct: int,
                 max_drop: float) -> tuple[dict | None, list[str], list[str]]:
    """(the snapshot before: date, distinct ids, drop; warnings; problems) for a catalog that
    shrank from the snapshot before it by more than `max_drop`."""
    previous = previous_snapshot(raw_root, items_date)
    if previous is None:
        return None, [f"items partition ds={items_date}: no earlier snapshot, catalog size not compared"], []
    day, files = previous
    try:
        ids = [raw.normalize(pq.read_table(f, columns=[F.ITEM_ID]), "items").column(F.ITEM_ID) for f in files]
    except (pa.ArrowException, OSError) as err:
        return None, [f"items partition ds={day} (the snapshot before) cannot be read, catalog size not "
                      f"compared: {err}"], []
    before = int(pc.count_distinct(pa.chunked_array([c for col in ids for c in col.chunks], pa.int64())).as_py())
    drop = 1.0 - distinct / before if before else 0.0
    record = {"snapshot": str(day), "distinct_ids": before, "drop": max(drop, 0.0)}
    if drop <= max_drop:
        return record, [], []
    return record, [], [f"items partition ds={items_date}: {distinct} distinct item ids vs {before} in ds={day}, the "
                        f"snapshot before (drop {drop:.1%}), above validate.max_catalog_drop={max_drop:.0%}: a "
                        f"partial export? Events of the missing items would be rejected as unknown_item"]


def drift(today: float, yesterday: float) -> float:
    """Relative change |today / yesterday - 1| (0 when both are 0, inf from 0 to >0)."""
    if yesterday == 0:
        return 0.0 if today == 0 else float("inf")
    return abs(today / yesterday - 1.0)
