"""tf.data input over the staged shards: each worker reads its own files.

Sharding is by *file* and decided here, not by tf.distribute's auto-sharding: with
`distribute_datasets_from_function` nothing is auto-sharded, and the options below set
AutoShardPolicy.OFF explicitly so the same dataset handed to `experimental_distribute_dataset`
is not sharded a second time. Reading whole files per worker means each worker reads 1/N of
the bytes (DATA sharding would make every worker read every byte and keep 1/N).

Order of operations is the fast one: interleave files in parallel, batch serialized records,
then one vectorized `parse_example` per batch (parsing record by record costs ~10x more
Python-free kernel launches), then prefetch so parsing overlaps the training step.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional, Sequence

import tensorflow as tf

from pipeline import features as F
from pipeline.config import ModelConfig

log = logging.getLogger(__name__)

SHUFFLE_BUFFER = 4096
READ_BUFFER_BYTES = 8 << 20


def list_shards(split_dir: Path) -> list[Path]:
    """The TFRecord shards of one split, sorted so every worker sees the same list."""
    split_dir = Path(split_dir)
    if not split_dir.is_dir():
        raise FileNotFoundError(f"no shard directory {split_dir} (was the stage step run?)")
    shards = sorted(p for p in split_dir.iterdir()
                    if p.is_file() and not p.name.startswith(".") and p.suffix != ".json")
    if not shards:
        raise FileNotFoundError(f"no TFRecord shards in {split_dir}")
    return shards


def shard_files(files: Sequence[Path], num_workers: int, worker_index: int) -> list[Path]:
    """Round-robin file assignment: worker i reads files i, i+N, i+2N, ..."""
    return [f for k, f in enumerate(files) if k % num_workers == worker_index]


def feature_spec(model_cfg: ModelConfig) -> dict[str, tf.io.FixedLenFeature]:
    return {
        F.TITLE_IDS: tf.io.FixedLenFeature([model_cfg.title_len], tf.int64),
        F.IMAGE_Z: tf.io.FixedLenFeature([F.IMAGE_DIM], tf.float32),
        F.HISTORY_IDS: tf.io.FixedLenFeature([model_cfg.history_len], tf.int64),
        F.LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
    }


def make_parse_fn(model_cfg: ModelConfig):
    """Batch of serialized tf.Examples -> (features, float label [B, 1])."""
    spec = feature_spec(model_cfg)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        label = tf.cast(tf.expand_dims(parsed.pop(F.LABEL_KEY), -1), tf.float32)
        return parsed, label

    return parse


def make_dataset(
    files: Sequence[Path],
    model_cfg: ModelConfig,
    batch_size: int,
    *,
    num_workers: int = 1,
    worker_index: int = 0,
    training: bool = True,
    deterministic: bool = False,
    seed: Optional[int] = None,
    readers: int = 4,
) -> tf.data.Dataset:
    """This worker's batches of (features, label).

    training=True shuffles, repeats forever (fit is given steps_per_epoch, so every worker
    runs the same number of steps however uneven its files are) and drops the last partial
    batch; training=False reads this worker's part exactly once.
    """
    files = [str(f) for f in files]
    mine = shard_files(files, num_workers, worker_index)
    record_level = not mine
    if record_level:
        # Fewer files than workers: every worker reads all files and keeps
        # every N-th record. Correct but N times the reading; the preprocess step should
        # write >= workers x readers shards.
        log.warning("%d shard(s) for %d workers: record-level sharding", len(files), num_workers)
        mine = files
    ds = tf.data.Dataset.from_tensor_slices(mine)
    if training:
        ds = ds.shuffle(len(mine), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, buffer_size=READ_BUFFER_BYTES),
        cycle_length=max(1, min(readers, len(mine))),
        block_length=16,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if record_level:
        ds = ds.shard(num_workers, worker_index)
    if training:
        ds = ds.shuffle(SHUFFLE_BUFFER, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=training)
    ds = ds.map(make_parse_fn(model_cfg), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=deterministic)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds.with_options(dataset_options(deterministic))


def dataset_options(deterministic: bool) -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = deterministic
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return options


def count_examples(split_dir: Path) -> int:
    """Examples in a split: from a manifest.json beside or above it when present, else counted."""
    split_dir = Path(split_dir)
    for manifest in (split_dir / "manifest.json", split_dir.parent / "manifest.json"):
        count = _count_from_manifest(manifest, split_dir.name)
        if count is not None:
            return count
    files = [str(f) for f in list_shards(split_dir)]
    ds = tf.data.TFRecordDataset(files, buffer_size=READ_BUFFER_BYTES, num_parallel_reads=4)
    return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1).numpy())


def _count_from_manifest(manifest: Path, split: str) -> Optional[int]:
    """Tolerant of the manifest's exact layout: {split: {"examples": n}} or {"<split>_examples": n}."""
    if not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        log.warning("unreadable manifest %s; counting records instead", manifest)
        return None
    candidates = [data.get(f"{split}_examples"), (data.get(split) or {}).get("examples")
                  if isinstance(data.get(split), dict) else None,
                  (data.get("examples") or {}).get(split) if isinstance(data.get("examples"), dict) else None]
    for value in candidates:
        if isinstance(value, int) and value >= 0:
            return value
    return None
