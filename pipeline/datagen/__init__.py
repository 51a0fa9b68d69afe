"""Synthetic retail data with a learnable signal and plantable faults (see docs/data.md).

The generator is numpy/pyarrow-backed; it is imported on first use so that light modules of this
package (the regime presets a config check reads) stay importable by the summary task.
"""
from __future__ import annotations

from typing import Any

__all__ = ["GenerationReport", "generate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pipeline.datagen import generator
        return getattr(generator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
