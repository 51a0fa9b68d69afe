"""Tiny transformed TFRecords that a model can learn, for testing training without preprocess.

The layout is preprocess's: examples reference items by item-table row, and the item table
(`<data dir>/items/item_table.parquet`) holds each item's title ids and image once. The label is
a noisy threshold on the shown item's image[0] plus a history signal (id parity), so a model
that trains at all clearly beats AUC 0.5 within an epoch or two, and one that does not, does
not.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M


def _example(values: dict) -> bytes:
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.atleast_1d(v).tolist()))
    feature = {name: ints(values[name]) for name in F.transformed_feature_spec(ModelConfig())}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def make_items(model: ModelConfig, title_vocab: int, items: int, seed: int = 99) -> dict[str, np.ndarray]:
    """Items 1..items-1 (row r = item r, its id embedding r as well): title ids and image."""
    rng = np.random.default_rng(seed)
    n = items - 1
    title = np.zeros((n, model.title_len), np.int64)
    for i in range(n):
        t = rng.integers(1, model.title_len + 1)
        title[i, :t] = rng.integers(1, title_vocab, t)
    rows = np.arange(1, items, dtype=np.int64)
    shown = rng.integers(0, 40, n)
    return {IT.ITEM_ID: rows + 1000, IT.ROW: rows, IT.EMBEDDING_ID: rows, IT.TITLE_IDS: title,
            IT.IMAGE: rng.standard_normal((n, F.IMAGE_DIM)).astype(np.float32),
            IT.SHOWN: shown, IT.CLICKS: rng.binomial(shown, 0.2)}


def write_item_table(path: Path, items: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(IT.from_arrays(items), path)


def make_rows(n: int, model: ModelConfig, images: np.ndarray, item_vocab: int, seed: int) -> dict[str, np.ndarray]:
    """Examples by reference; `images` [items - 1, 2048] are the items' (row r at r - 1)."""
    rng = np.random.default_rng(seed)
    history = np.zeros((n, model.history_len), np.int64)
    for i in range(n):
        h = rng.integers(0, model.history_len + 1)
        if h:
            history[i, model.history_len - h:] = rng.integers(1, item_vocab, h)
    target = rng.integers(1, item_vocab, n)
    logit = 2.5 * images[target - 1, 0] + 0.5 * (history[:, -1] % 2) - 1.0
    return {F.HISTORY_IDS: history, F.HISTORY_ROWS: history, F.TARGET_ID: target, F.TARGET_ROW: target,
            F.USER_BUCKET: rng.integers(1, 20, n), F.PLATFORM_ID: rng.integers(1, 4, n),
            F.HOUR_ID: rng.integers(1, 25, n),
            F.LABEL_KEY: (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)}


def write_split(out_dir: Path, n: int, model: ModelConfig, num_shards: int, seed: int,
                title_vocab: int = 50, item_vocab: int = 80) -> int:
    """Write `n` examples round-robin into `num_shards` uncompressed TFRecord files, and the item
    table beside the split (`out_dir`/../items/, the same items for every split of a folder)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    items = make_items(model, title_vocab, item_vocab)
    write_item_table(out_dir.parent / IT.ITEM_TABLE, items)
    rows = make_rows(n, model, items[IT.IMAGE], item_vocab, seed)
    writers = [tf.io.TFRecordWriter(str(out_dir / f"part-{k:05d}-of-{num_shards:05d}.tfrecord"))
               for k in range(num_shards)]
    for i in range(n):
        writers[i % num_shards].write(_example({k: v[i] for k, v in rows.items()}))
    for w in writers:
        w.close()
    return n


def write_with_manifest(root: Path, model: ModelConfig, shards: int, per_shard: int, random_labels: bool = False,
                        eval_rows: int = 64) -> None:
    """Train and eval splits under `root` with preprocess's manifest (so validation can be carved
    out), the item table's window counts those of the train split. `random_labels`: labels at a
    30 % rate that nothing predicts (validation AUC wanders)."""
    write_split(root / "train", shards * per_shard, model, num_shards=shards, seed=3, title_vocab=10, item_vocab=10)
    write_split(root / "eval", eval_rows, model, num_shards=2, seed=4, title_vocab=10, item_vocab=10)
    items = make_items(model, title_vocab=10, items=10)          # the table write_split wrote
    shown, clicks = np.zeros(10, np.int64), np.zeros(10, np.int64)
    for split in ("train", "eval"):
        for path in sorted((root / split).glob("*.tfrecord")):
            records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
            if random_labels:
                rng = np.random.default_rng(len(path.name))
                for example in records:
                    example.features.feature[F.LABEL_KEY].int64_list.value[:] = [int(rng.random() < 0.3)]
                with tf.io.TFRecordWriter(str(path)) as writer:
                    for example in records:
                        writer.write(example.SerializeToString())
            for example in records if split == "train" else ():
                feature = example.features.feature
                shown[feature[F.TARGET_ROW].int64_list.value[0]] += 1
                clicks[feature[F.TARGET_ROW].int64_list.value[0]] += feature[F.LABEL_KEY].int64_list.value[0]
    items[IT.SHOWN], items[IT.CLICKS] = shown[items[IT.ROW]], clicks[items[IT.ROW]]
    write_item_table(root / IT.ITEM_TABLE, items)
    sizes = {"train": (per_shard, shards), "eval": (eval_rows // 2, 2)}
    splits = {s: {"examples": n * k, "shards": [{"name": f"{s}/{p.name}", "examples": n}
                                                 for p in sorted((root / s).glob("*.tfrecord"))]}
              for s, (n, k) in sizes.items()}
    (root / M.MANIFEST).write_text(json.dumps({"format": M.FORMAT, "workers": 2, "compression": "", "splits": splits}))
