"""Evaluation gate: `run(config, paths) -> EvalResult` (see component.py)."""
from components.evaluate.component import BLESSED, NOT_BLESSED, EvalError, read_verdict, run

__all__ = ["BLESSED", "NOT_BLESSED", "EvalError", "read_verdict", "run"]
