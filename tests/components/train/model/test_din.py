"""The target-aware default model: one item embedding, history content read, padding ignored, optional users."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from components.train.model import tower
from components.train.model.build import VocabSizes, build_model
from components.train.worker.scoring import Scoring, call_transformed, transformed_fn
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from tests.components.train.model.test_model import _batch, by_reference, right_and_left_padded

DIN = ModelConfig(title_len=6, history_len=9, embedding_dim=8, image_units=(16, 8), hidden_units=16,
                  title_vocab_size=30, item_vocab_size=40, oov_buckets=2, user_buckets=20)
VOCAB = VocabSizes.from_config(DIN)


@pytest.fixture(scope="module")
def model():
    """Seeded: an unseeded untrained model now and then has every hidden ReLU dead for the one
    row a test scores (it then outputs 0.5 for any shown item), a flake, not a finding."""
    tf.keras.utils.set_random_seed(7)
    return build_model(DIN, VocabSizes.from_config(DIN))


def test_one_item_table_for_target_and_history(model):
    assert model.name == "din_ctr_model"
    assert set(model.input_names) == set(F.model_input_spec(DIN))
    tables = [layer for layer in model.submodules if getattr(layer, "name", "") == "item_embedding"]
    assert len(tables) == 1 and tables[0].input_dim == VOCAB.items
    out = model(_batch(5, DIN, VOCAB)).numpy()
    assert out.shape == (5, 1) and ((out > 0) & (out < 1)).all()


def test_prediction_depends_on_the_target_through_the_history(model):
    """The same user and history with another shown item scores differently, and moving the
    history's padding changes nothing (masked means)."""
    batch, shifted = right_and_left_padded(_batch(1, DIN, VOCAB))
    np.testing.assert_allclose(model(batch).numpy(), model(shifted).numpy(), atol=1e-6)
    other = {k: v.copy() for k, v in batch.items()}
    other[F.TARGET_ID][:] = (batch[F.TARGET_ID] % 30) + 3
    assert abs(float(model(other)[0, 0]) - float(model(batch)[0, 0])) > 1e-7
    empty = {k: v.copy() for k, v in batch.items()}
    empty[F.HISTORY_IDS][:] = 0                               # no history at all: finite output
    assert np.isfinite(model(empty).numpy()).all()


def test_the_history_items_own_content_moves_the_prediction(model):
    """Same ids, another look for one history item: the score changes (the content is read),
    and the change is the same through the export's precomputed item vectors."""
    batch = _batch(2, DIN, VOCAB)
    batch[F.HISTORY_IDS][:] = 3                    # one OOV-like id everywhere: ids tell nothing apart
    batch[F.HISTORY_INDEX][0, 0] = 3               # items 2, 3 are in histories only (targets: 0, 1)
    other = {k: v.copy() for k, v in batch.items()}
    other[F.IMAGE_Z][3] += 3.0
    assert abs(float(model(other)[0, 0]) - float(model(batch)[0, 0])) > 1e-6
    for b in (batch, other):
        content, features = by_reference(b)
        np.testing.assert_allclose(Scoring(model, content, DIN).by_rows(features).numpy(), model(b).numpy(),
                                   atol=1e-5)


def test_user_embedding_is_optional():
    cfg = dataclasses.replace(DIN, user_buckets=0)
    names = set(tower.layers(build_model(cfg, VocabSizes.from_config(cfg))))
    assert {"user_embedding", "user_memory"}.isdisjoint(names) and "item_embedding" in names


def test_without_interactions_the_dense_layers_read_the_plain_vectors():
    """The ablation lab's switch (gang/lab.py): no products or dot products, so another input
    width; the model still scores and still ignores the history's padding."""
    full = tower.layers(build_model(DIN, VOCAB))
    ablated = build_model(DIN, VOCAB, interactions=False)
    assert tower.layers(ablated)["hidden"].kernel.shape[0] != full["hidden"].kernel.shape[0]
    batch, shifted = right_and_left_padded(_batch(3, DIN, VOCAB))
    out = ablated(batch).numpy()
    assert out.shape == (3, 1) and np.isfinite(out).all()
    np.testing.assert_allclose(out, ablated(shifted).numpy(), atol=1e-6)


def test_the_interactions_switch_is_a_part_of_the_din_model_only():
    with pytest.raises(ValueError, match="part of the din model"):
        build_model(dataclasses.replace(DIN, architecture="reference"), VOCAB, interactions=False)


@pytest.mark.parametrize("serving_xla", [None, True])
def test_serving_function_matches_the_model_plain_and_xla(model, serving_xla):
    """The default (plain) export's model part and the XLA-compiled one both predict what the model does."""
    cfg = dataclasses.replace(DIN, serving_xla=serving_xla)
    assert cfg.xla_export is bool(serving_xla)
    batch = _batch(4, DIN, VOCAB)
    content, features = by_reference(batch)
    scoring = Scoring(model, content, cfg)
    got = call_transformed(transformed_fn(scoring, cfg), features, cfg)
    np.testing.assert_allclose(got.numpy(), model(batch).numpy(), atol=1e-5)
    # A request carrying the shown item's content scores it with the tower on that content.
    request = {**features, F.TITLE_IDS: tf.constant(batch[F.TITLE_IDS][:4]),
               F.IMAGE_Z: tf.constant(batch[F.IMAGE_Z][:4])}
    np.testing.assert_allclose(scoring.by_content(request).numpy(), model(batch).numpy(), atol=1e-5)


def test_training_calls_carry_the_row_penalties_and_inference_calls_none(model):
    """`training=True` reaches the scorer's layers: the wide part's item and user bias rows are
    penalised beside the user memory's fitting loss; a plain call adds no loss."""
    batch = _batch(4, DIN, VOCAB)
    model(batch, training=True)
    assert len(model.losses) == 1 + 2 * DIN.wide_bias and all(float(loss) >= 0 for loss in model.losses)
    model(batch)
    assert model.losses == []


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
        batch = _batch(2, DIN, VOCAB)
        batch[F.HISTORY_IDS][:] = 0
        out = model(batch).numpy()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert out.dtype == np.float32 and np.isfinite(out).all()


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


def test_image_code_is_fitted_to_the_catalogs_principal_directions():
    """Items differ along 3 hidden directions plus small noise: the fitted code keeps those
    (whitened: unit variance), and two items' code dot product follows their hidden similarity,
    which a random projection of the 2048-d image mostly drowns in noise."""
    from components.train.model.din import ImageCode, fit_image_code

    rng = np.random.default_rng(0)
    factors = rng.normal(size=(400, 3))
    images = (factors @ rng.normal(size=(3, F.IMAGE_DIM)) + 0.1 * rng.normal(size=(400, F.IMAGE_DIM)))
    images = (images - images.mean(0)).astype(np.float32)
    model = build_model(DIN, VOCAB)
    assert fit_image_code(model, images)
    layer = next(x for x in model.get_layer(tower.TOWER).layers if isinstance(x, ImageCode))
    codes = layer(tf.constant(images)).numpy()
    assert codes.shape == (400, ImageCode.UNITS)
    np.testing.assert_allclose(codes[:, :3].std(0), 1.0, rtol=0.05)
    hidden = np.corrcoef((factors[:200] * factors[200:]).sum(1), (codes[:200, :3] * codes[200:, :3]).sum(1))[0, 1]
    assert hidden > 0.95


def test_image_code_of_a_catalog_smaller_than_the_code_pads_with_zeros():
    from components.train.model.din import ImageCode, image_code_projection

    projection = image_code_projection(np.random.default_rng(1).normal(size=(5, 64)).astype(np.float32))
    assert projection.shape == (64, ImageCode.UNITS)
    assert np.abs(projection[:, :4]).sum() > 0 and not projection[:, 4:].any()


def test_image_code_of_low_rank_images_leaves_the_rounding_noise_out():
    """Images spanning 6 directions (a genre projection, say): the code's other columns stay zero
    instead of whitening rounding noise, so a slightly moved z-scoring moves the code slightly."""
    from components.train.model.din import image_code_projection

    rng = np.random.default_rng(2)
    images = (rng.normal(size=(300, 6)) @ rng.normal(size=(6, 64))).astype(np.float32)
    projection = image_code_projection(images)
    assert np.abs(projection[:, :6]).sum() > 0 and not projection[:, 6:].any()
    moved = images + rng.normal(scale=1e-3, size=images.shape).astype(np.float32)
    assert np.abs((moved - images) @ projection).max() < 0.01


def test_the_reference_architecture_has_no_image_code():
    from components.train.model.din import fit_image_code

    reference = build_model(dataclasses.replace(DIN, architecture="reference"), VOCAB)
    assert not fit_image_code(reference, np.zeros((10, F.IMAGE_DIM), np.float32))
