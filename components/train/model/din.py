"""The default model: target-aware interest over the behaviour sequence (DIN, Zhou et al. 2018).

Why this shape: click-through here is mostly a user x item taste term. One item representation
serves the shown item and every history item: its id embedding (frequent items own a row, the
tail shares OOV buckets) plus its content, the item tower's reading of its own title and image.
The shown item attends over the history (which past items matter depends on what is shown), and
the dot products of item with interest, with the hashed user's embedding and of the shown
item's content with the history's are explicit features. Content is what carries new and cold
items, shown or in a history, that the id embedding cannot tell apart.

The model is two parts (tower.py): the item tower, run once per distinct item of a batch, and
the scorer, which takes item vectors; the export precomputes the tower over the item table.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.train.model.embedding import RowEmbedding, gather_rows
from components.train.model.tower import SCORER, TOWER, contents, item_inputs, joined_model, scorer_inputs
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts.signature import OUTPUT


class TargetAttention(keras.layers.Layer):
    """Softmax attention of a query [B, d] over masked keys [B, L, d] -> [B, d] (zeros if none)."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = keras.layers.Dense(units, activation="relu", name="att_hidden")
        self.score = keras.layers.Dense(1, name="att_score")

    def build(self, input_shape):
        # call() reads the hidden layer's kernel without calling the layer: build both here, in
        # their own name scopes, so the variables keep the names a called layer gives them.
        for layer, width in ((self.hidden, 4 * input_shape[-1]), (self.score, self.units)):
            with tf.name_scope(layer.name):
                layer.build(tf.TensorShape([None, width]))
        super().build(input_shape)

    def call(self, query, keys, mask):
        # The hidden layer reads [q, k, q - k, q * k]; with its kernel split into four d-row blocks,
        # W [q, k, q-k, q*k] = q (Wq + Wd) + k (Wk - Wd) + (q * k) Wp. The same layer and
        # variables, but the query part is computed once per row instead of once per history
        # position, and no [B, L, 4d] tensor is built: half the multiply-adds, far less memory.
        wq, wk, wd, wp = tf.split(tf.cast(self.hidden.kernel, keys.dtype), 4, axis=0)
        per_row = tf.matmul(query, wq + wd) + tf.cast(self.hidden.bias, keys.dtype)
        hidden = tf.nn.relu(per_row[:, None, :] + tf.matmul(keys, wk - wd)
                            + tf.matmul(query[:, None, :] * keys, wp))
        scores = tf.squeeze(self.score(hidden), -1)
        # In float32 even under mixed precision: -1e9 is -inf in float16, and a row with no
        # history (all masked) would then be NaN instead of zeros.
        scores = tf.where(mask, tf.cast(scores, tf.float32), -1e9)
        weights = tf.nn.softmax(scores, axis=-1) * tf.cast(mask, tf.float32)
        return tf.reduce_sum(tf.cast(weights, keys.dtype)[..., None] * keys, axis=1)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


class UserMemory(keras.layers.Layer):
    """What a user's histories look like, pooled over all of the user's requests.

    One request's history is a short draw from what the user keeps coming back to; its content
    (the mean of its items' content vectors) is a noisy estimate of the user's taste. This table
    (hashed user -> vector) is fitted by a squared-error loss to the history content of every
    request of the user, so it converges to their mean, and is read for the request's user: the
    dot product of the shown item's content with it is the same content match with far less
    noise. The table is read as SCALE x its variable: Adam's steps are about the learning rate
    whatever the gradient, and a user appears only a few times per epoch, so unscaled rows would
    not reach their targets within the epochs a nightly run trains.
    """

    SCALE = 30.0

    def __init__(self, rows: int, weight: float, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.weight = rows, weight

    def build(self, input_shape):
        self.table = self.add_weight(name="table", shape=(self.rows, input_shape[-1]), initializer="zeros")

    def call(self, history_code, user, has_history, training=None):
        pooled = self.SCALE * gather_rows(self.table, user)
        if training:
            error = tf.reduce_sum(tf.square(pooled - tf.stop_gradient(tf.cast(history_code, pooled.dtype))), -1)
            count = tf.maximum(tf.reduce_sum(tf.cast(has_history, error.dtype)), 1.0)
            self.add_loss(self.weight * tf.reduce_sum(tf.where(has_history, error, 0.0)) / count)
        # Only the fitting loss moves the table: a statistic of the user's histories, not a
        # second free user embedding for the click loss to memorise clicks in.
        return tf.cast(tf.stop_gradient(pooled), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "rows": self.rows, "weight": self.weight}


def _masked_mean(values, mask):
    m = tf.cast(mask, values.dtype)[..., None]
    return tf.reduce_sum(values * m, axis=1) / tf.maximum(tf.reduce_sum(m, axis=1), 1.0)


def _dot(a, b):
    return tf.reduce_sum(a * b, axis=-1, keepdims=True)


def build_din(cfg: ModelConfig, vocab) -> keras.Model:
    return joined_model(cfg, item_tower(cfg, vocab), scorer(cfg, vocab), name="din_ctr_model")


def item_tower(cfg: ModelConfig, vocab) -> keras.Model:
    """Items' title ids and image [U, ...] -> content vectors [U, embedding_dim]."""
    inputs = item_inputs(cfg)
    d = cfg.embedding_dim
    title_ids = inputs[F.TITLE_IDS]
    title = RowEmbedding(vocab.title, d, l2=cfg.embedding_l2, name="title_embedding")(title_ids)
    title = _masked_mean(title, tf.not_equal(title_ids, 0))
    image = inputs[F.IMAGE_Z]
    for i, units in enumerate(cfg.image_units):
        image = keras.layers.Dense(units, activation="relu", name=f"image_dense_{i}")(image)
    content = keras.layers.Dense(d, name="item_content")(tf.concat([title, image], -1))
    return keras.Model(inputs=inputs, outputs=content, name=TOWER)


def scorer(cfg: ModelConfig, vocab) -> keras.Model:
    """Item vectors of the shown item [B, d] and the history [B, L, d], ids and context -> p."""
    d = cfg.embedding_dim
    inputs = scorer_inputs(cfg, d)
    l2 = cfg.embedding_l2
    history_ids, target_id = inputs[F.HISTORY_IDS], inputs[F.TARGET_ID]
    history_mask = tf.not_equal(history_ids, 0)
    items = RowEmbedding(vocab.items, d, l2=l2, name="item_embedding")
    target_content, history_content = contents(inputs)
    history = items(history_ids) + history_content
    item = items(target_id) + target_content

    interest = TargetAttention(cfg.attention_units, name="target_attention")(item, history, history_mask)
    mean_history = _masked_mean(history, history_mask)
    mean_content = _masked_mean(history_content, history_mask)
    seen = tf.reduce_any(tf.equal(history_ids, target_id[:, None]) & history_mask, axis=1)
    parts = [item, interest, interest * item, mean_history * item, _dot(interest, item), _dot(mean_history, item),
             mean_content * target_content, _dot(mean_content, target_content), tf.cast(seen, item.dtype)[:, None]]
    if cfg.user_buckets:
        user = RowEmbedding(vocab.users, d, l2=l2, name="user_embedding")(inputs[F.USER_BUCKET])
        parts += [user * item, _dot(user, item)]
        if cfg.user_memory_weight:
            pooled = UserMemory(vocab.users, cfg.user_memory_weight, name="user_memory")(
                mean_content, inputs[F.USER_BUCKET], tf.reduce_any(history_mask, axis=1))
            parts += [pooled * target_content, _dot(pooled, target_content)]
    parts += [RowEmbedding(len(F.PLATFORMS) + 1, 4, name="platform_embedding")(inputs[F.PLATFORM_ID]),
              RowEmbedding(25, 4, name="hour_embedding")(inputs[F.HOUR_ID])]
    z = tf.concat(parts, -1)
    z = keras.layers.Dense(cfg.hidden_units, activation="relu", name="hidden")(z)
    z = keras.layers.Dropout(cfg.dropout, name="dropout")(z)
    z = keras.layers.Dense(max(cfg.hidden_units // 4, 8), activation="relu", name="hidden_2")(z)
    # float32 output even under mixed precision: a float16 sigmoid saturates (inf log loss).
    out = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name=OUTPUT)(z)
    return keras.Model(inputs=inputs, outputs=out, name=SCORER)
