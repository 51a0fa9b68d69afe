"""The run's item table: every usable item of the catalog snapshot once, with what the model
reads of an item, keyed by a dense row index. No TensorFlow here.

    examples/items/item_table.parquet     item_id, row, embedding_id, title_ids, image, shown, clicks

Examples reference items by row (features.TARGET_ROW, HISTORY_ROWS); the content lives here
once. Why a row index of its own, and not the item-id vocabulary's index: that vocabulary is
capped (`model.item_vocab_size` most-shown items, the tail shares OOV buckets), so it cannot key
one row per item; the table must hold the content of every catalog item, the ones the window
never showed included. Each row records its item's `embedding_id` (the vocabulary index, or its
OOV bucket) beside it.

The row rule lives in the tf.Transform graph (transform.py, features.CATALOG_VOCAB): row r >= 1
is 1 + the item's index in the catalog vocabulary, row 0 is padding, and an item the vocabulary
does not know (a history item deleted from the catalog, or newer than the table) gets its one
OOV row, n + 1. Training, the raw-feature signature and the by-id signature all take rows from
that one graph. A row with no entry in the table (padding, OOV) reads as zeros: `dense` below.

`shown` and `clicks` are the item's impressions and clicks over the run's training window (the
rows preprocess kept; never the eval day): what popularity knows, which the last layer's blend
reads (pipeline/contracts/popularity.py `evidence`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.contracts.features import IMAGE_DIM

ITEM_TABLE = "items/item_table.parquet"     # relative to the examples dir (and a staged dir)
ITEM_ID, ROW, EMBEDDING_ID = "item_id", "row", "embedding_id"
TITLE_IDS, IMAGE = "title_ids", "image"     # transformed (tf.Transform) content
SHOWN, CLICKS = "shown", "clicks"           # the training window's impressions and clicks
COLUMNS = (ITEM_ID, ROW, EMBEDDING_ID, TITLE_IDS, IMAGE, SHOWN, CLICKS)


def record(rows: int, size: int, sha256: str) -> dict[str, Any]:
    """The manifest's entry for the table (stage copies and verifies it like a shard)."""
    return {"name": ITEM_TABLE, "rows": rows, "bytes": size, "sha256": sha256}


def schema(title_len: int, image_dim: int = IMAGE_DIM) -> pa.Schema:
    return pa.schema([(ITEM_ID, pa.int64()), (ROW, pa.int64()), (EMBEDDING_ID, pa.int64()),
                      (TITLE_IDS, pa.list_(pa.int64(), title_len)), (IMAGE, pa.list_(pa.float32(), image_dim)),
                      (SHOWN, pa.int64()), (CLICKS, pa.int64())])


def from_arrays(columns: dict[str, np.ndarray]) -> pa.Table:
    """The table from one array per column (title_ids [n, title_len], image [n, dim], the others
    [n]), fixed-size lists as one flat buffer each: what preprocess writes, and what tests and
    benchmarks build their tables with."""
    title_ids = np.asarray(columns[TITLE_IDS], np.int64)
    image = np.asarray(columns[IMAGE], np.float32)
    table_schema = schema(title_ids.shape[1], image.shape[1])
    lists = {TITLE_IDS: title_ids, IMAGE: image}

    def column(field: pa.Field) -> pa.Array:
        if field.name in lists:
            values = lists[field.name]
            return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel(), field.type.value_type), values.shape[1])
        return pa.array(np.asarray(columns[field.name], np.int64), field.type)

    return pa.table([column(field) for field in table_schema], schema=table_schema)


def read(path) -> pa.Table:
    return pq.read_table(path, columns=list(COLUMNS))


def dense(table: pa.Table) -> dict[str, np.ndarray]:
    """The table's content as arrays indexed by row, [max row + 2, ...]: the rows with no entry
    (0 = padding, the OOV row, gaps) hold zeros, and the last row is zeros too, so a reader can
    clip any row beyond the table to it (`clip_row`)."""
    rows = table.column(ROW).to_numpy()
    size = int(rows.max(initial=0)) + 2
    out = {}
    for name, dtype in ((TITLE_IDS, np.int64), (IMAGE, np.float32)):
        column = table.column(name).combine_chunks()
        width = column.type.list_size
        values = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype).reshape(-1, width)
        out[name] = np.zeros((size, width), dtype)
        out[name][rows] = values
    for name, dtype in ((EMBEDDING_ID, np.int64), (SHOWN, np.float32), (CLICKS, np.float32)):
        out[name] = np.zeros(size, dtype)
        out[name][rows] = table.column(name).to_numpy()
    return out


def clip_row(size: int) -> int:
    """The row any row >= it reads as (zeros): the last row of `dense`'s arrays."""
    return size - 1
