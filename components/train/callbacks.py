"""Small Keras callbacks: steady-state throughput and an epoch progress file.

Both are cheap (a clock read per batch, one small JSON per epoch) and MWMS-safe: every
worker runs them, only the chief writes a file.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import tf_keras as keras

from pipeline.fsutil import write_json_atomic

log = logging.getLogger(__name__)


class ThroughputMeter(keras.callbacks.Callback):
    """Training examples/s from the end of the first step to the end of training.

    The first step is left out because it traces and compiles the train function and
    warms the input pipeline; epoch-end work (backups) stays in, because a run pays it.
    """

    def __init__(self, global_batch: int):
        super().__init__()
        self.global_batch = global_batch
        self.steps = 0
        self._start: float | None = None
        self.seconds = 0.0

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        else:
            self.steps += 1
        self.seconds = now - self._start

    @property
    def examples_per_s(self) -> float:
        if self.steps and self.seconds > 0:
            return self.steps * self.global_batch / self.seconds
        return 0.0


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
