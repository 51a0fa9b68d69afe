"""The seed's three-tower model, kept selectable (`model.architecture: reference`).

Three towers meet in one MLP: the title's token ids and the user's behaviour sequence go
through their own Embedding -> LSTM, the 2048-d image embedding through a small MLP.
Ids are embedded *inside* the model (not in tf.Transform), so the history LSTM sees exactly
the reference design's history_len x embedding_dim sequence, and padding id 0 is masked.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.train.model.embedding import RowEmbedding
from components.train.model.vocab import VocabSizes
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts.signature import OUTPUT


def build_reference(model_cfg: ModelConfig, vocab: VocabSizes) -> keras.Model:
    """The seed's three-tower model: it reads title_ids, image and history_ids only."""
    title = keras.Input(shape=(model_cfg.title_len,), dtype=tf.int64, name=F.TITLE_IDS)
    image = keras.Input(shape=(F.IMAGE_DIM,), dtype=tf.float32, name=F.IMAGE_Z)
    history = keras.Input(shape=(model_cfg.history_len,), dtype=tf.int64, name=F.HISTORY_IDS)

    t = RowEmbedding(vocab.title, model_cfg.embedding_dim, mask_zero=True,
                               name="title_embedding")(title)
    # Loops when the serving export is XLA-compiled (export.transformed_fn): XLA fuses the loop,
    # and unrolled the graph took far longer to compile per batch shape and ran slower at batch 1
    # (measured in alternating rounds; see docs/benchmarks.md). Without XLA, unrolling removes
    # the executor's per-step overhead, so the plain export is faster unrolled: both sequences
    # have a fixed length. Same variables either way.
    unroll = not model_cfg.xla_export
    t = keras.layers.LSTM(model_cfg.lstm_units, unroll=unroll, name="title_lstm")(t)

    x = image
    for i, units in enumerate(model_cfg.image_units):
        x = keras.layers.Dense(units, activation="relu", name=f"image_dense_{i}")(x)

    h = RowEmbedding(vocab.items, model_cfg.embedding_dim, mask_zero=True,
                               name="item_embedding")(history)
    h = keras.layers.LSTM(model_cfg.lstm_units, unroll=unroll, name="history_lstm")(h)

    z = keras.layers.Concatenate(name="concat")([t, x, h])
    z = keras.layers.Dense(model_cfg.hidden_units, activation="relu", name="hidden")(z)
    # float32 output even under mixed precision: a float16 sigmoid saturates and the
    # log loss of confident predictions becomes inf.
    out = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name=OUTPUT)(z)
    return keras.Model(inputs={F.TITLE_IDS: title, F.IMAGE_Z: image, F.HISTORY_IDS: history},
                       outputs=out, name="ctr_model")
