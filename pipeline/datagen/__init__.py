"""Synthetic retail data with a learnable signal and plantable faults (see docs/data.md)."""
from pipeline.datagen.generator import GenerationReport, generate

__all__ = ["GenerationReport", "generate"]
