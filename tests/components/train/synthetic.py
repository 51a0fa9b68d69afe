"""Tiny transformed TFRecords that a model can learn, for testing training without preprocess.

The label is a noisy threshold on image[0] plus a history signal (id parity), so a model
that trains at all clearly beats AUC 0.5 within an epoch or two, and one that does not, does
not.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F


def _example(title, image, history, label, context=(1, 1, 1, 1)) -> bytes:
    """A transformed example; `context` = (target_id, user_bucket, platform_id, hour_id)."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    feature = {
        F.TITLE_IDS: ints(title),
        F.IMAGE_Z: tf.train.Feature(float_list=tf.train.FloatList(value=image)),
        F.HISTORY_IDS: ints(history),
        **{name: ints([int(v)]) for name, v in zip((F.TARGET_ID, F.USER_BUCKET, F.PLATFORM_ID, F.HOUR_ID), context)},
        F.LABEL_KEY: ints([label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def make_rows(n: int, model: ModelConfig, title_vocab: int, item_vocab: int, seed: int):
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((n, F.IMAGE_DIM)).astype(np.float32)
    title = np.zeros((n, model.title_len), np.int64)
    history = np.zeros((n, model.history_len), np.int64)
    for i in range(n):
        t = rng.integers(1, model.title_len + 1)
        title[i, :t] = rng.integers(1, title_vocab, t)
        h = rng.integers(0, model.history_len + 1)
        if h:
            history[i, model.history_len - h:] = rng.integers(1, item_vocab, h)
    logit = 2.5 * image[:, 0] + 0.5 * (history[:, -1] % 2) - 1.0
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return title, image, history, label


def write_split(out_dir: Path, n: int, model: ModelConfig, num_shards: int, seed: int,
                title_vocab: int = 50, item_vocab: int = 80) -> int:
    """Write `n` examples round-robin into `num_shards` uncompressed TFRecord files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    title, image, history, label = make_rows(n, model, title_vocab, item_vocab, seed)
    writers = [tf.io.TFRecordWriter(str(out_dir / f"part-{k:05d}-of-{num_shards:05d}.tfrecord"))
               for k in range(num_shards)]
    rng = np.random.default_rng(seed + 1)
    context = np.stack([rng.integers(1, item_vocab, n), rng.integers(1, 20, n), rng.integers(1, 4, n),
                        rng.integers(1, 25, n)], axis=1)
    for i in range(n):
        writers[i % num_shards].write(_example(title[i], image[i], history[i], int(label[i]), context[i]))
    for w in writers:
        w.close()
    return n
