"""The eval day's raw events joined with the item catalog, in batches of model-ready arrays.

Why raw Parquet and not the transformed eval shards: the gate scores both models through
their *raw-feature* serving signatures, exactly as TF Serving will call them, so a skew
between tf.Transform's training-time output and serving-time preprocessing shows up here
instead of in production. Rows the preprocess stage would reject (unknown item, broken
embedding, empty title, history longer than the contract, null label) are skipped and
counted by reason, so both stages evaluate the same population.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from components.evaluate.scoring import pad_histories
from pipeline import features as F
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)

_ITEM_SIDE = (F.TITLE, F.CATEGORY, F.PRICE)          # slice columns taken from the catalog
_EVENT_BASE = (F.USER_ID, F.ITEM_ID, F.HISTORY, F.LABEL)


class EvalDataError(RuntimeError):
    """The eval day cannot be read (missing partition or column)."""


@dataclass
class EvalBatch:
    """One batch of valid rows: serving inputs, label, resampling unit and slice values."""

    title: np.ndarray            # object (str) [b]
    image: np.ndarray            # float32 [b, 2048]
    history: list[list[int]]     # unpadded, most recent last
    label: np.ndarray            # int64 [b]
    user: np.ndarray             # int64 [b]
    slices: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.label)

    def serving_inputs(self) -> dict[str, np.ndarray]:
        return {F.TITLE: self.title, F.IMAGE: self.image, F.HISTORY: pad_histories(self.history)}


class Catalog:
    """The items snapshot as arrays, with a per-item rejection reason (None = usable)."""

    def __init__(self, table: pa.Table, extra: tuple[str, ...]):
        ids = table.column(F.ITEM_ID).to_numpy()
        # Keep the last row of a duplicated id, like a dict join would.
        _, last = np.unique(ids[::-1], return_index=True)
        keep = np.sort(len(ids) - 1 - last)
        table = table.take(pa.array(keep))
        self.ids = table.column(F.ITEM_ID).to_numpy()
        order = np.argsort(self.ids)
        self.ids = self.ids[order]
        table = table.take(pa.array(order))
        self.titles = np.array(table.column(F.TITLE).to_pylist(), dtype=object)
        self.columns = {c: np.array(table.column(c).to_pylist(), dtype=object) for c in extra}
        self.images, self.reject = _images_and_rejects(table, self.titles)

    def lookup(self, item_ids: np.ndarray) -> np.ndarray:
        """Row index per item id, -1 when the id is not in the snapshot."""
        if not len(self.ids):
            return np.full(len(item_ids), -1)
        pos = np.clip(np.searchsorted(self.ids, item_ids), 0, len(self.ids) - 1)
        return np.where(self.ids[pos] == item_ids, pos, -1)


def _images_and_rejects(table: pa.Table, titles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    column = table.column(F.IMAGE).combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy()
    images = np.zeros((len(lengths), F.IMAGE_DIM), dtype=np.float32)
    ok_len = lengths == F.IMAGE_DIM
    flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    starts = column.offsets.to_numpy()[:-1] - column.offsets[0].as_py()
    for i in np.flatnonzero(ok_len):
        images[i] = flat[starts[i]: starts[i] + F.IMAGE_DIM]
    reject = np.full(len(lengths), None, dtype=object)
    reject[~ok_len] = "bad_embedding_length"
    reject[ok_len & ~np.isfinite(images).all(axis=1)] = "non_finite_embedding"
    empty = np.array([not t for t in titles], dtype=bool)
    reject[(reject == None) & empty] = "empty_title"  # noqa: E711 (elementwise on object array)
    return images, reject


def snapshot_dir(paths: RunPaths, day: dt.date) -> Path:
    """items/ds=D if it exists, else the latest snapshot before D (catalogs change slowly)."""
    exact = paths.items_dir(day)
    if exact.is_dir():
        return exact
    root = exact.parent
    older = sorted(p for p in root.glob("ds=*") if p.is_dir() and p.name[3:] <= day.isoformat())
    if not older:
        raise EvalDataError(f"no item snapshot at or before {day} under {root}")
    log.warning("no item snapshot for %s: using %s", day, older[-1].name)
    return older[-1]


def load_catalog(paths: RunPaths, day: dt.date, slices: tuple[str, ...]) -> Catalog:
    folder = snapshot_dir(paths, day)
    extra = tuple(s for s in slices if s in _ITEM_SIDE)
    table = pq.read_table(folder, columns=[F.ITEM_ID, F.TITLE, F.IMAGE, *extra])
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
        self.batch_size = batch_size
        self.rejected: Counter[str] = Counter()
        self.rows = 0

    def __iter__(self) -> Iterator[EvalBatch]:
        columns = list(dict.fromkeys([*_EVENT_BASE, *self.event_slices]))
        for path in self.files:
            parquet = pq.ParquetFile(path)
            missing = set(columns) - set(parquet.schema_arrow.names)
            if missing:
                raise EvalDataError(f"{path}: missing columns {sorted(missing)}")
            for record_batch in parquet.iter_batches(batch_size=self.batch_size, columns=columns):
                batch = self._convert(record_batch)
                if batch is not None:
                    yield batch

    def _convert(self, rb: pa.RecordBatch) -> EvalBatch | None:
        self.rows += rb.num_rows
        reasons = np.full(rb.num_rows, None, dtype=object)
        label_col = rb.column(F.LABEL)
        labels = pc.fill_null(label_col, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        reasons[(labels != 0) & (labels != 1)] = "null_or_bad_label"
        item_ids = pc.fill_null(rb.column(F.ITEM_ID), -1).to_numpy(zero_copy_only=False)
        rows = self.catalog.lookup(item_ids)
        reasons[(reasons == None) & (rows < 0)] = "unknown_item"  # noqa: E711
        item_reject = np.where(rows >= 0, self.catalog.reject[np.maximum(rows, 0)], None)
        reasons = np.where(reasons == None, item_reject, reasons)  # noqa: E711
        history = rb.column(F.HISTORY).to_pylist()
        too_long = np.array([h is not None and len(h) > F.MAX_HISTORY for h in history], dtype=bool)
        reasons[(reasons == None) & too_long] = "long_history"  # noqa: E711
        self.rejected.update(r for r in reasons if r is not None)
        keep = np.flatnonzero(reasons == None)  # noqa: E711
        if not len(keep):
            return None
        items = rows[keep]
        slices = {s: np.array(rb.column(s).to_pylist(), dtype=object)[keep] for s in self.event_slices}
        slices.update({s: self.catalog.columns[s][items] for s in self.slices if s in _ITEM_SIDE})
        return EvalBatch(
            title=self.catalog.titles[items],
            image=self.catalog.images[items],
            history=[list(history[i] or []) for i in keep],
            label=labels[keep],
            user=rb.column(F.USER_ID).to_numpy(zero_copy_only=False)[keep].astype(np.int64),
            slices=slices,
        )
