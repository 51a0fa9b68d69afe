"""Beam DoFns and composite transforms of the preprocess pipeline (see pipeline.py for the graph).

Everything moves through Beam as record batches / numpy chunks, never one element per row:
Beam's per-element overhead on the DirectRunner would otherwise dominate (docs/benchmarks.md).
"""
from __future__ import annotations

import copy
import datetime as dt
import functools
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from components.preprocess import batches as B
from components.preprocess import examples as E
from components.preprocess import transform as T
from pipeline.contracts import event_ids, rows
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT

ITEM_CHUNK = 512          # rows per transform call: bounds the [rows, 2048] float64 temporaries
EVENT_CHUNK = 16384       # rows per TF call: enough to amortize TF's per-call overhead (docs/benchmarks.md)


@dataclass
class EventChunk:
    """Examples on their way to a shard. Their bytes live in one buffer (+ offsets), not one
    bytes object per example: less per example in the shuffle and pickling per chunk."""

    keys: np.ndarray          # uint64 event hash: shard = key % shards, order within a shard
    buffer: bytes             # the serialized tf.Examples, back to back
    offsets: np.ndarray       # int64 [n + 1] into buffer

    @classmethod
    def pack(cls, keys: np.ndarray, payloads: list[bytes]) -> EventChunk:
        offsets = np.zeros(len(payloads) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in payloads], out=offsets[1:])
        return cls(keys, b"".join(payloads), offsets)

    def payloads(self) -> list[bytes]:
        buf, ends = self.buffer, self.offsets.tolist()
        return [buf[a:b] for a, b in zip(ends[:-1], ends[1:])]

    @classmethod
    def grouped(cls, group_by: np.ndarray, keys: np.ndarray, payloads: list[bytes]):
        """(group value, chunk of that group's rows) for each distinct value: one stable sort,
        O(n log n), instead of one pass over all rows per distinct value."""
        order = np.argsort(group_by, kind="stable")
        values, starts = np.unique(group_by[order], return_index=True)
        for value, idx in zip(values.tolist(), np.split(order, starts[1:])):
            yield value, cls.pack(keys[idx], [payloads[i] for i in idx.tolist()])


def counter(name: str):
    return beam.metrics.Metrics.counter("preprocess", name)


class ValidateItems(beam.DoFn):
    """Arrow items table -> good ItemBatch chunks; 'rejected' rows; 'catalog' ids; 'counts'."""

    def process(self, element: tuple[str, pa.Table]):
        _, table = element
        good, bad_ids, reasons = B.validate_items(table)
        counts = {"items:rows": table.num_rows}
        for reason in reasons.tolist():
            counts[f"items:{reason}"] = counts.get(f"items:{reason}", 0) + 1
            counter(f"items_{reason}").inc()
        for item_id, reason in zip(bad_ids.tolist(), reasons.tolist()):
            yield beam.pvalue.TaggedOutput("rejected", {"table": "items", "item_id": item_id, "reason": reason})
        yield beam.pvalue.TaggedOutput("catalog", rows.Catalog(np.sort(good.item_ids), bad_ids, reasons))
        yield beam.pvalue.TaggedOutput("counts", counts)
        for start in range(0, len(good), ITEM_CHUNK):
            yield good.take(np.arange(start, min(start + ITEM_CHUNK, len(good))))


class MergeCatalog(beam.CombineFn):
    def create_accumulator(self):
        return []

    def add_input(self, acc, index):
        acc.append(index)
        return acc

    def merge_accumulators(self, accs):
        return [x for acc in accs for x in acc]

    def extract_output(self, acc):
        return rows.Catalog.merge(acc)


class ReadRowGroups(beam.DoFn):
    """(file, row group, its first row) -> (file, first row, Arrow table): the row positions the
    duplicate rule needs (event_ids.repeat_mask), which Beam's Parquet reader does not give."""

    def __init__(self, columns: tuple[str, ...]):
        self.columns = list(columns)

    def process(self, element: tuple[str, int, int]):
        path, group, first_row = element
        with FileSystems.open(path) as handle:
            yield path, first_row, pq.ParquetFile(handle).read_row_group(group, columns=self.columns)


class ValidateEvents(beam.DoFn):
    """(file, first row, Arrow events table) -> good EventBatch chunks; 'rejected' rows; 'counts'."""

    def __init__(self, partition_of: dict[str, tuple[str, dt.date]], repeats: dict[str, np.ndarray]):
        self.partition_of = partition_of      # file path -> ("train" | "eval", partition date)
        self.repeats = repeats                # file path -> row positions repeating an earlier id

    def process(self, element: tuple[str, int, pa.Table], catalog: rows.Catalog):
        filename, first_row, table = element
        split, day = self.partition_of[filename]
        repeats = event_ids.repeat_mask(self.repeats, filename, first_row, table.num_rows)
        batch, counts, rejected = B.validate_events(table, split, catalog, day, repeats)
        out = {f"{split}:{k}": v for k, v in counts.items()}
        out[f"{split}:rows"] = table.num_rows
        out[f"{split}:kept"] = len(batch)
        for key, value in counts.items():
            counter(f"{split}_{key}").inc(value)
        yield beam.pvalue.TaggedOutput("counts", out)
        for row in rejected:
            yield beam.pvalue.TaggedOutput("rejected", row)
        for start in range(0, len(batch), EVENT_CHUNK):
            yield batch.slice(start, min(start + EVENT_CHUNK, len(batch)))


class SumCounts(beam.CombineFn):
    """Adds dicts of counts (also used for impressions: {item_id: count})."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, counts):
        for key, value in counts.items():
            acc[key] = acc.get(key, 0) + value
        return acc

    def merge_accumulators(self, accs):
        out = {}
        for acc in accs:
            self.add_input(out, acc)
        return out

    def extract_output(self, acc):
        return acc


def batch_window_counts(batch: B.EventBatch) -> dict[int, np.ndarray]:
    """{item_id: [impressions, clicks]} of a training batch: the analysis weights and the item
    table's window statistics (contracts/item_table.py). Eval events never count."""
    if batch.split != "train":
        return {}
    ids, inverse = np.unique(batch.item_ids, return_inverse=True)
    shown = np.bincount(inverse, minlength=len(ids))
    clicks = np.bincount(inverse, weights=batch.labels, minlength=len(ids)).astype(np.int64)
    return {i: np.array(pair, np.int64) for i, pair in zip(ids.tolist(), zip(shown, clicks, strict=True), strict=True)}


def analysis_rows(items: B.ItemBatch, counts: dict[int, np.ndarray]):
    """Every usable item, weighted by its training impressions (transform.py says why all)."""
    if len(items):
        weights = np.array([counts[i][0] if i in counts else 0 for i in items.item_ids.tolist()],
                           dtype=np.float32)
        yield B.item_analysis_batch(items, weights)


def analysis_schema() -> pa.Schema:
    empty = B.ItemBatch(np.zeros(0, np.int64), np.zeros(0, object), np.zeros((0, F.IMAGE_DIM), np.float32))
    return B.item_analysis_batch(empty, np.zeros(0, np.float32)).schema


@functools.lru_cache(maxsize=2)
def _saved_model(transform_dir: str):
    import tensorflow_transform as tft
    from tensorflow_transform.saved import saved_transform_io_v2

    saved = tft.TFTransformOutput(transform_dir).transform_savedmodel_dir
    return saved_transform_io_v2.SavedModelLoader(saved)


@functools.lru_cache(maxsize=4)
def _loader(transform_dir: str, inputs: tuple[str, ...], outputs: tuple[str, ...]):
    """The transform graph, finalized for a partial set of inputs (one load per process).

    `finalize` builds a function over just `inputs`; unfed inputs get batch-1 dummies, so an
    event batch does not pay for a [batch, 2048] dummy image going through the z-score.
    Copies of one loaded SavedModel share the graph; each holds its own finalized function.
    """
    loader = copy.copy(_saved_model(transform_dir))
    loader.finalize(inputs, outputs)
    return loader


class TransformItems(beam.DoFn):
    """ItemBatch -> the same items transformed, as rows of the run's item table (Arrow tables,
    contracts/item_table.py): the only place item content is written."""

    def __init__(self, transform_dir: str):
        self.transform_dir = transform_dir

    def process(self, items: B.ItemBatch, _ready, catalog: rows.Catalog, counts: dict[int, np.ndarray]):
        import tensorflow as tf

        loader = _loader(self.transform_dir, (*T.ITEM_INPUTS, F.ITEM_ID), T.ITEM_OUTPUTS)
        out = loader.apply_transform_model({F.TITLE: tf.constant(items.titles.astype(bytes)),
                                            F.IMAGE: tf.constant(items.images),
                                            F.ITEM_ID: tf.constant(items.item_ids)})
        yield item_table_rows(items.item_ids, catalog.good, {k: v.numpy() for k, v in out.items()}, counts)


def item_table_rows(item_ids: np.ndarray, catalog_ids: np.ndarray, out: dict[str, np.ndarray],
                    counts: dict[int, np.ndarray]) -> pa.Table:
    """Transformed items as item-table rows, with their training-window counts. An item the
    merged catalog refused (an id used twice across chunks) gets no row."""
    keep = np.isin(item_ids, catalog_ids)
    window = np.array([counts.get(i, (0, 0)) for i in item_ids[keep].tolist()], np.int64).reshape(-1, 2)
    return IT.from_arrays({IT.ITEM_ID: item_ids[keep], IT.ROW: out[F.TARGET_ROW][keep],
                           IT.EMBEDDING_ID: out[F.TARGET_ID][keep], IT.TITLE_IDS: out[F.TITLE_IDS][keep],
                           IT.IMAGE: out[F.IMAGE_Z][keep], IT.SHOWN: window[:, 0], IT.CLICKS: window[:, 1]})


def _history_sparse(batch: B.EventBatch):
    import tensorflow as tf

    lengths = np.diff(batch.hist_offsets)
    rows = np.repeat(np.arange(len(batch)), lengths)
    cols = np.arange(len(batch.hist_values)) - np.repeat(batch.hist_offsets[:-1], lengths)
    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    return tf.SparseTensor(np.stack([rows, cols], axis=1).astype(np.int64).reshape(-1, 2),
                           batch.hist_values.astype(np.int64), [len(batch), width])


class TransformEvents(beam.DoFn):
    """EventBatch -> ((split, shard), chunk of whole serialized examples): items by reference."""

    def __init__(self, transform_dir: str, shards: dict[str, int]):
        self.transform_dir = transform_dir
        self.shards = shards

    def process(self, batch: B.EventBatch, _ready):
        import tensorflow as tf

        loader = _loader(self.transform_dir, T.EVENT_INPUTS, T.EVENT_OUTPUTS)
        out = loader.apply_transform_model({
            F.HISTORY: _history_sparse(batch), F.LABEL: tf.constant(batch.labels),
            F.ITEM_ID: tf.constant(batch.item_ids), F.USER_ID: tf.constant(batch.user_ids),
            F.PLATFORM: tf.constant(batch.platforms.astype(bytes)), F.HOUR: tf.constant(batch.hours)})
        examples = E.encode({name: out[name].numpy() for name in T.EVENT_OUTPUTS})
        keys = E.event_hash(batch.event_ids)
        shard = keys % np.uint64(self.shards[batch.split])
        for value, chunk in EventChunk.grouped(shard, keys, examples):
            yield (batch.split, int(value)), chunk
