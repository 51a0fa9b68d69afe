"""The averaged weights swap in for a block and out after it (the gang test is test_early_stopping)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.train.worker.averaging import AveragedEarlyStopping, ValidateAveraged, averaged_weights, averaging
from components.train.worker.callbacks import PacedBackup

DATA = tf.data.Dataset.from_tensors((np.eye(3, dtype=np.float32), np.ones((3, 1), np.float32)))


def _compiled(use_ema: bool = True) -> keras.Model:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
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
    average = [optimizer._model_variables_moving_average[optimizer._index_dict[optimizer._var_key(v)]].numpy()
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
