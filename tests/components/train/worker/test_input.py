"""The input pipeline: file-level sharding, exact coverage, determinism, manifests, empty shards."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from components.train.worker.input import dataset_options, make_dataset, read_split, worker_files
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import manifest as M
from tests.components.train.synthetic import write_split

CFG = ModelConfig(title_len=4, history_len=5)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    write_split(root / "train", 90, CFG, num_shards=6, seed=1)
    return root


def _tags(ds, batches=None) -> list[tuple]:
    """All of an example's ids identify it (the seeds give no two examples the same ones)."""
    out = []
    for i, (features, _label) in enumerate(ds):
        if batches is not None and i >= batches:
            break
        columns = [features[k].numpy().reshape(len(features[k]), -1)
                   for k in (F.TARGET_ROW, F.USER_BUCKET, F.PLATFORM_ID, F.HOUR_ID, F.HISTORY_ROWS)]
        out += [tuple(row) for row in np.concatenate(columns, axis=1).tolist()]
    return out


def test_worker_files_round_robin_and_empty_shards():
    files = [f"f{i}" for i in range(7)]
    parts = [worker_files(files, 3, i) for i in range(3)]
    assert parts == [["f0", "f3", "f6"], ["f1", "f4"], ["f2", "f5"]]
    # Empty shards keep their place in the rule (stage copies the same share) and are skipped.
    assert worker_files(files, 3, 0, sizes=[5, 5, 5, 0, 5, 5, 5]) == ["f0", "f6"]
    # A worker whose whole share is empty: everyone reads every non-empty file.
    assert worker_files(files[:4], 2, 1, sizes=[5, 0, 5, 0]) == ["f0", "f2"]


def test_workers_read_disjoint_files_covering_everything(shards):
    split = read_split(shards, "train")
    assert split.examples == 90 and len(split.files) == 6
    seen = [_tags(make_dataset(split.files, CFG, 7, num_workers=2, worker_index=i, training=False))
            for i in range(2)]
    assert not set(seen[0]) & set(seen[1])                       # no example read twice
    assert sorted(seen[0] + seen[1]) == sorted(_tags(make_dataset(split.files, CFG, 7, training=False)))
    assert len(seen[0]) + len(seen[1]) == 90


def test_training_reads_every_record_and_mixes_blocks_of_several_files(tmp_path):
    """Blocks of RECORD_BLOCK records travel through the shuffle: a file's last, partial block
    is read too (no record is left out of training), and most batches hold blocks of several files."""
    from components.train.worker.input import RECORD_BLOCK

    write_split(tmp_path / "train", 4 * 37, CFG, num_shards=4, seed=8)      # 37 = 2 blocks + 5
    files = read_split(tmp_path, "train").files
    by_file = [set(_tags(make_dataset([f], CFG, 8, training=False))) for f in files]
    assert [len(b) for b in by_file] == [37] * 4 and 37 % RECORD_BLOCK
    read = _tags(make_dataset(files, CFG, 2 * RECORD_BLOCK, seed=1, deterministic=True), batches=40)
    assert set(read) == set().union(*by_file)                            # 40 batches: > 8 passes
    files_per_batch = [len({k for k, b in enumerate(by_file) for tag in read[i:i + 2 * RECORD_BLOCK] if tag in b})
                       for i in range(0, len(read), 2 * RECORD_BLOCK)]
    assert sum(n > 1 for n in files_per_batch) > len(files_per_batch) / 2      # 2 blocks of 4 files


def test_batches_are_parsed_with_contract_shapes(shards):
    features, label = next(iter(make_dataset(read_split(shards, "train").files, CFG, 8)))
    assert set(features) == set(F.example_input_names(CFG))
    assert features[F.HISTORY_ROWS].shape == features[F.HISTORY_IDS].shape == (8, CFG.history_len)
    assert label.shape == (8, 1) and label.dtype == tf.float32
    assert set(np.unique(label.numpy())) <= {0.0, 1.0}


def test_the_join_gathers_each_distinct_item_once_with_its_table_content(shards):
    from components.train.worker.input import item_content
    from pipeline.contracts import item_table as IT

    split = read_split(shards, "train")
    plain = make_dataset(split.files, CFG, 16, training=False, deterministic=True)
    joined = make_dataset(split.files, CFG, 16, training=False, deterministic=True, item_table=split.item_table)
    content = item_content(str(split.item_table))
    for (by_ref, _), (model_in, label) in zip(plain, joined):
        assert set(model_in) == set(F.model_input_spec(CFG)) and label.shape == (len(by_ref[F.TARGET_ROW]), 1)
        rows = np.concatenate([by_ref[F.TARGET_ROW].numpy()[:, None], by_ref[F.HISTORY_ROWS].numpy()], axis=1)
        titles, images = model_in[F.TITLE_IDS].numpy(), model_in[F.IMAGE_Z].numpy()
        assert len(titles) == len(images) == len(np.unique(rows))          # one row per distinct item
        positions = np.concatenate([model_in[F.TARGET_INDEX].numpy()[:, None],
                                    model_in[F.HISTORY_INDEX].numpy()], axis=1)
        np.testing.assert_array_equal(images[positions], content[IT.IMAGE][rows])
        np.testing.assert_array_equal(titles[positions], content[IT.TITLE_IDS][rows])
        assert (content[IT.IMAGE][0] == 0).all()                            # padding reads zeros
        for name in (F.HISTORY_IDS, F.TARGET_ID, F.USER_BUCKET):
            np.testing.assert_array_equal(model_in[name].numpy(), by_ref[name].numpy())


def test_rows_beyond_the_table_read_zeros_and_a_missing_table_is_named(tmp_path):
    import pyarrow.parquet as pq

    from components.train.worker.input import item_content, join_items
    from pipeline.contracts import item_table as IT

    write_split(tmp_path / "train", 4, CFG, num_shards=1, seed=7, item_vocab=6)
    content = IT.dense(pq.read_table(tmp_path / IT.ITEM_TABLE))
    assert len(content[IT.IMAGE]) == 7 and not content[IT.IMAGE][6].any()   # rows 1..5, then 0s
    features = {F.TARGET_ROW: tf.constant([3, 99], tf.int64),
                F.HISTORY_ROWS: tf.constant([[0, 5], [6, 1000]], tf.int64)}
    joined = join_items(content)(features)
    images = joined[F.IMAGE_Z].numpy()[joined[F.HISTORY_INDEX].numpy()]
    assert not images[1].any() and images[0, 1].any() and not images[0, 0].any()
    with pytest.raises(FileNotFoundError, match="no item table .*nowhere"):
        item_content(str(tmp_path / "nowhere" / IT.ITEM_TABLE))


def test_deterministic_option_repeats_order(shards):
    files = read_split(shards, "train").files
    runs = [_tags(make_dataset(files, CFG, 8, deterministic=True, seed=3), batches=6) for _ in range(2)]
    assert runs[0] == runs[1]
    assert make_dataset(files, CFG, 8, deterministic=True).options().deterministic


def test_autoshard_and_autotuning_are_off_deliberately(shards):
    assert (dataset_options(False).experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.OFF)
    # Deleting an autotuned iterator waits out the autotune loop's period (dataset_options' doc).
    assert make_dataset(read_split(shards, "train").files, CFG, 8).options().autotune.enabled is False


def test_training_repeats_and_drops_partial_batches(shards):
    ds = make_dataset(read_split(shards, "train").files, CFG, 8, num_workers=2, worker_index=1)
    sizes = [f[F.TARGET_ROW].shape[0] for f, _ in ds.take(20)]   # 20 x 8 > this worker's 45 examples
    assert sizes == [8] * 20


def test_fewer_files_than_workers_falls_back_to_records(tmp_path):
    write_split(tmp_path / "train", 20, CFG, num_shards=1, seed=2)
    files = read_split(tmp_path, "train").files
    parts = [_tags(make_dataset(files, CFG, 4, num_workers=2, worker_index=i, training=False))
             for i in range(2)]
    assert len(parts[0]) == len(parts[1]) == 10 and not set(parts[0]) & set(parts[1])


def test_empty_shards_are_skipped(tmp_path):
    """A worker given only empty shards would spin forever in repeat(); they are left out."""
    write_split(tmp_path / "train", 12, CFG, num_shards=1, seed=4)
    (tmp_path / "train" / "part-empty.tfrecord").write_bytes(b"")
    split = read_split(tmp_path, "train")
    assert [f.name for f in split.files] == ["part-00000-of-00001.tfrecord"] and split.examples == 12
    ds = make_dataset(split.files, CFG, 4, num_workers=2, worker_index=1)
    assert len(list(ds.take(5))) == 5          # record-level sharding over the one real shard


def _manifest(tmp_path, shards):
    manifest = {"format": M.FORMAT, "workers": 2, "compression": "", "splits": {"train": {
        "examples": sum(n for _, n in shards), "shards": [{"name": s, "examples": n} for s, n in shards]}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))


def test_manifest_is_authoritative(tmp_path):
    write_split(tmp_path / "train", 10, CFG, num_shards=2, seed=5)
    (tmp_path / "train" / "part-stray.tfrecord").write_bytes(b"not listed")
    names = ["train/part-00000-of-00002.tfrecord", "train/part-00001-of-00002.tfrecord"]
    _manifest(tmp_path, [(names[0], 5), ("train/part-empty.tfrecord", 0), (names[1], 5)])
    split = read_split(tmp_path, "train")
    assert [f.name for f in split.non_empty] == [n.split("/")[1] for n in names]
    assert split.examples == 10 and split.missing() == []


def test_manifest_of_a_per_worker_staging(tmp_path):
    """A cluster host stages only its worker's shards: sharding still follows the full list."""
    write_split(tmp_path / "train", 10, CFG, num_shards=2, seed=6)
    (tmp_path / "train" / "part-00001-of-00002.tfrecord").unlink()       # worker 1's shard
    _manifest(tmp_path, [("train/part-00000-of-00002.tfrecord", 5),
                         ("train/part-00001-of-00002.tfrecord", 5)])
    split = read_split(tmp_path, "train")
    assert split.missing(worker_files(split.files, 2, 0)) == []
    assert [f.name for f in split.missing(worker_files(split.files, 2, 1))] == [
        "part-00001-of-00002.tfrecord"]
