"""A lazy Adam for the embedding tables: a sparse gradient updates only the rows it touches.

tf_keras' Adam decays the first and second moments of every row of a variable on every step,
even when the gradient is a `tf.IndexedSlices` touching a few rows of a big embedding table, so
each step costs the whole table. `LazyAdam` (the TensorFlow Addons LazyAdam rule) updates m, v
and the variable on the touched rows only; dense gradients get the parent's exact update.

This is not Adam on sparse variables: an untouched row keeps its moments and its value (no
momentum carry-over), i.e. its moments decay only on the steps that touch it.

With `use_ema`, Keras moves the average of every weight on every step, whole tables included,
which costs as much as the dense Adam this class avoids. Here a table's average moves on the
touched rows only, and a row that sat out k steps first catches up in one go: its weight was
constant meanwhile, so k steps of `a = m a + (1 - m) w` are `a = m^k a + (1 - m^k) w`. The
averages then equal Keras' (up to rounding) whenever they are read: `sync_averages` brings the
rows that sat out up to the current step, and the readers (weight averaging's callbacks, fit's
final `finalize_variable_values`) call it first.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.train.model import keras_private as private
from components.train.model.embedding import gather_rows
from components.train.model.sparse_gather import all_gather_sparse, can_pack, count_slots


@keras.saving.register_keras_serializable(package="reco_nightly")
class LazyAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` with a touched-rows-only update for `tf.IndexedSlices` gradients.

    `update_step` and the cross-replica aggregation of sparse gradients are overridden:
    clipping (`global_clipnorm` etc.), the dense gradients' aggregation, XLA wrapping and
    distributed-variable handling stay the parent's, and so do the slot variables ("m", "v"
    built by `Adam.build`), so checkpoints have plain Adam's layout (with `use_ema`, plus one
    `averaged_through` per rank-2 weight).
    `weight_decay`, when set, still acts on whole variables (parent code); `use_ema` averages a
    table by its touched rows (module docstring).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("LazyAdam does not implement amsgrad; use keras.optimizers.Adam(amsgrad=True).")

    def build(self, var_list):
        """The parent's slots, and with `use_ema` one more per table: the step each row's average
        is current through (`averaged_through`, float32 like the table it counts for)."""
        super().build(var_list)
        if hasattr(self, "_lazy_averages") or not self.use_ema:
            return
        self._lazy_averages: dict = {}       # var key -> (variable, average, averaged_through)
        for var in var_list:
            if var.shape.rank == 2:
                through = self.add_variable_from_reference(var, "averaged_through", shape=var.shape[:1])
                average = private.moving_average(self, private.slot_index(self, var))
                self._lazy_averages[private.variable_key(self, var)] = (var, average, through)

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
        grads = private.deduplicate_sparse_grad(self, [g for g, _ in grads_and_vars])
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
            if not self._lazy_average_of(variable):
                return super().update_step(gradient, variable)
            before = tf.identity(variable.read_value())
            super().update_step(gradient, variable)
            return self._average_all(variable, before)

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

        m, v = private.adam_moments(self, private.slot_index(self, variable))
        # beta*m + (1-beta)*g, written as Adam's dense step writes it (1 - beta as a Python float
        # too), so touched rows round exactly as plain Adam's do.
        m_rows = gather_rows(m, rows)
        m_rows += (grad - m_rows) * (1 - self.beta_1)
        v_rows = gather_rows(v, rows)
        v_rows += (tf.square(grad) - v_rows) * (1 - self.beta_2)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        before = gather_rows(variable, rows) if self._lazy_average_of(variable) else None
        step = (m_rows * alpha) / (tf.sqrt(v_rows) + epsilon_hat)
        variable.scatter_sub(tf.IndexedSlices(step, rows))
        if before is not None:
            self._average_rows(variable, rows, before, before - step)

    def _lazy_average_of(self, variable) -> bool:
        return self.use_ema and private.variable_key(self, variable) in self._lazy_averages

    def _average_rows(self, variable, rows, before, after) -> None:
        """The average's step on the touched rows, after catching up the steps they sat out."""
        _, average, through = self._lazy_averages[private.variable_key(self, variable)]
        now = tf.cast(self.iterations + 1, through.dtype)
        rows_average = self._caught_up(gather_rows(average, rows), before, now - 1 - gather_rows(through, rows))
        average.scatter_update(tf.IndexedSlices(self._stepped(rows_average, after), rows))
        through.scatter_update(tf.IndexedSlices(tf.fill(tf.shape(rows), now), rows))

    def _average_all(self, variable, before) -> None:
        """The average's step on a table that got a dense gradient: every row catches up (none
        sat out when all its steps were dense), then steps."""
        _, average, through = self._lazy_averages[private.variable_key(self, variable)]
        now = tf.cast(self.iterations + 1, through.dtype)
        average.assign(self._stepped(self._caught_up(average, before, now - 1 - through), variable))
        through.assign(tf.fill(tf.shape(through), now))

    def _caught_up(self, average, weight, behind):
        """Rows' averages after `behind` steps in which their weights stayed `weight`:
        m^k a + (1 - m^k) w, k steps of Keras' update in one go."""
        decay = tf.pow(tf.cast(self.ema_momentum, behind.dtype), behind)[:, None]
        return decay * average + (1 - decay) * weight

    def _stepped(self, average, weight):
        """Keras' one-step update of an average (optimizer._update_model_variables_moving_average)."""
        return self.ema_momentum * average + (1 - self.ema_momentum) * weight

    def _update_model_variables_moving_average(self, var_list):
        """The parent's whole-variable step, except for the tables stepped by rows (update_step).
        A private method of tf_keras' optimizer: keras_private.OVERRIDDEN."""
        tables = getattr(self, "_lazy_averages", {})
        super()._update_model_variables_moving_average(
            [v for v in var_list if private.variable_key(self, v) not in tables])

    def sync_averages(self) -> None:
        """Every table's average up to the current step (cross-replica context): afterwards each
        average is what Keras' every-step averaging would hold."""
        strategy = private.distribution_strategy(self)
        now = tf.cast(self.iterations, tf.float32)
        for var, average, through in getattr(self, "_lazy_averages", {}).values():
            value = self._caught_up(average.read_value(), var.read_value(), now - through.read_value())
            strategy.extended.update(average, lambda a, v: a.assign(v), args=(value,))
            strategy.extended.update(through, lambda t, v: t.assign(v), args=(tf.fill(tf.shape(through), now),))

    def finalize_variable_values(self, var_list):
        self.sync_averages()
        super().finalize_variable_values(var_list)

    def get_config(self):
        # Adam.get_config leaves out adaptive_epsilon; amsgrad is always False here.
        config = super().get_config()
        config["adaptive_epsilon"] = self.adaptive_epsilon
        return config
