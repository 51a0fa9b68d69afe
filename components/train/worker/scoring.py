"""Every way the trained model scores: by transformed rows (the chief's evaluation during
training, the skew check), by a request's content, at batch 1 for TF Lite. The export
(export.py) wraps these in its serving signatures; they live apart because training scores
through them too, without exporting.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from components.train.model import linear
from components.train.model.tower import (
    BLEND_LAYER,
    EXAMPLE_IDS,
    HISTORY_CONTENT,
    SCORER,
    TARGET_CONTENT,
    TOWER,
    scorer_ids,
)
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import popularity
from pipeline.contracts import signature as S

OUTPUT = S.OUTPUT
ITEM_FEATURES = tuple(F.item_feature_spec(ModelConfig()))
CORE_INPUTS = (*ITEM_FEATURES, F.HISTORY_ROWS, F.TARGET_ROW, *EXAMPLE_IDS)   # a request, transformed


def _specs(model_cfg: ModelConfig, names, batch: int | None = None) -> list[tf.TensorSpec]:
    spec = {**F.transformed_feature_spec(model_cfg), **F.item_feature_spec(model_cfg)}
    return [tf.TensorSpec([batch, *spec[n].shape], tf.as_dtype(spec[n].dtype), name=n) for n in names]


def history_to_sparse(history: tf.Tensor) -> tf.SparseTensor:
    """Dense int64 [B, L] with 0 = padding -> the VarLen SparseTensor the transform expects.

    Zeros are dropped and the remaining ids packed to columns 0..k-1 in order, so left- or
    right-padded requests give the same ragged-right tensor a parsed VarLenFeature would.
    """
    history = tf.convert_to_tensor(history, tf.int64)
    keep = tf.not_equal(history, 0)
    ragged = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(history, keep), tf.reduce_sum(tf.cast(keep, tf.int64), axis=1))
    return ragged.to_sparse()


class Scoring:
    """The trained model's parts and the item table's vectors: every way of scoring a request.

    `vectors[r]` is the item tower's output for item-table row r; rows beyond the table (and
    padding) read its last row, the tower's output for zero content, as in training. A plain
    object, not a tf.Module: the saved module tracks only variables, never the Keras layers.
    """

    def __init__(self, model, content: dict[str, np.ndarray], model_cfg: ModelConfig):
        self.tower, self.scorer = model.get_layer(TOWER), model.get_layer(SCORER)
        self.calibration = model.get_layer(BLEND_LAYER)
        self.linear = linear.find(model)
        self.ids = scorer_ids(self.scorer)
        self.model_variables = list(model.variables)
        self.vectors = tf.Variable(item_vectors(self.tower, content), trainable=False, name="item_vectors")
        self.in_table = tf.constant(content[IT.EMBEDDING_ID] > 0)      # rows the table holds
        self.last_row = IT.clip_row(len(content[IT.EMBEDDING_ID]))
        # What the last layer blends with the model's logit (model/blend.py), by row;
        # rows with no impressions (newer than the table too) read the window's rate.
        self.evidence = tf.constant(popularity.evidence(content[IT.SHOWN], content[IT.CLICKS]))
        jit = True if model_cfg.xla_export else None
        self.by_rows = tf.function(self._by_rows, jit_compile=jit)
        self.by_content = tf.function(self._by_content, jit_compile=jit)

    def _rows(self, rows):
        return tf.gather(self.vectors, tf.minimum(rows, self.last_row))

    def _score(self, target, history, features):
        target_rows = tf.minimum(features[F.TARGET_ROW], self.last_row)
        p = self.scorer({TARGET_CONTENT: target, HISTORY_CONTENT: history,
                         **{k: features[k] for k in self.ids}}, training=False)
        member = self.linear.logit(features) if self.linear is not None else None
        return self.calibration(p, evidence=tf.gather(self.evidence, target_rows), linear=member, training=False)

    def _by_rows(self, features):
        """Examples by reference: both the shown item and the history from the table."""
        return self._score(self._rows(features[F.TARGET_ROW]), self._rows(features[F.HISTORY_ROWS]), features)

    def _by_content(self, features):
        """A request carrying the shown item's content: the tower runs on it."""
        target = self.tower({k: features[k] for k in ITEM_FEATURES}, training=False)
        return self._score(target, self._rows(features[F.HISTORY_ROWS]), features)

    def check_in_table(self, item_ids, rows):
        """InvalidArgumentError naming the shown item ids the exported table does not hold."""
        known = tf.gather(self.in_table, tf.minimum(rows, self.last_row))
        return tf.debugging.Assert(tf.reduce_all(known), [
            f"{S.SERVING_BY_ID}: item ids not in the item table exported with this model (newer than the model? "
            f"score them through {S.SERVING_DEFAULT} with their title and image):",
            tf.boolean_mask(item_ids, tf.logical_not(known))], summarize=20)


def item_vectors(tower, content: dict[str, np.ndarray], batch: int = 4096) -> np.ndarray:
    """The tower's output for every row of the item table's content, [rows, width]."""
    out = [tower({F.TITLE_IDS: content[IT.TITLE_IDS][i:i + batch], F.IMAGE_Z: content[IT.IMAGE][i:i + batch]},
                 training=False).numpy() for i in range(0, len(content[IT.TITLE_IDS]), batch)]
    return np.concatenate(out).astype(np.float32)


def transformed_fn(scoring: Scoring, model_cfg: ModelConfig):
    """The model on transformed examples (evaluation, the skew check)."""
    names = F.example_input_names(model_cfg)

    @tf.function(input_signature=_specs(model_cfg, names))
    def serve_transformed(*tensors):
        return {OUTPUT: scoring.by_rows(dict(zip(names, tensors)))}

    return serve_transformed


def core_batch1_fn(scoring: Scoring, model_cfg: ModelConfig):
    """A transformed request at batch 1, un-compiled (see module doc)."""
    @tf.function(input_signature=_specs(model_cfg, CORE_INPUTS, batch=1))
    def core_batch1(*tensors):
        return {OUTPUT: scoring._by_content(dict(zip(CORE_INPUTS, tensors)))}

    return core_batch1


def call_transformed(serve_transformed, features: dict, model_cfg: ModelConfig):
    """The model's probabilities for a dict of transformed example features."""
    return serve_transformed(*[features[name] for name in F.example_input_names(model_cfg)])[OUTPUT]


def transformed_scoring(model, item_table: Path, model_cfg: ModelConfig):
    """The transformed-features function alone (what the chief evaluates through), for a run
    that exports nothing and may have no transform graph (benchmarks on synthetic shards)."""
    return transformed_fn(Scoring(model, IT.dense(IT.read(item_table)), model_cfg), model_cfg)
