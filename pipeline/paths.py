"""Where every artifact of a run lives, derived from config + run date + run id.

Each run works on its own folders keyed by the data date and the run id, so two runs never
write into each other, and a retry of the same run (same id) finds its own partial work
(training backups) and replaces the rest. Nothing here touches the filesystem except the
explicit helpers at the bottom.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Config

_RUN_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_SEPARATORS = ("/", "\\", "\0")
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def safe_run_id(run_id: str) -> str:
    """The run id as one safe path component: Airflow's ':' and '+' (which some filesystems and
    URIs dislike) become '_'. An id that is not one component is refused, never cleaned: `.`
    made a run's folders collapse onto its date's (stage then replaced every staged run of that
    date), `..` onto the parent; a leading dot is how temp and lock files are named."""
    if any(sep in run_id for sep in _SEPARATORS):
        raise ValueError(f"run id {run_id!r} holds a path separator")
    cleaned = _RUN_ID_UNSAFE.sub("_", run_id).strip("_")
    if not cleaned:
        raise ValueError(f"run id {run_id!r} has no usable characters")
    if cleaned.startswith("."):
        raise ValueError(f"run id {run_id!r} starts with '.': not a run folder name")
    return cleaned


def parse_date(value: str | dt.date) -> dt.date:
    """A date object, or exactly YYYY-MM-DD (`2026-11-05xyz` is refused, not cut to 10 characters)."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    text = str(value)
    try:
        if not _ISO_DAY.fullmatch(text):
            raise ValueError(text)
        return dt.date.fromisoformat(text)
    except ValueError as err:
        raise ValueError(f"run date {value!r} is not YYYY-MM-DD") from err


def events_partition(raw_root: Path, day: dt.date) -> Path:
    return raw_root / "events" / f"ds={day.isoformat()}"


def items_partition(raw_root: Path, day: dt.date) -> Path:
    return raw_root / "items" / f"ds={day.isoformat()}"


@dataclass(frozen=True)
class RunPaths:
    """All paths of one run for data date `run_date` (the eval day D)."""

    run_date: dt.date
    run_id: str
    raw_root: Path
    artifact_root: Path
    staging_root: Path
    serving_base: Path
    model_name: str
    train_days: int

    @classmethod
    def for_run(cls, config: Config, run_date: str | dt.date, run_id: str = "cli") -> RunPaths:
        return cls(
            run_date=parse_date(run_date),
            run_id=safe_run_id(run_id),
            raw_root=config.data.raw_root,
            artifact_root=config.data.artifact_root,
            staging_root=config.data.staging_root,
            serving_base=config.data.serving_base,
            model_name=config.push.model_name,
            train_days=config.window.train_days,
        )

    # --- inputs ----------------------------------------------------------------------
    @property
    def train_dates(self) -> list[dt.date]:
        """The N days before the run date, oldest first."""
        return [self.run_date - dt.timedelta(days=n) for n in range(self.train_days, 0, -1)]

    @property
    def eval_date(self) -> dt.date:
        """The run date itself: a next-day, time-based holdout."""
        return self.run_date

    def events_dir(self, day: dt.date) -> Path:
        return events_partition(self.raw_root, day)

    def items_dir(self, day: dt.date) -> Path:
        return items_partition(self.raw_root, day)

    # --- run-scoped artifacts --------------------------------------------------------
    @property
    def ds(self) -> str:
        return self.run_date.isoformat()

    @property
    def run_dir(self) -> Path:
        return self.artifact_root / "runs" / self.ds / self.run_id

    @property
    def validation_dir(self) -> Path:
        return self.run_dir / "validation"

    @property
    def validation_history_dir(self) -> Path:
        """Latest validation report per data date, for day-over-day drift checks."""
        return self.artifact_root / "validation_history"

    @property
    def transform_dir(self) -> Path:
        """tf.Transform output: transform_fn/ and transformed_metadata/."""
        return self.run_dir / "transform"

    @property
    def examples_dir(self) -> Path:
        """Transformed TFRecord shards in the artifact store (train/, eval/, manifest.json)."""
        return self.run_dir / "examples"

    @property
    def staged_dir(self) -> Path:
        """The training hosts' local-SSD copy of the shards."""
        return self.staging_root / self.ds / self.run_id

    @property
    def train_dir(self) -> Path:
        return self.run_dir / "train"

    @property
    def model_dir(self) -> Path:
        """The exported SavedModel (raw-feature serving signature)."""
        return self.train_dir / "model"

    @property
    def backup_dir(self) -> Path:
        """BackupAndRestore state: survives a killed attempt, so a retry resumes."""
        return self.train_dir / "backup"

    @property
    def tensorboard_dir(self) -> Path:
        return self.train_dir / "tensorboard"

    @property
    def logs_dir(self) -> Path:
        return self.train_dir / "logs"

    @property
    def eval_dir(self) -> Path:
        return self.run_dir / "eval"

    @property
    def push_dir(self) -> Path:
        return self.run_dir / "push"

    @property
    def model_base(self) -> Path:
        """TF Serving's directory for this model: <serving_base>/<model_name>/<version>."""
        return self.serving_base / self.model_name
