"""The real thing: a 2-worker MWMS gang on real tf.Transform output, killed and resumed.

One module-scoped scenario keeps the suite within budget on 2 cores: launch 2 workers, SIGKILL
worker 1 once epoch 1 is backed up, check the launcher fails fast naming it and leaves no
process, then relaunch the same run and check it resumes from the backup, learns, and exports
a raw-feature model that agrees with Beam's transform + the bare model (the skew check).
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import psutil
import pytest
import tensorflow as tf

from components import train
from components.train.gang.launcher import GangError
from components.train.worker import export
from pipeline.contracts import features as F
from tests.components.train.conftest import EVAL_ROWS, GANG, TRAIN_ROWS, saved_epoch, worker_processes
from tests.components.train.tft_fixture import read_in_raw_order

pytestmark = pytest.mark.integration


def _kill_worker_after_first_epoch(paths, facts: dict) -> None:
    """Watcher thread: once progress.json says epoch 1 is backed up, SIGKILL worker 1 (a real kill, mid-training)."""
    progress = paths.train_dir / "progress.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        backed_up = json.loads(progress.read_text())["backed_up_epochs"] if progress.exists() else 0
        if backed_up >= 1:
            facts["pids"] = [p.pid for p in worker_processes()]
            victim = worker_processes(index=1)[0]
            facts["backed_up_at_kill"] = backed_up
            os.kill(victim.pid, signal.SIGKILL)
            facts["killed_at"] = time.monotonic()
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def gang_config(train_config):
    return train_config.with_overrides(GANG)


@pytest.fixture(scope="module")
def scenario(gang_config, train_data):
    paths, eval_raw = train_data
    facts: dict = {}
    watcher = threading.Thread(target=_kill_worker_after_first_epoch, args=(paths, facts))
    watcher.start()
    try:
        train.run(gang_config, paths)
    except GangError as err:
        facts["error"], facts["failed_at"] = err, time.monotonic()
    watcher.join()
    facts["leftover"] = [p.pid for p in worker_processes()]
    facts["saved_epoch"] = saved_epoch(paths.backup_dir)
    facts["result"] = train.run(gang_config, paths)           # the orchestrator's retry
    return paths, eval_raw, facts


def test_killed_worker_fails_the_gang_fast_and_is_named(scenario):
    _, _, facts = scenario
    err = facts.get("error")
    assert err is not None, "the launcher did not fail after a worker was killed"
    assert err.worker == 1 and err.exit_code == -signal.SIGKILL
    assert "worker-1" in str(err) and "SIGKILL" in str(err)
    assert facts["failed_at"] - facts["killed_at"] < 15      # kill_grace_s=2 + polling
    assert facts["leftover"] == []
    for pid in facts["pids"]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_relaunch_resumes_from_the_backup(scenario, gang_config):
    paths, _, facts = scenario
    result = facts["result"]
    assert facts["saved_epoch"] + 1 >= facts["backed_up_at_kill"] >= 1
    assert result.initial_epoch == facts["saved_epoch"] + 1       # resumed, not restarted
    assert 1 <= result.initial_epoch < gang_config.train.epochs
    card = json.loads((paths.train_dir / "model_card.json").read_text())
    assert card["initial_epoch"] == result.initial_epoch
    assert not paths.backup_dir.exists()            # removed once the model was published


def test_two_workers_learn(scenario):
    result = scenario[2]["result"]
    assert result.workers == 2
    assert result.metrics["eval_auc"] > 0.8, result.metrics
    assert result.metrics["train_auc"] > 0.8, result.metrics
    assert result.examples_per_s > 0
    # Every worker's heartbeat counted its batches and its last beat said it exited cleanly.
    from components.train.gang import heartbeat

    beats = [heartbeat.read(scenario[0].logs_dir / f"worker-{i}.ready") for i in range(2)]
    assert all(b.steps > 0 and b.phase == heartbeat.DONE for b in beats), beats


def test_model_card(scenario, gang_config):
    paths, _, facts = scenario
    card = json.loads((paths.model_dir / "model_card.json").read_text())
    assert card["data_window"] == {"train_dates": ["2026-11-01", "2026-11-02", "2026-11-03"],
                                   "eval_date": "2026-11-04"}
    assert card["examples"] == {"train": TRAIN_ROWS, "eval": EVAL_ROWS}
    assert card["workers"] == 2 and card["replicas"] == 2
    assert card["epochs"] == gang_config.train.epochs
    assert card["global_batch_size"] == 16 and card["learning_rate"] == pytest.approx(0.005)
    assert card["collective"] == "RING" and card["mixed_precision"] is False
    assert card["metrics"] == pytest.approx(facts["result"].metrics)
    assert card["training_examples_per_s"] > 0


def test_only_the_chief_wrote_outputs(scenario):
    paths = scenario[0]
    assert list(paths.tensorboard_dir.glob("events.out.tfevents.*"))
    leftovers = [p for p in paths.train_dir.rglob("*") if "workertemp" in p.name
                 or p.name.startswith(".model.")]
    assert leftovers == []
    assert sorted(p.name for p in (paths.logs_dir).glob("*.log")) == ["worker-0.log", "worker-1.log"]


def _padded(histories, left: bool) -> np.ndarray:
    width = max(1, max(len(h) for h in histories))
    out = np.zeros((len(histories), width), np.int64)
    for i, h in enumerate(histories):
        if h:
            start = width - len(h) if left else 0
            out[i, start:start + len(h)] = h
    return out


def test_raw_export_matches_transform_then_model(scenario, gang_config):
    """Training/serving skew check: raw features through the exported graph vs Beam's output."""
    paths, eval_raw, _ = scenario
    loaded = tf.saved_model.load(str(paths.model_dir))
    raw = {name: tf.constant(np.stack([r[name] for r in eval_raw]) if name == F.IMAGE else [r[name] for r in eval_raw],
                             dtype=F.RAW_SERVING_DTYPES[name]) for name in F.RAW_SERVING_FEATURES if name != F.HISTORY}
    histories = [r[F.HISTORY] for r in eval_raw]
    serve = loaded.signatures[export.SERVING_DEFAULT]
    raw_right = serve(**raw, history_item_ids=tf.constant(_padded(histories, left=False)))["probability"]
    raw_left = serve(**raw, history_item_ids=tf.constant(_padded(histories, left=True)))["probability"]

    beam = read_in_raw_order(paths.staged_dir / "eval", paths.transform_dir, eval_raw, gang_config.model)
    bare = loaded.signatures[export.SERVING_TRANSFORMED](
        **{name: tf.constant(beam[name]) for name in F.example_input_names(gang_config.model)})["probability"]
    np.testing.assert_allclose(raw_right.numpy(), bare.numpy(), atol=1e-5, rtol=0)
    by_id = loaded.signatures[export.SERVING_BY_ID](
        **{k: raw[k] for k in F.BY_ID_SERVING_FEATURES if k != F.HISTORY},
        history_item_ids=tf.constant(_padded(histories, left=False)))["probability"]
    np.testing.assert_allclose(by_id.numpy(), raw_right.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(raw_left.numpy(), raw_right.numpy(), atol=1e-6, rtol=0)
    assert raw_right.shape == (len(eval_raw), 1)
    assert np.std(raw_right.numpy()) > 0.05                     # not a constant model

    serialized = tf.constant([export.raw_example(r) for r in eval_raw[:20]])
    by_example = loaded.signatures[export.SERVING_EXAMPLES](examples=serialized)["probability"]
    regress = loaded.signatures[export.REGRESS](inputs=serialized)["outputs"]
    np.testing.assert_allclose(by_example.numpy(), raw_right.numpy()[:20], atol=1e-6)
    np.testing.assert_allclose(regress.numpy(), raw_right.numpy()[:20], atol=1e-6)


def test_by_id_names_an_item_newer_than_the_table_and_raw_features_still_score_it(scenario):
    paths = scenario[0]
    loaded = tf.saved_model.load(str(paths.model_dir))
    request = {F.ITEM_ID: tf.constant([3, 4242], tf.int64), F.HISTORY: tf.constant([[1, 2], [0, 0]], tf.int64),
               F.USER_ID: tf.constant([1, 2], tf.int64), F.PLATFORM: tf.constant(["ios", "web"]),
               F.HOUR: tf.constant([5, 6], tf.int64)}
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not in the item table exported with this model.*4242"):
        loaded.signatures[export.SERVING_BY_ID](**request)
    raw = loaded.signatures[export.SERVING_DEFAULT](
        **request, title=tf.constant(["Sale Lamp!", "New Mug!"]),
        image_embedding=tf.ones([2, F.IMAGE_DIM]))["probability"].numpy()
    assert raw.shape == (2, 1) and np.isfinite(raw).all()


def test_signatures_for_tf_serving(scenario):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((scenario[0].model_dir / "saved_model.pb").read_bytes())
    sigs = proto.meta_graphs[0].signature_def
    assert set(sigs["serving_default"].inputs) == set(F.RAW_SERVING_FEATURES)
    assert set(sigs["serving_default"].outputs) == {"probability"}
    assert set(sigs[export.SERVING_EXAMPLES].inputs) == {"examples"}
    assert sigs[export.REGRESS].method_name == "tensorflow/serving/regress"
    assert set(sigs[export.REGRESS].inputs) == {"inputs"}
    assert set(sigs[export.SERVING_BY_ID].inputs) == set(F.BY_ID_SERVING_FEATURES)
    card = json.loads((scenario[0].model_dir / "model_card.json").read_text())
    assert 0 < card["export"]["variables_mib"] < card["export"]["total_mib"]
    assert export.SERVING_BY_ID in card["signatures"]
