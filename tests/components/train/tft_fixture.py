"""A real tf.Transform output + transformed shards, made from synthetic raw rows.

Runs tf.Transform's AnalyzeAndTransformDataset (DirectRunner) with the preprocess stage's own
`make_preprocessing_fn`, so the transform graph the export embeds is the real one and the
transformed shards are exactly what Beam produced for these raw rows: the reference for the
training/serving skew check. Clicks depend on the image (a shift over its first dims) and a
title word, so a tiny model learns them in a couple of epochs.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from pipeline import features as F
from pipeline.config import ModelConfig

WORDS = ("red", "blue", "shoe", "lamp", "sofa", "desk", "mug", "bag", "hat", "coat", "sale", "new")


def raw_rows(n: int, seed: int, items: int = 60) -> list[dict]:
    """Raw rows in the serving contract (+ label, item_id, impressions for analysis)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        label = int(rng.random() < 0.4)
        image = rng.standard_normal(F.IMAGE_DIM).astype(np.float32) * 2.0 + 3.0
        image[:32] += 1.5 if label else -1.5
        words = list(rng.choice(WORDS[:-2], size=rng.integers(1, 6)))
        if rng.random() < (0.7 if label else 0.2):
            words.insert(int(rng.integers(0, len(words) + 1)), "sale")
        history = [int(h) for h in rng.integers(1, items, size=rng.integers(0, 12))]
        rows.append({F.TITLE: " ".join(words).title() + "!", F.IMAGE: image,
                     F.HISTORY: history, F.LABEL: label,
                     F.ITEM_ID: int(rng.integers(1, items)), "impressions": 1.0})
    return rows


def _example(row: dict, model_cfg: ModelConfig) -> bytes:
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(v).reshape(-1)))
    feature = {
        F.TITLE_IDS: ints(row[F.TITLE_IDS]),
        F.IMAGE_Z: tf.train.Feature(float_list=tf.train.FloatList(value=row[F.IMAGE_Z])),
        F.HISTORY_IDS: ints(row[F.HISTORY_IDS]),
        F.LABEL_KEY: ints([row[F.LABEL_KEY]]),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_shards(rows: list[dict], out_dir: Path, num_shards: int, model_cfg: ModelConfig) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    writers = [tf.io.TFRecordWriter(str(out_dir / f"part-{k:05d}-of-{num_shards:05d}.tfrecord"))
               for k in range(num_shards)]
    for i, row in enumerate(rows):
        writers[i % num_shards].write(_example(row, model_cfg))
    for w in writers:
        w.close()


def analyze_and_transform(train: list[dict], evals: list[dict], model_cfg: ModelConfig,
                          transform_dir: Path) -> tuple[list[dict], list[dict]]:
    """Analyze on `train`, transform both splits, write transform_fn to `transform_dir`."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata

    from components.preprocess.transform import RAW_FEATURE_SPEC, make_preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(RAW_FEATURE_SPEC)
    out: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(runner="DirectRunner") as p, tft_beam.Context(temp_dir=tmp):
            train_pc = p | "Train" >> beam.Create(train)
            eval_pc = p | "Eval" >> beam.Create(evals)
            (train_t, _), transform_fn = (
                (train_pc, metadata)
                | "Analyze" >> tft_beam.AnalyzeAndTransformDataset(make_preprocessing_fn(model_cfg)))
            eval_t, _ = ((eval_pc, metadata), transform_fn) | "Apply" >> tft_beam.TransformDataset()
            _ = transform_fn | "Write" >> tft_beam.WriteTransformFn(str(transform_dir))
            for name, pc in (("train", train_t), ("eval", eval_t)):
                _ = pc | f"Collect{name}" >> beam.combiners.ToList() | f"Keep{name}" >> beam.Map(
                    lambda rows, name=name: out.__setitem__(name, rows))
    return out["train"], out["eval"]


def make_run_data(paths, model_cfg: ModelConfig, n_train: int, n_eval: int,
                  num_shards: int = 4, seed: int = 0) -> dict:
    """Write transform_dir and staged train/eval shards for `paths`; return the raw eval rows."""
    train_raw, eval_raw = raw_rows(n_train, seed), raw_rows(n_eval, seed + 1)
    train_t, eval_t = analyze_and_transform(train_raw, eval_raw, model_cfg, paths.transform_dir)
    write_shards(train_t, paths.staged_dir / "train", num_shards, model_cfg)
    write_shards(eval_t, paths.staged_dir / "eval", max(1, num_shards // 2), model_cfg)
    return {"eval_raw": eval_raw, "eval_transformed": eval_t}
