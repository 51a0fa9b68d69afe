"""Tonight's training plan: the whole window from scratch (full), or only the days the served model
has not fitted, starting from its weights (incremental).

Why incremental: a full retrain transforms, stages and trains on every day of the window every
night, although all but one were processed the night before, so a night's cost follows the window.
An incremental night still analyses the whole window (the vocabularies and the item table's counts,
which the model's rows and the popularity blend are numbered and fitted by), but transforms, stages
and trains only the new days, warm-started from the served model (its rows follow the ids).

Why full retrains still come: fine-tuning on one day at a time forgets what older days taught and
drifts from the window; one model in every `train.full_retrain_every` of a served lineage (its
full retrain and the incremental models pushed after it: a night the gate keeps the served model
adds a day to the next incremental night, not a model to the lineage) is a full retrain, and
whenever the served model cannot be continued (none, not recorded, older than the window, or newer
than this run: a backfill), the night retrains on the whole window.

Preprocess decides once and writes the plan into the manifest; train reads it from there, so both
steps of a run act on the same plan whatever is pushed in between. Pure Python: a test, the DAG and
the replay compute the same plan.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.contracts import serving

log = logging.getLogger(__name__)

FULL, INCREMENTAL = "full", "incremental"


@dataclass(frozen=True)
class Plan:
    mode: str                       # FULL or INCREMENTAL
    train_dates: tuple[str, ...]    # the days transformed, staged and trained on (ISO)
    models_since_full: int          # 0 for a full retrain; the incremental models since the lineage's full one
    served_version: int | None      # the version an incremental night starts from
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "train_dates": list(self.train_dates)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, window: list[dt.date]) -> Plan:
        """The manifest's plan; a manifest written before plans existed is a full retrain."""
        if not data:
            return full(window, "the manifest records no plan (written before training plans)")
        return cls(data["mode"], tuple(data["train_dates"]), _models_since_full(data),
                   data.get("served_version"), data.get("reason", ""))


def _models_since_full(recorded: dict[str, Any]) -> int:
    """The count a plan or a model card records; `nights_since_full` is its name in plans and
    cards written by 2ac0a8e (a run preprocessed or a model trained before the rename)."""
    return int(recorded.get("models_since_full", recorded.get("nights_since_full", 0)))


def full(window: list[dt.date], reason: str) -> Plan:
    return Plan(FULL, tuple(d.isoformat() for d in window), 0, None, reason)


def decide(incremental: bool, full_retrain_every: int, window: list[dt.date],
           served_version: int | None, served_card: dict[str, Any] | None) -> Plan:
    """The plan for a run whose training window is `window`, given the served version and its model card."""
    if not incremental:
        return full(window, "train.incremental is off")
    if served_version is None:
        return full(window, "no model is served yet")
    lineage = (served_card or {}).get("training")
    served_date = (served_card or {}).get("run_date")
    if not lineage or not served_date:
        return full(window, f"served version {served_version} records no training plan (trained before plans)")
    new = [d for d in window if d.isoformat() >= served_date]
    if not new:
        return full(window, f"served version {served_version} ({served_date}) is not older than this window")
    if served_date < window[0].isoformat():
        return full(window, f"served version {served_version} ({served_date}) is older than the window")
    models = _models_since_full(lineage) + 1
    if models >= full_retrain_every:
        return full(window, f"the served lineage holds {models - 1} incremental model(s) after its full retrain "
                            f"(train.full_retrain_every={full_retrain_every}: one full retrain in every "
                            f"{full_retrain_every} models)")
    return Plan(INCREMENTAL, tuple(d.isoformat() for d in new), models, served_version,
                f"continues served version {served_version} ({served_date}) on {len(new)} new day(s)")


def night_config(config, plan: Plan):
    """The config tonight's training runs with: an incremental night fine-tunes the served model on
    a day or two, with its own epochs and learning rate (`train.incremental_epochs`,
    `train.incremental_learning_rate`); the full window's (`train.epochs`, `train.learning_rate`)
    move a model trained from scratch and, on one day, pull a trained one far from what the window
    taught it."""
    if plan.mode != INCREMENTAL:
        return config
    return config.with_overrides({"train.epochs": config.train.incremental_epochs,
                                  "train.learning_rate": config.train.incremental_learning_rate})


def served_card(model_base: Path) -> tuple[int | None, dict[str, Any] | None]:
    """(served version, its model card or None) from the serving directory."""
    version = serving.served_version(model_base)
    if version is None:
        return None, None
    path = serving.version_dir(model_base, version) / serving.MODEL_CARD
    try:
        return version, json.loads(path.read_text())
    except (OSError, ValueError) as err:
        log.warning("served version %s: no readable model card (%s): it cannot be continued", version, err)
        return version, None


def plan_for(train_config, model_base: Path, window: list[dt.date]) -> Plan:
    """Tonight's plan from the config's train section and the serving directory."""
    version, card = served_card(model_base)
    plan = decide(train_config.incremental, train_config.full_retrain_every, window, version, card)
    log.info("training plan: %s on %s: %s", plan.mode, ", ".join(plan.train_dates), plan.reason)
    return plan
