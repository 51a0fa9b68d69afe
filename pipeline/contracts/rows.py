"""The row rules: which raw rows a model may learn from or be judged on, and why a row is not.

Preprocess (inside Beam) and evaluate (on the eval day's Parquet) both call these functions,
so training and the gate see the same population. Vectorized over Arrow tables: per-row
Python would cost more than the rest of the work.

Items: `null_item_id`, `duplicate_item_id` (every row of an id that appears twice: which one
is right is unknown), `image_wrong_length` (not IMAGE_DIM floats, or null), `image_not_finite`,
`empty_title` (null, empty or whitespace only). Events: `null_event_id`, `duplicate_event_id`
(a later row of an id already seen in the partition: `pipeline.contracts.event_ids` finds them,
the first copy is kept), `null_label`, `label_not_binary`, `invalid_user_id` (null or < 1),
`event_ts_outside_partition` (null, or not within the partition's UTC day: an upstream time-zone
bug or a late file), `hour_mismatch` (`hour_of_day` is not the UTC hour of `event_ts`),
`null_history_id` (a null inside the history the model reads: what the user did there is
unknown, and it must not become the padding id mid-sequence), `unknown_item` (not in the
snapshot), else the reason of their item. docs/data.md lists them.

Counted but KEPT (`KEPT_NOTES`, per split next to the rejected counts): histories longer than
MAX_HISTORY keep their most recent MAX_HISTORY ids (`history_truncated`): the model reads only
the most recent ids anyway, and dropping those rows would bias both training and the gate
against the most active users. A history that holds an id no catalog row has
(`history_unknown_item`: an item delisted since, or an id from elsewhere) is what the user did;
the model reads that id as an unknown item. A `platform` value other than ios/android/web
(`unknown_platform`, after the ASCII lower-casing and trimming the transform applies) is read as
"platform unknown", like a null one; the row's item and label are sound. Null values
(platform, hour) are context left out and not counted.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F
from pipeline.contracts import raw

ITEM_REASONS = ("null_item_id", "duplicate_item_id", "image_wrong_length", "image_not_finite", "empty_title")
EVENT_REASONS = ("null_event_id", "duplicate_event_id", "null_label", "label_not_binary", "invalid_user_id",
                 "event_ts_outside_partition", "hour_mismatch", "null_history_id", "unknown_item")
TRUNCATED = "history_truncated"
HISTORY_UNKNOWN_ITEM = "history_unknown_item"
UNKNOWN_PLATFORM = "unknown_platform"
KEPT_NOTES = (TRUNCATED, HISTORY_UNKNOWN_ITEM, UNKNOWN_PLATFORM)    # counted on kept rows, never rejected
ITEM_COLUMNS = (F.ITEM_ID, F.TITLE, F.IMAGE)                    # what the item rules read
EVENT_COLUMNS = (F.EVENT_ID, F.EVENT_TS, F.USER_ID, F.ITEM_ID, F.HISTORY, F.HOUR, F.LABEL,
                 F.PLATFORM)                                    # the event rules'
# What preprocess and evaluate read of an event: the rules' columns, which are the model's event features.
MODEL_EVENT_COLUMNS = EVENT_COLUMNS
_DAY_US = 86_400_000_000
_HOUR_US = 3_600_000_000


def first_reason(masks: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Per row, the first failing reason in `masks` order ('' when the row is fine)."""
    reasons = np.full(n, "", dtype=object)
    for reason, bad in reversed(list(masks.items())):
        reasons[bad] = reason
    return reasons


def list_parts(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(offsets int64 [n+1], flat values) of a list column, null lists as empty ones."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, pc.list_flatten(arr)          # skips null lists, so it lines up with `lengths`


def take_lists(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lists of `rows` only, as (offsets, values)."""
    lengths = np.diff(offsets)[rows]
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    starts = np.repeat(offsets[rows], lengths)
    within = np.arange(new_offsets[-1]) - np.repeat(new_offsets[:-1], lengths)
    return new_offsets, values[starts + within]


def keep_recent(offsets: np.ndarray, values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep the last `limit` ids of each list: (offsets, values, truncated mask)."""
    lengths = np.diff(offsets)
    long = lengths > limit
    if not long.any():
        return offsets, values, long
    kept = np.minimum(lengths, limit)
    new_offsets = np.zeros_like(offsets)
    np.cumsum(kept, out=new_offsets[1:])
    starts = np.repeat(offsets[1:] - kept, kept)
    within = np.arange(new_offsets[-1]) - np.repeat(new_offsets[:-1], kept)
    return new_offsets, values[starts + within], long


@dataclass
class CheckedItems:
    """An items table with a reason per row ('' = usable)."""

    ids: np.ndarray          # int64 [n], -1 where null
    titles: pa.Array         # string [n]
    images: np.ndarray       # float32 [n, IMAGE_DIM], zeros where the length is wrong
    reasons: np.ndarray      # object [n]


def check_items(table: pa.Table) -> CheckedItems:
    table = raw.normalize(table, "items")
    n = table.num_rows
    ids = pc.fill_null(table.column(F.ITEM_ID), -1).to_numpy().astype(np.int64)
    offsets, flat = list_parts(table.column(F.IMAGE))
    lengths = np.diff(offsets)
    right_len = lengths == F.IMAGE_DIM
    values = pc.fill_null(flat, np.nan).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    images = np.zeros((n, F.IMAGE_DIM), dtype=np.float32)
    images[right_len] = values[right_len[np.repeat(np.arange(n), lengths)]].reshape(-1, F.IMAGE_DIM)
    titles = table.column(F.TITLE).combine_chunks()
    empty = pc.fill_null(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(titles)), 0), True)
    unique, counts = np.unique(ids, return_counts=True)
    reasons = first_reason({
        "null_item_id": ids < 0,
        "duplicate_item_id": np.isin(ids, unique[counts > 1]),
        "image_wrong_length": ~right_len,
        "image_not_finite": right_len & ~np.isfinite(images).all(axis=1),
        "empty_title": empty.to_numpy(zero_copy_only=False),
    }, n)
    return CheckedItems(ids, titles, images, reasons)


def find_sorted(values: np.ndarray, sorted_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found mask, position in sorted_ids) of each value."""
    if len(sorted_ids) == 0:
        return np.zeros(len(values), dtype=bool), np.zeros(len(values), dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_ids, values), len(sorted_ids) - 1)
    return sorted_ids[pos] == values, pos


@dataclass
class Catalog:
    """Sorted usable item ids, sorted rejected ids and their reasons: all events need to know."""

    good: np.ndarray
    bad: np.ndarray
    bad_reasons: np.ndarray

    @classmethod
    def merge(cls, parts: list[Catalog]) -> Catalog:
        """One catalog from per-chunk ones; an id usable in two chunks is a duplicate."""
        good = np.concatenate([p.good for p in parts] or [np.zeros(0, np.int64)])
        unique, counts = np.unique(good, return_counts=True)
        dup = unique[counts > 1]
        bad = np.concatenate([*(p.bad for p in parts), dup])
        reasons = np.concatenate([*(p.bad_reasons for p in parts), np.full(len(dup), "duplicate_item_id", object)])
        order = np.argsort(bad, kind="stable")
        return cls(unique[counts == 1], bad[order], reasons[order].astype(object))

    @classmethod
    def of(cls, items: CheckedItems) -> Catalog:
        ok = items.reasons == ""
        order = np.argsort(items.ids[~ok], kind="stable")
        return cls(np.sort(items.ids[ok]), items.ids[~ok][order], items.reasons[~ok][order])

    def holds(self, item_ids: np.ndarray) -> np.ndarray:
        """Per id: does the snapshot have a row of it (usable or rejected)?"""
        return find_sorted(item_ids, self.good)[0] | find_sorted(item_ids, self.bad)[0]

    def event_reasons(self, item_ids: np.ndarray) -> np.ndarray:
        """'' for a usable item, its item's reason for a rejected one, else `unknown_item`."""
        known, _ = find_sorted(item_ids, self.good)
        is_bad, pos = find_sorted(item_ids, self.bad)
        reasons = np.where(known, "", "unknown_item").astype(object)
        if len(self.bad):
            reasons[is_bad] = self.bad_reasons[pos[is_bad]]
        return reasons


@dataclass
class CheckedEvents:
    """An events table with a reason per row and histories cut to the most recent MAX_HISTORY."""

    event_ids: np.ndarray        # object (str) [n]
    item_ids: np.ndarray         # int64 [n]
    labels: np.ndarray           # int64 [n] (0 where null)
    reasons: np.ndarray          # object [n]
    hist_offsets: np.ndarray     # int64 [n + 1]
    hist_values: np.ndarray      # int64
    truncated: np.ndarray        # bool [n]
    table: pa.Table              # the normalized table, for the columns the rules do not read
    notes: dict[str, np.ndarray] = field(default_factory=dict)   # KEPT_NOTES -> bool [n]

    def note_counts(self, rows_: np.ndarray) -> dict[str, int]:
        """How many of `rows_` (the kept ones) carry each of KEPT_NOTES."""
        return {note: int(self.notes[note][rows_].sum()) for note in KEPT_NOTES}


def time_masks(table: pa.Table, day: dt.date) -> dict[str, np.ndarray]:
    """`event_ts_outside_partition` and `hour_mismatch` of a normalized events table whose
    partition is `day` (a null hour is context left out, not a contradiction)."""
    micros = pc.fill_null(pc.cast(table.column(F.EVENT_TS), pa.int64()), -1).to_numpy().astype(np.int64)
    start = (day - dt.date(1970, 1, 1)).days * _DAY_US
    outside = (micros < start) | (micros >= start + _DAY_US) | table.column(F.EVENT_TS).is_null().to_numpy(
        zero_copy_only=False)
    hours = pc.fill_null(table.column(F.HOUR), -1).to_numpy().astype(np.int64)
    mismatch = ~outside & (hours >= 0) & (hours != (micros - start) // _HOUR_US)
    return {"event_ts_outside_partition": outside, "hour_mismatch": mismatch}


def unknown_platform_mask(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Rows whose `platform` is given (not null, not blank) but is none of F.PLATFORMS as the
    transform reads it (ASCII lower-cased, whitespace trimmed: " iOS" is ios)."""
    read = pc.ascii_lower(pc.ascii_trim_whitespace(column))
    given = pc.fill_null(pc.not_equal(read, ""), False)
    known = pc.is_in(read, value_set=pa.array(F.PLATFORMS, pa.string()))
    return pc.and_(given, pc.invert(known)).to_numpy(zero_copy_only=False).astype(bool)


def _rows_with(offsets: np.ndarray, element: np.ndarray) -> np.ndarray:
    """Per list: does any of its elements carry the flag `element` (bool, one per value)?"""
    owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return np.bincount(owner[element], minlength=len(offsets) - 1) > 0


def check_events(table: pa.Table, catalog: Catalog, day: dt.date, repeats: np.ndarray) -> CheckedEvents:
    """The reasons of every row of one events partition's batch: `day` is the partition's date,
    `repeats` flags the rows repeating an earlier event id (event_ids.repeat_mask)."""
    table = raw.normalize(table, "events")
    event_ids = table.column(F.EVENT_ID)
    items = pc.fill_null(table.column(F.ITEM_ID), -1).to_numpy().astype(np.int64)
    labels_col = table.column(F.LABEL)
    labels = pc.fill_null(labels_col, 0).to_numpy().astype(np.int64)
    users = pc.fill_null(table.column(F.USER_ID), 0).to_numpy().astype(np.int64)
    # The history as the model reads it (its most recent MAX_HISTORY ids); its nulls are tracked
    # beside it, so a null is a reason, never an id.
    raw_offsets, flat = list_parts(table.column(F.HISTORY))
    hist = pc.fill_null(flat, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    null = flat.is_null().to_numpy(zero_copy_only=False).astype(np.int64)
    offsets, hist, truncated = keep_recent(raw_offsets, hist, F.MAX_HISTORY)
    _, null, _ = keep_recent(raw_offsets, null, F.MAX_HISTORY)
    null = null.astype(bool)
    reasons = first_reason({
        "null_event_id": event_ids.is_null().to_numpy(zero_copy_only=False),
        "duplicate_event_id": np.asarray(repeats, dtype=bool),
        "null_label": labels_col.is_null().to_numpy(zero_copy_only=False),
        "label_not_binary": (labels != 0) & (labels != 1),
        "invalid_user_id": users < 1,
        **time_masks(table, day),
        "null_history_id": _rows_with(offsets, null),
    }, table.num_rows)
    reasons = np.where(reasons == "", catalog.event_reasons(items), reasons)
    notes = {TRUNCATED: truncated,
             HISTORY_UNKNOWN_ITEM: _rows_with(offsets, ~null & (hist != 0) & ~catalog.holds(hist)),
             UNKNOWN_PLATFORM: unknown_platform_mask(table.column(F.PLATFORM))}
    return CheckedEvents(np.asarray(event_ids.to_pylist(), dtype=object), items, labels, reasons,
                         offsets, hist, truncated, table, notes)


def rejected_fraction_problem(split: str, rows: int, rejected: dict[str, int], max_fraction: float) -> str | None:
    """The one bound on rejected rows, for preprocess (per split) and evaluate (the eval day, also
    when it runs alone): None when within `preprocess.max_rejected_fraction`, else what is wrong."""
    if rows == 0:
        return f"{split} split has no events"
    fraction = sum(rejected.values()) / rows
    if fraction <= max_fraction:
        return None
    detail = ", ".join(f"{r}={n}" for r, n in sorted(rejected.items()))
    return (f"{split} split: {fraction:.2%} of {rows} events rejected ({detail}), "
            f"above preprocess.max_rejected_fraction={max_fraction:.2%}")
