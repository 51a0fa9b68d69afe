"""The eval day's raw events joined with the item catalog, in batches of model-ready arrays.

Why raw Parquet and not the transformed eval shards: the gate scores both models through
their *raw-feature* serving signatures, exactly as TF Serving will call them, so a skew
between tf.Transform's training-time output and serving-time preprocessing shows up here
instead of in production. Rows are kept, rejected (counted by reason) and their histories
truncated by the same row rules preprocess applies (`pipeline.contracts.rows`), on the same
items snapshot (`pipeline.contracts.inputs`), so training and the gate see one population.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import event_ids, raw, rows
from pipeline.contracts import features as F
from pipeline.contracts.inputs import latest_items_snapshot
from pipeline.contracts.signature import pad_histories
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)

_ITEM_SIDE = (F.TITLE, F.CATEGORY, F.PRICE)          # slice columns taken from the catalog


class EvalDataError(RuntimeError):
    """The eval day cannot be read (missing partition or column)."""


@dataclass
class EvalBatch:
    """One batch of valid rows: serving inputs, label, resampling unit and slice values."""

    event_id: np.ndarray         # object (str) [b]
    title: np.ndarray            # object (str) [b]
    image: np.ndarray            # float32 [b, 2048]
    history: list[list[int]]     # unpadded, most recent last
    label: np.ndarray            # int64 [b]
    user: np.ndarray             # int64 [b] (also the bootstrap's resampling unit)
    item: np.ndarray             # int64 [b]
    platform: np.ndarray         # object (str) [b]
    hour: np.ndarray             # int64 [b]
    slices: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.label)

    def row(self, i: int) -> dict:
        """Row i's raw serving features as plain Python values (eval sample, REST, warmup)."""
        return {F.TITLE: str(self.title[i]), F.IMAGE: [float(x) for x in self.image[i]],
                F.HISTORY: [int(x) for x in self.history[i]], F.ITEM_ID: int(self.item[i]),
                F.USER_ID: int(self.user[i]), F.PLATFORM: str(self.platform[i]), F.HOUR: int(self.hour[i])}

    def serving_inputs(self) -> dict[str, np.ndarray]:
        return {F.TITLE: self.title, F.IMAGE: self.image, F.HISTORY: pad_histories(self.history),
                F.ITEM_ID: self.item, F.USER_ID: self.user, F.PLATFORM: self.platform, F.HOUR: self.hour}


class Catalog:
    """The items snapshot as arrays sorted by id, with the row rules' reason per item."""

    def __init__(self, table: pa.Table, extra: tuple[str, ...]):
        checked = rows.check_items(table)
        order = np.argsort(checked.ids, kind="stable")
        self.ids = checked.ids[order]
        self.titles = np.array(checked.titles.take(pa.array(order)).to_pylist(), dtype=object)
        self.images = checked.images[order]
        self.columns = {c: np.array(table.column(c).take(pa.array(order)).to_pylist(), dtype=object)
                        for c in extra}
        self.index = rows.Catalog.of(checked)

    def lookup(self, item_ids: np.ndarray) -> np.ndarray:
        """Row index per item id, -1 when the id is not in the snapshot."""
        found, pos = rows.find_sorted(item_ids, self.ids)
        return np.where(found, pos, -1)


def load_catalog(paths: RunPaths, day: dt.date, slices: tuple[str, ...]) -> Catalog:
    snapshot = latest_items_snapshot(paths.raw_root, day)
    if snapshot is None:
        raise EvalDataError(f"no item snapshot at or before {day} under {paths.raw_root / 'items'}")
    extra = tuple(s for s in slices if s in _ITEM_SIDE)
    table = pq.read_table(paths.items_dir(snapshot), columns=list(dict.fromkeys([*rows.ITEM_COLUMNS, *extra])))
    return Catalog(table, extra)


class EvalData:
    """Iterates the eval day once; `rejected` counts skipped rows by reason."""

    def __init__(self, paths: RunPaths, slices: tuple[str, ...], batch_size: int = 1024):
        self.day = paths.eval_date
        self.folder = paths.events_dir(self.day)
        self.files = sorted(self.folder.glob("*.parquet")) if self.folder.is_dir() else []
        if not self.files:
            raise EvalDataError(f"no eval events for {self.day} in {self.folder}")
        unknown = [s for s in slices if s not in _ITEM_SIDE and s not in F.EVENT_COLUMNS]
        if unknown:
            raise EvalDataError(f"eval.slices {unknown} are neither event nor item columns")
        self.slices = slices
        self.event_slices = tuple(s for s in slices if s not in _ITEM_SIDE)
        self.catalog = load_catalog(paths, self.day, slices)
        self.ids = event_ids.read_partition(self.day, self.files)
        self.batch_size = batch_size
        self.rejected: Counter[str] = Counter()
        self.rows = 0
        self.truncated = 0

    def __iter__(self) -> Iterator[EvalBatch]:
        columns = list(dict.fromkeys([*rows.MODEL_EVENT_COLUMNS, *self.event_slices]))
        for path in self.files:
            parquet = pq.ParquetFile(path)
            missing = set(columns) - set(parquet.schema_arrow.names)
            if missing:
                raise EvalDataError(f"{path}: missing columns {sorted(missing)}")
            first_row = 0
            for record_batch in parquet.iter_batches(batch_size=self.batch_size, columns=columns):
                repeats = event_ids.repeat_mask(self.ids.repeats, str(path), first_row, record_batch.num_rows)
                first_row += record_batch.num_rows
                batch = self._convert(record_batch, repeats)
                if batch is not None:
                    yield batch

    def _convert(self, rb: pa.RecordBatch, repeats: np.ndarray) -> EvalBatch | None:
        self.rows += rb.num_rows
        table = raw.normalize(rb, "events")
        checked = rows.check_events(table, self.catalog.index, self.day, repeats)
        self.rejected.update(r for r in checked.reasons if r)
        self.truncated += int(checked.truncated[checked.reasons == ""].sum())
        keep = np.flatnonzero(checked.reasons == "")
        if not len(keep):
            return None
        items = self.catalog.lookup(checked.item_ids[keep])
        offsets, values = checked.hist_offsets, checked.hist_values
        slices = {s: np.array(table.column(s).to_pylist(), dtype=object)[keep] for s in self.event_slices}
        slices.update({s: self.catalog.columns[s][items] for s in self.slices if s in _ITEM_SIDE})
        return EvalBatch(
            event_id=checked.event_ids[keep],
            title=self.catalog.titles[items],
            image=self.catalog.images[items],
            history=[values[offsets[i]:offsets[i + 1]].tolist() for i in keep.tolist()],
            label=checked.labels[keep],
            user=pc.fill_null(table.column(F.USER_ID), -1).to_numpy().astype(np.int64)[keep],
            item=checked.item_ids[keep],
            platform=np.array([p or "" for p in table.column(F.PLATFORM).to_pylist()], dtype=object)[keep],
            hour=pc.fill_null(table.column(F.HOUR), -1).to_numpy().astype(np.int64)[keep],
            slices=slices,
        )
