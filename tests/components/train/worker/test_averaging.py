"""The averaged weights swap in for a block and out after it (the gang test is test_early_stopping)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.train.worker.averaging import averaged_weights, averaging


def _stepped_model(use_ema: bool) -> keras.Model:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer=keras.optimizers.Adam(0.1, use_ema=use_ema, ema_momentum=0.5), loss="mse")
    x, y = np.eye(3, dtype=np.float32), np.ones((3, 1), np.float32)
    model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(5), epochs=1, verbose=0)
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
