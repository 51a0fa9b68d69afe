"""The two parts every architecture is built from, and how training and serving join them.

    item tower   an item's title ids and image -> its content vector (no example context)
    scorer       the shown item's and the history items' vectors, their ids, the context -> p

Training (`joined_model`): the input pipeline hands the model a batch's DISTINCT items' content
[U, ...] and each example's positions into it (components/train/worker/input.py); the tower runs
once per distinct item and its output is gathered back per example and history slot. Serving
(components/train/worker/export.py): the tower's output for every row of the item table is
computed once at export, so a request by id only gathers vectors; a raw-feature request runs the
tower on the shown item it carries. Both call the same two Keras models with the same weights.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

TOWER, SCORER = "item_tower", "scorer"
# The last layer (blend.py): its saved name stays "calibration", the name served models' variables
# and backups carry, so warm start and resume read the models trained before the rename.
BLEND_LAYER = "calibration"
TARGET_CONTENT, HISTORY_CONTENT = "target_content", "history_content"   # scorer inputs (vectors)
EXAMPLE_IDS = (F.HISTORY_IDS, F.TARGET_ID, *F.CONTEXT_IDS)    # what an example carries itself
SCORER_IDS = EXAMPLE_IDS


def _inputs(spec: dict[str, F.FeatureShape]) -> dict[str, keras.Input]:
    return {name: keras.Input(shape=s.shape, dtype=s.dtype, name=name) for name, s in spec.items()}


def item_inputs(cfg: ModelConfig) -> dict[str, keras.Input]:
    return _inputs(F.item_feature_spec(cfg))


def scorer_inputs(cfg: ModelConfig, width: int, names: tuple[str, ...] = SCORER_IDS) -> dict[str, keras.Input]:
    """The scorer's inputs: the vectors (`width` = the tower's output) and the ids in `names`."""
    spec = F.model_input_spec(cfg)
    return {TARGET_CONTENT: keras.Input(shape=(width,), name=TARGET_CONTENT),
            HISTORY_CONTENT: keras.Input(shape=(cfg.history_len, width), name=HISTORY_CONTENT),
            **_inputs({name: spec[name] for name in names if name in spec})}


def scorer_ids(scorer: keras.Model) -> tuple[str, ...]:
    """The ids and context this scorer reads (the reference scorer reads fewer)."""
    return tuple(name for name in scorer.input_names if name in SCORER_IDS)


def joined_model(cfg: ModelConfig, tower: keras.Model, scorer: keras.Model, name: str) -> keras.Model:
    """The training form: distinct items' content + positions + ids -> p (see module doc)."""
    inputs = _inputs(F.model_input_spec(cfg))
    content = tower({k: inputs[k] for k in F.item_feature_spec(cfg)})
    vectors = {TARGET_CONTENT: tf.gather(content, inputs[F.TARGET_INDEX]),
               HISTORY_CONTENT: tf.gather(content, inputs[F.HISTORY_INDEX])}
    out = scorer({**vectors, **{k: inputs[k] for k in scorer_ids(scorer)}})
    return keras.Model(inputs=inputs, outputs=out, name=name)


def layers(model: keras.Model) -> dict[str, keras.layers.Layer]:
    """Every layer of the model's parts by name (a joined model's `layers` lists only the parts)."""
    return {layer.name: layer for part in model.layers if isinstance(part, keras.Model) for layer in part.layers}


def contents(inputs: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """The scorer's (target, history) content in the compute dtype (float16 under mixed precision)."""
    dtype = keras.mixed_precision.global_policy().compute_dtype
    return tf.cast(inputs[TARGET_CONTENT], dtype), tf.cast(inputs[HISTORY_CONTENT], dtype)
