"""Build and compile the CTR model (tf_keras; Keras 3 `fit` fails under MWMS here).

`model.architecture` picks the core: "din" (din.py, the default, target-aware) or "reference"
(reference.py, the seed's three-tower model), both ending in the Platt calibration of
calibration.py and exported and served the same way.

Optimisation follows the reference design for synchronous data parallelism: global batch =
per-replica batch x replicas and a learning rate scaled linearly by replicas (same
per-example step size whatever the gang size), gradients clipped by global norm.
"""
from __future__ import annotations

import logging

import tensorflow as tf
import tf_keras as keras

from components.train.model.tower import BLEND_LAYER
from components.train.model.vocab import VocabSizes
from pipeline.config import ModelConfig, TrainConfig

log = logging.getLogger(__name__)


def build_model(model_cfg: ModelConfig, vocab: VocabSizes, interactions: bool = True) -> keras.Model:
    """Uncompiled model of `model.architecture` over the transformed features, ending in the
    (identity until fitted) Platt calibration and blend of blend.py, with the linear member
    (linear.py) beside the network when `model.linear_member`. `interactions`
    false: the din scorer without its interaction features (the ablation lab's switch, never
    the config's)."""
    from components.train.model.blend import CalibratedBlend

    if model_cfg.architecture == "din":
        from components.train.model.din import build_din

        core = build_din(model_cfg, vocab, interactions)
    elif not interactions:
        raise ValueError(f"the interaction features are part of the din model, not of {model_cfg.architecture!r}")
    else:
        from components.train.model.reference import build_reference

        core = build_reference(model_cfg, vocab)
    linear = None
    if model_cfg.linear_member:
        from components.train.model.linear import LAYER, LinearMember

        member = LinearMember(vocab.items, vocab.users if model_cfg.user_buckets else 0, name=LAYER, dtype="float32")
        linear = member.logit(core.input)
    out = CalibratedBlend(name=BLEND_LAYER, dtype="float32")(core.output, linear=linear)
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

    item_join = None    # examples by item-table row -> the model's inputs (worker/input.join_items)

    def _joined(self, data):
        """The batch as the model reads it: joined here, in the step, when the trainer set an
        item join (its input pipeline then only reads and parses), as given otherwise."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        return (self.item_join(x) if self.item_join is not None else x), y, sample_weight

    def test_step(self, data):
        return super().test_step(self._joined(data))

    def train_step(self, data):
        x, y, sample_weight = self._joined(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, sample_weight)
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        self.compiled_metrics.update_state(y, y_pred, sample_weight)
        # type(m).result is the metric's own result(); the instance attribute is Keras' wrapper
        # that all-reduces the metric's variables first.
        return {m.name: type(m).result(m) for m in self.metrics}


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
    from components.train.model.optimizers import LazyAdam

    kind = LazyAdam if train_cfg.optimizer == "lazy_adam" else keras.optimizers.Adam
    optimizer = kind(learning_rate=scaled_learning_rate(train_cfg, replicas), global_clipnorm=train_cfg.clip_norm,
                     use_ema=train_cfg.ema_momentum > 0, ema_momentum=train_cfg.ema_momentum)
    # Not XLA-compiled, also on CPU: LazyAdam's gathers and scatters run several times slower
    # compiled, and so does dense Adam once no embedding penalty makes its gradients dense
    # (docs/decisions.md).
    optimizer.jit_compile = False
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
    )
    model.distribute_reduction_method = "first"     # see CTRModel
    return model

