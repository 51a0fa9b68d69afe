"""The target-aware default model: one item table, attention that ignores padding, optional users."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from components.train.model.build import VocabSizes, build_model
from components.train.worker.export import call_transformed, transformed_fn
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from tests.components.train.model.test_model import _batch, right_and_left_padded

DIN = ModelConfig(title_len=6, history_len=9, embedding_dim=8, image_units=(16, 8), hidden_units=16,
                  title_vocab_size=30, item_vocab_size=40, oov_buckets=2, user_buckets=20, attention_units=8)


@pytest.fixture(scope="module")
def model():
    return build_model(DIN, VocabSizes.from_config(DIN))


def test_one_item_table_for_target_and_history(model):
    assert model.name == "din_ctr_model"
    assert set(model.input_names) == set(F.model_input_names(DIN))
    tables = [layer for layer in model.layers if layer.name == "item_embedding"]
    assert len(tables) == 1 and tables[0].input_dim == VocabSizes.from_config(DIN).items
    out = model(_batch(5, DIN)).numpy()
    assert out.shape == (5, 1) and ((out > 0) & (out < 1)).all()


def test_prediction_depends_on_the_target_through_the_history(model):
    """The same user and history with another shown item scores differently, and moving the
    history's padding changes nothing (masked attention and mean)."""
    batch, shifted = right_and_left_padded(_batch(1, DIN))
    np.testing.assert_allclose(model(batch).numpy(), model(shifted).numpy(), atol=1e-6)
    other = {k: v.copy() for k, v in batch.items()}
    other[F.TARGET_ID][:] = (batch[F.TARGET_ID] % 30) + 3
    assert abs(float(model(other)[0, 0]) - float(model(batch)[0, 0])) > 1e-7
    empty = {k: v.copy() for k, v in batch.items()}
    empty[F.HISTORY_IDS][:] = 0                               # no history at all: finite output
    assert np.isfinite(model(empty).numpy()).all()


def test_user_embedding_is_optional():
    cfg = dataclasses.replace(DIN, user_buckets=0)
    names = {layer.name for layer in build_model(cfg, VocabSizes.from_config(cfg)).layers}
    assert {"user_embedding", "user_memory"}.isdisjoint(names) and "target_attention" in names


@pytest.mark.parametrize("serving_xla", [None, True])
def test_serving_function_matches_the_model_plain_and_xla(model, serving_xla):
    """The default (plain) export's model part and the XLA-compiled one both predict what the model does."""
    cfg = dataclasses.replace(DIN, serving_xla=serving_xla)
    assert cfg.xla_export is bool(serving_xla)
    batch = _batch(4, DIN)
    got = call_transformed(transformed_fn(model, cfg), {k: tf.constant(v) for k, v in batch.items()}, cfg)
    np.testing.assert_allclose(got.numpy(), model(batch).numpy(), atol=1e-5)


def test_training_calls_carry_the_row_penalties_and_inference_calls_none(model):
    """`training=True` reaches every layer of the functional model: the title, item (target and
    history) and user rows are penalised beside the two memories' fitting losses; a plain call
    adds no loss."""
    batch = _batch(4, DIN)
    model(batch, training=True)
    assert len(model.losses) == 6 and all(float(loss) >= 0 for loss in model.losses)
    model(batch)
    assert model.losses == []


def test_content_memory_learns_what_shown_items_look_like_and_reads_it_for_the_history():
    from components.train.model.din import ContentMemory

    layer = ContentMemory(rows=10, units=4, weight=1.0)
    image = tf.random.stateless_normal((3, F.IMAGE_DIM), seed=(1, 2))
    target, history = tf.constant([3, 5, 3]), tf.constant([[0, 3, 5], [0, 0, 0], [5, 5, 0]])
    code, history_code = layer(target, image, history, training=True)
    assert len(layer.losses) == 1 and float(layer.losses[0]) > 0          # rows start at 0: a loss to fit
    np.testing.assert_array_equal(history_code.numpy(), np.zeros((3, 4)))
    layer.table.assign(tf.tensor_scatter_nd_update(tf.zeros((10, 4)), [[3], [5]], [[1.0] * 4, [3.0] * 4]) / layer.SCALE)
    _, history_code = layer(target, image, history, training=False)
    np.testing.assert_allclose(history_code.numpy(), [[2.0] * 4, [0.0] * 4, [3.0] * 4], rtol=1e-6)  # masked mean
    assert code.shape == (3, 4) and layer.trainable_weights[0] is not layer.projection


def test_user_memory_converges_to_the_mean_history_code_of_each_user():
    """Two requests of user 2 with different history codes: the user's row is fitted to their
    mean; a request without history (user 4) pulls nothing, so its row stays 0."""
    from components.train.model.din import UserMemory

    layer = UserMemory(rows=6, weight=1.0)
    codes = tf.constant([[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]])
    users, has_history = tf.constant([2, 2, 4]), tf.constant([True, True, False])
    optimizer = tf.keras.optimizers.SGD(2e-4)      # the row moves by 2 x SCALE**2 x lr of its error
    for _ in range(200):
        with tf.GradientTape() as tape:
            layer(codes, users, has_history, training=True)
            loss = tf.add_n(layer.losses)
        optimizer.apply_gradients(zip(tape.gradient(loss, layer.trainable_weights), layer.trainable_weights))
    pooled = layer(codes, users, has_history, training=False).numpy()
    np.testing.assert_allclose(pooled[0], [2.0, 1.0], atol=1e-3)
    np.testing.assert_array_equal(pooled[2], [0.0, 0.0])


def test_builds_and_stays_finite_under_mixed_precision():
    """GPU workers train in mixed_float16: the parts must share a dtype and an empty history
    (a new user) must not turn the masked softmax into NaN (-1e9 is -inf in float16)."""
    import tf_keras as keras

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = build_model(DIN, VocabSizes.from_config(DIN))
        batch = _batch(2, DIN)
        batch[F.HISTORY_IDS][:] = 0
        out = model(batch).numpy()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert out.dtype == np.float32 and np.isfinite(out).all()


def test_attention_is_the_mlp_over_query_key_difference_and_product():
    """The split-kernel computation is DIN's MLP over [q, k, q - k, q * k], with padding masked."""
    from components.train.model.din import TargetAttention

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((3, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], bool)
    layer = TargetAttention(6)
    got = layer(tf.constant(q), tf.constant(k), tf.constant(mask)).numpy()
    assert [v.name for v in layer.variables] == [
        "target_attention/att_hidden/kernel:0", "target_attention/att_hidden/bias:0",
        "target_attention/att_score/kernel:0", "target_attention/att_score/bias:0"]
    qb = np.broadcast_to(q[:, None, :], k.shape)
    hidden = np.maximum(np.concatenate([qb, k, qb - k, qb * k], -1) @ layer.hidden.kernel.numpy()
                        + layer.hidden.bias.numpy(), 0)
    scores = (hidden @ layer.score.kernel.numpy())[..., 0] + layer.score.bias.numpy()
    masked = np.where(mask, scores, -1e9)
    weights = np.exp(masked - masked.max(-1, keepdims=True)) * mask
    weights = weights / np.maximum(weights.sum(-1, keepdims=True), 1e-30)
    np.testing.assert_allclose(got, (weights[..., None] * k).sum(1), atol=1e-5)
    np.testing.assert_array_equal(got[2], 0)                 # no history: zeros


def test_row_penalty_covers_the_looked_up_rows_once_and_keeps_the_gradient_sparse():
    from components.train.model.embedding import RowEmbedding

    layer = RowEmbedding(50, 4, l2=0.5)
    ids = tf.constant([[3, 3, 7], [7, 0, 3]])
    with tf.GradientTape() as tape:
        out = layer(ids, training=True)
        penalty = tf.add_n(layer.losses)
    table = layer.embeddings.numpy()
    np.testing.assert_allclose(out.numpy(), table[ids.numpy()])
    np.testing.assert_allclose(float(penalty), 0.5 * (table[[0, 3, 7]] ** 2).sum(), rtol=1e-6)
    grad = tape.gradient(penalty, layer.embeddings)
    assert isinstance(grad, tf.IndexedSlices)                # not the whole table: LazyAdam stays lazy
    assert sorted(set(grad.indices.numpy().tolist())) == [0, 3, 7]
    np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy()[7], table[7], rtol=1e-6)   # 2 * 0.5 * w


def test_row_lookup_at_inference_pays_no_penalty_and_no_unique():
    """Validation, evaluation and the serving export look rows up directly: the same vectors,
    no penalty, and no tf.unique in the graph a request runs."""
    from components.train.model.embedding import RowEmbedding

    layer = RowEmbedding(50, 4, l2=0.5)
    ids = tf.constant([[3, 3, 7], [7, 0, 3]])
    lookup = tf.function(lambda x: layer(x, training=False))
    out = lookup(ids)
    np.testing.assert_allclose(out.numpy(), layer.embeddings.numpy()[ids.numpy()])
    assert layer.losses == []
    ops = {op.type for op in lookup.get_concrete_function(ids).graph.get_operations()}
    assert "Unique" not in ops and "ResourceGather" in ops
