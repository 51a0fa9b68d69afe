"""The tf.Transform `preprocessing_fn`: the one definition of features shared by training and serving.

Analysis runs on an ITEM-level dataset: one row per catalog item shown in the training window,
with `impressions` = how many training events showed it. Every analyzer is impression-weighted,
so the statistics equal what a per-event pass would compute, but the 2048-d image and the title
are read once per item instead of once per event (the work on the heavy columns shrinks by
the mean number of events per item in the window):

- image z-score: mean_w = E[w*x] / E[w], var_w = E[w*x^2] / E[w] - mean_w^2 (accumulated in
  float64; dimensions with no variance keep std 1 so they map to 0 instead of NaN);
- title vocabulary: tokens weighted by impressions, so with `title_vocab_size` below the number
  of distinct tokens, the words the model will rarely see go to the OOV buckets first;
- item-id vocabulary for the history: the `item_vocab_size` most-shown items;
- catalog vocabulary: every usable catalog item once, unweighted and uncapped, shown or not; it
  numbers the item table's rows (pipeline/contracts/item_table.py), so an example, a raw
  request and a by-id request all find an item's content through this one graph.

Items the window never showed are analysis rows too, with weight 0: they add nothing to the
weighted statistics (the two vocabularies above rank only what was shown), but
they get a catalog row, so the model can read their content when a history holds them.

Vocabulary vs hashing for history ids: a vocabulary gives every frequent item its own embedding
row (no collisions among the items that matter) and the long tail shares `oov_buckets` rows,
whereas hashing 1M+ ids into a fixed space makes popular items collide with random others. The
vocabulary costs one analyzer pass over item ids (cheap at item level) and an asset file in the
graph, and its size is known before training, so the model's embedding table is fixed-size.

Id 0 means padding everywhere: vocabulary ids and OOV buckets are shifted by +1.

The saved graph is fed PARTIALLY (tf.Transform supplies dummies for unfed inputs and drops the
outputs that depend on them): items feed title + image_embedding, events feed the history, the
label and the event context (item_id, user_id, platform, hour_of_day), the raw-feature signature
feeds all seven raw serving features and the by-id signature all but the title and image.
"""
from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

IMPRESSIONS = "impressions"          # analysis-only weight column (item rows)
_PUNCTUATION = r"[[:punct:]]+"

RAW_FEATURE_SPEC = {
    F.TITLE: tf.io.FixedLenFeature([], tf.string),
    F.IMAGE: tf.io.FixedLenFeature([F.IMAGE_DIM], tf.float32),
    F.HISTORY: tf.io.VarLenFeature(tf.int64),
    F.LABEL: tf.io.FixedLenFeature([], tf.int64),
    F.ITEM_ID: tf.io.FixedLenFeature([], tf.int64),
    F.USER_ID: tf.io.FixedLenFeature([], tf.int64),
    F.PLATFORM: tf.io.FixedLenFeature([], tf.string),
    F.HOUR: tf.io.FixedLenFeature([], tf.int64),
    IMPRESSIONS: tf.io.FixedLenFeature([], tf.float32),
}
ITEM_INPUTS = (F.TITLE, F.IMAGE)                                # what an item row feeds
EVENT_INPUTS = (F.HISTORY, F.LABEL, *F.EVENT_CONTEXT)           # what an event row feeds
ITEM_OUTPUTS = (F.TITLE_IDS, F.IMAGE_Z, F.TARGET_ID, F.TARGET_ROW)    # an item table row
EVENT_OUTPUTS = tuple(F.transformed_feature_spec(ModelConfig()))     # one example


def tokenize(titles: tf.Tensor) -> tf.RaggedTensor:
    """Lowercase, punctuation to spaces, split on whitespace: [batch] -> ragged [batch, None]."""
    cleaned = tf.strings.regex_replace(tf.strings.lower(titles), _PUNCTUATION, " ")
    return tf.strings.split(cleaned)


def _pad(ids: tf.RaggedTensor, length: int) -> tf.Tensor:
    return ids.to_tensor(default_value=0, shape=[None, length])


def _shown(values: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The analysis values of items the window showed, with their weights: what a weighted
    vocabulary ranks (a never-shown item's zero weight would still make it an entry)."""
    keep = weights > 0
    return tf.boolean_mask(values, keep), tf.boolean_mask(weights, keep)


def _title_ids(titles: tf.Tensor, weights: tf.Tensor, model: ModelConfig) -> tf.Tensor:
    tokens = tokenize(titles)
    token_weights = tf.gather(weights, tokens.value_rowids())
    shown, shown_weights = _shown(tokens.values, token_weights)
    vocab = tft.vocabulary(shown, top_k=model.title_vocab_size, weights=shown_weights,
                           vocab_filename=F.TITLE_VOCAB)
    kept = tokens[:, : model.title_len]
    ids = tft.apply_vocabulary(kept, vocab, num_oov_buckets=model.oov_buckets) + 1
    return _pad(ids, model.title_len)


def _image_z(image: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    x = tf.cast(image, tf.float64)
    w = tf.cast(weights, tf.float64)[:, None]
    mean_w = tft.mean(w)
    mean = tft.mean(w * x, reduce_instance_dims=False) / mean_w
    var = tft.mean(w * tf.square(x), reduce_instance_dims=False) / mean_w - tf.square(mean)
    std = tf.where(var > 1e-12, tf.sqrt(tf.maximum(var, 1e-12)), tf.ones_like(var))
    return tf.cast((x - mean) / std, tf.float32)


def _item_ids(history: tf.SparseTensor, item_ids: tf.Tensor, weights: tf.Tensor,
              model: ModelConfig) -> dict[str, tf.Tensor]:
    """History [B, history_len] and target [B] twice: as ids of the model's shared item
    embedding (one id space: the shown item and the items the user interacted with are the same
    rows) and as item table rows (the items' content)."""
    values, shown_weights = _shown(item_ids, weights)
    vocab = tft.vocabulary(values, top_k=model.item_vocab_size, weights=shown_weights,
                           vocab_filename=F.ITEM_VOCAB)
    catalog = tft.vocabulary(item_ids, vocab_filename=F.CATALOG_VOCAB)
    ragged = tf.RaggedTensor.from_sparse(history)
    ragged = tf.ragged.boolean_mask(ragged, ragged > 0)          # 0 = no item
    recent = ragged[:, -model.history_len:]                      # most recent last

    def ids(values, vocabulary, oov):
        return tft.apply_vocabulary(values, vocabulary, num_oov_buckets=oov) + 1

    return {F.HISTORY_IDS: _pad(ids(recent, vocab, model.oov_buckets), model.history_len),
            F.HISTORY_ROWS: _pad(ids(recent, catalog, 1), model.history_len),
            F.TARGET_ID: ids(item_ids, vocab, model.oov_buckets),
            F.TARGET_ROW: ids(item_ids, catalog, 1)}


def _context(inputs, model: ModelConfig) -> dict[str, tf.Tensor]:
    """Analyzer-free event context: hashed user, platform index, hour of day (0 = unknown)."""
    platform = tf.strings.lower(tf.strings.strip(inputs[F.PLATFORM]))
    known = tf.equal(platform[:, None], tf.constant(F.PLATFORMS))
    platform_id = tf.where(tf.reduce_any(known, axis=1), tf.argmax(tf.cast(known, tf.int64), axis=1) + 1, 0)
    hour = tf.cast(inputs[F.HOUR], tf.int64)
    users = max(model.user_buckets, 1)
    return {
        F.USER_BUCKET: tf.strings.to_hash_bucket_fast(tf.strings.as_string(inputs[F.USER_ID]), users) + 1,
        F.PLATFORM_ID: platform_id,
        F.HOUR_ID: tf.where((hour >= 0) & (hour < 24), hour + 1, 0),
    }


def make_preprocessing_fn(model: ModelConfig):
    """A `preprocessing_fn` for the given sizes (title_len, vocab sizes, history_len, OOV)."""

    def preprocessing_fn(inputs):
        weights = tf.cast(inputs[IMPRESSIONS], tf.float32)
        return {
            F.TITLE_IDS: _title_ids(inputs[F.TITLE], weights, model),
            F.IMAGE_Z: _image_z(inputs[F.IMAGE], weights),
            **_item_ids(inputs[F.HISTORY], inputs[F.ITEM_ID], weights, model),
            **_context(inputs, model),
            F.LABEL_KEY: tf.cast(inputs[F.LABEL], tf.int64),
        }

    return preprocessing_fn


# Module-level function with the default sizes (tf.Transform census style).
preprocessing_fn = make_preprocessing_fn(ModelConfig())

