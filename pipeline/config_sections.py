"""The params file's sections, one frozen dataclass each: the one place every default is defined.

conf/params.yaml may show values, but loading it must give exactly these defaults
(tests/pipeline/test_config.py), so a user's own params file that omits a key gets what the
docs say. Checks of ranges are in config_checks.py; loading is config.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class DataConfig:
    raw_root: Path = PROJECT_ROOT / "var" / "data" # raw partitions: events/ds=D/, items/ds=D/ (docs/data.md)
    artifact_root: Path = PROJECT_ROOT / "var" / "artifacts" # every run's outputs: runs/D/<run>/ (docs/artifacts.md)
    staging_root: Path = PROJECT_ROOT / "var" / "ssd"        # the training hosts' local SSD
    serving_base: Path = PROJECT_ROOT / "var" / "serving"    # TF Serving's model base dir
    artifact_store: str = ""     # URL (gs://, s3://, any fsspec) the run's outputs are mirrored to; "" = off


@dataclass(frozen=True)
class WindowConfig:
    train_days: int = 3           # N days before the run date D are the training window


@dataclass(frozen=True)
class GeneratorConfig:
    users: int = 2000                # synthetic users (python -m pipeline generate-data)
    items: int = 1000                # synthetic catalog size
    events_per_day: int = 4000       # impressions generated per day
    ctr: float = 0.12                # base click rate of the default world
    seed: int = 7                    # the generated data (same seed, same partitions)
    regime: str = "default"       # kind of world (pipeline/datagen/regimes.py); its knobs win over ctr


@dataclass(frozen=True)
class ValidateConfig:
    """Bounds on the raw partitions as a whole (components/validate; docs/data.md lists them)."""

    max_label_rate_drift: float = 0.5    # |today/yesterday - 1| above this fails
    warn_label_rate_drift: float = 0.2 # above this: a warning, not a failure
    max_row_count_drift: float = 0.8 # |rows today/yesterday - 1| above this fails
    warn_row_count_drift: float = 0.3 # above this: a warning
    max_duplicate_fraction: float = 0.01   # of a day's rows repeating an earlier event_id
    max_misdated_fraction: float = 0.01    # of a day's rows with event_ts outside its day or a wrong hour
    max_eval_overlap: float = 0.01         # of the eval day's event ids also in the training window
    max_catalog_drop: float = 0.3          # items snapshot's distinct ids lost vs the snapshot before


@dataclass(frozen=True)
class PreprocessConfig:
    runner: str = "DirectRunner"     # Beam runner: DirectRunner, PortableRunner, DataflowRunner ... (docs/scaling.md)
    direct_running_mode: str = "auto"    # auto: in_memory for small inputs, else multi_processing
    direct_num_workers: int = 0          # 0 = one per core
    beam_args: tuple[str, ...] = ()      # passed through to PipelineOptions
    max_rejected_fraction: float = 0.01 # of a day's rows refused by a check, above which the run fails
    readers_per_worker: int = 2          # shards = workers x readers_per_worker x shard_multiple
    shard_multiple: int = 4          # more shards than readers, so a slow shard does not hold a worker up
    compression: str = ""                # "" or "GZIP"; uncompressed reads much faster (docs/benchmarks.md)
    staging_keep_runs: int = 2           # newest staged runs kept on the local SSD (current always)
    staging_pin_h: float = 24.0          # a staged run is kept until trained, or this long (contracts/staged.py)


@dataclass(frozen=True)
class ModelConfig:
    title_len: int = 20              # title tokens kept
    title_vocab_size: int = 50_000   # title tokens in tf.Transform's vocabulary
    history_len: int = 50            # the user's most recent items kept
    item_vocab_size: int = 100_000   # item ids with a row of their own (the rest share OOV rows)
    oov_buckets: int = 10            # rows shared by ids outside the vocabulary
    embedding_dim: int = 128         # width of the item and user embeddings
    lstm_units: int = 64             # the reference architecture's history LSTM
    image_units: tuple[int, ...] | None = None   # trained image path; null: the architecture's own
    hidden_units: int = 256          # first dense layer (the second is a quarter of it)
    architecture: str = "din"            # "din" (target-aware, the default) or "reference" (the seed's)
    user_buckets: int = 100_000          # hashed user-id space (tf.Transform); 0: the model ignores users
    user_memory_weight: float = 0.1      # DIN user memory (pooled history code per user); 0: off
    stack_popularity: bool = True        # last layer blends the model with item popularity (blend.py)
    linear_member: bool = True           # last layer blends the model with a fitted LR on ids (linear.py)
    wide_bias: bool = True               # din: per-item and per-user logit biases (the wide part)
    bias_l2: float = 1.0                 # L2 on the looked-up bias rows (x SCALE^-2 on the bias: din.ScaledBias)
    serving_xla: bool | None = None      # XLA-compile the export's model part; null: where it pays

    @property
    def image_tower(self) -> tuple[int, ...]:
        """din: one narrow layer (its fixed ImageCode carries the image's similarities; a wide
        stack memorised the run's few thousand images, docs/training.md); reference: the seed's
        128 -> 64."""
        if self.image_units is not None:
            return tuple(self.image_units)
        return (128, 64) if self.architecture == "reference" else (16,)

    @property
    def xla_export(self) -> bool:
        """By default XLA only fuses the reference model's LSTM loops; din has none (docs/serving.md)."""
        return self.architecture == "reference" if self.serving_xla is None else self.serving_xla


@dataclass(frozen=True)
class ExecutionConfig:
    """Where the heavy steps run, for the whole run: "local" (this host: Beam's runner from
    preprocess.runner, training workers as processes) or "kubernetes" (preprocess, train,
    evaluate and push as pods of one image; training workers as a TFJob or Indexed Job)."""

    backend: str = "local"               # "local" processes or "kubernetes" pods
    image: str = "reco-worker:latest"    # container image for the kubernetes backend
    namespace: str = "default"       # Kubernetes namespace of the pods
    k8s_flavor: str = "tfjob"            # "tfjob" (Kubeflow) or "indexed-job" (+ headless Service)
    k8s_artifacts_pvc: str = "reco-artifacts"   # shared volume with artifact_root
    k8s_raw_pvc: str = "reco-raw"               # shared volume with raw_root (read by the preprocess pod)
    k8s_serving_pvc: str = "reco-serving"       # TF Serving's model base (evaluate reads, push writes)
    k8s_service_account: str = "reco-launcher"  # launcher pods; RBAC: python -m components.train.k8s rbac


@dataclass(frozen=True)
class TrainConfig:
    workers: int = 2                 # gang size: MultiWorkerMirroredStrategy workers
    epochs: int = 4                      # at most: early stopping restores the best epoch by val AUC
    batch_size_per_replica: int = 256 # global batch = this x replicas
    learning_rate: float = 0.001         # per replica; scaled linearly by replicas
    clip_norm: float = 5.0           # global-norm gradient clipping
    mixed_precision: bool = False        # used only when GPUs are present
    startup_timeout_s: float = 120.0     # peers that never arrive fail the gang
    kill_grace_s: float = 5.0            # SIGTERM -> SIGKILL escalation
    progress_timeout_s: float = 600.0    # no heartbeat, or no step while fitting, this long: stop (0: off)
    timeout_s: float = 3600.0        # a gang still running after this is stopped and fails
    gpus_per_worker: int = 0         # 0: CPU (GPU paths are untested here: docs/scaling.md)
    threads_per_worker: int = 0          # TF intra-op threads; 0 = cores / workers on this host
    readers: int = 4                     # files read in parallel per worker
    data_order_seed: int = 0         # the order of the training data only (initial weights are not seeded)
    warm_start: str = "none"             # "served": start from the served model's weights (rows follow ids)
    incremental: bool = False            # train only the days the served model has not fitted, from its weights
    full_retrain_every: int = 7          # with incremental: one full retrain in every N served models
    incremental_epochs: int = 1          # an incremental night's epochs over its new days (a fine-tune)
    incremental_learning_rate: float = 0.0003  # and its learning rate (per replica)
    optimizer: str = "lazy_adam"         # "lazy_adam" (touched rows only) or "adam"
    validation_shards: int = 1           # train shards held out for early stopping (0 = none)
    early_stopping_patience: int = 1     # epochs without a better val AUC before stopping
    ema_momentum: float = 0.97           # validate, keep and export the weights' moving average (0: off)
    backup_interval_s: float = 300.0     # back up at an epoch end this long after the last (0: every epoch)
    profile_steps: tuple[int, ...] = ()  # (first, last): TF profile of those steps, train/profile/worker-i


@dataclass(frozen=True)
class EvalConfig:
    min_auc: float | None = 0.55     # absolute floor for a BLESSED candidate; null: off
    max_log_loss: float | None = None # absolute ceiling; null: off
    max_auc_drop: float | None = 0.0      # candidate AUC may be at most this below the served model's
    min_lift_over_baseline: float | None = 0.01  # AUC must beat the window's item popularity by this
    drop_needs_significance: bool = False  # true: a drop passes while the bootstrap cannot tell them apart
    slices: tuple[str, ...] = ("category", "platform") # columns the report's per-slice AUCs are cut by
    min_slice_size: int = 100        # smaller slices are not reported
    bootstrap_samples: int = 200     # paired user bootstrap of candidate - served AUC
    seed: int = 0                    # the bootstrap's resampling
    batch_size: int = 1024           # rows per scoring call through the serving signature
    trend_nights: int = 14           # nights in the report's quality trend (pipeline/contracts/trend.py)
    min_rows: int = 200              # fewer usable eval-day rows: refused, not judged (validate: raw rows)


@dataclass(frozen=True)
class PushConfig:
    model_name: str = "recommender"  # TF Serving's model name (the serving dir's folder)
    keep_versions: int = 5           # newest versions kept in the serving dir
    allow_backfill: bool = False     # a run older than the served model's data never serves
    force: bool = False              # push even if NOT_BLESSED: one run's param, never a default
    force_reason: str | None = None  # required with force; recorded in the push record
    tflite: bool = False             # also write a TF Lite model beside the SavedModel (docs/serving.md)
    warmup_requests: int = 8         # also the number of eval examples verified after publish
    warmup_batch_sizes: tuple[int, ...] = (1,)  # shapes compiled at load (XLA export compile: docs/benchmarks.md)
    verify_tolerance: float = 1e-5   # max |served - evaluated| probability on the same examples
    verify_timeout_s: float = 300.0  # the fresh verification process
    force_needs_approval: bool = True  # a forced push waits for Approve in Airflow's Required Actions
    approval_timeout_s: float = 14_400.0  # no answer by then: Reject (no push)
    approvers: tuple[str, ...] = ()    # who may approve a forced push (empty: anyone but its requester)
    serving_url: str = ""            # TF Serving REST, e.g. http://tf-serving:8501: label canary, then stable
    label_wait_s: float = 300.0      # how long the new version may take to become AVAILABLE there


@dataclass(frozen=True)
class ScheduleConfig:
    cron: str = "0 2 * * *"          # the nightly run's cron
    timezone: str = "UTC"            # the cron's zone (partitions are UTC days: docs/operations.md)
    training_pool: str = "training"  # Airflow pool the train task runs in
    training_pool_slots: int = 1     # gangs at a time
    training_queue: str = "training"        # Celery queue of the train task; LocalExecutor ignores it
    heavy_pool: str = "heavy"               # preprocess and evaluate of concurrent runs take turns here
    heavy_pool_slots: int = 1        # preprocess / evaluate steps at a time
    max_active_runs: int = 4                # a run waiting for its data never holds up another one
    retries: int = 1                 # each task's retries
    retry_delay_s: float = 120.0     # between a failed try and the next
    data_wait_h: float = 8.0                # wait for _SUCCESS markers until D ends + this (0: never wait)
    data_poke_s: float = 60.0               # how often the triggerer looks for them
    serve_deadline_minutes: int | None = None  # Deadline Alert after the run is queued (experimental)
