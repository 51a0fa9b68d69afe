"""The reference (seed) model: shapes, a forward pass, sizes from config, optimiser scaling."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from components.train.model import tower
from components.train.model.build import VocabSizes, build_model, compile_model, global_batch_size, scaled_learning_rate
from pipeline.config import ModelConfig, TrainConfig
from pipeline.contracts import features as F
from pipeline.contracts import serving

TINY = ModelConfig(title_len=6, history_len=9, embedding_dim=8, lstm_units=8,
                   image_units=(16, 8), hidden_units=16, title_vocab_size=30,
                   item_vocab_size=40, oov_buckets=2, user_buckets=20, architecture="reference")


def _window_counts(items: int) -> tuple[np.ndarray, np.ndarray]:
    """Impressions and clicks of items 0..items-1 (fixed, so the table by_reference builds agrees)."""
    u = np.arange(items, dtype=np.float32)
    return 3 * u + 1, u % 3


def _batch(n, cfg=TINY, vocab=VocabSizes.from_config(TINY)):
    """Every model input of a joined batch (see model/tower.py): 2n distinct items, the shown
    item i is item i, the history draws from all of them."""
    rng = np.random.default_rng(0)
    batch = {F.TITLE_IDS: rng.integers(0, vocab.title, (2 * n, cfg.title_len)),
             F.IMAGE_Z: rng.standard_normal((2 * n, F.IMAGE_DIM)).astype(np.float32),
             F.TARGET_INDEX: np.arange(n), F.HISTORY_INDEX: rng.integers(0, 2 * n, (n, cfg.history_len)),
             F.HISTORY_IDS: rng.integers(0, vocab.items, (n, cfg.history_len)),
             F.TARGET_ID: rng.integers(1, vocab.items, n), F.USER_BUCKET: rng.integers(1, vocab.users, n),
             F.PLATFORM_ID: rng.integers(0, 4, n), F.HOUR_ID: rng.integers(0, 25, n)}
    return batch


def by_reference(batch: dict) -> tuple[dict, dict]:
    """The same batch as the export sees it: (item table content with item u at row u + 1,
    transformed example features referencing those rows; padding at row 0)."""
    from pipeline.contracts import item_table as IT

    items = len(batch[F.TITLE_IDS])
    content = {IT.TITLE_IDS: np.concatenate([np.zeros_like(batch[F.TITLE_IDS][:1]), batch[F.TITLE_IDS],
                                             np.zeros_like(batch[F.TITLE_IDS][:1])]),
               IT.IMAGE: np.concatenate([np.zeros((1, F.IMAGE_DIM), np.float32), batch[F.IMAGE_Z],
                                         np.zeros((1, F.IMAGE_DIM), np.float32)]),
               IT.EMBEDDING_ID: np.r_[0, np.arange(1, items + 1), 0]}
    shown, clicks = _window_counts(items)
    content.update({IT.SHOWN: np.r_[0, shown, 0].astype(np.float32), IT.CLICKS: np.r_[0, clicks, 0].astype(np.float32)})
    rows = np.where(batch[F.HISTORY_IDS] > 0, batch[F.HISTORY_INDEX] + 1, 0)
    features = {F.TARGET_ROW: batch[F.TARGET_INDEX] + 1, F.HISTORY_ROWS: rows,
                **{k: batch[k] for k in (F.HISTORY_IDS, F.TARGET_ID, F.USER_BUCKET, F.PLATFORM_ID, F.HOUR_ID)}}
    return content, {k: tf.constant(v) for k, v in features.items()}


@pytest.fixture(scope="module")
def model():
    return build_model(TINY, VocabSizes.from_config(TINY))


def test_forward_pass_shapes_and_range(model):
    out = model(_batch(5)).numpy()
    assert out.shape == (5, 1)
    assert ((out > 0) & (out < 1)).all()


def test_layer_sizes_follow_config(model):
    vocab = VocabSizes.from_config(TINY)
    layers = tower.layers(model)
    assert vocab == VocabSizes(title=30 + 2 + 1, items=40 + 2 + 1, users=20 + 1)   # + OOV + padding id
    assert layers["title_embedding"].input_dim == vocab.title
    assert layers["item_embedding"].input_dim == vocab.items
    assert layers["item_embedding"].output_dim == TINY.embedding_dim
    assert layers["history_lstm"].units == layers["title_lstm"].units == TINY.lstm_units
    assert [layers[f"image_dense_{i}"].units for i in range(2)] == [16, 8]
    assert layers["hidden"].units == TINY.hidden_units
    assert layers["concat_history"].output.shape[-1] == 2 * TINY.lstm_units + 8
    assert layers["probability"].units == 1


def test_reference_sizes_by_default():
    """Defaults are the reference design: 128-d embeddings, LSTM 64, image 128->64, MLP 256."""
    cfg = ModelConfig(architecture="reference")
    model = build_model(cfg, VocabSizes(title=100, items=100))
    layers = tower.layers(model)
    assert layers["item_embedding"].output_dim == 128
    assert layers["history_lstm"].units == 64
    assert [layers["image_dense_0"].units, layers["image_dense_1"].units] == [128, 64]
    assert layers["hidden"].units == 256
    assert layers["history_lstm"].input.shape[1:] == (50, 128)   # 50 x 128 sequence


def right_and_left_padded(batch: dict) -> tuple[dict, dict]:
    """The same three-item history (ids and content) padded at the end and at the start."""
    right = {k: v.copy() for k, v in batch.items()}
    right[F.HISTORY_IDS][:] = 0
    right[F.HISTORY_IDS][0, -3:] = [5, 6, 7]
    right[F.HISTORY_INDEX][0, -3:] = [1, 0, 1]
    left = {k: v.copy() for k, v in right.items()}
    left[F.HISTORY_IDS][0, :] = 0
    left[F.HISTORY_IDS][0, :3] = [5, 6, 7]
    left[F.HISTORY_INDEX][0, :3] = [1, 0, 1]
    return right, left


def test_padding_is_masked(model):
    """Moving the padding of the history must not change the prediction (mask_zero)."""
    batch, shifted = right_and_left_padded(_batch(1))
    np.testing.assert_allclose(model(batch).numpy(), model(shifted).numpy(), atol=1e-6)


def test_optimizer_scaled_by_replicas(model):
    train = TrainConfig(learning_rate=0.001, batch_size_per_replica=32, clip_norm=5.0)
    compile_model(model, train, replicas=4)
    assert global_batch_size(train, 4) == 128
    assert scaled_learning_rate(train, 4) == pytest.approx(0.004)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.004)
    assert model.optimizer.global_clipnorm == 5.0
    assert model.optimizer.jit_compile is False         # plain update by default (see model.py)
    assert model.distribute_reduction_method == "first"     # no per-step metric collectives
    assert isinstance(model.loss, tf.keras.losses.BinaryCrossentropy)
    assert [m.name for m in model.compiled_metrics._user_metrics] == ["auc", "accuracy"]


@pytest.mark.parametrize("serving_xla", [True, False])
def test_serving_function_xla_switch_keeps_predictions(model, tmp_path, serving_xla):
    """`model.serving_xla` changes how the export runs (XLA-fused loops, and the TF Serving flag
    it then needs), never what it predicts; the SavedModel marks exactly the XLA case. Unset,
    XLA is where it pays: this recurrent reference model (the loop-free DIN: test_din.py), so the
    unset case is the True case (asserted here, not compiled a third time)."""
    import dataclasses

    from components.train.worker.saved_model_facts import tf_serving_flags
    from components.train.worker.scoring import Scoring, call_transformed, transformed_fn

    assert dataclasses.replace(TINY, serving_xla=None).xla_export is True
    cfg = dataclasses.replace(TINY, serving_xla=serving_xla)
    xla = serving_xla
    assert cfg.xla_export is xla
    # Without XLA the fixed-length LSTMs are unrolled (no per-step executor overhead).
    assert tower.layers(build_model(cfg, VocabSizes.from_config(cfg)))["history_lstm"].unroll is not xla
    batch = _batch(3)
    content, features = by_reference(batch)
    scoring = Scoring(model, content, cfg)
    serve = transformed_fn(scoring, cfg)
    got = call_transformed(serve, features, cfg)
    np.testing.assert_allclose(got.numpy(), model(batch).numpy(), atol=1e-6)
    module = tf.Module()
    module.model_variables, module.item_vectors = list(model.variables), scoring.vectors
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"serving_transformed": serve})
    assert tf_serving_flags(tmp_path / "m") == ([serving.XLA_SERVING_FLAG] if xla else [])
    # Saved without the export's facts (an older export): push's fallback still asks for the flag.
    assert set(tf_serving_flags(tmp_path / "m")) <= set(serving.export_facts(tmp_path / "m")["tf_serving_flags"])
