"""The chief's last step before export: the blend fitted on the validation split (popularity
and the linear member fitted on the training split) is what the export serves."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from components import train
from components.train.model.blend import STACK_TERMS
from components.train.worker import export
from components.train.worker.input import make_dataset
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts.popularity import evidence
from pipeline.paths import RunPaths
from tests.components.train.synthetic import write_with_manifest
from tests.conftest import ONE_WORKER, make_tiny_config


def _logit(p):
    p = np.asarray(p, np.float64).ravel()
    return np.log(p / (1 - p))


@pytest.mark.integration
def test_the_export_serves_the_blend_fitted_on_validation(tmp_path, train_data):
    """With the blend's weights zeroed in the loaded export, every eval row's logit moves back by
    exactly the blend's terms: the item table's evidence by the row each example names (the
    counts the chief fitted the blend for) and the linear member's logit on the example's ids,
    from the member's exported weights."""
    transform_paths, _ = train_data
    config = make_tiny_config(tmp_path, **{"train.epochs": 2, "train.batch_size_per_replica": 8, **ONE_WORKER,
                                           "train.learning_rate": 0.002,
                                           "model.title_len": 8, "model.history_len": 10})
    paths = RunPaths.for_run(config, "2026-11-04", "blend")
    data = tmp_path / "data"
    write_with_manifest(data, config.model, shards=8, per_shard=32)
    paths.transform_dir.parent.mkdir(parents=True, exist_ok=True)
    paths.transform_dir.symlink_to(transform_paths.transform_dir)
    m = train.run(config, paths, data_dir=data).metrics
    stack = np.array([m[f"stack_{name}"] for name in STACK_TERMS])
    assert np.abs(stack).max() > 1e-3 and abs(m["stack_linear"]) > 1e-3, m
    assert m["linear_member_rows"] == 7 * 32          # the training shards (1 of 8 held out), no more

    loaded = tf.saved_model.load(str(paths.model_dir))
    serve = loaded.signatures[export.SERVING_TRANSFORMED]
    names = F.example_input_names(config.model)
    batches = list(make_dataset(sorted((data / "eval").glob("*.tfrecord")), config.model, 64, training=False))
    blended = np.concatenate([_logit(serve(**{k: f[k] for k in names})["probability"]) for f, _ in batches])
    weights = [v for v in loaded.model_variables if v.name.endswith("stack:0")]
    member = {v.name.split("/")[-1][:-2]: v.numpy() for v in loaded.model_variables if "linear_member" in v.name}
    assert len(weights) == 1 and set(member) == {"item", "user", "history", "bias"}
    np.testing.assert_allclose(weights[0].numpy(), stack, atol=1e-6)
    weights[0].assign(tf.zeros_like(weights[0]))
    platt = np.concatenate([_logit(serve(**{k: f[k] for k in names})["probability"]) for f, _ in batches])

    model_logit = (platt - m["calibration_b"]) / m["calibration_a"]
    content = IT.dense(IT.read(data / IT.ITEM_TABLE))
    rows = np.concatenate([f[F.TARGET_ROW].numpy().ravel() for f, _ in batches])
    q, s = evidence(content[IT.SHOWN], content[IT.CLICKS])[rows].T.astype(np.float64)
    ids = {k: np.concatenate([f[k].numpy() for f, _ in batches]) for k in (F.TARGET_ID, F.USER_BUCKET, F.HISTORY_IDS)}
    history = member["history"][ids[F.HISTORY_IDS], 0] * (ids[F.HISTORY_IDS] != 0)
    lr = (member["item"][ids[F.TARGET_ID].ravel(), 0] + member["user"][ids[F.USER_BUCKET].ravel(), 0] + member["bias"]
          + history.sum(axis=1) / np.maximum((ids[F.HISTORY_IDS] != 0).sum(axis=1), 1))
    terms = np.stack([q, s, q * s, model_logit * s, lr], axis=1) @ stack
    assert np.abs(terms).max() > 0.01
    # A confident row's float32 probability holds too few digits of its logit: compare the rest.
    exact = np.isfinite(blended) & np.isfinite(platt) & (np.abs(blended) < 8) & (np.abs(platt) < 8)
    assert exact.sum() >= 16, (blended, platt)
    np.testing.assert_allclose((blended - platt)[exact], terms[exact], atol=5e-3)
