"""The seed's three-tower model, kept selectable (`model.architecture: reference`).

Three towers meet in one MLP: the title's token ids and the user's behaviour sequence go
through their own Embedding -> LSTM, the 2048-d image embedding through a small MLP. The title
and image towers are the item tower (tower.py), the history tower sits in the scorer; the seed
never read the history items' content and this copy does not either.
Ids are embedded *inside* the model (not in tf.Transform), so the history LSTM sees exactly
the reference design's history_len x embedding_dim sequence, and padding id 0 is masked.
"""
from __future__ import annotations

import tf_keras as keras

from components.train.model.embedding import RowEmbedding
from components.train.model.tower import SCORER, TOWER, contents, item_inputs, joined_model, scorer_inputs
from components.train.model.vocab import VocabSizes
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts.signature import OUTPUT


def build_reference(model_cfg: ModelConfig, vocab: VocabSizes) -> keras.Model:
    """The seed's three-tower model: it reads the shown item's title ids and image and the
    history's ids, through the same join as every architecture (tower.py)."""
    tower = item_tower(model_cfg, vocab)
    return joined_model(model_cfg, tower, scorer(model_cfg, vocab, tower.output_shape[-1]), name="ctr_model")


def _unroll(model_cfg: ModelConfig) -> bool:
    # Loops when the serving export is XLA-compiled (export.py): XLA fuses the loop, and unrolled
    # the graph took far longer to compile per batch shape and ran slower at batch 1 (measured in
    # alternating rounds; see docs/benchmarks.md). Without XLA, unrolling removes the executor's
    # per-step overhead, so the plain export is faster unrolled: both sequences have a fixed
    # length. Same variables either way.
    return not model_cfg.xla_export


def item_tower(model_cfg: ModelConfig, vocab: VocabSizes) -> keras.Model:
    """Two of the seed's towers, per item: title ids -> Embedding -> LSTM, image -> MLP."""
    inputs = item_inputs(model_cfg)
    t = RowEmbedding(vocab.title, model_cfg.embedding_dim, mask_zero=True,
                     name="title_embedding")(inputs[F.TITLE_IDS])
    t = keras.layers.LSTM(model_cfg.lstm_units, unroll=_unroll(model_cfg), name="title_lstm")(t)
    x = inputs[F.IMAGE_Z]
    for i, units in enumerate(model_cfg.image_tower):
        x = keras.layers.Dense(units, activation="relu", name=f"image_dense_{i}")(x)
    return keras.Model(inputs=inputs, outputs=keras.layers.Concatenate(name="concat")([t, x]), name=TOWER)


def scorer(model_cfg: ModelConfig, vocab: VocabSizes, width: int) -> keras.Model:
    """The third tower (history ids -> Embedding -> LSTM) and the MLP over all three."""
    inputs = scorer_inputs(model_cfg, width, names=(F.HISTORY_IDS,))
    h = RowEmbedding(vocab.items, model_cfg.embedding_dim, mask_zero=True,
                     name="item_embedding")(inputs[F.HISTORY_IDS])
    h = keras.layers.LSTM(model_cfg.lstm_units, unroll=_unroll(model_cfg), name="history_lstm")(h)
    z = keras.layers.Concatenate(name="concat_history")([contents(inputs)[0], h])
    z = keras.layers.Dense(model_cfg.hidden_units, activation="relu", name="hidden")(z)
    # float32 output even under mixed precision: a float16 sigmoid saturates and the
    # log loss of confident predictions becomes inf.
    out = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name=OUTPUT)(z)
    return keras.Model(inputs=inputs, outputs=out, name=SCORER)
