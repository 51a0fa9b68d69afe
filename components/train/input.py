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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

from pipeline import features as F
from pipeline.config import ModelConfig

log = logging.getLogger(__name__)

SHUFFLE_BUFFER = 4096
READ_BUFFER_BYTES = 8 << 20


@dataclass(frozen=True)
class Split:
    """The non-empty shards of one split and how many examples they hold."""

    files: list[Path]
    examples: int
    compression: str = ""

    def missing(self, files: Sequence[Path] | None = None) -> list[Path]:
        return [f for f in (self.files if files is None else files) if not Path(f).is_file()]


def read_split(data_dir: Path, split: str) -> Split:
    """The split's shards from data_dir/manifest.json (written last, so complete), else a listing.

    With a manifest the list is the full, ordered shard list even when this host staged only
    its own worker's shards (cluster staging), so file-level sharding agrees across workers;
    files that are not here are the caller's to check (Split.missing). Shards with no examples
    are left out: a worker given only empty files would spin forever in `repeat()`. Without a
    manifest (hand-made data), every non-empty file in data_dir/<split>/ is a shard and the
    examples are counted.
    """
    data_dir = Path(data_dir)
    manifest = data_dir / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text())
        entry = info["splits"][split]
        files = [data_dir / s["name"] for s in entry["shards"] if s.get("examples", 1) > 0]
        return Split(files, int(entry["examples"]), info.get("compression", "") or "")
    files = [f for f in list_shards(data_dir / split) if f.stat().st_size > 0]
    return Split(files, count_records(files))


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


def count_records(files: Sequence[Path], compression: str = "") -> int:
    ds = tf.data.TFRecordDataset([str(f) for f in files], compression_type=compression,
                                 buffer_size=READ_BUFFER_BYTES, num_parallel_reads=4)
    return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1).numpy())


def shard_files(files: Sequence[Path], num_workers: int, worker_index: int) -> list[Path]:
    """Round-robin file assignment: worker i reads files i, i+N, i+2N, ..."""
    return [f for k, f in enumerate(files) if k % num_workers == worker_index]


def worker_files(files: Sequence, num_workers: int, worker_index: int) -> list:
    """What worker i reads: its round-robin files, or all of them when there are fewer files
    than workers (record-level sharding; decided from the count alone, so all workers agree)."""
    if record_level_sharding(files, num_workers):
        return list(files)
    return shard_files(files, num_workers, worker_index)


def record_level_sharding(files: Sequence, num_workers: int) -> bool:
    """Fewer files than workers: every worker reads all files and keeps every N-th record."""
    return len(files) < num_workers


def feature_spec(model_cfg: ModelConfig) -> dict[str, tf.io.FixedLenFeature]:
    """The parsing spec of the shards, as the stage that writes them defines it."""
    from components.preprocess.transform import transformed_feature_spec

    return transformed_feature_spec(model_cfg)


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
    seed: int | None = None,
    readers: int = 4,
    compression: str = "",
) -> tf.data.Dataset:
    """This worker's batches of (features, label).

    training=True shuffles, repeats forever (fit is given steps_per_epoch, so every worker
    runs the same number of steps however uneven its files are) and drops the last partial
    batch; training=False reads this worker's part exactly once.
    """
    files = [str(f) for f in files]
    if not files:
        raise ValueError("no non-empty shard: nothing to read")
    mine = worker_files(files, num_workers, worker_index)
    record_level = record_level_sharding(files, num_workers)
    if record_level:
        # Fewer files than workers: every worker reads all files in the same fixed order and
        # keeps every N-th record. Correct but N times the reading; the preprocess step
        # writes >= workers x readers shards so this is the exception.
        log.warning("%d shard(s) for %d workers: record-level sharding", len(files), num_workers)
    ds = tf.data.Dataset.from_tensor_slices(mine)
    if training and not record_level:
        ds = ds.shuffle(len(mine), seed=seed, reshuffle_each_iteration=True)
    if training:
        ds = ds.repeat()
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression,
                                          buffer_size=READ_BUFFER_BYTES),
        cycle_length=max(1, min(readers, len(mine))),
        block_length=16,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic or record_level,
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
