"""Typed configuration, loaded once: YAML file, then environment, then explicit overrides.

Why three layers: the YAML file (`conf/params.yaml`) is the one params file a team reviews;
environment variables (`RECO__TRAIN__WORKERS=4`) let a deployment change a value without a
commit; explicit overrides are what an Airflow run's form passes. Every error names the
dotted key, the value and what was expected, so a typo in a 2 a.m. backfill is obvious.
"""
from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.config_checks import CHECKS

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = PROJECT_ROOT / "conf" / "params.yaml"
ENV_PREFIX = "RECO__"
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
URL_REFUSED = ("is a URL; artifacts are written with local file operations (atomic rename, fsync), "
               "so every root must be a local or mounted path (a PVC, gcsfuse, an S3 CSI mount); for an "
               "object store keep data.artifact_root local and set data.artifact_store to the URL "
               "(pipeline/storage.py, docs/scaling.md)")


class ConfigError(ValueError):
    """A configuration value is unknown, mistyped or out of range; the message names the key."""


@dataclass(frozen=True)
class DataConfig:
    raw_root: Path = PROJECT_ROOT / "var" / "data"
    artifact_root: Path = PROJECT_ROOT / "var" / "artifacts"
    staging_root: Path = PROJECT_ROOT / "var" / "ssd"        # the training hosts' local SSD
    serving_base: Path = PROJECT_ROOT / "var" / "serving"    # TF Serving's model base dir
    artifact_store: str = ""     # URL (gs://, s3://, any fsspec) the run's outputs are mirrored to; "" = off


@dataclass(frozen=True)
class WindowConfig:
    train_days: int = 3           # N days before the run date D are the training window


@dataclass(frozen=True)
class GeneratorConfig:
    users: int = 2000
    items: int = 1000
    events_per_day: int = 4000
    ctr: float = 0.12
    seed: int = 7


@dataclass(frozen=True)
class PreprocessConfig:
    runner: str = "DirectRunner"
    direct_running_mode: str = "auto"    # auto: in_memory for small inputs, else multi_processing
    direct_num_workers: int = 0          # 0 = one per core
    beam_args: tuple[str, ...] = ()      # passed through to PipelineOptions
    max_rejected_fraction: float = 0.01
    max_label_rate_drift: float = 0.5    # |today/yesterday - 1| above this fails
    warn_label_rate_drift: float = 0.2
    max_row_count_drift: float = 0.8
    warn_row_count_drift: float = 0.3
    readers_per_worker: int = 2          # shards = workers x readers_per_worker x shard_multiple
    shard_multiple: int = 4
    compression: str = ""                # "" or "GZIP"; uncompressed reads much faster (docs/benchmarks.md)
    side_input_max_items: int = 100_000  # side-input join up to this (~8.3 KB/item/worker), else CoGBK
    staging_keep_runs: int = 2           # newest staged runs kept on the local SSD (current always)


@dataclass(frozen=True)
class ModelConfig:
    title_len: int = 20
    title_vocab_size: int = 50_000
    history_len: int = 50
    item_vocab_size: int = 100_000
    oov_buckets: int = 10
    embedding_dim: int = 128
    lstm_units: int = 64
    image_units: tuple[int, ...] = (128, 64)
    hidden_units: int = 256
    architecture: str = "din"            # "din" (target-aware, the default) or "reference" (the seed's)
    user_buckets: int = 10_000           # hashed user-id space (tf.Transform); 0: the model ignores users
    attention_units: int = 64            # DIN attention MLP width
    content_units: int = 32              # DIN content memory: projected image per item id
    content_weight: float = 0.1          # weight of its fitting loss beside the click loss
    user_memory_weight: float = 0.1      # DIN user memory (pooled history code per user); 0: off
    dropout: float = 0.1
    embedding_l2: float = 3e-4           # L2 on the looked-up id embedding rows (docs/benchmarks.md)
    serving_xla: bool | None = None      # XLA-compile the export's model part; null: where it pays

    @property
    def xla_export(self) -> bool:
        """By default XLA only fuses the reference model's LSTM loops; din has none (docs/serving.md)."""
        return self.architecture == "reference" if self.serving_xla is None else self.serving_xla


@dataclass(frozen=True)
class TrainConfig:
    workers: int = 2
    epochs: int = 2
    batch_size_per_replica: int = 256
    learning_rate: float = 0.001         # per replica; scaled linearly by replicas
    clip_norm: float = 5.0
    mixed_precision: bool = False        # used only when GPUs are present
    backend: str = "local"               # "local" processes or "kubernetes" pods
    startup_timeout_s: float = 120.0     # peers that never arrive fail the gang
    kill_grace_s: float = 5.0            # SIGTERM -> SIGKILL escalation
    progress_timeout_s: float = 600.0    # no heartbeat, or no step while fitting, this long: stop (0: off)
    timeout_s: float = 3600.0
    image: str = "reco-worker:latest"    # container image for the kubernetes backend
    namespace: str = "default"
    gpus_per_worker: int = 0
    threads_per_worker: int = 0          # TF intra-op threads; 0 = cores / workers on this host
    pin_cpus: bool = False               # pin worker i to its own cores (benchmarks)
    readers: int = 4                     # files read in parallel per worker
    deterministic: bool = False          # reproducible input order (tests)
    seed: int = 0
    k8s_flavor: str = "tfjob"            # "tfjob" (Kubeflow) or "indexed-job" (+ headless Service)
    k8s_artifacts_pvc: str = "reco-artifacts"   # shared volume with artifact_root
    k8s_raw_pvc: str = "reco-raw"               # shared volume with raw_root (read by the preprocess pod)
    k8s_serving_pvc: str = "reco-serving"       # TF Serving's model base (evaluate reads, push writes)
    k8s_service_account: str = "reco-launcher"  # launcher pods; RBAC: python -m components.train.k8s rbac
    export: bool = True                  # false: train + evaluate only (benchmarks)
    warm_start: str = "none"             # "served": start from the served model's weights (rows follow ids)
    optimizer: str = "lazy_adam"         # "lazy_adam" (touched rows only) or "adam"
    validation_shards: int = 1           # train shards held out for early stopping (0 = none)
    early_stopping_patience: int = 1     # epochs without a better val AUC before stopping
    backup_interval_s: float = 300.0     # back up at an epoch end this long after the last (0: every epoch)
    profile_steps: tuple[int, ...] = ()  # (first, last): TF profile of those steps, train/profile/worker-i
    xla_optimizer: bool = False          # XLA-compiled optimizer update (slower with lazy_adam: docs/benchmarks.md)


@dataclass(frozen=True)
class EvalConfig:
    min_auc: float | None = 0.55
    max_log_loss: float | None = None
    max_auc_drop: float | None = 0.01     # candidate AUC may be at most this below baseline
    drop_needs_significance: bool = True  # ...unless the paired bootstrap cannot tell them apart
    slices: tuple[str, ...] = ("category", "platform")
    min_slice_size: int = 100
    bootstrap_samples: int = 200
    seed: int = 0
    batch_size: int = 1024           # rows per scoring call through the serving signature


@dataclass(frozen=True)
class PushConfig:
    model_name: str = "recommender"
    keep_versions: int = 5
    allow_backfill: bool = False     # a run older than the served model's data never serves
    force: bool = False              # push even if NOT_BLESSED: one run's param, never a default
    force_reason: str | None = None  # required with force; recorded in the push record
    tflite: bool = False
    warmup_requests: int = 8         # also the number of eval examples verified after publish
    warmup_batch_sizes: tuple[int, ...] = (1,)  # shapes compiled at load (XLA export compile: docs/benchmarks.md)
    verify_tolerance: float = 1e-5   # max |served - evaluated| probability on the same examples
    verify_timeout_s: float = 300.0  # the fresh verification process
    force_needs_approval: bool = True  # a forced push waits for Approve in Airflow's Required Actions
    approval_timeout_s: float = 14_400.0  # no answer by then: Reject (no push)
    serving_url: str = ""            # TF Serving REST, e.g. http://tf-serving:8501: label canary, then stable
    label_wait_s: float = 300.0      # how long the new version may take to become AVAILABLE there


@dataclass(frozen=True)
class ScheduleConfig:
    cron: str = "0 2 * * *"
    timezone: str = "UTC"
    training_pool: str = "training"
    training_pool_slots: int = 1
    retries: int = 1
    retry_delay_s: float = 120.0
    data_wait_h: float = 8.0                # wait for _SUCCESS markers until D ends + this (0: never wait)
    data_poke_s: float = 60.0               # how often the triggerer looks for them
    serve_deadline_minutes: int | None = None  # Deadline Alert after the run is queued (experimental)


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    preprocess: PreprocessConfig = field(default_factory=PreprocessConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    push: PushConfig = field(default_factory=PushConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-able dict (paths as strings) that `from_dict` reads back."""
        return _plain(dataclasses.asdict(self))

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A copy with dotted-key overrides applied and validated (e.g. {"train.workers": 4})."""
        tree = self.to_dict()
        _apply_dotted(tree, overrides, origin="override")
        return from_dict(tree)


def load_config(
    path: os.PathLike | str | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Load `path` (else $RECO_CONFIG, else conf/params.yaml), then RECO__* env, then overrides."""
    env = os.environ if env is None else env
    path = Path(path or env.get("RECO_CONFIG") or DEFAULT_CONFIG_FILE)
    tree = Config().to_dict()
    if path.exists():
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of sections, got {type(loaded).__name__}")
        _merge(tree, loaded, prefix="", origin=str(path))
    elif path != DEFAULT_CONFIG_FILE:
        raise ConfigError(f"config file {path} does not exist")
    env_overrides = {
        key[len(ENV_PREFIX):].lower().replace("__", "."): yaml.safe_load(value)
        for key, value in env.items()
        if key.startswith(ENV_PREFIX)
    }
    _apply_dotted(tree, env_overrides, origin="environment")
    _apply_dotted(tree, overrides or {}, origin="override")
    return from_dict(tree)


def from_dict(tree: Mapping[str, Any]) -> Config:
    """Build and validate a Config from a nested dict (as written by `to_dict`)."""
    sections = {}
    for f in dataclasses.fields(Config):
        sections[f.name] = _build_section(f.name, f.default_factory, tree.get(f.name, {}))
    unknown = set(tree) - set(sections)
    if unknown:
        raise ConfigError(f"unknown config section(s) {sorted(unknown)}; expected one of {sorted(sections)}")
    return Config(**sections)


def _build_section(name: str, cls: type, values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        dotted = f"{name}.{key}"
        if key not in hints:
            raise ConfigError(f"unknown config key {dotted!r}; {name} has {sorted(hints)}")
        kwargs[key] = _coerce(dotted, value, hints[key])
        check = CHECKS.get(dotted)
        if check and not check[0](kwargs[key]):
            raise ConfigError(f"{dotted}: got {value!r}, expected {check[1]}")
    return cls(**kwargs)


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Check `value` against a field's type hint; ints widen to float, lists become tuples."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # Optional[X], X | None
        if value is None:
            return None
        return _coerce(key, value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: got {value!r}, expected a list")
        return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
    if hint is Path:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{key}: got {value!r}, expected a path string")
        if isinstance(value, str) and URL.match(value):     # Path() would fold gs:// into gs:/
            raise ConfigError(f"{key}: {value!r} {URL_REFUSED}")
        p = Path(value).expanduser()
        return p if p.is_absolute() else PROJECT_ROOT / p
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float) and isinstance(value, bool) or not isinstance(value, hint):
        raise ConfigError(f"{key}: got {value!r} ({type(value).__name__}), expected {hint.__name__}")
    return value


def _merge(tree: dict, loaded: Mapping[str, Any], prefix: str, origin: str) -> None:
    for key, value in loaded.items():
        dotted = f"{prefix}{key}"
        if key not in tree:
            raise ConfigError(f"{origin}: unknown config key {dotted!r}")
        if isinstance(tree[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: {dotted} must be a mapping, got {value!r}")
            _merge(tree[key], value, f"{dotted}.", origin)
        else:
            tree[key] = value


def _apply_dotted(tree: dict, overrides: Mapping[str, Any], origin: str) -> None:
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if section not in tree or not key or key not in tree[section]:
            raise ConfigError(f"{origin}: unknown config key {dotted!r}")
        tree[section][key] = value


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
