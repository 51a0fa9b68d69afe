"""The averaged weights swap in for a block and out after it (the gang test is test_early_stopping)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.train.model import keras_private as private
from components.train.worker.averaging import AveragedEarlyStopping, ValidateAveraged, averaged_weights, averaging
from components.train.worker.callbacks import PacedBackup

DATA = tf.data.Dataset.from_tensors((np.eye(3, dtype=np.float32), np.ones((3, 1), np.float32)))


def _compiled(use_ema: bool = True) -> keras.Model:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,), kernel_initializer="zeros")])  # deterministic
    model.compile(optimizer=keras.optimizers.Adam(0.1, use_ema=use_ema, ema_momentum=0.5), loss="mse")
    return model


def _stepped_model(use_ema: bool) -> keras.Model:
    model = _compiled(use_ema)
    model.fit(DATA.repeat(5), epochs=1, verbose=0)
    return model


def test_inside_the_block_the_model_holds_the_average_and_after_it_the_raw_weights():
    model = _stepped_model(use_ema=True)
    for var in model.trainable_variables:      # fit() ended by writing the average into the weights
        var.assign(var + 1.0)
    raw = [w.copy() for w in model.get_weights()]
    optimizer = model.optimizer
    average = [private.moving_average(optimizer, private.slot_index(optimizer, v)).numpy()
               for v in model.trainable_variables]
    assert averaging(model)
    with averaged_weights(model):
        for got, want in zip(model.get_weights(), average):
            np.testing.assert_allclose(got, want)
    for got, want in zip(model.get_weights(), raw):
        np.testing.assert_allclose(got, want)


def test_without_averaging_the_block_changes_nothing():
    model = _stepped_model(use_ema=False)
    before = [w.copy() for w in model.get_weights()]
    assert not averaging(model)
    with averaged_weights(model):
        for got, want in zip(model.get_weights(), before):
            np.testing.assert_array_equal(got, want)


def test_the_raw_weights_come_back_when_the_block_raises():
    model = _stepped_model(use_ema=True)
    for var in model.trainable_variables:
        var.assign(var + 1.0)
    raw = [w.copy() for w in model.get_weights()]
    with pytest.raises(RuntimeError), averaged_weights(model):
        raise RuntimeError("validation failed")
    for got, want in zip(model.get_weights(), raw):
        np.testing.assert_allclose(got, want)


def test_a_retry_that_resumes_after_the_last_epoch_holds_the_weights_early_stopping_kept(tmp_path):
    """A kill during export: the retry restores the backup, runs no epoch and exports. It must
    export the round early stopping kept (here the first: the monitor is maximised loss), not
    the last step's average that fit() writes into the weights when it ends."""
    def fit(model):
        stopping = AveragedEarlyStopping(monitor="val_loss", mode="max", patience=5, restore_best_weights=True)
        backup = PacedBackup(str(tmp_path / "backup"), 0.0, delete_checkpoint=False)   # every epoch too
        model.fit(DATA.repeat(4), validation_data=DATA, epochs=3, verbose=0,
                  callbacks=[ValidateAveraged(), stopping, backup])
        return stopping

    first = _compiled()
    assert fit(first).best_epoch == 0
    kept = first.get_weights()
    retry = _compiled()
    fit(retry)
    assert int(retry.optimizer.iterations) == 12          # restored, and no step taken
    for got, want in zip(retry.get_weights(), kept):
        np.testing.assert_allclose(got, want, rtol=1e-6)


class _TableProbe(keras.callbacks.Callback):
    """The embedding table at the start, after every step, and as validation reads it."""

    def table(self):
        return self.model.layers[0].embeddings.numpy().copy()

    def on_train_begin(self, logs=None):
        self.steps, self.start = [], self.table()

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append(self.table())

    def on_test_begin(self, logs=None):
        self.validated = self.table()


@pytest.mark.parametrize("validated", [True, False], ids=["validated", "no-validation"])
def test_a_table_averaged_by_rows_is_validated_and_exported_as_its_every_step_average(validated):
    """LazyAdam steps a table's average on the touched rows only: what validation reads and what
    fit() leaves in the weights (Keras' finalize, the only reader without validation) must still
    be the average of every step (rows 0, 2, 4-9 are never touched, row 5 sits out most steps)."""
    from components.train.model.optimizers import LazyAdam

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Embedding(10, 2, input_length=1), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile(optimizer=LazyAdam(0.1, use_ema=True, ema_momentum=0.5), loss="mse")
    ids = np.array([[1], [5], [3], [1], [3], [1], [3], [3]])
    probe = _TableProbe()
    model.fit(ids, np.ones((8, 1)), batch_size=2, epochs=1, shuffle=False, verbose=0,
              validation_data=(ids[:2], np.ones((2, 1))) if validated else None, callbacks=[ValidateAveraged(), probe])
    expected = probe.start
    for table in probe.steps:
        expected = 0.5 * expected + 0.5 * table
    assert not np.allclose(expected[5], probe.steps[-1][5], atol=1e-4)     # averaging is visible
    if validated:
        np.testing.assert_allclose(probe.validated, expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(model.layers[0].embeddings.numpy(), expected, rtol=0, atol=1e-6)


def test_under_mixed_precision_the_wrapped_optimizers_averages_are_read():
    """Keras wraps the optimizer in a LossScaleOptimizer under mixed precision (GPU runs): the
    averages live in the inner optimizer, and validation must still read them."""
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,), kernel_initializer="zeros")])
    model.compile(optimizer=keras.mixed_precision.LossScaleOptimizer(
        keras.optimizers.Adam(0.1, use_ema=True, ema_momentum=0.5)), loss="mse")
    model.fit(DATA.repeat(5), epochs=1, verbose=0)
    for var in model.trainable_variables:
        var.assign(var + 1.0)
    inner = model.optimizer.inner_optimizer
    average = [private.moving_average(inner, private.slot_index(inner, v)).numpy()
               for v in model.trainable_variables]
    with averaged_weights(model):
        for got, want in zip(model.get_weights(), average):
            np.testing.assert_allclose(got, want)
