"""Small Keras callbacks: steady-state throughput and an epoch progress file.

Both are cheap (a clock read per batch, one small JSON per epoch) and MWMS-safe: every
worker runs them, only the chief writes a file.
"""
from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path

import tf_keras as keras

from pipeline.fsutil import write_json_atomic

log = logging.getLogger(__name__)


class ThroughputMeter(keras.callbacks.Callback):
    """Training examples/s from the end of the first step to the end of training, and where
    the time between steps goes.

    The first step is left out because it traces and compiles the train function and
    warms the input pipeline; epoch-end work (validation, backups) stays in, because a run
    pays it. `steady_examples_per_s` (median step) and `epoch_end_seconds` (last step of an
    epoch to the first of the next) split the two, for benchmarks and the model card.
    """

    _supports_tf_logs = True      # never reads logs: Keras need not convert them every step

    def __init__(self, global_batch: int):
        super().__init__()
        self.global_batch = global_batch
        self._start: float | None = None
        self.seconds = 0.0
        self.step_seconds: list[float] = []
        self.epoch_end_seconds = 0.0
        self._batch_start = 0.0
        self._last_end: float | None = None
        self._new_epoch = False

    def on_epoch_begin(self, epoch, logs=None):
        self._new_epoch = True

    def on_train_batch_begin(self, batch, logs=None):
        self._batch_start = time.perf_counter()
        if self._new_epoch and self._last_end is not None:
            self.epoch_end_seconds += self._batch_start - self._last_end
        self._new_epoch = False

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        else:
            self.step_seconds.append(now - self._batch_start)
        self._last_end = now
        self.seconds = now - self._start

    @property
    def steps(self) -> int:
        return len(self.step_seconds)

    @property
    def examples_per_s(self) -> float:
        if self.steps and self.seconds > 0:
            return self.steps * self.global_batch / self.seconds
        return 0.0

    @property
    def steady_examples_per_s(self) -> float:
        """The rate of a median step: no epoch-end work, no first step."""
        return self.global_batch / statistics.median(self.step_seconds) if self.step_seconds else 0.0


class StepBeat(keras.callbacks.Callback):
    """Counts train and validation batches into the worker's heartbeat (see heartbeat.py)."""

    _supports_tf_logs = True

    def __init__(self, writer):
        super().__init__()
        self.writer = writer

    def on_train_batch_end(self, batch, logs=None):
        self.writer.step()

    def on_test_batch_end(self, batch, logs=None):
        self.writer.step()


class StepProfiler(keras.callbacks.Callback):
    """A TensorFlow profile (xplane.pb, TensorBoard's Profile tab) of training steps
    [first, last) counted from the start of fit(), on every worker: the gang's cost is the
    slowest worker's, so each writes its own."""

    _supports_tf_logs = True

    def __init__(self, log_dir: Path, first: int, last: int):
        super().__init__()
        self.log_dir, self.first, self.last = Path(log_dir), first, last
        self.step = 0
        self.running = False

    def on_train_batch_begin(self, batch, logs=None):
        if self.step == self.first:
            import tensorflow as tf

            tf.profiler.experimental.start(str(self.log_dir))
            self.running = True

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.running and self.step >= self.last:
            self._stop()

    def on_train_end(self, logs=None):
        if self.running:
            self._stop()

    def _stop(self):
        import tensorflow as tf

        tf.profiler.experimental.stop()
        self.running = False
        log.info("profile of steps %d-%d written under %s", self.first, self.last, self.log_dir)


class EpochProgress(keras.callbacks.Callback):
    """Records the epoch training (re)started from, and writes progress.json on the chief.

    Listed after BackupAndRestore, so when progress.json says epoch k is done, the backup
    for epoch k has been written: an operator (or a test) can trust it as the resume point.
    """

    def __init__(self, path: Path | None, total_epochs: int):
        super().__init__()
        self.path = path
        self.total_epochs = total_epochs
        self.initial_epoch: int | None = None
        self.completed = 0

    def on_epoch_begin(self, epoch, logs=None):
        if self.initial_epoch is None:
            self.initial_epoch = epoch
            if epoch:
                log.info("resumed from backup at epoch %d of %d", epoch, self.total_epochs)

    def on_epoch_end(self, epoch, logs=None):
        self.completed = epoch + 1
        log.info("epoch %d/%d done: %s", epoch + 1, self.total_epochs,
                 {k: round(float(v), 4) for k, v in (logs or {}).items()})
        if self.path is not None:
            write_json_atomic(self.path, {"epochs_done": epoch + 1, "epochs": self.total_epochs,
                                          "initial_epoch": self.initial_epoch,
                                          "metrics": {k: float(v) for k, v in (logs or {}).items()},
                                          "time": time.time()})


class ScalarSummaries(keras.callbacks.Callback):
    """Per-epoch metrics as TensorBoard scalar events, without the tensorboard package.

    Keras' TensorBoard callback needs the `tensorboard` pip package for `tf.summary.scalar`;
    the serving-side constraints do not ship it, so this writes the same event records
    (plugin "scalars") with TF's core `tf.summary.write`. TensorBoard reads them as usual.
    """

    def __init__(self, log_dir: Path):
        super().__init__()
        self.log_dir = Path(log_dir)
        self._writer = None

    def _write(self, values: dict, step: int, prefix: str) -> None:
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2

        if self._writer is None:
            self._writer = tf.summary.create_file_writer(str(self.log_dir))
        metadata = summary_pb2.SummaryMetadata()
        metadata.plugin_data.plugin_name = "scalars"
        with self._writer.as_default():
            for name, value in values.items():
                tf.summary.write(f"{prefix}{name}", tf.constant(float(value), tf.float32),
                                 step=step, metadata=metadata)
        self._writer.flush()

    def on_epoch_end(self, epoch, logs=None):
        self._write(logs or {}, epoch + 1, "epoch_")

    def write_final(self, metrics: dict, step: int) -> None:
        self._write(metrics, step, "final_")
