"""Preprocess on Beam's portable runner: the Job API, the runner-API pipeline proto, SDK workers
as separate processes started by an EXTERNAL worker pool (tests/components/preprocess/portable.py).

The session's DirectRunner run (`preprocessed`) is the reference: the same date and config, a
different run id, `preprocess.runner: PortableRunner` with the endpoints in `preprocess.beam_args`.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.contracts import manifest as M
from pipeline.fsutil import sha256_file
from tests.components.preprocess.helpers import RUN_DATE
from tests.components.preprocess.portable import portable_stack

pytestmark = pytest.mark.integration

# The files of transform/ that differ between ANY two runs, DirectRunner ones included (diffed):
# the SavedModel graph (transform_fn/saved_model.pb) names its vocabulary hash tables after the
# analyzers' files under the run's own hidden temp dir, and its traced functions with TF's
# process-wide counters (`__inference__initializer_5773` vs `_4182`); fingerprint.pb hashes it.
# The graph is compared by what it computes instead (below).
RUN_SPECIFIC = {"transform_fn/saved_model.pb", "transform_fn/fingerprint.pb"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with portable_stack(tmp_path_factory.mktemp("portable")) as running:
        yield running


def _files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def _transform(transform_dir: Path, items, events) -> dict[str, np.ndarray]:
    """The transform graph on the run's own raw items and eval-day events (one call each)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    out = tft.TFTransformOutput(str(transform_dir))
    item_feed = {F.TITLE: tf.constant(items.column(F.TITLE).to_pylist()),
                 F.ITEM_ID: tf.constant(items.column(F.ITEM_ID).to_numpy()),
                 F.IMAGE: tf.constant(np.stack(items.column(F.IMAGE).to_numpy(zero_copy_only=False))
                                      .astype(np.float32))}
    event_feed = {F.HISTORY: tf.ragged.constant(events.column(F.HISTORY).to_pylist(), dtype=tf.int64).to_sparse(),
                  F.LABEL: tf.constant(events.column(F.LABEL).to_numpy()),
                  **{name: tf.constant(events.column(name).to_numpy(zero_copy_only=False).astype(
                      str if name == F.PLATFORM else np.int64)) for name in F.EVENT_CONTEXT}}
    got = {}
    for tag, feed in (("item", item_feed), ("event", event_feed)):
        for key, value in out.transform_raw_features(feed).items():
            got[f"{tag}:{key}"] = value.numpy()
    return got


def test_preprocess_on_the_portable_runner_equals_the_direct_runner(tiny_config, pp_paths, pp_result, stack,
                                                                    caplog):
    import tensorflow as tf

    from components.preprocess import run
    from pipeline.paths import RunPaths

    config = tiny_config.with_overrides({"preprocess.runner": "PortableRunner",
                                         "preprocess.beam_args": stack.beam_args})
    paths = RunPaths.for_run(config, RUN_DATE, "portable")
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    started = time.monotonic()
    with caplog.at_level(logging.INFO):
        result = run(config, paths)
    took = time.monotonic() - started
    # It ran on the stack: the pre-flight's worker called back, then the job's own workers were started.
    assert f"worker pool {stack.pool_endpoint} started an SDK worker that called back" in caplog.text
    starts = [line for line in stack.pool_log.read_text().splitlines() if "Starting worker with command" in line]
    assert len(starts) >= 2 and any("reco-pool-check" not in line for line in starts), starts
    assert "Job state changed to DONE" in caplog.text                      # the Job API's state stream
    assert (result.train_examples, result.eval_examples) == (pp_result.train_examples, pp_result.eval_examples)

    # The shards: the same names, counts, bytes and sha256, in the manifest and on disk.
    want, got = M.read(pp_paths.examples_dir), M.read(paths.examples_dir)
    for split in M.SPLITS:
        assert got["splits"][split]["shards"] == want["splits"][split]["shards"], split
        for shard in got["splits"][split]["shards"]:
            assert sha256_file(paths.examples_dir / shard["name"]) == shard["sha256"], shard["name"]
    assert got["item_table"] == want["item_table"]                          # rows, bytes, sha256
    assert sha256_file(paths.examples_dir / got["item_table"]["name"]) == want["item_table"]["sha256"]

    # The transform output: every file there, each byte-identical but the run-specific graph.
    mine, ref = _files(paths.transform_dir), _files(pp_paths.transform_dir)
    assert set(mine) == set(ref)
    assert {name for name in mine if name.startswith("transform_fn/assets/")}      # the vocabularies
    assert {"transformed_metadata/schema.pbtxt"} <= set(mine)
    for name in sorted(set(mine) - RUN_SPECIFIC):
        assert mine[name].read_bytes() == ref[name].read_bytes(), name
    # (the variables' checkpoint is among those bytes; its values, named, once more)
    reader, ref_reader = (tf.train.load_checkpoint(str(d / "transform_fn" / "variables" / "variables"))
                          for d in (paths.transform_dir, pp_paths.transform_dir))
    shapes = reader.get_variable_to_shape_map()
    assert shapes == ref_reader.get_variable_to_shape_map()
    for name in shapes:
        np.testing.assert_array_equal(reader.get_tensor(name), ref_reader.get_tensor(name), err_msg=name)
    # The graph: the same outputs for the run's own raw items and eval-day events.
    items = pq.read_table(paths.items_dir(paths.eval_date))
    events = pq.read_table(paths.events_dir(paths.eval_date)).combine_chunks()
    portable, direct = (_transform(d, items, events) for d in (paths.transform_dir, pp_paths.transform_dir))
    assert set(portable) == set(direct)
    for key in portable:
        np.testing.assert_array_equal(portable[key], direct[key], err_msg=key)
    logging.getLogger(__name__).info("portable preprocess took %.1f s", took)


def test_a_pool_that_cannot_start_a_worker_fails_the_step_in_seconds_naming_the_cause(tiny_config, raw_data,
                                                                                       tmp_path):
    """The pool's `python` (first on its PATH) lacks apache_beam: without the pre-flight the job
    waits for a worker that never comes and dies after job_server_timeout (300 s) with a bare
    DEADLINE_EXCEEDED."""
    from components.preprocess import run
    from components.preprocess.run import WorkerPoolError
    from pipeline.paths import RunPaths

    system = shutil.which("python3", path="/usr/bin:/bin")
    if not system or subprocess.run([system, "-c", "import apache_beam"], capture_output=True).returncode == 0:
        pytest.skip("no python3 without apache_beam on this host to break the pool with")
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "python").symlink_to(system)
    with portable_stack(tmp_path / "stack", python_dir=broken) as stack:
        config = tiny_config.with_overrides({"preprocess.runner": "PortableRunner",
                                             "preprocess.beam_args": stack.beam_args})
        paths = RunPaths.for_run(config, RUN_DATE, "portable-broken-pool")
        shutil.rmtree(paths.run_dir, ignore_errors=True)
        started = time.monotonic()
        with pytest.raises(WorkerPoolError) as failed:
            run(config, paths)
        took = time.monotonic() - started
        pool_log = stack.pool_log.read_text()
    assert took < 60, took
    message = str(failed.value)
    assert stack.pool_endpoint in message and "PATH" in message and "apache_beam" in message, message
    assert "ModuleNotFoundError: No module named 'apache_beam'" in pool_log       # what the message says
    assert not paths.examples_dir.exists() and not paths.transform_dir.exists()
    assert not list(paths.run_dir.glob(".*"))                                   # no temp output left
