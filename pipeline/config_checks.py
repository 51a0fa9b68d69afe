"""Range checks of the params file: dotted key -> (predicate, what was expected).

`pipeline.config` applies them after the types are checked, so an error names the key, the
value and this expectation (`train.workers: got 0, expected an int >= 1`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pipeline.config_sections import ExecutionConfig, ValidateConfig
from pipeline.datagen.regimes import PRESETS

CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "window.train_days": (lambda v: v >= 1, "an int >= 1 (days)"),
    "data.artifact_store": (lambda v: not v or "://" in v, "'' (off) or a URL such as gs://bucket/reco"),
    "train.workers": (lambda v: v >= 1, "an int >= 1"),
    "train.epochs": (lambda v: v >= 1, "an int >= 1"),
    "train.batch_size_per_replica": (lambda v: v >= 1, "an int >= 1"),
    "train.learning_rate": (lambda v: v > 0, "a float > 0"),
    "train.clip_norm": (lambda v: v > 0, "a float > 0"),
    "execution.backend": (lambda v: v in ("local", "kubernetes"), "'local' or 'kubernetes'"),
    "train.optimizer": (lambda v: v in ("lazy_adam", "adam"), "'lazy_adam' or 'adam'"),
    "train.warm_start": (lambda v: v in ("none", "served"), "'none' or 'served'"),
    "train.full_retrain_every": (lambda v: v >= 1, "an int >= 1 (1: every night is a full retrain)"),
    "train.incremental_epochs": (lambda v: v >= 1, "an int >= 1"),
    "train.incremental_learning_rate": (lambda v: v > 0, "a float > 0"),
    "train.validation_shards": (lambda v: v >= 0, "an int >= 0"),
    "train.early_stopping_patience": (lambda v: v >= 0, "an int >= 0"),
    "train.ema_momentum": (lambda v: 0 <= v < 1, "a float in [0, 1)"),
    "train.backup_interval_s": (lambda v: v >= 0, "a float >= 0 (seconds; 0 = every epoch)"),
    "model.architecture": (lambda v: v in ("din", "reference"), "'din' or 'reference'"),
    "model.user_buckets": (lambda v: v >= 0, "an int >= 0"),
    "train.gpus_per_worker": (lambda v: v >= 0, "an int >= 0"),
    "schedule.max_active_runs": (lambda v: v >= 1, "an int >= 1"),
    "eval.trend_nights": (lambda v: v >= 1, "an int >= 1"),
    "eval.min_rows": (lambda v: v >= 0, "an int >= 0 (0 = no floor)"),
    "preprocess.staging_pin_h": (lambda v: v > 0, "hours > 0"),
    "schedule.heavy_pool_slots": (lambda v: v >= 1, "an int >= 1"),
    "train.threads_per_worker": (lambda v: v >= 0, "an int >= 0 (0 = automatic)"),
    "train.readers": (lambda v: v >= 1, "an int >= 1"),
    "train.startup_timeout_s": (lambda v: v > 0, "a float > 0 (seconds)"),
    "train.kill_grace_s": (lambda v: v >= 0, "a float >= 0 (seconds)"),
    "train.timeout_s": (lambda v: v > 0, "a float > 0 (seconds)"),
    "train.progress_timeout_s": (lambda v: v >= 0, "a float >= 0 (seconds; 0 = no progress deadline)"),
    "train.profile_steps": (lambda v: not v or (len(v) == 2 and 0 <= v[0] < v[1]),
                            "empty or [first, last] steps with 0 <= first < last"),
    "execution.k8s_flavor": (lambda v: v in ("tfjob", "indexed-job"), "'tfjob' or 'indexed-job'"),
    "preprocess.max_rejected_fraction": (lambda v: 0 <= v <= 1, "a fraction in [0, 1]"),
    **{f"validate.{key}": (lambda v: 0 <= v <= 1, "a fraction in [0, 1]")
       for key in ("max_duplicate_fraction", "max_misdated_fraction", "max_eval_overlap", "max_catalog_drop")},
    "preprocess.compression": (lambda v: v in ("", "GZIP"), "'' or 'GZIP'"),
    "preprocess.readers_per_worker": (lambda v: v >= 1, "an int >= 1"),
    "preprocess.shard_multiple": (lambda v: v >= 1, "an int >= 1"),
    "preprocess.direct_running_mode": (lambda v: v in ("auto", "in_memory", "multi_processing", "multi_threading"),
                                       "'auto', 'in_memory', 'multi_processing' or 'multi_threading'"),
    "generator.ctr": (lambda v: 0 < v < 1, "a rate in (0, 1)"),
    "generator.regime": (lambda v: v in PRESETS, "a regime or preset of pipeline/datagen/regimes.py"),
    "eval.min_auc": (lambda v: v is None or 0 <= v <= 1, "null or a value in [0, 1]"),
    "eval.max_auc_drop": (lambda v: v is None or 0 <= v <= 1, "null or a value in [0, 1]"),
    "eval.min_lift_over_baseline": (lambda v: v is None or -1 <= v <= 1, "null or a value in [-1, 1]"),
    "eval.max_log_loss": (lambda v: v is None or v > 0, "null or a float > 0"),
    "push.keep_versions": (lambda v: v >= 2, "an int >= 2 (served + previous)"),
    "push.warmup_requests": (lambda v: v >= 1, "an int >= 1"),
    "push.warmup_batch_sizes": (lambda v: len(v) >= 1 and min(v) >= 1, "a non-empty list of ints >= 1"),
    "push.verify_tolerance": (lambda v: v > 0, "a float > 0"),
    "push.approval_timeout_s": (lambda v: v > 0, "a float > 0 (seconds)"),
    "push.serving_url": (lambda v: not v or v.startswith(("http://", "https://")), "empty or an http(s):// URL"),
    "push.label_wait_s": (lambda v: v > 0, "a float > 0 (seconds)"),
    "schedule.data_wait_h": (lambda v: v >= 0, "a float >= 0 (hours after the data date ends; 0 = never wait)"),
    "schedule.data_poke_s": (lambda v: v > 0, "a float > 0 (seconds)"),
    "schedule.serve_deadline_minutes": (lambda v: v is None or v >= 1, "null (off) or an int >= 1"),
    "eval.batch_size": (lambda v: v >= 1, "an int >= 1"),
    "eval.bootstrap_samples": (lambda v: v >= 0, "an int >= 0 (0 = no bootstrap)"),
}

# Sections carved out of another: each of their keys, under the old section's name, is refused
# with a message naming where it lives now.
CARVED_OUT: dict[str, tuple[str, type]] = {
    "train": ("execution", ExecutionConfig),
    "preprocess": ("validate", ValidateConfig),
}
MOVED_KEYS: dict[str, str] = {
    f"{old}.{field.name}": f"{new}.{field.name}"
    for old, (new, section) in CARVED_OUT.items() for field in dataclasses.fields(section)
} | {"train.seed": "train.data_order_seed"}       # renamed: it never seeded the weights
# Keys a release removed, and why: a params file that still sets one gets this, not "unknown".
REMOVED_KEYS: dict[str, str] = {
    "preprocess.side_input_max_items": "examples reference items by item-table row; preprocess joins nothing",
    "model.content_units": "the model reads the history items' own content; the content memory is gone",
    "model.content_weight": "the model reads the history items' own content; the content memory is gone",
    "train.validations_per_epoch": "validating more than once per epoch measured worse (docs/benchmarks.md)",
    "model.item_stats": "the window statistics as model inputs measured worse; the popularity blend reads them",
    "train.xla_optimizer": "the XLA-compiled optimizer update measured slower (docs/benchmarks.md)",
    "model.attention_units": "the din model's target attention measured level with the history's mean: removed",
    "model.dropout": "dropout measured level on every world and on MovieTweetings (docs/benchmarks.md): removed",
    "model.embedding_l2": "the embedding rows' L2 measured level on every world and on MovieTweetings: removed",
    "train.deterministic": "nothing set it; tests order the input through make_dataset directly",
    "train.export": "a benchmark option now, not production config: RECO_TRAIN_LAB (components/train/gang/lab.py)",
    "train.pin_cpus": "a benchmark option now, not production config: RECO_TRAIN_LAB (components/train/gang/lab.py)",
}
