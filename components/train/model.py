"""The CTR models (tf_keras; Keras 3 `fit` fails under MWMS here) and how they are optimized.

`model.architecture` picks one: "din" (din.py, the default, target-aware) or "reference", the
seed's three-tower model below, kept selectable and exported and served the same way.

Reference: three towers meet in one MLP: the title's token ids and the user's behaviour sequence go
through their own Embedding -> LSTM, the 2048-d image embedding through a small MLP.
Ids are embedded *inside* the model (not in tf.Transform), so the history LSTM sees exactly
the reference design's history_len x embedding_dim sequence, and padding id 0 is masked.

Optimisation follows the reference design for synchronous data parallelism: global batch =
per-replica batch x replicas and a learning rate scaled linearly by replicas (same
per-example step size whatever the gang size), gradients clipped by global norm.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import tensorflow as tf
import tf_keras as keras

from components.train.embedding import RowEmbedding
from pipeline.config import ModelConfig, TrainConfig
from pipeline.contracts import features as F
from pipeline.contracts.signature import OUTPUT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VocabSizes:
    """Embedding input sizes: ids are in [0, size) with 0 = padding."""

    title: int
    items: int
    users: int = 1

    @classmethod
    def from_config(cls, model: ModelConfig) -> VocabSizes:
        """Upper bounds from config: vocab top-k + OOV buckets + the padding id."""
        return cls(title=model.title_vocab_size + model.oov_buckets + 1,
                   items=model.item_vocab_size + model.oov_buckets + 1, users=model.user_buckets + 1)


def build_model(model_cfg: ModelConfig, vocab: VocabSizes) -> keras.Model:
    """Uncompiled model of `model.architecture` over the transformed features, ending in the
    (identity until fitted) Platt calibration of calibration.py."""
    from components.train.calibration import Calibration

    if model_cfg.architecture == "din":
        from components.train.din import build_din

        core = build_din(model_cfg, vocab)
    else:
        core = build_reference(model_cfg, vocab)
    out = Calibration(name="calibration", dtype="float32")(core.output)
    return CTRModel(inputs=core.input, outputs=out, name=core.name)


class CTRModel(keras.Model):
    """A functional Keras model whose training step does not synchronise metrics every step.

    Under MWMS, Keras' train_step reads each metric's result through a cross-worker all-reduce
    of every metric variable (loss, AUC's four confusion tables, accuracy) and then all-reduces
    the results again: about ten small, sequential collectives per step, after the gradients'.
    Here a step returns this worker's own running values, and `compile_model` reduces outputs
    with "first" (no collective): the training metrics in logs are the chief's shard's. The
    validation step is Keras' own, synchronised, so `val_*` (and early stopping on `val_auc`)
    are global and every worker takes the same decision.
    """

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, sample_weight)
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        self.compiled_metrics.update_state(y, y_pred, sample_weight)
        # type(m).result is the metric's own result(); the instance attribute is Keras' wrapper
        # that all-reduces the metric's variables first.
        return {m.name: type(m).result(m) for m in self.metrics}


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


def global_batch_size(train_cfg: TrainConfig, replicas: int) -> int:
    return train_cfg.batch_size_per_replica * replicas


def scaled_learning_rate(train_cfg: TrainConfig, replicas: int) -> float:
    """Linear scaling rule: the gradient of an N-times bigger batch gets an N-times bigger step."""
    return train_cfg.learning_rate * replicas


def compile_model(model: keras.Model, train_cfg: TrainConfig, replicas: int) -> keras.Model:
    """Adam (lr scaled by replicas, global-norm clipping), BCE loss, AUC + accuracy.

    `train.optimizer: lazy_adam` updates an embedding table's moments only on the rows a batch
    touched (optimizers.py); dense weights get plain Adam either way.
    """
    from components.train.optimizers import LazyAdam

    kind = LazyAdam if train_cfg.optimizer == "lazy_adam" else keras.optimizers.Adam
    optimizer = kind(learning_rate=scaled_learning_rate(train_cfg, replicas), global_clipnorm=train_cfg.clip_norm)
    # Plain (not XLA-compiled) by default, also on CPU: LazyAdam's gathers and scatters run
    # several times slower compiled, and so does dense Adam once no embedding penalty makes its
    # gradients dense (docs/benchmarks.md). `train.xla_optimizer` turns compilation on.
    optimizer.jit_compile = train_cfg.xla_optimizer
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
    )
    model.distribute_reduction_method = "first"     # see CTRModel
    return model

