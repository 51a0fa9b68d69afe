"""The Keras core model rebuilt from an export's variables: TF Lite's batch-1 retrace needs the
model itself, not the SavedModel's traced functions (push/tflite.py)."""
from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from components.train.model.build import build_model
from components.train.model.vocab import VocabSizes


def load_keras_model(saved_model_dir: Path, model_cfg):
    """The Keras core model with the SavedModel's weights (matched by variable name and shape)."""
    loaded = tf.saved_model.load(str(saved_model_dir))
    saved = {v.name: v for v in loaded.model_variables}
    vocab = VocabSizes(title=int(saved["title_embedding/embeddings:0"].shape[0]),
                       items=int(saved["item_embedding/embeddings:0"].shape[0]),
                       users=model_cfg.user_buckets + 1)
    model = build_model(model_cfg, vocab)
    for var in model.variables:
        source = saved.get(var.name)
        if source is None or source.shape != var.shape:
            raise ValueError(f"cannot rebuild the core model: {var.name} {var.shape} has no match in "
                             f"{saved_model_dir} (model config differs from the export?)")
        var.assign(source)
    return model, loaded
