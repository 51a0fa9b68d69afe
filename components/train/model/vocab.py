"""The embedding tables' input sizes, shared by every architecture, the export and warm start."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VocabSizes:
    """Embedding input sizes: ids are in [0, size) with 0 = padding."""

    title: int
    items: int
    users: int = 1

    @classmethod
    def from_config(cls, model: ModelConfig) -> VocabSizes:
        """Upper bounds from config: vocab top-k + OOV buckets + the padding id."""
        return cls(title=model.title_vocab_size + model.oov_buckets + 1,
                   items=model.item_vocab_size + model.oov_buckets + 1, users=model.user_buckets + 1)


def vocab_sizes(transform_dir: Path, model_cfg: ModelConfig) -> VocabSizes:
    """Actual sizes from the tf.Transform vocabularies when readable, else the config bounds.

    Real vocabularies are often far smaller than the configured top-k (a 1,000-item catalogue
    never fills 100,000 slots), and the embedding tables are most of the parameters: reading
    them keeps the model, its checkpoints and its all-reduce small.
    """
    fallback = VocabSizes.from_config(model_cfg)
    try:
        import tensorflow_transform as tft

        title_vocab, item_vocab = F.TITLE_VOCAB, F.ITEM_VOCAB
        output = tft.TFTransformOutput(str(transform_dir))
        sizes = VocabSizes(
            title=output.vocabulary_size_by_name(title_vocab) + model_cfg.oov_buckets + 1,
            items=output.vocabulary_size_by_name(item_vocab) + model_cfg.oov_buckets + 1,
            users=model_cfg.user_buckets + 1)
    except (ImportError, OSError, ValueError, KeyError, tf.errors.OpError) as err:
        log.warning("vocabulary sizes from config bounds %s: %s", fallback, err)
        return fallback
    log.info("vocabulary sizes from %s: %s", transform_dir, sizes)
    return sizes
