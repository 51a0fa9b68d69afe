"""A lazy Adam for the embedding tables: a sparse gradient updates only the rows it touches.

tf_keras' Adam decays the first and second moments of every row of a variable on every step,
even when the gradient is a `tf.IndexedSlices` touching a few rows of a big embedding table, so
each step costs the whole table. `LazyAdam` (the TensorFlow Addons LazyAdam rule) updates m, v
and the variable on the touched rows only; dense gradients get the parent's exact update.

This is not Adam on sparse variables: an untouched row keeps its moments and its value (no
momentum carry-over), i.e. its moments decay only on the steps that touch it.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.train.model.embedding import gather_rows
from components.train.model.sparse_gather import all_gather_sparse, can_pack, count_slots


@keras.saving.register_keras_serializable(package="reco_nightly")
class LazyAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` with a touched-rows-only update for `tf.IndexedSlices` gradients.

    `update_step` and the cross-replica aggregation of sparse gradients are overridden:
    clipping (`global_clipnorm` etc.), the dense gradients' aggregation, XLA wrapping and
    distributed-variable handling stay the parent's, and so do the slot variables ("m", "v"
    built by `Adam.build`), so checkpoints have plain Adam's layout.
    `weight_decay` and `use_ema`, when set, still act on whole variables (parent code).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("LazyAdam does not implement amsgrad; use keras.optimizers.Adam(amsgrad=True).")

    def aggregate_gradients(self, grads_and_vars):
        """Sum each sparse gradient's duplicate rows *before* the cross-worker exchange, and send
        all sparse gradients together (sparse_gather.py); the dense ones are summed as the
        parent sums them, in one all-reduce that also carries the sparse row counts.

        The parent all-gathers every (row, value) pair a batch produced and deduplicates after:
        a 50-long history repeats an item's row many times per batch, and under MWMS each copy
        crosses the network. Summing first sends each touched row once per worker.
        """
        grads_and_vars = list(grads_and_vars)
        ctx = tf.distribute.get_replica_context()
        if ctx is None or ctx.num_replicas_in_sync == 1:     # nothing crosses: apply_gradients dedups
            return super().aggregate_gradients(grads_and_vars)
        variables = [v for _, v in grads_and_vars]
        grads = self._deduplicate_sparse_grad([g for g, _ in grads_and_vars])
        sparse = [k for k, g in enumerate(grads) if isinstance(g, tf.IndexedSlices)]
        if not sparse or not can_pack([grads[k] for k in sparse]):
            return super().aggregate_gradients(list(zip(grads, variables)))
        dense = [k for k in range(len(grads)) if k not in sparse and grads[k] is not None]
        sparse_grads = [grads[k] for k in sparse]
        # The parent's dense all-reduce (a sum), with the sparse gradients' row counts riding in
        # it, so a step makes two collectives, not three. A None gradient stays None.
        *dense_sums, slots = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                            [grads[k] for k in dense] + [count_slots(ctx, sparse_grads)])
        reduced = dict.fromkeys(range(len(grads)))
        reduced.update(zip(dense, dense_sums))
        reduced.update(zip(sparse, all_gather_sparse(ctx, sparse_grads, slots)))
        return list(zip([reduced[k] for k in range(len(grads))], variables))

    def update_step(self, gradient, variable):
        """Adam on the rows of a sparse gradient (duplicates summed); the parent's step otherwise."""
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable)

        dtype = variable.dtype
        lr = tf.cast(self.learning_rate, dtype)
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1_power = tf.pow(tf.cast(self.beta_1, dtype), local_step)
        beta_2_power = tf.pow(tf.cast(self.beta_2, dtype), local_step)
        # Same bias correction and epsilon placement as Adam.update_step.
        alpha = lr * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        if self.adaptive_epsilon:
            epsilon_hat = self.epsilon * tf.sqrt(1 - beta_2_power)
        else:
            epsilon_hat = self.epsilon

        # apply_gradients already deduplicates, but a scatter_update with duplicate indices keeps
        # only one of them, so update_step must not depend on its caller for correctness.
        rows, positions = tf.unique(gradient.indices)
        grad = tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(rows)[0])

        index = self._index_dict[self._var_key(variable)]
        m = self._momentums[index]
        v = self._velocities[index]
        # beta*m + (1-beta)*g, written as Adam's dense step writes it (1 - beta as a Python float
        # too), so touched rows round exactly as plain Adam's do.
        m_rows = gather_rows(m, rows)
        m_rows += (grad - m_rows) * (1 - self.beta_1)
        v_rows = gather_rows(v, rows)
        v_rows += (tf.square(grad) - v_rows) * (1 - self.beta_2)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        variable.scatter_sub(tf.IndexedSlices((m_rows * alpha) / (tf.sqrt(v_rows) + epsilon_hat), rows))

    def get_config(self):
        # Adam.get_config leaves out adaptive_epsilon; amsgrad is always False here.
        config = super().get_config()
        config["adaptive_epsilon"] = self.adaptive_epsilon
        return config
