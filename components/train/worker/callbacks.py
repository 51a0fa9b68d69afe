"""Small Keras callbacks: paced backups, steady-state throughput and an epoch progress file.

All are MWMS-safe: every worker runs them, only the chief writes a file (the backup's
collectives are joined by every worker, see PacedBackup).
"""
from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path

import tf_keras as keras

from pipeline.fsutil import write_json_atomic

log = logging.getLogger(__name__)


class PacedBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore at an epoch end only when `interval_s` has passed since the last backup
    (or the start of fit), and at the end of a fit that ran an epoch.

    Why: a backup is the whole training state (tables and both Adam slots) written by every
    worker, seconds per save at reference sizes; after every short epoch it costs a large share
    of the run, while what it saves on a crash is at most `interval_s` of training plus an epoch.
    A save is a collective (synced metric variables), so the decision must be the gang's, not
    each worker's clock: every worker votes and one all-reduce decides (any yes is a yes). `interval_s=0`:
    every epoch, as Keras does. The epoch recorded is the one begun last, so a resume starts
    after the last backed-up epoch either way.
    """

    def __init__(self, backup_dir: str, interval_s: float, **kwargs):
        super().__init__(backup_dir, **kwargs)
        self.interval_s = interval_s
        self.backed_up_epochs = 0      # epochs in the backup (a resumed fit starts with those restored)
        self.seconds = 0.0             # time spent in backups (this fit)
        self._epochs_done: int | None = None
        self._last = 0.0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._last = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        if self._epochs_done is None:             # the first epoch of this fit: after the restored ones
            self._epochs_done = self.backed_up_epochs = epoch

    def on_epoch_end(self, epoch, logs=None):
        self._epochs_done = epoch + 1
        if self._gang_votes(time.monotonic() - self._last >= self.interval_s):
            self._save()

    def on_train_end(self, logs=None):
        # Whenever this fit ran an epoch, even one just backed up: early stopping (listed before
        # this) has since put the kept weights back, and a retry that resumes here exports them.
        if self._epochs_done is not None:
            self._save()
        super().on_train_end(logs)

    def _save(self) -> None:
        start = time.monotonic()
        self._backup(epoch=self._epochs_done - 1)
        self._last = time.monotonic()
        self.seconds += self._last - start
        self.backed_up_epochs = self._epochs_done

    def _gang_votes(self, due: bool) -> bool:
        import tensorflow as tf

        strategy = self.model.distribute_strategy
        votes = strategy.run(lambda: tf.constant(float(due)))
        return bool(strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None).numpy() > 0)


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

    Listed after PacedBackup, so `backed_up_epochs` in progress.json is the resume point an
    operator (or a test) can trust: a retry of the run starts after that many epochs.
    """

    def __init__(self, path: Path | None, total_epochs: int, backup: PacedBackup):
        super().__init__()
        self.path = path
        self.total_epochs = total_epochs
        self.backup = backup
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
                                          "backed_up_epochs": self.backup.backed_up_epochs,
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
