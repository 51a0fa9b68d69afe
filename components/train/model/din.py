"""The default model: the shown item against the behaviour sequence (after DIN, Zhou et al. 2018).

Why this shape: click-through here is mostly a user x item taste term. One item representation
serves the shown item and every history item: its id embedding (frequent items own a row, the
tail shares OOV buckets) plus its content, the item tower's reading of its own title and image.
The history is pooled by its mean, and the products and dot products of the shown item with the
history, with the hashed user's embedding and of the shown item's content and image code with the
history's are explicit features (off, they cost 0.11 AUC where taste drives clicks). DIN's target
attention over the history (which past items matter depends on what is shown) was measured
level with the plain mean on every world and on MovieTweetings, and removed (docs/training.md,
the mechanism table). Content is what carries new and cold items, shown or in a history, that
the id embedding cannot tell apart.

The model is two parts (tower.py): the item tower, run once per distinct item of a batch, and
the scorer, which takes item vectors; the export precomputes the tower over the item table.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.train.model.embedding import RowEmbedding, gather_rows
from components.train.model.tower import SCORER, TOWER, contents, item_inputs, joined_model, scorer_inputs
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts.signature import OUTPUT

RANK_TOLERANCE = 1e-6     # of the largest principal variance: smaller directions are rounding noise


class ImageCode(keras.layers.Layer):
    """A fixed low-dimensional code of an item's z-scored image (never trained by the loss).

    Codes keep dot products, so code(shown) . mean code(history) is "does the shown item look
    like what this user chose before" from the first step on, for every history item, shown in
    the window or not; the learned content vector must first learn such a similarity through its
    dense layers. The projection starts as a seeded random one and `fit_image_code` replaces it
    with the catalog's principal directions, whitened (the way Image Matters embeds behaviour
    images once into short codes): a random projection of a 2048-d image is mostly noise, the
    top principal directions are where items differ.
    """

    UNITS = 32

    def build(self, input_shape):
        self.projection = self.add_weight(
            name="projection", shape=(int(input_shape[-1]), self.UNITS), trainable=False,
            initializer=keras.initializers.RandomNormal(stddev=float(input_shape[-1]) ** -0.5, seed=7))

    def call(self, image):
        return tf.stop_gradient(tf.matmul(image, tf.cast(self.projection, image.dtype)))


def image_code_projection(images: np.ndarray, units: int = ImageCode.UNITS) -> np.ndarray:
    """[dim, units]: the whitened top principal directions of the catalog's images (one row per
    item, so a popular item weighs as much as any other); columns past the images' numerical rank
    stay zero. Why the rank matters: real image features are often of lower rank than the code
    (the MovieTweetings import's genre projection has 25), and whitening a direction of variance
    ~1e-12 multiplies rounding noise by ~1e6: a per-item noise feature in training, and codes in
    the millions as soon as the z-scoring moves (a warm start on the next window)."""
    from sklearn.decomposition import PCA

    rows, dim = images.shape
    n = max(0, min(units, rows - 1, dim))
    out = np.zeros((dim, units), np.float32)
    if n:
        pca = PCA(n_components=n, svd_solver="randomized", random_state=0).fit(images)
        variance = pca.explained_variance_
        rank = int(np.sum(variance > RANK_TOLERANCE * max(float(variance[0]), 1e-30)))
        out[:, :rank] = (pca.components_[:rank] / np.sqrt(variance[:rank])[:, None]).T
    return out


def fit_image_code(model: keras.Model, images: np.ndarray) -> bool:
    """Set the model's ImageCode projection from the catalog's images; False if it has none
    (the reference architecture)."""
    layers = [x for x in model.submodules if isinstance(x, ImageCode)]
    for layer in layers:
        layer.projection.assign(image_code_projection(images, layer.UNITS))
    return bool(layers)


class UserMemory(keras.layers.Layer):
    """What a user's histories look like, pooled over all of the user's requests.

    One request's history is a short draw from what the user keeps coming back to; its code
    (the mean of its items' image codes) is a noisy estimate of the user's taste. This table
    (hashed user -> code) is fitted by a squared-error loss to the history code of every
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


def build_din(cfg: ModelConfig, vocab, interactions: bool = True) -> keras.Model:
    return joined_model(cfg, item_tower(cfg, vocab), scorer(cfg, vocab, interactions), name="din_ctr_model")


def item_tower(cfg: ModelConfig, vocab) -> keras.Model:
    """Items' title ids and image [U, ...] -> item vectors [U, embedding_dim + ImageCode.UNITS]: the
    learned content vector, then the image's fixed code."""
    inputs = item_inputs(cfg)
    d = cfg.embedding_dim
    title_ids = inputs[F.TITLE_IDS]
    title = RowEmbedding(vocab.title, d, name="title_embedding")(title_ids)
    title = _masked_mean(title, tf.not_equal(title_ids, 0))
    image = inputs[F.IMAGE_Z]
    for i, units in enumerate(cfg.image_tower):
        image = keras.layers.Dense(units, activation="relu", name=f"image_dense_{i}")(image)
    content = keras.layers.Dense(d, name="item_content")(tf.concat([title, image], -1))
    code = ImageCode(name="image_code")(inputs[F.IMAGE_Z])
    return keras.Model(inputs=inputs, outputs=tf.concat([content, code], -1), name=TOWER)


def scorer(cfg: ModelConfig, vocab, interactions: bool = True) -> keras.Model:
    """Item vectors of the shown item [B, d] and the history [B, L, d], ids and context -> p.
    `interactions` false (an ablation, components/train/gang/lab.py): the dense layers get the
    vectors themselves instead of their products and dot products."""
    d = cfg.embedding_dim
    inputs = scorer_inputs(cfg, d + ImageCode.UNITS)
    history_ids, target_id = inputs[F.HISTORY_IDS], inputs[F.TARGET_ID]
    history_mask = tf.not_equal(history_ids, 0)
    items = RowEmbedding(vocab.items, d, name="item_embedding")
    target_vector, history_vector = contents(inputs)
    target_content, code = target_vector[:, :d], target_vector[:, d:]
    history_content, history_codes = history_vector[:, :, :d], history_vector[:, :, d:]
    history_code = _masked_mean(history_codes, history_mask)
    history = items(history_ids) + tf.stop_gradient(history_content)
    item = items(target_id) + target_content

    mean_history = _masked_mean(history, history_mask)
    mean_content = _masked_mean(history_content, history_mask)
    seen = tf.reduce_any(tf.equal(history_ids, target_id[:, None]) & history_mask, axis=1)
    plain = not interactions
    parts = [item, mean_history, *(
        [mean_content, target_content, history_code, code] if plain else
        [mean_history * item, _dot(mean_history, item), mean_content * target_content,
         _dot(mean_content, target_content), history_code * code, _dot(history_code, code)]),
        tf.cast(seen, item.dtype)[:, None]]
    if cfg.user_buckets:
        user = RowEmbedding(vocab.users, d, name="user_embedding")(inputs[F.USER_BUCKET])
        parts += [user] if plain else [user * item, _dot(user, item)]
        if cfg.user_memory_weight:
            pooled = UserMemory(vocab.users, cfg.user_memory_weight, name="user_memory")(
                history_code, inputs[F.USER_BUCKET], tf.reduce_any(history_mask, axis=1))
            parts += [pooled] if plain else [pooled * code, _dot(pooled, code)]
    parts += [RowEmbedding(len(F.PLATFORMS) + 1, 4, name="platform_embedding")(inputs[F.PLATFORM_ID]),
              RowEmbedding(25, 4, name="hour_embedding")(inputs[F.HOUR_ID])]
    z = tf.concat(parts, -1)
    z = keras.layers.Dense(cfg.hidden_units, activation="relu", name="hidden")(z)
    z = keras.layers.Dense(max(cfg.hidden_units // 4, 8), activation="relu", name="hidden_2")(z)
    logit = keras.layers.Dense(1, dtype="float32", name="deep_logit")(z)
    if cfg.wide_bias:
        logit = logit + wide_logit(inputs, vocab, cfg)
    # float32 output even under mixed precision: a float16 sigmoid saturates (inf log loss).
    out = keras.layers.Activation("sigmoid", dtype="float32", name=OUTPUT)(logit)
    return keras.Model(inputs=inputs, outputs=out, name=SCORER)


@keras.saving.register_keras_serializable(package="reco_nightly")
class ScaledBias(RowEmbedding):
    """A per-id logit bias, read as SCALE x its one-wide embedding row.

    The wide part: what LR on one-hot item and user learns, the item's own click propensity
    (popularity) and the user's, added to the deep part's logit. Through the MLP the item
    embedding can learn it too, but shares it with taste and pays the embedding penalty for it,
    and Adam moves a row by about the learning rate per step it is touched: a tail item touched a
    few dozen times an epoch would not reach its bias in the epochs a nightly run trains (the
    same reason as UserMemory.SCALE). Its L2 (`model.bias_l2`, on the variable: SCALE^-2 of it on
    the bias) is the smoothing towards "no bias", about as strong as the LR baseline's.
    """

    SCALE = 50.0

    def __init__(self, input_dim: int, l2: float = 0.0, **kwargs):
        kwargs.pop("output_dim", None)                  # get_config's, always 1
        kwargs.setdefault("embeddings_initializer", "zeros")
        super().__init__(input_dim, 1, l2=l2, **kwargs)

    def call(self, inputs, training=None):
        return self.SCALE * tf.cast(super().call(inputs, training=training), tf.float32)


def wide_logit(inputs, vocab, cfg: ModelConfig):
    """[B, 1]: the shown item's bias, plus the user's when the model reads users."""
    out = ScaledBias(vocab.items, l2=cfg.bias_l2, name="item_bias")(inputs[F.TARGET_ID])
    if cfg.user_buckets:
        out = out + ScaledBias(vocab.users, l2=cfg.bias_l2, name="user_bias")(inputs[F.USER_BUCKET])
    return out
