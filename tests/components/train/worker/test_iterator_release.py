"""fit()'s training iterator is kept past fit() and dropped on a background thread, on a real
fit() under a real tf.distribute strategy (iterator_release.py)."""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.train.worker.iterator_release import HeldIterators


def _distributed(strategy):
    x, y = np.ones((64, 3), np.float32), np.zeros((64, 1), np.float32)
    return strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8))


def test_fit_reads_the_held_dataset_and_its_iterator_outlives_fit():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
        model.compile(optimizer="sgd", loss="mse")
    held = HeldIterators(_distributed(strategy))
    history = model.fit(held, epochs=2, steps_per_epoch=4, verbose=0)
    assert len(history.history["loss"]) == 2
    assert len(held._iterators) == 1                  # one iterator for the whole fit, still alive
    kept = weakref.ref(held._iterators[0])
    gc.collect()
    assert kept() is not None

    releasing = held.release()
    assert isinstance(releasing, threading.Thread) and releasing.name == "release-iterators"
    releasing.join(timeout=120)
    gc.collect()
    assert not releasing.is_alive() and kept() is None and held._iterators == []


def test_the_iterator_is_dropped_on_the_release_thread():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    held = HeldIterators(_distributed(strategy))
    next(iter(held))
    dropped_on = []
    weakref.finalize(held._iterators[0], lambda: dropped_on.append(threading.current_thread().name))
    held.release().join(timeout=120)
    assert dropped_on == ["release-iterators"]


def test_the_rest_is_the_wrapped_datasets():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    finite = strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))
    held = HeldIterators(finite)
    assert held.element_spec == finite.element_spec
    assert int(held.reduce(tf.constant(0, tf.int64), lambda total, batch: total + tf.reduce_sum(batch))) == 28
    assert held._iterators == []                      # reduce iterates inside the dataset, holding nothing
