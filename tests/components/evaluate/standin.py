"""Stand-in SavedModels with the training stage's serving contract, for gate and push tests.

Same signatures as the real export: `serving_default` over raw features (title string [None],
image_embedding float32 [None, 2048], history_item_ids int64 [None, None], 0 = padding) ->
{"probability": [None, 1]}, and `serving_examples` over serialized raw tf.Examples.

- "good": a taste model that really predicts clicks on the generated data: the cosine between
  the (catalog-centred) image of the candidate item and the mean image of the user's history
  items, through a logistic regression fitted on a training day (AUC ~0.65 on a fresh day).
- "bad": a hash of the title, i.e. a deterministic but uninformative score (AUC ~0.5).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts import serving


def _serving_spec():
    import tensorflow as tf

    return [
        tf.TensorSpec([None], tf.string, name=F.TITLE),
        tf.TensorSpec([None, F.IMAGE_DIM], tf.float32, name=F.IMAGE),
        tf.TensorSpec([None, None], tf.int64, name=F.HISTORY),
    ]


def catalog_table(items_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images indexed by item id with row 0 = padding, catalog mean) from one snapshot."""
    t = pq.read_table(items_dir, columns=[F.ITEM_ID, F.IMAGE]).to_pydict()
    ids = np.array(t[F.ITEM_ID])
    rows = [(i, e) for i, e in zip(ids, t[F.IMAGE], strict=True) if e is not None and len(e) == F.IMAGE_DIM]
    images = np.array([e for _, e in rows], dtype=np.float32)
    images = np.where(np.isfinite(images), images, 0.0).astype(np.float32)
    mean = images.mean(axis=0)
    table = np.zeros((ids.max() + 1, F.IMAGE_DIM), dtype=np.float32)
    table[[i for i, _ in rows]] = images - mean
    return table, mean


def _cosine_feature(table, mean, images, histories) -> np.ndarray:
    img = images - mean
    out = np.zeros(len(images))
    for k, (v, hist) in enumerate(zip(img, histories, strict=True)):
        hist = [h for h in hist if 0 < h < len(table)]
        if hist:
            m = table[hist].mean(axis=0)
            out[k] = m @ v / (np.linalg.norm(m) * np.linalg.norm(v) + 1e-6)
    return out


def fit_taste(raw_root: Path, day: str) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Fit slope and bias of the taste feature on one (training) day's events."""
    from sklearn.linear_model import LogisticRegression

    table, mean = catalog_table(raw_root / "items" / f"ds={day}")
    ev = pq.read_table(raw_root / "events" / f"ds={day}",
                       columns=[F.ITEM_ID, F.HISTORY, F.LABEL]).to_pydict()
    keep = [k for k, (i, y) in enumerate(zip(ev[F.ITEM_ID], ev[F.LABEL], strict=True))
            if y is not None and i < len(table)]
    images = table[[ev[F.ITEM_ID][k] for k in keep]] + mean
    x = _cosine_feature(table, mean, images, [ev[F.HISTORY][k] for k in keep])
    y = np.array([ev[F.LABEL][k] for k in keep])
    lr = LogisticRegression().fit(x[:, None], y)
    return table, mean, float(lr.coef_[0, 0]), float(lr.intercept_[0])


def save_standin(export_dir: Path, kind: str, raw_root: Path, fit_day: str) -> Path:
    """Write a stand-in SavedModel of `kind` ("good" or "bad") to `export_dir`."""
    import tensorflow as tf

    spec = _serving_spec()
    if kind == "good":
        table, mean, slope, bias = fit_taste(raw_root, fit_day)
    elif kind == "bad":
        table, mean, slope, bias = np.zeros((1, F.IMAGE_DIM), np.float32), np.zeros(F.IMAGE_DIM), 0.0, 0.0
    else:
        raise ValueError(kind)

    class StandIn(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.Variable(table, trainable=False, name="item_images")
            self.mean = tf.Variable(mean.astype(np.float32), trainable=False, name="image_mean")
            self.coef = tf.Variable([slope, bias], dtype=tf.float32, trainable=False, name="coef")

        @tf.function(input_signature=spec)
        def serve(self, title, image_embedding, history_item_ids):
            if kind == "bad":
                bucket = tf.strings.to_hash_bucket_fast(title, 1000)
                p = 0.05 + 0.2 * tf.cast(bucket, tf.float32) / 1000.0
                return {"probability": p[:, None]}
            ids = tf.where(history_item_ids < tf.shape(self.table, out_type=tf.int64)[0], history_item_ids, 0)
            mask = tf.cast(ids > 0, tf.float32)
            count = tf.reduce_sum(mask, axis=1, keepdims=True)
            hist = tf.reduce_sum(tf.gather(self.table, ids) * mask[..., None], axis=1)
            hist = hist / tf.maximum(count, 1.0)
            img = image_embedding - self.mean
            cos = tf.reduce_sum(hist * img, axis=1) / (tf.norm(hist, axis=1) * tf.norm(img, axis=1) + 1e-6)
            return {"probability": tf.sigmoid(self.coef[0] * cos + self.coef[1])[:, None]}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_examples(self, examples):
            parsed = tf.io.parse_example(examples, {
                F.TITLE: tf.io.FixedLenFeature([], tf.string),
                F.IMAGE: tf.io.FixedLenFeature([F.IMAGE_DIM], tf.float32),
                F.HISTORY: tf.io.VarLenFeature(tf.int64),
            })
            return self.serve(parsed[F.TITLE], parsed[F.IMAGE], tf.sparse.to_dense(parsed[F.HISTORY]))

    module = StandIn()
    tf.saved_model.save(module, str(export_dir), signatures={
        "serving_default": module.serve.get_concrete_function(),
        "serving_examples": module.serve_examples.get_concrete_function(),
    })
    serving.write_export_facts(export_dir, [])      # a plain graph, as the training export records it
    return export_dir
