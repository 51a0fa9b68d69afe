"""Scoring through a SavedModel's raw-feature `serving_default` signature, as TF Serving does.

The eval sample is also scored by id (the export's item table), so push can verify both
signatures a client calls against what the gate saw.

Calling the signature (not a Keras model object) means the gate exercises the exported
preprocessing graph too; a model whose export is broken fails here, before anyone pushes it.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from pipeline.contracts import features as F
from pipeline.contracts import signature

log = logging.getLogger(__name__)

SIGNATURE, OUTPUT = signature.SERVING_DEFAULT, signature.OUTPUT


class ScoringError(RuntimeError):
    """A SavedModel lacks the raw serving signature or returns something unusable."""


class Scorer:
    """Loads `model_dir` once; `__call__` maps serving inputs to a float32 probability vector.

    With `batch_size`, every shorter batch (a file's last one, one that lost rejected rows) is
    padded up to it by repeating its first row, and the padding's predictions dropped: an
    XLA-compiled export compiles once per batch shape, which is slow enough at reference size
    that every batch keeps the one shape (see docs/benchmarks.md), for at most one batch of
    extra compute per short batch.
    """

    def __init__(self, model_dir: Path, batch_size: int | None = None):
        import tensorflow as tf

        self._tf = tf
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size
        try:
            loaded = tf.saved_model.load(str(model_dir))
        except (OSError, ValueError, tf.errors.OpError) as err:
            raise ScoringError(f"cannot load SavedModel {model_dir}: {err}") from err
        if SIGNATURE not in loaded.signatures:
            raise ScoringError(f"{model_dir} has no {SIGNATURE!r} signature "
                               f"(has {sorted(loaded.signatures)})")
        self._loaded = loaded            # keep the object alive: the signature refers to it
        self._fn = loaded.signatures[SIGNATURE]
        self.input_specs = self._fn.structured_input_signature[1]
        # A model exported before a raw feature was added takes a subset: it gets what it takes.
        expected = set(F.RAW_SERVING_FEATURES)
        if not self.input_specs or not set(self.input_specs) <= expected:
            raise ScoringError(f"{model_dir} {SIGNATURE} takes {sorted(self.input_specs)}, "
                               f"expected raw serving features among {sorted(expected)}")

    def __call__(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        tf = self._tf
        rows = len(inputs[F.TITLE])
        pad = max(0, (self.batch_size or rows) - rows) if rows else 0
        tensors = {name: tf.constant(_pad_rows(np.asarray(inputs[name]), pad), dtype=spec.dtype)
                   for name, spec in self.input_specs.items()}
        outputs = self._fn(**tensors)
        return probabilities(outputs, self.model_dir, rows + pad)[:rows]


    def by_id(self, rows: list[dict]) -> np.ndarray | None:
        """The export's by-id signature on `rows` (their shown item's content from the exported
        item table), or None when the export has none or does not hold every shown item."""
        tf = self._tf
        fn = self._loaded.signatures.get(signature.SERVING_BY_ID)
        if fn is None or not rows:
            return None
        arrays = signature.request_arrays(rows, F.BY_ID_SERVING_FEATURES)
        specs = fn.structured_input_signature[1]
        try:
            outputs = fn(**{name: tf.constant(arrays[name], dtype=spec.dtype) for name, spec in specs.items()})
        except tf.errors.InvalidArgumentError as err:
            log.warning("%s: %s not scored (%s)", self.model_dir, signature.SERVING_BY_ID,
                        str(err.message).splitlines()[-1][:300])
            return None
        return probabilities(outputs, self.model_dir, len(rows))


def _pad_rows(values: np.ndarray, pad: int) -> np.ndarray:
    return np.concatenate([values, np.repeat(values[:1], pad, axis=0)]) if pad and len(values) else values


def probabilities(outputs: dict, model_dir: Path, batch: int) -> np.ndarray:
    """The "probability" output as float32 [batch], whether the model returns [b, 1] or [b]."""
    if OUTPUT not in outputs:
        raise ScoringError(f"{model_dir} {SIGNATURE} returns {sorted(outputs)}, expected {OUTPUT!r}")
    values = np.asarray(outputs[OUTPUT]).astype(np.float32)
    if values.size != batch:
        raise ScoringError(f"{model_dir} returned {values.shape} probabilities for {batch} rows")
    return values.reshape(batch)
