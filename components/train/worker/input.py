"""tf.data input over the staged shards: each worker reads its own files.

Sharding is by *file* and decided here, not by tf.distribute's auto-sharding: with
`distribute_datasets_from_function` nothing is auto-sharded, and the options below set
AutoShardPolicy.OFF explicitly so the same dataset handed to `experimental_distribute_dataset`
is not sharded a second time. Reading whole files per worker means each worker reads 1/N of
the bytes (DATA sharding would make every worker read every byte and keep 1/N).

Order of operations is the fast one: interleave files in parallel in blocks of RECORD_BLOCK
consecutive records, shuffle the blocks, rebatch them to the batch size, then one vectorized
`parse_example` per batch (parsing record by record costs many times more Python-free kernel
launches; docs/benchmarks.md), then prefetch so parsing overlaps the training step. Blocks,
not records, pass through the interleave and the shuffle buffer: each element costs about the
same whatever its size, so per-record elements made those two steps cost as much as reading
and parsing (docs/benchmarks.md). A block is consecutive records of one shard, which preprocess
fills from events spread over the whole day; a batch holds batch / RECORD_BLOCK blocks drawn
from a buffer of SHUFFLE_BUFFER records, as many as the per-record shuffle held.

The join (`join_items`) is where examples, which reference items by item-table row, meet the
items' content: once per batch, for the batch's DISTINCT target and history items. The model then
runs its item tower once per distinct item, not once per example x history slot, and reads every
history item's own title and image. Training joins inside its step (build.CTRModel.item_join,
on the step's device), so the host's input pipeline only reads and parses; the chief's
calibration and evaluation read joined batches from here (`item_table`). Either way the table
is data, not a weight: it changes every run, stays out of checkpoints, warm start and the
all-reduce, and is read from the host's staged copy. It is held as constants, so it must fit in
the step device's memory (a catalog of millions of items would need a compact code instead of
the raw image).
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M

log = logging.getLogger(__name__)

SHUFFLE_BUFFER = 4096    # records
RECORD_BLOCK = 16        # consecutive records of one file that travel (and are shuffled) together
READ_BUFFER_BYTES = 8 << 20


@dataclass(frozen=True)
class Split:
    """Every shard of one split in manifest order, the examples in each, and the total."""

    files: list[Path]
    examples: int
    compression: str = ""
    sizes: tuple[int, ...] | None = None     # examples per file; None = every file holds some
    item_table: Path | None = None           # the run's item table beside the shards

    def hold_out(self, per_worker: int, workers: int) -> tuple[Split, Split | None]:
        """(rest, the last `per_worker` x `workers` shards): a validation split carved from the
        training data (needs the manifest's counts). Both parts start at a multiple of `workers`,
        so the sharding rule gives each worker the same shards in them as in the full list,
        which is what stage copied onto its host."""
        held = per_worker * workers
        if not per_worker or self.sizes is None or held >= len(self.files):
            return self, None
        cut = len(self.files) - held
        rest, out = self.sizes[:cut], self.sizes[cut:]
        # Either part needing record-level sharding would make a worker read shards that were
        # staged on another worker's host: keep the training data whole instead.
        parts = ((self.files[:cut], rest), (self.files[cut:], out))
        if any(record_level_sharding(files, workers, sizes) for files, sizes in parts):
            return self, None
        return (Split(self.files[:cut], sum(rest), self.compression, rest, self.item_table),
                Split(self.files[cut:], sum(out), self.compression, out, self.item_table))

    @property
    def non_empty(self) -> list[Path]:
        return [f for k, f in enumerate(self.files) if self.sizes is None or self.sizes[k] > 0]

    def missing(self, files: Sequence[Path] | None = None) -> list[Path]:
        return [f for f in (self.non_empty if files is None else files) if not Path(f).is_file()]


def read_split(data_dir: Path, split: str) -> Split:
    """The split's shards from data_dir/manifest.json (written last, so complete), else a listing.

    With a manifest the list is the full, ordered shard list even when this host staged only
    its own worker's shards (cluster staging), so the sharding rule gives every worker the
    same share that stage copied for it; files that are not here are the caller's to check
    (Split.missing). Without a manifest (hand-made data), every non-empty file in
    data_dir/<split>/ is a shard and the examples are counted.
    """
    data_dir = Path(data_dir)
    if (data_dir / M.MANIFEST).is_file():
        info = M.read(data_dir)
        shards = M.shard_records(info, split)
        return Split([data_dir / s["name"] for s in shards], int(info["splits"][split]["examples"]),
                     info.get("compression", "") or "", tuple(int(s["examples"]) for s in shards),
                     data_dir / IT.ITEM_TABLE)
    files = [f for f in list_shards(data_dir / split) if f.stat().st_size > 0]
    return Split(files, count_records(files), item_table=data_dir / IT.ITEM_TABLE)


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


def worker_files(files: Sequence, num_workers: int, worker_index: int,
                 sizes: Sequence[int] | None = None) -> list:
    """What worker i reads: the non-empty files of its share under the manifest's sharding rule,
    or every non-empty file when some worker's share holds no example (record-level sharding:
    a worker given only empty files would spin forever in `repeat()`). Decided from the counts
    alone, so all workers agree."""
    if record_level_sharding(files, num_workers, sizes):
        return [f for k, f in enumerate(files) if sizes is None or sizes[k] > 0]
    share = M.worker_share(range(len(files)), worker_index, num_workers)
    return [files[k] for k in share if sizes is None or sizes[k] > 0]


def record_level_sharding(files: Sequence, num_workers: int, sizes: Sequence[int] | None = None) -> bool:
    """Some worker's share of the files holds no example: every worker reads all files instead."""
    for worker in range(num_workers):
        share = M.worker_share(range(len(files)), worker, num_workers)
        if not any(sizes is None or sizes[k] > 0 for k in share):
            return True
    return False


def feature_spec(model_cfg: ModelConfig) -> dict[str, tf.io.FixedLenFeature]:
    """The parsing spec of the shards, built from the contract's plain shapes and dtypes."""
    return {name: tf.io.FixedLenFeature(list(f.shape), tf.as_dtype(f.dtype))
            for name, f in F.transformed_feature_spec(model_cfg).items()}


def make_parse_fn(model_cfg: ModelConfig):
    """Batch of serialized tf.Examples -> (features, float label [B, 1])."""
    spec = feature_spec(model_cfg)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        label = tf.cast(tf.expand_dims(parsed.pop(F.LABEL_KEY), -1), tf.float32)
        return parsed, label

    return parse


@functools.lru_cache(maxsize=2)
def item_content(path: str) -> dict[str, np.ndarray]:
    """The item table's content by row (pipeline/contracts/item_table.py), read once per process."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no item table {path}: examples reference items by its rows "
                                "(was this host's data staged by this version?)")
    return IT.dense(IT.read(path))


def join_items(content: dict[str, np.ndarray], device: str | None = None):
    """features with rows -> the model's inputs: the batch's distinct items' title ids and
    image [U, ...] and each example's positions into them (see module doc). The table's arrays
    become constants on `device` (the training step's: no host-to-device copy per step)."""
    with tf.device(device):
        titles, images = tf.constant(content[IT.TITLE_IDS]), tf.constant(content[IT.IMAGE])
    last = IT.clip_row(len(content[IT.TITLE_IDS]))

    def join(features):
        features = dict(features)
        rows = tf.concat([features.pop(F.TARGET_ROW)[:, None], features.pop(F.HISTORY_ROWS)], axis=1)
        unique, index = tf.unique(tf.reshape(tf.minimum(rows, last), [-1]), out_idx=tf.int64)
        index = tf.reshape(index, tf.shape(rows))
        features.update({F.TITLE_IDS: tf.gather(titles, unique), F.IMAGE_Z: tf.gather(images, unique),
                         F.TARGET_INDEX: index[:, 0], F.HISTORY_INDEX: index[:, 1:]})
        return features

    return join


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
    sizes: Sequence[int] | None = None,
    shuffle: bool | None = None,
    item_table: Path | None = None,
) -> tf.data.Dataset:
    """This worker's batches of (features, label).

    training=True shuffles, repeats forever (fit is given steps_per_epoch, so every worker
    runs the same number of steps however uneven its files are) and drops the last partial
    batch; training=False reads this worker's part exactly once. shuffle=False with training=True
    repeats in file order: a validation set that is the same examples every epoch. With
    `item_table` the batches are joined with the items' content (the model's inputs); without,
    they hold the examples' own features (scoring by reference, the export's job).
    """
    shuffle = training if shuffle is None else shuffle
    files = [str(f) for f in files]
    if not worker_files(files, 1, 0, sizes):
        raise ValueError("no non-empty shard: nothing to read")
    mine = worker_files(files, num_workers, worker_index, sizes)
    record_level = record_level_sharding(files, num_workers, sizes)
    if record_level:
        # Fewer files than workers: every worker reads all files in the same fixed order and
        # keeps every N-th record (blocks of one record: an even split). Correct but N times
        # the reading; the preprocess step writes >= workers x readers shards so this is the
        # exception.
        log.warning("%d shard(s) for %d workers: record-level sharding", len(files), num_workers)
    block = 1 if record_level else RECORD_BLOCK
    ds = tf.data.Dataset.from_tensor_slices(mine)
    if shuffle and not record_level:
        ds = ds.shuffle(len(mine), seed=seed, reshuffle_each_iteration=True)
    if training:
        ds = ds.repeat()
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression,
                                          buffer_size=READ_BUFFER_BYTES).batch(block),
        cycle_length=max(1, min(readers, len(mine))),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic or record_level,
    )
    if record_level:
        ds = ds.shard(num_workers, worker_index)
    if shuffle:
        ds = ds.shuffle(SHUFFLE_BUFFER // block, seed=seed)
    ds = ds.rebatch(batch_size, drop_remainder=training)
    parse = make_parse_fn(model_cfg)
    if item_table is not None:        # one map for both: one function call per batch
        join = join_items(item_content(str(item_table)))

        def parse(serialized, parse_only=parse):
            features, label = parse_only(serialized)
            return join(features), label

    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds.with_options(dataset_options(deterministic))


def dataset_options(deterministic: bool) -> tf.data.Options:
    """Autotuning off: in this TensorFlow (2.21) deleting an iterator whose pipeline autotunes
    waits out the autotune loop's current period, which doubles while the iterator runs (up to
    60 s), so every finished fit, evaluation and calibration pass stalled for seconds with no
    CPU used (docs/training.md, "Input"). The input is many times faster than training without
    it (bench/train.py's input figures), so tuning buys nothing here."""
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = False
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return options
