"""The throughput meter's split (median step vs epoch-end work) and the step profiler, on a real fit()."""
from __future__ import annotations

import time

import numpy as np
import tf_keras as keras

from components.train.callbacks import StepProfiler, ThroughputMeter

EPOCH_END_SLEEP = 0.3


class SlowEpochEnd(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(EPOCH_END_SLEEP)


def test_meter_separates_epoch_end_work_and_profiler_writes_a_trace(tmp_path):
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((32, 3), np.float32), np.zeros((32, 1), np.float32)
    meter = ThroughputMeter(global_batch=8)
    profiler = StepProfiler(tmp_path / "profile", first=1, last=3)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[meter, SlowEpochEnd(), profiler])
    assert meter.steps == 7 and len(meter.step_seconds) == 7          # 2 x 4 steps, the first left out
    assert meter.epoch_end_seconds >= EPOCH_END_SLEEP                 # one boundary, slept through
    assert meter.seconds >= meter.epoch_end_seconds
    # The median step excludes the epoch end; the overall rate pays it.
    assert meter.steady_examples_per_s > meter.examples_per_s > 0
    assert not profiler.running and list((tmp_path / "profile").rglob("*.xplane.pb"))
