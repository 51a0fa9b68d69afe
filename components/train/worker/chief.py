"""What only the chief does after fit(): evaluate, export, model card, result.

None of it is a collective: the trained weights are copied into a plain (non-distributed)
float32 model first, so the other workers need not join; they wait in the gang's final
all-reduce meanwhile (see worker.py).
"""
from __future__ import annotations

import datetime as dt
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.train.gang.lab import lab_options
from components.train.model import linear
from components.train.model.blend import calibrate, held_out_evidence
from components.train.model.build import VocabSizes, build_model, scaled_learning_rate
from components.train.model.tower import BLEND_LAYER
from components.train.worker import export, saved_model_facts, scoring
from components.train.worker.input import Split, item_content, make_dataset, read_split
from components.train.worker.linear_fit import fit_linear_member
from pipeline.config import Config
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M
from pipeline.contracts import serving, staged
from pipeline.contracts.training_plan import Plan
from pipeline.fsutil import publish_dir, remove_stale_temps, temp_sibling, write_json_atomic
from pipeline.paths import RunPaths
from pipeline.results import TrainResult

log = logging.getLogger(__name__)

RESULT_FILE = "result.json"
MODEL_CARD_FILE = serving.MODEL_CARD


@dataclass(frozen=True)
class Trained:
    """Facts of the finished fit() that the card and the result report."""

    model: keras.Model
    vocab: VocabSizes
    train_split: Split
    eval_split: Split
    valid_split: Split | None
    train_metrics: dict[str, float]
    initial_epoch: int
    examples_per_s: float
    train_seconds: float
    workers: int
    replicas: int
    global_batch: int
    collective: str
    mixed_precision: bool
    plan: Plan


def _check_item_table(table: Path) -> None:
    """The export builds the served item content from this file: it must still be what stage
    verified (train checked it before the gang started; training can take hours)."""
    if (table.parent / M.MANIFEST).is_file() and (found := staged.problems(table.parent, (table.name,))):
        raise RuntimeError(f"not exported: {found[0]}; the staged copy changed during training (train's "
                           f"retry re-stages it)")


def finish(config: Config, paths: RunPaths, t: Trained, summaries) -> TrainResult:
    """Evaluate, export (atomically), write the model card and result; drop the backup."""
    _check_item_table(t.eval_split.item_table)
    serving_model = local_copy(t.model, config, t.vocab)
    exporting = lab_options().export
    if exporting:
        module = export.serving_module(serving_model, t.eval_split.item_table, paths.transform_dir, config.model)
        predict = module.signatures_[export.SERVING_TRANSFORMED]
    else:                                                  # nothing to serve: no transform graph needed
        module, predict = None, scoring.transformed_scoring(serving_model, t.eval_split.item_table, config.model)
    calibration = {}
    valid = t.valid_split
    if valid is not None and valid.missing():     # this host staged only its share: shared storage
        valid = read_split(paths.examples_dir, "train").hold_out(config.train.validation_shards, t.workers)[1]
    member = fit_linear_member(serving_model, config, paths, t.train_split, t.plan, t.workers)
    if valid is not None:
        calibration = calibrate_on(serving_model, predict, valid, config, t.global_batch)
    eval_ds = make_dataset(t.eval_split.files, config.model, t.global_batch, training=False,
                           deterministic=True, readers=config.train.readers,
                           compression=t.eval_split.compression, sizes=t.eval_split.sizes)
    metrics = {**t.train_metrics, **member, **calibration,
               **evaluate(predict, eval_ds, config.model)}
    log.info("final metrics: %s", metrics)
    summaries.write_final(metrics, config.train.epochs)
    card = model_card(config, paths, t, metrics)
    if exporting:
        export_dir = temp_sibling(paths.model_dir, "export")
        export.save_module(module, export_dir)
        card["export"] = saved_model_facts.export_size(export_dir)
        write_json_atomic(export_dir / MODEL_CARD_FILE, card)
        publish_dir(export_dir, paths.model_dir)
        remove_stale_temps(paths.model_dir.parent, paths.model_dir.name)
    else:
        log.warning("RECO_TRAIN_LAB export is false: no SavedModel written")
    write_json_atomic(paths.train_dir / MODEL_CARD_FILE, card)
    result = TrainResult(model_dir=str(paths.model_dir) if exporting else "",
                         model_card_path=str(paths.train_dir / MODEL_CARD_FILE),
                         tensorboard_dir=str(paths.tensorboard_dir), workers=t.workers,
                         epochs=config.train.epochs, examples_per_s=t.examples_per_s,
                         metrics=metrics, initial_epoch=t.initial_epoch)
    result.write_json(paths.train_dir / RESULT_FILE)
    # The run is complete: the backup has done its job and must not leak into a rerun.
    shutil.rmtree(paths.backup_dir, ignore_errors=True)
    return result


def local_copy(model: keras.Model, config: Config, vocab: VocabSizes) -> keras.Model:
    """The trained weights in a plain float32 model outside the strategy.

    Exporting the MWMS model itself would re-trace every layer against distributed variables
    (slow) and, for sync-on-read variables, need every worker to join the save; a plain copy
    is traced once, needs no collective, and serves in float32 even after mixed precision.
    """
    keras.mixed_precision.set_global_policy("float32")
    copy = build_model(config.model, vocab, lab_options().interactions)
    copy.set_weights(model.get_weights())
    return copy


def evaluate(predict, dataset: tf.data.Dataset, model_cfg) -> dict[str, float]:
    """Eval-split AUC, accuracy and log loss through the function the export serves (the
    examples by reference: the items' content from the exported item vectors)."""
    auc, acc = keras.metrics.AUC(), keras.metrics.BinaryAccuracy()
    loss = keras.metrics.Mean()
    for features, label in dataset:
        prob = scoring.call_transformed(predict, features, model_cfg)
        auc.update_state(label, prob)
        acc.update_state(label, prob)
        loss.update_state(keras.losses.binary_crossentropy(label, prob))
    return {"eval_auc": float(auc.result()), "eval_accuracy": float(acc.result()),
            "eval_loss": float(loss.result())}


def calibrate_on(model: keras.Model, predict, valid: Split, config: Config, batch: int) -> dict[str, float]:
    """Fit the model's last layer (model/blend.py) on the validation split, scored through
    the export's own function with that layer at the identity; the blend's evidence from the item
    table's counts without the validation rows, and the linear member's logits (fitted on the
    training rows only)."""
    layer = model.get_layer(BLEND_LAYER)
    start = layer.values()            # the identity, or the served model's layer after a warm start
    layer.reset()
    member = linear.find(model)
    probs, rows, labels, logits = [], [], [], []
    for features, label in make_dataset(valid.files, config.model, batch, training=False, deterministic=True,
                                        readers=config.train.readers, compression=valid.compression,
                                        sizes=valid.sizes):
        probs.append(scoring.call_transformed(predict, features, config.model).numpy().ravel())
        rows.append(features[F.TARGET_ROW].numpy().ravel())
        labels.append(label.numpy().ravel())
        if member is not None:
            logits.append(member.logit(features).numpy().ravel())
    probs, rows, labels, logits = (np.concatenate(x) if x else np.zeros(0) for x in (probs, rows, labels, logits))
    evidence = None
    if config.model.stack_popularity:
        content = item_content(str(valid.item_table))
        evidence = held_out_evidence(content[IT.SHOWN], content[IT.CLICKS], rows, labels)
    return calibrate(layer, probs, labels, evidence, start, lab_options().platt,
                     logits if member is not None else None)


def model_card(config: Config, paths: RunPaths, t: Trained, metrics: dict) -> dict[str, Any]:
    """What a reviewer needs to trust a model: its data, how it was trained, how it scored."""
    return {
        "model_name": paths.model_name,
        "run_date": paths.ds,
        "run_id": paths.run_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "data_window": {"train_dates": [d.isoformat() for d in paths.train_dates],
                        "eval_date": paths.eval_date.isoformat()},
        "examples": {"train": t.train_split.examples, "eval": t.eval_split.examples},
        "epochs": config.train.epochs,
        "initial_epoch": t.initial_epoch,
        "workers": t.workers,
        "replicas": t.replicas,
        "strategy": "MultiWorkerMirroredStrategy",
        "collective": t.collective,
        "mixed_precision": t.mixed_precision,
        "global_batch_size": t.global_batch,
        "learning_rate": scaled_learning_rate(config.train, t.replicas),
        "clip_norm": config.train.clip_norm,
        "metrics": metrics,
        "training_examples_per_s": round(t.examples_per_s, 2),
        "train_seconds": round(t.train_seconds, 2),
        "vocab_sizes": asdict(t.vocab),
        "model": config.model.__dict__ | {"image_units": list(config.model.image_tower)},
        "transform_dir": str(paths.transform_dir),
        "training": t.plan.to_json(),
        "signatures": [export.SERVING_DEFAULT, export.SERVING_BY_ID, export.SERVING_EXAMPLES, export.REGRESS,
                       export.SERVING_TRANSFORMED, export.CORE_BATCH1],
    }
