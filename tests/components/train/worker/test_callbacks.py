"""The throughput meter's split (median step vs epoch-end work) and the step profiler, on a real fit()."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import tf_keras as keras

from components.train.worker.callbacks import PacedBackup, StepProfiler, ThroughputMeter
from tests.components.train.conftest import saved_epoch

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


class Recorder(keras.callbacks.Callback):
    """After each epoch end: which epoch the backup on disk holds, and how many epochs the
    PacedBackup says are backed up (what progress.json reports)."""

    def __init__(self, backup: PacedBackup):
        super().__init__()
        self.backup, self.seen, self.backed_up = backup, [], []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(saved_epoch(Path(self.backup.backup_dir)))
        self.backed_up.append(self.backup.backed_up_epochs)


def _fit_with_backup(tmp_path, interval_s: float, epochs: int = 3, stop_after: int | None = None):
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer="adam", loss="mse")
    x, y = np.ones((32, 3), np.float32), np.zeros((32, 1), np.float32)
    backup = PacedBackup(str(tmp_path / "backup"), interval_s, delete_checkpoint=False)
    recorder = Recorder(backup)
    extra = [keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: setattr(model, "stop_training", True))
             ] if stop_after else []
    history = model.fit(x, y, batch_size=8, epochs=epochs, verbose=0, callbacks=[backup, recorder, *extra])
    return backup, recorder, len(history.epoch)


def test_paced_backup_saves_every_epoch_at_interval_zero(tmp_path):
    backup, recorder, _ = _fit_with_backup(tmp_path, interval_s=0)
    assert recorder.seen == [0, 1, 2] and recorder.backed_up == [1, 2, 3] and backup.seconds > 0


def test_paced_backup_skips_epoch_ends_within_the_interval_but_keeps_the_last_epoch(tmp_path):
    backup, recorder, _ = _fit_with_backup(tmp_path, interval_s=3600)
    assert recorder.seen == [None, None, None] and recorder.backed_up == [0, 0, 0]   # no epoch end was due...
    assert saved_epoch(tmp_path / "backup") == 2     # ...the end of training saved the last epoch
    assert backup.backed_up_epochs == 3


def test_paced_backup_after_early_stopping_keeps_the_stopping_epoch(tmp_path):
    _, _, ran = _fit_with_backup(tmp_path, interval_s=3600, epochs=5, stop_after=1)
    assert ran == 1 and saved_epoch(tmp_path / "backup") == 0


def test_a_resumed_fit_starts_after_the_last_backed_up_epoch(tmp_path):
    _fit_with_backup(tmp_path, interval_s=3600, epochs=2)
    backup, recorder, ran = _fit_with_backup(tmp_path, interval_s=3600, epochs=4)
    assert ran == 2                                   # epochs 2 and 3 only: 0-1 came from the backup
    assert recorder.seen == [1, 1] and recorder.backed_up == [2, 2]   # the restored epochs count as backed up
    assert saved_epoch(tmp_path / "backup") == 3 and backup.backed_up_epochs == 4
