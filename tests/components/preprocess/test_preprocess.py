"""The whole preprocess step on generated data: outputs, reference equality, the item table, reruns."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.contracts import manifest as M
from pipeline.fsutil import sha256_file
from tests.components.preprocess.helpers import read_split

pytestmark = pytest.mark.integration


def _full_feed(transform_dir, features: dict) -> dict[str, np.ndarray]:
    import tensorflow_transform as tft

    out = tft.TFTransformOutput(transform_dir).transform_raw_features(features)
    return {k: v.numpy() for k, v in out.items()}


def _reference_eval(config, paths, transform_dir) -> dict[str, np.ndarray]:
    """Eval examples computed independently: raw Parquet + one transform call, in shard order."""
    import tensorflow as tf

    from components.preprocess.examples import event_hash

    events = pq.read_table(paths.events_dir(paths.eval_date)).combine_chunks()
    history = tf.ragged.constant(events.column(F.HISTORY).to_pylist(), dtype=tf.int64).to_sparse()
    out = _full_feed(transform_dir, {
        F.HISTORY: history, F.LABEL: tf.constant(events.column(F.LABEL).to_numpy()),
        **{name: tf.constant(events.column(name).to_numpy(zero_copy_only=False).astype(
            str if name == F.PLATFORM else np.int64)) for name in F.EVENT_CONTEXT}})
    keys = event_hash(events.column(F.EVENT_ID).to_pylist())
    shards = M.read(paths.examples_dir)["splits"]["eval"]["num_shards"]
    order = np.lexsort((keys, keys % np.uint64(shards)))
    return {k: v[order] for k, v in out.items()}


def test_outputs_equal_an_independent_reference(tiny_config, pp_paths, pp_result):
    got = read_split(pp_paths.examples_dir, "eval", tiny_config.model)
    want = _reference_eval(tiny_config, pp_paths, pp_result.transform_dir)
    assert len(got[F.LABEL_KEY]) == pp_result.eval_examples == 1500
    assert set(got) == set(F.transformed_feature_spec(tiny_config.model))     # ids only: no content
    for key in got:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert (got[F.HISTORY_IDS] > 0).any() and ((got[F.HISTORY_ROWS] > 0) == (got[F.HISTORY_IDS] > 0)).all()


def test_the_item_table_holds_each_catalog_item_once_as_the_transform_makes_it(tiny_config, pp_paths,
                                                                              pp_result):
    import tensorflow as tf

    from pipeline.contracts import item_table as IT

    manifest = M.read(pp_paths.examples_dir)
    entry = manifest["item_table"]
    path = pp_paths.examples_dir / entry["name"]
    assert path.stat().st_size == entry["bytes"] and sha256_file(path) == entry["sha256"]
    table = pq.read_table(path).sort_by(IT.ITEM_ID)
    assert table.num_rows == entry["rows"] and table.column_names == list(IT.COLUMNS)
    items = pq.read_table(pp_paths.items_dir(pp_paths.eval_date)).sort_by(F.ITEM_ID)
    ids = table.column(IT.ITEM_ID).to_numpy()
    # Every item of the snapshot once (clean tiny data: none refused), shown in the window or not.
    np.testing.assert_array_equal(ids, items.column(F.ITEM_ID).to_numpy())
    assert sorted(table.column(IT.ROW).to_pylist()) == list(range(1, len(ids) + 1))
    want = _full_feed(pp_result.transform_dir, {
        F.TITLE: tf.constant(items.column(F.TITLE).to_pylist()), F.ITEM_ID: tf.constant(ids),
        F.IMAGE: tf.constant(np.stack(items.column(F.IMAGE).to_numpy(zero_copy_only=False)).astype(np.float32))})
    for column, key in ((IT.ROW, F.TARGET_ROW), (IT.EMBEDDING_ID, F.TARGET_ID), (IT.TITLE_IDS, F.TITLE_IDS)):
        values = table.column(column).to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(np.stack(values) if values.dtype == object else values, want[key])
    images = np.stack(table.column(IT.IMAGE).to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(images, want[F.IMAGE_Z], rtol=1e-5, atol=1e-5)
    # The training window's impressions and clicks per item (the eval day never counts).
    files = [f for day in pp_paths.train_dates for f in sorted(pp_paths.events_dir(day).glob("*.parquet"))]
    window = pq.read_table(files, columns=[F.ITEM_ID, F.LABEL]).group_by(F.ITEM_ID).aggregate(
        [(F.LABEL, "count"), (F.LABEL, "sum")])
    shown = dict(zip(window.column(F.ITEM_ID).to_pylist(), window.column(f"{F.LABEL}_count").to_pylist(), strict=True))
    clicks = dict(zip(window.column(F.ITEM_ID).to_pylist(), window.column(f"{F.LABEL}_sum").to_pylist(), strict=True))
    assert table.column(IT.SHOWN).to_pylist() == [shown.get(i, 0) for i in ids.tolist()]
    assert table.column(IT.CLICKS).to_pylist() == [clicks.get(i, 0) for i in ids.tolist()]
    assert sum(shown.values()) == pp_result.train_examples
    # The examples reference it: each example's target row is its item's row.
    got = read_split(pp_paths.examples_dir, "eval", tiny_config.model)
    row_of = dict(zip(table.column(IT.ROW).to_pylist(), table.column(IT.EMBEDDING_ID).to_pylist()))
    assert [row_of[r] for r in got[F.TARGET_ROW].tolist()] == got[F.TARGET_ID].tolist()
    # Items the window never showed have rows too: more rows than items shown in training.
    assert len(set(got[F.TARGET_ROW].tolist())) < len(ids)


def test_manifest_describes_complete_balanced_output(tiny_config, pp_paths, pp_result):
    manifest = M.read(pp_paths.examples_dir)
    workers = tiny_config.train.workers
    pre = tiny_config.preprocess
    train, evals = manifest["splits"]["train"], manifest["splits"]["eval"]
    assert train["num_shards"] == workers * pre.readers_per_worker * pre.shard_multiple
    assert evals["num_shards"] == workers * pre.readers_per_worker
    assert train["examples"] == pp_result.train_examples == 4500
    listed = {s["name"] for split in (train, evals) for s in split["shards"]}
    on_disk = {str(p.relative_to(pp_paths.examples_dir)) for p in pp_paths.examples_dir.rglob("*.tfrecord")}
    assert listed == on_disk                                  # nothing stale, nothing missing
    for split in (train, evals):
        for shard in split["shards"]:
            path = pp_paths.examples_dir / shard["name"]
            assert path.stat().st_size == shard["bytes"] and sha256_file(path) == shard["sha256"]
        by_worker = [n for w in range(workers) for n in split["by_worker"][str(w)]]
        assert sorted(by_worker) == sorted(s["name"] for s in split["shards"])
        sizes = [s["bytes"] for s in split["shards"]]
        assert split["imbalance"] == pytest.approx(max(sizes) / min(sizes)) and split["imbalance"] < 1.5
    assert manifest["transform_fingerprint"] == M.transform_fingerprint(pp_paths.transform_dir)
    report = json.loads(Path(pp_result.report_path).read_text())
    assert report["passed"] and report["splits"]["train"]["rows"] == 4500
    assert M.shard_files(pp_paths.examples_dir, "train", worker=1) == [
        pp_paths.examples_dir / n for n in train["by_worker"]["1"]]


def test_rerun_replaces_outputs_identically(tiny_config, pp_paths, pp_result):
    """Rerun the same date + run id: identical shards and item table, no stale files."""
    from components.preprocess import run

    before = M.read(pp_paths.examples_dir)
    stale = pp_paths.examples_dir / "train" / "part-00099-of-00100.tfrecord"
    stale.write_bytes(b"left over from an older layout")
    result = run(tiny_config, pp_paths)
    after = M.read(pp_paths.examples_dir)
    assert after["item_table"] == before["item_table"]
    assert not stale.exists()
    for split in ("train", "eval"):
        assert after["splits"][split]["shards"] == before["splits"][split]["shards"]   # names, sizes, sha256
    assert result.train_examples == pp_result.train_examples
    assert not list(pp_paths.run_dir.glob(".*"))               # no temp leftovers after success


def test_runner_is_named_and_never_prism(tiny_config):
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    from components.preprocess import pipeline_options
    from components.preprocess.run import FN_API_RUNNER

    small = pipeline_options(tiny_config, events=1000)
    assert small.view_as(StandardOptions).runner == FN_API_RUNNER
    assert small.view_as(DirectOptions).direct_running_mode == "in_memory"
    many_cores = tiny_config.with_overrides({"preprocess.direct_num_workers": 8})
    big = pipeline_options(many_cores, events=10_000_000)
    assert big.view_as(DirectOptions).direct_running_mode == "multi_processing"
    assert big.view_as(DirectOptions).direct_num_workers == 8
    two_cores = tiny_config.with_overrides({"preprocess.direct_num_workers": 2})
    assert pipeline_options(two_cores, events=10_000_000).view_as(DirectOptions).direct_running_mode == "in_memory"
    flags = pipeline_options(tiny_config, ["--direct_running_mode=multi_threading", "--direct_num_workers=3"])
    assert flags.view_as(DirectOptions).direct_running_mode == "multi_threading"
    assert flags.view_as(DirectOptions).direct_num_workers == 3
    other = pipeline_options(tiny_config, ["--runner=FlinkRunner"])
    assert other.view_as(StandardOptions).runner == "FlinkRunner"
