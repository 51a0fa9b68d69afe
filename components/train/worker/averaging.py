"""Validate, keep and export the moving average of the weights, not the last step's.

Why: a nightly run trains a few dozen to a few thousand steps, and the last step's weights carry
that step's batch noise: two trainings of the same recipe on the same data then differ by more
than the gate's own tolerance, and a same-data rerun can flip the verdict. The exponential moving
average of the weights (Polyak averaging) is a cheap, well-known cure: the optimizer keeps it
(`use_ema`, updated after every step under the same distribution strategy as the weights), and
these callbacks make every decision on it: validation reads the averaged weights, early stopping
keeps the best averaged weights, and so the model the chief evaluates and exports is an average.

Training itself still steps the raw weights (`ema_overwrite_frequency` stays None): averaging
only reads them. Every worker runs these callbacks; a swap is a local assignment on each worker
(all hold the same weights in synchronous training), never a collective.
"""
from __future__ import annotations

import contextlib

import tf_keras as keras

from components.train.model import keras_private as private


def _optimizer(model: keras.Model):
    """The optimizer that keeps the averages: under mixed precision Keras wraps it in a
    LossScaleOptimizer, which forwards `use_ema` but not the averages themselves."""
    return getattr(model.optimizer, "inner_optimizer", model.optimizer)


def averaging(model: keras.Model) -> bool:
    """True when the model's optimizer keeps a moving average of its weights."""
    return bool(getattr(_optimizer(model), "use_ema", False))


def _has_averages(model: keras.Model) -> bool:
    """Averaging, and the averages exist (the optimizer builds them at its first step)."""
    return averaging(model) and private.built(_optimizer(model))


@contextlib.contextmanager
def averaged_weights(model: keras.Model):
    """The model holds its averaged weights inside the block and its raw ones after it."""
    if not _has_averages(model):
        yield
        return
    _swap(model)
    try:
        yield
    finally:
        _swap(model)


def _pairs(model: keras.Model):
    """(trainable variable, its moving average) for every variable the optimizer averages."""
    optimizer = _optimizer(model)
    for var in model.trainable_variables:
        index = private.slot_index(optimizer, var)
        if index is not None:                    # else a variable the optimizer never built a slot for
            yield var, private.moving_average(optimizer, index)


def _assign(strategy, target, value) -> None:
    """target := value on every local device (a cross-replica assignment, no collective)."""
    strategy.extended.update(target, lambda t, v: t.assign(v), args=(value,))


def _sync(model: keras.Model) -> None:
    """Averages kept lazily (LazyAdam's tables) up to the current step before anyone reads them."""
    sync = getattr(_optimizer(model), "sync_averages", None)
    if sync is not None:
        sync()


def _swap(model: keras.Model) -> None:
    """Exchange each trainable variable with its average."""
    _sync(model)
    for var, average in _pairs(model):
        raw = var.read_value()
        _assign(model.distribute_strategy, var, average)
        _assign(model.distribute_strategy, average, raw)


class ValidateAveraged(keras.callbacks.Callback):
    """fit()'s validation rounds read the averaged weights."""

    def on_test_begin(self, logs=None):
        self._block = averaged_weights(self.model)
        self._block.__enter__()

    def on_test_end(self, logs=None):
        self._block.__exit__(None, None, None)


class AveragedEarlyStopping(keras.callbacks.EarlyStopping):
    """EarlyStopping whose "best weights" are the averaged weights of the best round, the ones
    that round's validation scored (ValidateAveraged)."""

    def on_epoch_end(self, epoch, logs=None):
        with averaged_weights(self.model):
            super().on_epoch_end(epoch, logs)

    def on_train_end(self, logs=None):
        """After restoring the kept weights, make them the average too: fit() ends by writing the
        average into the weights (Keras' finalize), so a retry that resumes after the last epoch
        from the backup taken next (PacedBackup, listed after this) would otherwise export the
        last step's average instead of the kept weights."""
        super().on_train_end(logs)
        if _has_averages(self.model):
            for var, average in _pairs(self.model):
                _assign(self.model.distribute_strategy, average, var.read_value())
