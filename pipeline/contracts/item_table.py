"""The run's item table: every usable item of the catalog snapshot once, with what the model
reads of an item, keyed by a dense row index. No TensorFlow here.

    examples/items/item_table.parquet     item_id, row, embedding_id, title_ids, image

Why a row index of its own, and not the item-id vocabulary's index: the vocabulary is capped
(`model.item_vocab_size` most-shown items, the tail shares OOV buckets), so it cannot key one
row per item; the table must hold the content of every catalog item, the ones the window never
showed included. Each row records its item's `embedding_id` (the vocabulary index, or its OOV
bucket) so a reader gets both from the row.

The row rule, written once here: row r (1..n) is the r-th smallest usable item id of the
snapshot; row 0 is padding; row n + 1 is "an item this table does not know" (a history item
deleted from the catalog, or newer than the table), whose content readers take as zeros.
"""
from __future__ import annotations

from typing import Any

import numpy as np

ITEM_TABLE = "items/item_table.parquet"     # relative to the examples dir (and a staged dir)
ITEM_ID, ROW, EMBEDDING_ID = "item_id", "row", "embedding_id"
TITLE_IDS, IMAGE = "title_ids", "image"     # transformed (tf.Transform) content
COLUMNS = (ITEM_ID, ROW, EMBEDDING_ID, TITLE_IDS, IMAGE)


def unknown_row(catalog_ids: np.ndarray) -> int:
    return len(catalog_ids) + 1


def rows_of(item_ids: np.ndarray, catalog_ids: np.ndarray) -> np.ndarray:
    """Row of each id in the sorted usable catalog ids: 1 + its position, else the unknown row."""
    ids = np.asarray(item_ids, dtype=np.int64)
    pos = np.searchsorted(catalog_ids, ids)
    found = pos < len(catalog_ids)
    found[found] = catalog_ids[pos[found]] == ids[found]
    return np.where(found, pos + 1, unknown_row(catalog_ids)).astype(np.int64)


def record(rows: int, size: int, sha256: str) -> dict[str, Any]:
    """The manifest's entry for the table (stage copies and verifies it like a shard)."""
    return {"name": ITEM_TABLE, "rows": rows, "bytes": size, "sha256": sha256}
