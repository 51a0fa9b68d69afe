"""Arrow record batches -> compact numpy batches of the rows the row rules keep.

The rules themselves (reasons, truncation of long histories) are `pipeline.contracts.rows`,
shared with evaluation; this module only packs what they keep for the Beam steps.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F
from pipeline.contracts import rows


@dataclass
class ItemBatch:
    item_ids: np.ndarray        # int64 [n]
    titles: np.ndarray          # bytes (object) [n]
    images: np.ndarray          # float32 [n, 2048]

    def __len__(self) -> int:
        return len(self.item_ids)

    def take(self, index: np.ndarray) -> ItemBatch:
        return ItemBatch(self.item_ids[index], self.titles[index], self.images[index])


@dataclass
class EventBatch:
    split: str
    event_ids: np.ndarray       # str (object) [n]
    item_ids: np.ndarray        # int64 [n]
    labels: np.ndarray          # int64 [n]
    hist_offsets: np.ndarray    # int64 [n + 1]
    hist_values: np.ndarray     # int64 [offsets[-1]]
    user_ids: np.ndarray        # int64 [n]
    platforms: np.ndarray       # bytes (object) [n]
    hours: np.ndarray           # int64 [n]

    def __len__(self) -> int:
        return len(self.item_ids)

    def slice(self, start: int, stop: int) -> EventBatch:
        lo, hi = self.hist_offsets[start], self.hist_offsets[stop]
        return EventBatch(self.split, self.event_ids[start:stop], self.item_ids[start:stop],
                          self.labels[start:stop], self.hist_offsets[start:stop + 1] - lo,
                          self.hist_values[lo:hi], self.user_ids[start:stop], self.platforms[start:stop],
                          self.hours[start:stop])


def context_columns(table: pa.Table, rows_: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user ids, platforms as bytes, hours) of `rows_`; nulls as -1 / b"" / -1 (mapped to 0 later)."""
    users = pc.fill_null(table.column(F.USER_ID), -1).to_numpy().astype(np.int64)[rows_]
    platforms = np.array([(p or "").encode() for p in table.column(F.PLATFORM).to_pylist()], dtype=object)[rows_]
    hours = pc.fill_null(table.column(F.HOUR), -1).to_numpy().astype(np.int64)[rows_]
    return users, platforms, hours


def validate_items(table: pa.Table) -> tuple[ItemBatch, np.ndarray, np.ndarray]:
    """(good items, rejected item ids, their reasons)."""
    checked = rows.check_items(table)
    good = checked.reasons == ""
    title_bytes = np.array([t.encode() if t is not None else b"" for t in checked.titles.to_pylist()],
                           dtype=object)
    batch = ItemBatch(checked.ids, title_bytes, checked.images).take(np.flatnonzero(good))
    return batch, checked.ids[~good], checked.reasons[~good]


def validate_events(table: pa.Table, split: str, catalog: rows.Catalog, day: dt.date,
                    repeats: np.ndarray) -> tuple[EventBatch, dict, list[dict]]:
    """(good events, counts per reason, rejected rows) of a batch of partition `day`."""
    checked = rows.check_events(table, catalog, day, repeats)
    good = checked.reasons == ""
    keep = np.flatnonzero(good)
    offsets, values = rows.take_lists(checked.hist_offsets, checked.hist_values, keep)
    batch = EventBatch(split, checked.event_ids[keep], checked.item_ids[keep], checked.labels[keep],
                       offsets, values, *context_columns(checked.table, keep))
    bad = np.flatnonzero(~good)
    counts = {r: int(c) for r, c in zip(*np.unique(checked.reasons[bad], return_counts=True))}
    counts.update(checked.note_counts(keep))       # kept rows' notes: history_truncated, ... (rows.KEPT_NOTES)
    rejected = [{"table": "events", "split": split, "event_id": checked.event_ids[i],
                 "item_id": int(checked.item_ids[i]), "label": int(checked.labels[i]),
                 "reason": checked.reasons[i]} for i in bad.tolist()]
    return batch, counts, rejected


def item_analysis_batch(items: ItemBatch, impressions: np.ndarray) -> pa.RecordBatch:
    """One analysis row per usable catalog item, in tf.Transform's list layout, weighted by how
    many training events showed it (0: never shown; it still gets its item table row)."""
    n = len(items)

    def scalar_list(values, typ):
        return pa.ListArray.from_arrays(np.arange(n + 1, dtype=np.int32), pa.array(values, typ))

    images = items.images
    zeros = np.zeros(n, dtype=np.int64)       # event-level columns: no analyzer reads them
    return pa.RecordBatch.from_arrays([
        scalar_list(items.titles.tolist(), pa.binary()),
        pa.ListArray.from_arrays(np.arange(0, n * F.IMAGE_DIM + 1, F.IMAGE_DIM, dtype=np.int32),
                                 pa.array(images.ravel(), pa.float32())),
        pa.ListArray.from_arrays(np.zeros(n + 1, dtype=np.int32), pa.array([], pa.int64())),
        scalar_list(zeros, pa.int64()),
        scalar_list(items.item_ids, pa.int64()),
        scalar_list(zeros, pa.int64()),
        scalar_list([b""] * n, pa.binary()),
        scalar_list(zeros, pa.int64()),
        scalar_list(np.asarray(impressions, np.float32), pa.float32()),
    ], names=[F.TITLE, F.IMAGE, F.HISTORY, F.LABEL, F.ITEM_ID, F.USER_ID, F.PLATFORM, F.HOUR, "impressions"])
