"""The embedding tables' input sizes, shared by every architecture, the export and warm start."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import ModelConfig


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
