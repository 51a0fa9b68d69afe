"""Typed results that steps hand to each other: small records (paths, counts, metrics), never data.

They travel as JSON through Airflow XCom, the CLI and the tests; `to_dict`/`from_dict`
keep the wire format explicit and reject unknown fields instead of silently dropping them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T", bound="StepResult")


@dataclass(frozen=True)
class StepResult:
    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=str))

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
        return cls(**data)

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True))


@dataclass(frozen=True)
class ValidateResult(StepResult):
    run_date: str
    train_dates: list[str]
    rows: dict[str, int]                 # date -> rows
    label_rate: dict[str, float]         # date -> clicks / rows
    report_path: str
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PreprocessResult(StepResult):
    run_date: str
    examples_dir: str
    transform_dir: str
    manifest_path: str
    report_path: str
    train_examples: int
    eval_examples: int
    rejected: int
    num_shards: int


@dataclass(frozen=True)
class StageResult(StepResult):
    staged_dir: str
    num_shards: int
    bytes: int
    removed_runs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TrainResult(StepResult):
    model_dir: str
    model_card_path: str
    tensorboard_dir: str
    workers: int
    epochs: int
    examples_per_s: float
    metrics: dict[str, float]
    initial_epoch: int = 0               # > 0 when resumed from a backup


@dataclass(frozen=True)
class EvalResult(StepResult):
    blessed: bool
    reasons: list[str]
    metrics_path: str
    report_path: str
    candidate_auc: float
    baseline_auc: float | None
    baseline_version: int | None
    examples: int
    popularity_auc: float | None = None   # the training window's item popularity (contracts/popularity.py)


@dataclass(frozen=True)
class PushResult(StepResult):
    pushed: bool
    reason: str
    version: int | None = None
    version_dir: str | None = None
    served_version: int | None = None
    record_path: str | None = None
