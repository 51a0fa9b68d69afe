"""One MultiWorkerMirroredStrategy worker: `python -m components.train.worker ...`.

Started by the launcher (local processes) or by a Kubernetes pod, always with TF_CONFIG.
Worker 0 is the chief. During fit() every worker runs the same steps (MWMS is synchronous: a
step or a checkpoint save is a collective, so all must join), but only the chief writes to
the real places; the others write to scratch directories that are deleted. After fit() the
chief alone evaluates and exports (chief.py) while the others wait in a last all-reduce.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from threading import Thread

import tensorflow as tf
import tf_keras as keras

from components.train.gang.heartbeat import FINISH, HeartbeatWriter
from components.train.gang.lab import lab_options
from components.train.model.build import build_model, compile_model, global_batch_size, scaled_learning_rate
from components.train.model.vocab import vocab_sizes
from components.train.worker import chief
from components.train.worker.averaging import AveragedEarlyStopping, ValidateAveraged
from components.train.worker.callbacks import (
    EpochProgress,
    PacedBackup,
    ScalarSummaries,
    StepBeat,
    StepProfiler,
    ThroughputMeter,
)
from components.train.worker.input import Split, item_content, join_items, make_dataset, read_split, worker_files
from components.train.worker.iterator_release import HeldIterators
from pipeline.config import Config, TrainConfig, from_dict
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M
from pipeline.contracts import serving, staged
from pipeline.contracts.training_plan import INCREMENTAL, Plan, night_config
from pipeline.paths import RunPaths
from pipeline.results import TrainResult

log = logging.getLogger(__name__)

PROGRESS_FILE = "progress.json"
PROFILE_DIR = "profile"


@dataclass(frozen=True)
class Task:
    """This process's place in the gang, from TF_CONFIG."""

    num_workers: int
    index: int

    @property
    def is_chief(self) -> bool:
        return self.index == 0

    @classmethod
    def from_env(cls) -> Task:
        """From TF_CONFIG; on a Kubernetes Indexed Job, TF_CONFIG is first built from
        RECO_WORKER_HOSTS (pod DNS names) and JOB_COMPLETION_INDEX (this pod's index)."""
        if "TF_CONFIG" not in os.environ and "RECO_WORKER_HOSTS" in os.environ:
            os.environ["TF_CONFIG"] = json.dumps({
                "cluster": {"worker": os.environ["RECO_WORKER_HOSTS"].split(",")},
                "task": {"type": "worker", "index": int(os.environ["JOB_COMPLETION_INDEX"])}})
        tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
        workers = tf_config.get("cluster", {}).get("worker", [])
        task = tf_config.get("task", {})
        if not workers or task.get("type") != "worker":
            raise RuntimeError("TF_CONFIG must name a 'worker' cluster and task; got "
                               f"{os.environ.get('TF_CONFIG')!r}")
        return cls(num_workers=len(workers), index=int(task["index"]))


def make_strategy(train_cfg: TrainConfig) -> tuple[tf.distribute.Strategy, str, bool]:
    """MWMS with NCCL all-reduce on GPUs, RING (gRPC) on CPU; mixed precision only on GPUs."""
    gpus = tf.config.list_physical_devices("GPU")
    impl = (tf.distribute.experimental.CommunicationImplementation.NCCL if gpus
            else tf.distribute.experimental.CommunicationImplementation.RING)
    mixed = bool(gpus) and train_cfg.mixed_precision
    if mixed:
        keras.mixed_precision.set_global_policy("mixed_float16")
    elif train_cfg.mixed_precision:
        log.warning("mixed precision requested but no GPU found: training in float32")
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=impl))
    return strategy, impl.name, mixed


def gang_barrier(strategy: tf.distribute.Strategy) -> int:
    """An all-reduce every worker must join: returns only once the whole gang is up."""
    ones = strategy.run(lambda: tf.constant(1.0))
    return int(strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None).numpy())


def _distributed(strategy, split, config: Config, global_batch: int, shuffle: bool = True):
    """Repeating batches of examples by reference: worker i reads its own files (see input.py),
    per-replica batch size; the model's step joins them (_join_in_step). shuffle=False
    (validation): the same examples in the same order every epoch."""
    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(split.files, config.model, ctx.get_per_replica_batch_size(global_batch),
                            num_workers=ctx.num_input_pipelines, worker_index=ctx.input_pipeline_id,
                            training=True, shuffle=shuffle, deterministic=not shuffle,
                            seed=config.train.data_order_seed, readers=config.train.readers,
                            compression=split.compression, sizes=split.sizes)
    return strategy.distribute_datasets_from_function(dataset_fn)


def train(config: Config, paths: RunPaths, task: Task, data_dir: Path | None = None,
          ready_file: Path | None = None) -> TrainResult | None:
    """Train on every worker; evaluate and export on the chief. Returns the chief's TrainResult."""
    strategy, collective, mixed = make_strategy(config.train)
    log.info("gang up: worker %d of %d, %d replicas, %s all-reduce", task.index, task.num_workers,
             gang_barrier(strategy), collective)
    beat = HeartbeatWriter(ready_file) if ready_file else None   # also says "joined the gang"
    data_dir = Path(data_dir or paths.staged_dir)
    with staged.reading(data_dir):        # stage never deletes shards a gang reads
        return _train(config, paths, task, strategy, collective, mixed, data_dir, beat)


def _train(config: Config, paths: RunPaths, task: Task, strategy, collective: str, mixed: bool,
           data_dir: Path, beat: HeartbeatWriter | None) -> TrainResult | None:
    plan = _plan(data_dir, paths)
    config = night_config(config, plan)
    train_split, eval_split = _train_split(data_dir, task), _eval_split(data_dir, paths)
    train_split, valid_split = train_split.hold_out(config.train.validation_shards, task.num_workers)
    log.info("data: %d train / %d validation / %d eval examples", train_split.examples,
             valid_split.examples if valid_split else 0, eval_split.examples)
    replicas = strategy.num_replicas_in_sync
    global_batch = global_batch_size(config.train, replicas)
    vocab = vocab_sizes(paths.transform_dir, config.model)
    with strategy.scope():
        model = compile_model(build_model(config.model, vocab, lab_options().interactions), config.train, replicas)
        _join_in_step(model, strategy, config, train_split)
        warm = _warm_start(model, config, paths, plan)
        _fit_image_code(model, train_split, warm)
    log.info("model built: %d parameters", model.count_params())

    fitted, summaries, releasing = _fit(strategy, model, config, paths, task, (train_split, valid_split),
                                        global_batch, beat)
    if beat:
        beat.phase = FINISH          # the chief evaluates and exports alone: no steps from here
    fitted["train_metrics"]["warm_start_variables"] = float(len(warm))
    result = None
    if task.is_chief:
        result = chief.finish(config, paths, chief.Trained(
            model=model, vocab=vocab, train_split=train_split, eval_split=eval_split, valid_split=valid_split,
            workers=task.num_workers, replicas=replicas, global_batch=global_batch,
            collective=collective, mixed_precision=mixed, plan=plan, **fitted), summaries)
    # The chief evaluates and exports alone (no collective in it); the others wait in a last
    # all-reduce so the gang ends together: a worker that just exited looks like a crash to the
    # chief's coordination service.
    gang_barrier(strategy)
    releasing.join()
    if beat:
        beat.close()                 # every worker's last beat says it exited cleanly (DONE)
    return result


def _fit(strategy, model, config: Config, paths: RunPaths, task: Task, splits: tuple[Split, Split | None],
         global_batch: int, beat: HeartbeatWriter | None = None) -> tuple[dict, ScalarSummaries, Thread]:
    """model.fit with backups, progress, throughput and TensorBoard scalars (chief: real dirs);
    with a validation split, early stopping that restores the epoch of the best validation AUC.
    The thread releasing fit's training iterator is the caller's to join (iterator_release.py)."""
    train_split, valid_split = splits
    scratch = None if task.is_chief else Path(tempfile.mkdtemp(prefix=f"train-worker{task.index}-"))
    try:
        meter = ThroughputMeter(global_batch)
        summaries = ScalarSummaries(paths.tensorboard_dir if task.is_chief else scratch / "tb")
        # Every worker saves (a save is a collective), non-chiefs into a temp dir that
        # BackupAndRestore deletes. delete_checkpoint=False: the backup outlives fit()
        # until the model is published, so a kill during export does not retrain.
        backup = PacedBackup(str(paths.backup_dir), config.train.backup_interval_s, delete_checkpoint=False)
        epochs = config.train.epochs
        progress = EpochProgress(paths.train_dir / PROGRESS_FILE if task.is_chief else None, epochs, backup)
        fit_kwargs, callbacks = {}, []
        if valid_split is not None:
            # Listed before the backup: its last save, at the end of fit, holds the weights early
            # stopping kept, so a retry that resumes after the last epoch exports those.
            fit_kwargs = {"validation_data": _distributed(strategy, valid_split, config, global_batch, shuffle=False),
                          "validation_steps": max(1, valid_split.examples // global_batch)}
            callbacks += [ValidateAveraged(), AveragedEarlyStopping(
                monitor="val_auc", mode="max", patience=config.train.early_stopping_patience,
                restore_best_weights=True, verbose=1)]
        callbacks += [backup, progress, meter, summaries]
        if beat:
            callbacks.append(StepBeat(beat))
        if config.train.profile_steps:
            callbacks.append(StepProfiler(paths.train_dir / PROFILE_DIR / f"worker-{task.index}",
                                          *config.train.profile_steps))
        steps = max(1, train_split.examples // global_batch)
        log.info("fit: %d steps/epoch x %d epochs, global batch %d, lr %g", steps, epochs,
                 global_batch, scaled_learning_rate(config.train, strategy.num_replicas_in_sync))
        started = time.time()
        train_data = HeldIterators(_distributed(strategy, train_split, config, global_batch))
        history = model.fit(train_data, epochs=epochs, steps_per_epoch=steps,
                            callbacks=callbacks, verbose=2, **fit_kwargs)
        releasing = train_data.release()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    initial = progress.initial_epoch if progress.initial_epoch is not None else epochs
    timing = {"steady_examples_per_s": meter.steady_examples_per_s, "epoch_end_seconds": meter.epoch_end_seconds,
              "backup_seconds": backup.seconds}
    return {"train_metrics": {**_fit_metrics(history.history), **timing},
            "initial_epoch": initial, "examples_per_s": meter.examples_per_s,
            "train_seconds": time.time() - started}, summaries, releasing


def _fit_image_code(model, split, warmed: tuple[str, ...]) -> None:
    """The image code is fitted to this run's catalog (din.py) unless the warm start set it: the
    served model's code stays with the weights that read it, and its fit (a PCA of the catalog's
    images) is skipped. After _join_in_step, which checks the item table is there."""
    from components.train.model.din import ImageCode, fit_image_code

    if any(isinstance(layer, ImageCode) and layer.projection.name in warmed for layer in model.submodules):
        log.info("image code kept from the warm start")
        return
    images = item_content(str(split.item_table))[IT.IMAGE]
    if fit_image_code(model, images):
        log.info("image code fitted to the item table's %d items", len(images))


def _join_in_step(model, strategy, config: Config, split) -> None:
    """The training and validation steps join their batches with the item table (input.py),
    its arrays held on the step's device."""
    if split.item_table is None:
        raise FileNotFoundError("no item table beside the shards: examples reference items by its rows")
    device = strategy.extended.worker_devices[0]
    model.item_join = join_items(item_content(str(split.item_table)), device=device)


def _plan(data_dir: Path, paths: RunPaths) -> Plan:
    """The plan preprocess decided and wrote into the manifest (pipeline/contracts/training_plan.py)."""
    try:
        recorded = M.read(data_dir).get("training_plan")
    except FileNotFoundError:          # shards without a manifest (a listing): a full retrain
        recorded = None
    return Plan.from_json(recorded, paths.train_dates)


def _warm_start(model, config: Config, paths: RunPaths, plan: Plan) -> tuple[str, ...]:
    """The variables initialised from the served model (none: a cold start). A backup, if any, still
    wins: BackupAndRestore restores over these values when fit() starts. An incremental night
    continues the version its plan names, whatever serves now."""
    from components.train.worker.warm_start import refitted_days, warm_start

    if plan.mode == INCREMENTAL:
        served_dir = serving.version_dir(paths.model_base, plan.served_version)
        if not served_dir.is_dir():
            raise FileNotFoundError(f"the incremental plan continues version {plan.served_version}, which is no "
                                    f"longer in {paths.model_base}: re-run preprocess to plan again")
        return warm_start(model, served_dir, paths.transform_dir, config.model.oov_buckets)
    if config.train.warm_start != "served":
        return ()

    served = serving.served_version(paths.model_base)
    served_dir = serving.version_dir(paths.model_base, served) if served is not None else None
    refitted = refitted_days(serving.read_push_record(served_dir) if served_dir else None, paths.train_dates)
    if refitted:
        log.warning("warm start from version %s, which already fitted %s of this window: re-fitting them "
                    "overfits, and the validation split drawn from them overrates it; train only the days "
                    "since (window.train_days)", served, ", ".join(d.isoformat() for d in refitted))
    return warm_start(model, served_dir, paths.transform_dir, config.model.oov_buckets)


def _fit_metrics(history: dict[str, list[float]]) -> dict[str, float]:
    """The last epoch's training metrics, and the best epoch's validation ones (restored)."""
    out = {f"train_{k}": float(v[-1]) for k, v in history.items() if v and not k.startswith("val_")}
    if history.get("val_auc"):
        best = int(max(range(len(history["val_auc"])), key=history["val_auc"].__getitem__))
        out.update({k: float(v[best]) for k, v in history.items() if k.startswith("val_") and v})
        out["best_epoch"] = float(best + 1)
        out["epochs_run"] = float(len(history["val_auc"]))
    return out


def _train_split(data_dir: Path, task: Task) -> Split:
    split = read_split(data_dir, "train")
    missing = split.missing(worker_files(split.files, task.num_workers, task.index, split.sizes))
    if missing:
        raise FileNotFoundError(f"{len(missing)} of this worker's shards are not staged in "
                                f"{data_dir}, e.g. {missing[0]} (run the stage step for worker "
                                f"{task.index} of {task.num_workers})")
    return split


def _eval_split(data_dir: Path, paths: RunPaths) -> Split:
    """The whole eval split for the chief: staged if all of it is here, else the artifact store
    (a host that staged only its own worker's shards; eval is read once, so shared storage does)."""
    split = read_split(data_dir, "eval")
    if split.missing() and data_dir != paths.examples_dir:
        log.info("eval shards not all staged in %s: reading %s", data_dir, paths.examples_dir)
        split = read_split(paths.examples_dir, "eval")
    return split


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config-json", required=True, type=Path, help="resolved Config as JSON")
    p.add_argument("--date", required=True, help="run date YYYY-MM-DD")
    p.add_argument("--run-id", default="cli")
    p.add_argument("--data-dir", type=Path, help="shards dir with train/ and eval/ "
                                                 "(default: the run's staged dir)")
    p.add_argument("--ready-file", type=Path, help="heartbeat file, first written once the gang is up")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0 = TF default)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    task = Task.from_env()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s w{task.index} %(levelname)s %(name)s: %(message)s")
    tf.get_logger().setLevel(logging.WARNING)     # one INFO line per collective otherwise
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, args.threads))
    config = from_dict(json.loads(args.config_json.read_text()))
    paths = RunPaths.for_run(config, args.date, args.run_id)
    train(config, paths, task, data_dir=args.data_dir, ready_file=args.ready_file)
    return 0

