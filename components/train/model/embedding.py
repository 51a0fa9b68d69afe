"""Embedding tables that stay sparse under tf.distribute: lookups, penalty and optimizer reads.

Inside `strategy.run`, `tf.gather` on a MirroredVariable reads the *whole* variable and gathers
from that copy: tf.distribute's `DistributedVariable` has no `sparse_read`, so `tf.gather` falls
back to a dense read. A variable that was ever scatter-updated (every table under LazyAdam) is
in TensorFlow's copy-on-read mode, so each such read copies the whole table: a 100k-row
table, read a few times per step for lookups and optimizer slots, cost more than the batch.
Reading the replica's own component variable keeps the ResourceGather, whose gradient is the
same IndexedSlices on the same variable.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


def local_variable(variable):
    """This replica's component of a distributed variable (the variable itself otherwise)."""
    component = getattr(variable, "_get_on_device_or_primary", None)   # tf.distribute's own accessor
    return component() if component is not None else variable


def gather_rows(variable, ids):
    """`tf.gather(variable, ids)` as a sparse read, also on a mirrored variable."""
    return tf.gather(local_variable(variable), ids)


@keras.saving.register_keras_serializable(package="reco_nightly")
class RowEmbedding(keras.layers.Embedding):
    """A Keras Embedding that reads sparsely under tf.distribute, with an optional L2 penalty on
    only the rows a batch looks up (DIN's mini-batch aware regularisation, without its frequency
    weights). Keras' `embeddings_regularizer` penalises the whole table: its gradient is dense,
    so every step would update, and under MWMS all-reduce, every row. A touched row's penalty
    gradient is the same as under the whole-table penalty. The penalty is a training loss:
    only a `training=True` call pays it. Variables keep Keras' names."""

    def __init__(self, input_dim: int, output_dim: int, l2: float = 0.0, **kwargs):
        super().__init__(input_dim, output_dim, **kwargs)
        self.l2 = l2

    def call(self, inputs, training=None):
        ids = inputs if inputs.dtype in (tf.int32, tf.int64) else tf.cast(inputs, tf.int32)
        if self.l2 and training:
            # One read of the table's distinct rows serves the penalty and the lookup, and the
            # gradient then holds each row once. Inference (validation, evaluation, the serving
            # export) has no penalty to pay and looks rows up directly: no tf.unique per request.
            rows, positions = tf.unique(tf.reshape(ids, [-1]))
            vectors = gather_rows(self.embeddings, rows)
            self.add_loss(self.l2 * tf.reduce_sum(tf.square(vectors)))
            out = tf.reshape(tf.gather(vectors, positions), tf.concat([tf.shape(ids), [self.output_dim]], 0))
            out.set_shape(ids.shape.concatenate([self.output_dim]))
        else:
            out = gather_rows(self.embeddings, ids)
        if self.compute_dtype != self.variable_dtype:
            out = tf.cast(out, self.compute_dtype)
        return out

    def get_config(self):
        return {**super().get_config(), "l2": self.l2}
